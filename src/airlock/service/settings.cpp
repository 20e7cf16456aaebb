#include "airlock/service/settings.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <tuple>

#include "airlock/core/encoding.h"
#include "airlock/core/ids.h"
#include "airlock/core/units.h"
#include "airlock/egress/policy.h"
#include "airlock/images/image_reference.h"
#include "airlock/service/tenant_keys.h"

namespace airlock::service {
namespace {

Error configError(std::string context) {
  return Error{ErrorCode::kConfigurationError, 0, std::move(context)};
}

// "settings file line 4, column 10: " for a node of the file.
std::string where(std::string_view source, const YAML::Node& node) {
  const YAML::Mark m = node.Mark();
  if (m.line < 0) return std::string(source) + ": ";
  return std::string(source) + " line " + std::to_string(m.line + 1) + ", column " +
         std::to_string(m.column + 1) + ": ";
}

template <class E>
struct NamedValue {
  std::string_view name;
  E value;
};

template <class E, std::size_t N>
Result<E> pick(std::string_view setting, std::string_view text,
               const std::array<NamedValue<E>, N>& names, const std::string& prefix) {
  std::string choices;
  for (const auto& n : names) {
    if (n.name == text) return n.value;
    choices += (choices.empty() ? "" : ", ") + std::string(n.name);
  }
  return tl::unexpected(configError(prefix + std::string(setting) + " " + quoteForMessage(text) +
                                    " is not one of " + choices));
}

constexpr std::array<NamedValue<DeploymentMode>, 2> kDeploymentModes = {
    {{"development", DeploymentMode::kDevelopment}, {"production", DeploymentMode::kProduction}}};
constexpr std::array<NamedValue<AuthMode>, 2> kAuthModes = {
    {{"dev", AuthMode::kDev}, {"token", AuthMode::kToken}}};
Result<void> checkListen(std::string_view text, const std::string& prefix) {
  auto bad = [&](const std::string& why) {
    return tl::unexpected(configError(prefix + "listen " + quoteForMessage(text) + " " + why));
  };
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos) return bad("is not host:port");
  std::string host(text.substr(0, colon));
  const std::string_view port = text.substr(colon + 1);
  if (port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string_view::npos ||
      std::stoi(std::string(port)) > 65535)
    return bad("has no valid port (0-65535)");
  if (host == "localhost") return {};
  in6_addr a6{};
  in_addr a4{};
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    if (::inet_pton(AF_INET6, host.substr(1, host.size() - 2).c_str(), &a6) == 1) return {};
    return bad("has an invalid IPv6 address");
  }
  if (::inet_pton(AF_INET, host.c_str(), &a4) == 1) return {};
  return bad("needs an IP address or localhost as host (a name is not resolved)");
}

Result<std::int64_t> positiveInt(std::string_view setting, std::string_view text,
                                 const std::string& prefix) {
  if (text.empty() || text.size() > 18 ||
      text.find_first_not_of("0123456789") != std::string_view::npos)
    return tl::unexpected(configError(prefix + std::string(setting) + " " + quoteForMessage(text) +
                                      " is not a whole number"));
  const std::int64_t v = std::stoll(std::string(text));
  if (v <= 0)
    return tl::unexpected(configError(prefix + std::string(setting) + " must be greater than 0"));
  return v;
}

Result<std::int64_t> sizeSetting(std::string_view setting, std::string_view text,
                                 const std::string& prefix) {
  auto v = parseSize(text);
  if (!v)
    return tl::unexpected(configError(prefix + std::string(setting) + ": " + v.error().context));
  if (*v <= 0)
    return tl::unexpected(configError(prefix + std::string(setting) + " must be greater than 0"));
  return *v;
}

Result<std::chrono::seconds> secondsSetting(std::string_view setting, std::string_view text,
                                            const std::string& prefix) {
  auto d = parseDuration(text);
  if (!d)
    return tl::unexpected(configError(prefix + std::string(setting) + ": " + d.error().context));
  if (d->count() < 1000 || d->count() % 1000 != 0)
    return tl::unexpected(configError(prefix + std::string(setting) + " " + quoteForMessage(text) +
                                      " must be a whole number of seconds, at least 1s"));
  return std::chrono::duration_cast<std::chrono::seconds>(*d);
}

// `parsed` into `field`, or its error.
template <class Field, class Value>
Result<void> assignParsed(Field& field, Result<Value> parsed) {
  if (!parsed) return tl::unexpected(parsed.error());
  field = std::move(*parsed);
  return {};
}

// The top-level settings that are one number (positiveInt, or sizeSetting
// for bytes) or a whole number of seconds: each key once, with its field and
// its ceiling (0: none); a value above the ceiling is refused, naming both.
struct NumberSetting {
  std::string_view key;
  std::int64_t Settings::*field;
  Result<std::int64_t> (*read)(std::string_view, std::string_view, const std::string&);
  std::int64_t ceiling = 0;
};
constexpr NumberSetting kNumberSettings[] = {
    {"max_header_bytes", &Settings::max_header_bytes, sizeSetting},
    {"max_body_bytes", &Settings::max_body_bytes, sizeSetting},
    {"max_concurrent_executions", &Settings::max_concurrent_executions, positiveInt},
    {"max_connections", &Settings::max_connections, positiveInt},
    {"max_unauthenticated_connections", &Settings::max_unauthenticated_connections, positiveInt},
    {"files_changed_listing", &Settings::files_changed_listing, positiveInt,
     kMaxFilesChangedListing},
    {"node_capacity", &Settings::node_capacity, positiveInt},
};
struct SecondsSetting {
  std::string_view key;
  std::chrono::seconds Settings::*field;
  std::int64_t ceiling = 0;  // seconds; 0: none
};
constexpr SecondsSetting kSecondsSettings[] = {
    {"reaper_interval", &Settings::reaper_interval},
    {"schedule_fire_interval", &Settings::schedule_fire_interval},
    {"request_timeout", &Settings::request_timeout},
    {"unauthenticated_request_timeout", &Settings::unauthenticated_request_timeout},
    {"start_budget", &Settings::start_budget, kMaxStartBudgetSeconds},
    {"environment_lifetime", &Settings::environment_lifetime, kEnvironmentHardCapCeiling},
    {"environment_hard_cap", &Settings::environment_hard_cap, kEnvironmentHardCapCeiling},
};

// `parsed`, unless it is above `ceiling` (0: none): then the error naming
// the setting, the value and the ceiling in `unit` ("" or "s").
Result<std::int64_t> withinCeiling(Result<std::int64_t> parsed, std::string_view setting,
                                   std::int64_t ceiling, std::string_view unit,
                                   const std::string& prefix) {
  if (!parsed || ceiling == 0 || *parsed <= ceiling) return parsed;
  return tl::unexpected(configError(prefix + std::string(setting) + " " + std::to_string(*parsed) +
                                    std::string(unit) + " is above its ceiling of " +
                                    std::to_string(ceiling) + std::string(unit)));
}

Result<std::chrono::seconds> boundedSeconds(const SecondsSetting& setting, std::string_view text,
                                            const std::string& prefix) {
  auto v = secondsSetting(setting.key, text, prefix);
  if (!v) return v;
  auto bounded = withinCeiling(v->count(), setting.key, setting.ceiling, "s", prefix);
  if (!bounded) return tl::unexpected(bounded.error());
  return *v;
}

constexpr std::array<NamedValue<ServiceRole>, 3> kRoles = {
    {{"both", ServiceRole::kBoth},
     {"gateway", ServiceRole::kGateway},
     {"execution", ServiceRole::kExecution}}};

// A token the internal API accepts: the service_token's rule.
bool isToken(std::string_view value) {
  return value.size() >= 16 && value.find_first_of(" \t\r\n") == std::string_view::npos;
}

// A base URL of a gateway or an execution node: "http://host[:port]", host
// an IP literal (IPv6 bracketed) or a DNS name; a final "/" is dropped.
Result<std::string> baseUrl(std::string_view setting, std::string_view text,
                            const std::string& prefix) {
  auto bad = [&](const std::string& why) -> Result<std::string> {
    return tl::unexpected(
        configError(prefix + std::string(setting) + " entry " + quoteForMessage(text) + " " + why));
  };
  constexpr std::string_view kScheme = "http://";
  if (text.substr(0, kScheme.size()) != kScheme)
    return bad("must be a base URL starting with http://");
  std::string_view rest = text.substr(kScheme.size());
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.find('/') != std::string_view::npos) return bad("must have no path");
  std::string_view host = rest;
  std::string_view port;
  if (!rest.empty() && rest.front() == '[') {
    const auto close = rest.find(']');
    if (close == std::string_view::npos) return bad("has an unclosed [");
    host = rest.substr(1, close - 1);
    in6_addr a6{};
    if (::inet_pton(AF_INET6, std::string(host).c_str(), &a6) != 1)
      return bad("has an invalid IPv6 address");
    if (close + 1 < rest.size()) {
      if (rest[close + 1] != ':') return bad("has text after its address");
      port = rest.substr(close + 2);
    }
  } else if (const auto colon = rest.rfind(':'); colon != std::string_view::npos) {
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
    if (host.empty() ||
        host.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789.-") != std::string_view::npos)
      return bad("has no valid host");
  } else if (host.empty() || host.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789.-") !=
                                 std::string_view::npos) {
    return bad("has no valid host");
  }
  if (rest.back() == ':' ||
      (!port.empty() &&
       (port.size() > 5 || port.find_first_not_of("0123456789") != std::string_view::npos ||
        std::stoi(std::string(port)) == 0 || std::stoi(std::string(port)) > 65535)))
    return bad("has no valid port (1-65535)");
  return std::string(kScheme) + std::string(rest);
}

// One execution_nodes entry: a base URL, or (from the environment)
// "<name>=<url>".
Result<ExecutionNodeSetting> executionNode(std::string name, std::string_view url,
                                           const std::string& prefix) {
  if (!name.empty() && !isNodeName(name))
    return tl::unexpected(configError(prefix + "execution_nodes name " + quoteForMessage(name) +
                                      " must be 1-63 characters of a-z 0-9 and -, not starting "
                                      "or ending with -"));
  auto base = baseUrl("execution_nodes", url, prefix);
  if (!base) return tl::unexpected(base.error());
  return ExecutionNodeSetting{std::move(name), std::move(*base)};
}

Result<void> addExecutionNode(Settings& s, ExecutionNodeSetting node, const std::string& prefix) {
  for (const auto& other : s.execution_nodes) {
    if (other.url == node.url)
      return tl::unexpected(configError(prefix + "execution_nodes entry " +
                                        quoteForMessage(node.url) + " is there twice"));
    if (!node.name.empty() && other.name == node.name)
      return tl::unexpected(configError(prefix + "execution_nodes name " +
                                        quoteForMessage(node.name) + " is there twice"));
  }
  s.execution_nodes.push_back(std::move(node));
  return {};
}

// The comma-separated form of a list setting (environment variables).
std::vector<std::string> commaList(std::string_view text) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at <= text.size()) {
    const auto comma = std::min(text.find(',', at), text.size());
    std::string item(text.substr(at, comma - at));
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    if (!item.empty()) out.push_back(std::move(item));
    at = comma + 1;
  }
  return out;
}

// One top-level scalar setting, from the file or the environment.
Result<void> applyScalar(Settings& s, std::string_view key, const std::string& value,
                         const std::string& prefix) {
  for (const auto& number : kNumberSettings) {
    if (key == number.key)
      return assignParsed(s.*number.field, withinCeiling(number.read(key, value, prefix), key,
                                                         number.ceiling, "", prefix));
  }
  for (const auto& seconds : kSecondsSettings) {
    if (key == seconds.key)
      return assignParsed(s.*seconds.field, boundedSeconds(seconds, value, prefix));
  }
  if (key == "role") {
    return assignParsed(s.role, pick("role", value, kRoles, prefix));
  } else if (key == "internal_token") {
    if (!isToken(value))
      return tl::unexpected(
          configError(prefix + "internal_token must be at least 16 characters without spaces"));
    s.internal_token = value;
  } else if (key == "internal_token_file") {
    if (value.empty() || value.front() != '/')
      return tl::unexpected(configError(prefix + "internal_token_file " + quoteForMessage(value) +
                                        " must be an absolute path"));
    s.internal_token_file = value;
  } else if (key == "host_image_digest") {
    if (!images::isDigest(value))
      return tl::unexpected(configError(prefix + "host_image_digest " + quoteForMessage(value) +
                                        " is not a digest (sha256:<64 hex digits>)"));
    s.host_image_digest = value;
  } else if (key == "execution_nodes") {
    s.execution_nodes.clear();
    for (const auto& item : commaList(value)) {
      const auto eq = item.find('=');
      auto node = eq == std::string::npos
                      ? executionNode("", item, prefix)
                      : executionNode(item.substr(0, eq), item.substr(eq + 1), prefix);
      if (!node) return tl::unexpected(node.error());
      if (auto added = addExecutionNode(s, std::move(*node), prefix); !added) return added;
    }
  } else if (key == "gateways") {
    s.gateways.clear();
    for (const auto& item : commaList(value)) {
      auto url = baseUrl("gateways", item, prefix);
      if (!url) return tl::unexpected(url.error());
      s.gateways.push_back(std::move(*url));
    }
  } else if (key == "deployment_mode") {
    return assignParsed(s.deployment_mode,
                        pick("deployment_mode", value, kDeploymentModes, prefix));
  } else if (key == "auth_mode") {
    return assignParsed(s.auth_mode, pick("auth_mode", value, kAuthModes, prefix));
  } else if (key == "sandbox") {
    auto v = mechanismNamed(value);
    if (!v)
      return tl::unexpected(configError(prefix + "sandbox " + quoteForMessage(value) +
                                        " is not one of " + mechanismNameList()));
    s.sandbox = *v;
  } else if (key == "state_dir") {
    if (value.empty() || value.front() != '/')
      return tl::unexpected(configError(prefix + "state_dir " + quoteForMessage(value) +
                                        " must be an absolute path"));
    s.state_dir = value;
  } else if (key == "node_name") {
    if (!value.empty() && !isNodeName(value))
      return tl::unexpected(configError(prefix + "node_name " + quoteForMessage(value) +
                                        " must be 1-63 characters of a-z 0-9 and -, not starting "
                                        "or ending with -"));
    s.node_name = value;
  } else if (key == "listen") {
    if (auto r = checkListen(value, prefix); !r) return r;
    s.listen = value;
  } else if (key == "service_token") {
    if (!isToken(value))
      return tl::unexpected(
          configError(prefix + "service_token must be at least 16 characters without spaces"));
    s.service_token = value;
  } else if (key == "default_image") {
    if (value.empty())
      return tl::unexpected(configError(prefix + "default_image must name an image (host, or the "
                                                 "name of an images entry)"));
    s.default_image = value;
  } else if (key == "egress_policy") {
    s.egress_policy_path = value;
  } else if (key == "tenant_keys_file") {
    if (!value.empty() && value.front() != '/')
      return tl::unexpected(configError(prefix + "tenant_keys_file " + quoteForMessage(value) +
                                        " must be an absolute path (or empty: no tenant keys)"));
    s.tenant_keys_file = value;
  } else if (key == "session_jobs") {
    if (value != "allowed" && value != "refused")
      return tl::unexpected(configError(prefix + "session_jobs " + quoteForMessage(value) +
                                        " must be allowed or refused"));
    s.allow_session_jobs = value == "allowed";
  } else if (key == "schedule_database") {
    if (!value.empty() && value.rfind("postgresql://", 0) != 0 &&
        value.rfind("postgres://", 0) != 0)
      return tl::unexpected(configError(
          prefix +
          "schedule_database must be empty (SQLite under state_dir) or a "
          "postgresql:// connection URI (the value is not repeated: it may hold a password)"));
    s.schedule_database = value;
  } else {
    return tl::unexpected(configError(prefix + "unknown setting " + quoteForMessage(key)));
  }
  return {};
}

// limits.defaults / limits.ceilings: the spec's ResourceLimits field names.
template <class T>
Result<void> applyLimits(T& target, const YAML::Node& map, std::string_view source,
                         const std::string& path) {
  if (!map.IsMap())
    return tl::unexpected(configError(where(source, map) + path + " must be a mapping"));
  for (const auto& kv : map) {
    const std::string key = kv.first.as<std::string>();
    const std::string prefix = where(source, kv.second);
    if (!kv.second.IsScalar())
      return tl::unexpected(configError(prefix + path + "." + key + " must be a single value"));
    const std::string value = kv.second.Scalar();
    const std::string name = path + "." + key;
    const auto rows = limitTable();
    const auto row =
        std::find_if(rows.begin(), rows.end(), [&](const LimitRow& r) { return key == r.name; });
    if (row == rows.end())
      return tl::unexpected(configError(prefix + "unknown setting " + quoteForMessage(name)));
    auto v = row->bytes ? sizeSetting(name, value, prefix) : positiveInt(name, value, prefix);
    if (!v) return tl::unexpected(v.error());
    *limitFields(target)[static_cast<std::size_t>(row - rows.begin())] = *v;
  }
  return {};
}

bool isImageName(std::string_view name) {
  return !name.empty() && name.size() <= 63 &&
         name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789._-") ==
             std::string_view::npos;
}

// images: a list whose entries are a reference (or digest), or a mapping
// {name, reference}. The reference's grammar is checked where it is
// resolved; here only its shape and the names.
Result<void> applyImages(Settings& s, const YAML::Node& list, std::string_view source) {
  if (!list.IsSequence())
    return tl::unexpected(configError(where(source, list) +
                                      "images must be a list of image references, or of "
                                      "{name, reference} mappings"));
  for (const auto& item : list) {
    const std::string prefix = where(source, item);
    ImageSetting image;
    if (item.IsScalar()) {
      image.reference = item.Scalar();
    } else if (item.IsMap()) {
      for (const auto& kv : item) {
        const std::string k = kv.first.as<std::string>();
        if (!kv.second.IsScalar())
          return tl::unexpected(configError(prefix + "images." + k + " must be a single value"));
        if (k == "name") {
          image.name = kv.second.Scalar();
        } else if (k == "reference") {
          image.reference = kv.second.Scalar();
        } else {
          return tl::unexpected(configError(prefix + "unknown setting " +
                                            quoteForMessage("images." + k) +
                                            " (name or reference)"));
        }
      }
    } else {
      return tl::unexpected(configError(prefix + "an images entry must be a reference or a "
                                                 "{name, reference} mapping"));
    }
    if (image.reference.empty())
      return tl::unexpected(configError(prefix + "an images entry has no reference"));
    if (!images::isDigest(image.reference))
      if (auto ref = images::parseImageReference(image.reference); !ref)
        return tl::unexpected(configError(prefix + "images: " + ref.error().context));
    if (image.name.empty())
      image.name = image.reference;
    else if (!isImageName(image.name))
      return tl::unexpected(configError(prefix + "images name " + quoteForMessage(image.name) +
                                        " must be 1-63 characters of a-z 0-9 . _ -"));
    if (image.name == "host")
      return tl::unexpected(configError(prefix + "images name \"host\" is the host image's"));
    for (const auto& other : s.images)
      if (other.name == image.name)
        return tl::unexpected(
            configError(prefix + "images name " + quoteForMessage(image.name) + " is there twice"));
    s.images.push_back(std::move(image));
  }
  return {};
}

// execution_nodes: a list whose entries are a base URL, or a mapping
// {name, url}.
Result<void> applyExecutionNodes(Settings& s, const YAML::Node& list, std::string_view source) {
  if (!list.IsSequence())
    return tl::unexpected(configError(where(source, list) +
                                      "execution_nodes must be a list of base URLs, or of "
                                      "{name, url} mappings"));
  for (const auto& item : list) {
    const std::string prefix = where(source, item);
    std::string name;
    std::string url;
    if (item.IsScalar()) {
      url = item.Scalar();
    } else if (item.IsMap()) {
      for (const auto& kv : item) {
        const std::string k = kv.first.as<std::string>();
        if (!kv.second.IsScalar())
          return tl::unexpected(
              configError(prefix + "execution_nodes." + k + " must be a single value"));
        if (k == "name") {
          name = kv.second.Scalar();
          if (name.empty())
            return tl::unexpected(configError(prefix + "execution_nodes name is empty"));
        } else if (k == "url") {
          url = kv.second.Scalar();
        } else {
          return tl::unexpected(configError(prefix + "unknown setting " +
                                            quoteForMessage("execution_nodes." + k) +
                                            " (name or url)"));
        }
      }
    } else {
      return tl::unexpected(configError(
          prefix + "an execution_nodes entry must be a base URL or a {name, url} mapping"));
    }
    auto node = executionNode(std::move(name), url, prefix);
    if (!node) return tl::unexpected(node.error());
    if (auto added = addExecutionNode(s, std::move(*node), prefix); !added) return added;
  }
  return {};
}

Result<Settings> parseDocument(const YAML::Node& root, std::string_view source) {
  Settings s;
  if (root.IsNull()) return s;
  if (!root.IsMap())
    return tl::unexpected(configError(where(source, root) + "the settings must be a mapping"));
  for (const auto& kv : root) {
    const std::string key = kv.first.as<std::string>();
    const std::string prefix = where(source, kv.second);
    if (key == "limits") {
      if (!kv.second.IsMap())
        return tl::unexpected(configError(prefix + "limits must be a mapping"));
      for (const auto& part : kv.second) {
        const std::string which = part.first.as<std::string>();
        Result<void> r;
        if (which == "defaults") {
          r = applyLimits(s.limit_defaults, part.second, source, "limits.defaults");
        } else if (which == "ceilings") {
          r = applyLimits(s.limit_ceilings, part.second, source, "limits.ceilings");
        } else {
          r = tl::unexpected(configError(where(source, part.second) + "unknown setting " +
                                         quoteForMessage("limits." + which) +
                                         " (defaults or ceilings)"));
        }
        if (!r) return tl::unexpected(r.error());
      }
    } else if (key == "images") {
      auto r = applyImages(s, kv.second, source);
      if (!r) return tl::unexpected(r.error());
    } else if (key == "execution_nodes") {
      auto r = applyExecutionNodes(s, kv.second, source);
      if (!r) return tl::unexpected(r.error());
    } else if (key == "gateways") {
      if (!kv.second.IsSequence())
        return tl::unexpected(configError(prefix + "gateways must be a list of base URLs"));
      for (const auto& item : kv.second) {
        if (!item.IsScalar())
          return tl::unexpected(
              configError(where(source, item) + "a gateways entry must be a base URL"));
        auto url = baseUrl("gateways", item.Scalar(), where(source, item));
        if (!url) return tl::unexpected(url.error());
        s.gateways.push_back(std::move(*url));
      }
    } else if (key == "internal_token") {
      // A secret in a file that is read by many: a file of its own, or the
      // environment.
      return tl::unexpected(configError(prefix +
                                        "internal_token is not read from the settings file: use "
                                        "internal_token_file or AIRLOCK_INTERNAL_TOKEN"));
    } else if (key == "artifacts") {
      s.artifacts_given = true;
      if (!kv.second.IsMap())
        return tl::unexpected(configError(prefix + "artifacts must be a mapping"));
      for (const auto& part : kv.second) {
        const std::string k = part.first.as<std::string>();
        const std::string p = where(source, part.second);
        if (!part.second.IsScalar())
          return tl::unexpected(configError(p + "artifacts." + k + " must be a single value"));
        const std::string value = part.second.Scalar();
        Result<std::int64_t> v =
            tl::unexpected(configError(p + "unknown setting " + quoteForMessage("artifacts." + k)));
        if (k == "retention_days") {
          v = positiveInt("artifacts.retention_days", value, p);
          if (v) s.artifacts.retention_days = *v;
        } else if (k == "tenant_byte_cap") {
          v = sizeSetting("artifacts.tenant_byte_cap", value, p);
          if (v) s.artifacts.tenant_byte_cap = *v;
        } else if (k == "max_artifact_bytes") {
          v = sizeSetting("artifacts.max_artifact_bytes", value, p);
          if (v) s.artifacts.max_artifact_bytes = *v;
        }
        if (!v) return tl::unexpected(v.error());
      }
    } else {
      if (!kv.second.IsScalar())
        return tl::unexpected(
            configError(prefix + quoteForMessage(key) + " must be a single value"));
      if (auto r = applyScalar(s, key, kv.second.Scalar(), prefix); !r)
        return tl::unexpected(r.error());
    }
  }
  return s;
}

}  // namespace

std::string_view deploymentModeName(DeploymentMode m) noexcept {
  return m == DeploymentMode::kProduction ? "production" : "development";
}
std::string_view authModeName(AuthMode m) noexcept {
  return m == AuthMode::kToken ? "token" : "dev";
}
std::string_view serviceRoleName(ServiceRole r) noexcept {
  for (const auto& named : kRoles)
    if (named.value == r) return named.name;
  return "both";
}

EnvLookup processEnvironment() {
  return [](std::string_view name) -> std::optional<std::string> {
    const char* v = std::getenv(std::string(name).c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

Result<Settings> parseSettings(std::string_view yaml, std::string_view source) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    // yaml-cpp reports syntax errors as exceptions carrying a mark.
    std::string at = std::string(source);
    if (e.mark.line >= 0)
      at += " line " + std::to_string(e.mark.line + 1) + ", column " +
            std::to_string(e.mark.column + 1);
    return tl::unexpected(configError(at + ": not valid YAML (" + e.msg + ")"));
  }
  try {
    return parseDocument(root, source);
  } catch (const YAML::Exception& e) {
    // A key that is not a scalar, or similar shape errors.
    return tl::unexpected(configError(std::string(source) + ": " + e.msg));
  }
}

Result<Settings> applyEnvironment(Settings settings, const EnvLookup& env) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 19> kVars = {{
      {"AIRLOCK_ROLE", "role"},
      {"AIRLOCK_INTERNAL_TOKEN", "internal_token"},
      {"AIRLOCK_INTERNAL_TOKEN_FILE", "internal_token_file"},
      {"AIRLOCK_EXECUTION_NODES", "execution_nodes"},
      {"AIRLOCK_GATEWAYS", "gateways"},
      {"AIRLOCK_NODE_CAPACITY", "node_capacity"},
      {"AIRLOCK_DEPLOYMENT_MODE", "deployment_mode"},
      {"AIRLOCK_AUTH_MODE", "auth_mode"},
      {"AIRLOCK_SANDBOX", "sandbox"},
      {"AIRLOCK_STATE_DIR", "state_dir"},
      {"AIRLOCK_NODE_NAME", "node_name"},
      {"AIRLOCK_LISTEN", "listen"},
      {"AIRLOCK_SERVICE_TOKEN", "service_token"},
      {"AIRLOCK_REAPER_INTERVAL", "reaper_interval"},
      {"AIRLOCK_EGRESS_POLICY", "egress_policy"},
      {"AIRLOCK_TENANT_KEYS_FILE", "tenant_keys_file"},
      {"AIRLOCK_SCHEDULE_DATABASE", "schedule_database"},
      {"AIRLOCK_ENVIRONMENT_LIFETIME", "environment_lifetime"},
      {"AIRLOCK_ENVIRONMENT_HARD_CAP", "environment_hard_cap"},
  }};
  for (const auto& [var, key] : kVars) {
    auto value = env(var);
    if (!value) continue;
    if (auto r =
            applyScalar(settings, key, *value, "environment variable " + std::string(var) + ": ");
        !r)
      return tl::unexpected(r.error());
  }
  return settings;
}

Result<Settings> loadSettings(const std::optional<std::string>& path, const EnvLookup& env) {
  Settings s;
  if (path) {
    std::ifstream in(*path);
    if (!in)
      return tl::unexpected(
          configError("settings file " + quoteForMessage(*path) + " cannot be read"));
    std::stringstream text;
    text << in.rdbuf();
    auto parsed = parseSettings(text.str(), "settings file " + quoteForMessage(*path));
    if (!parsed) return tl::unexpected(parsed.error());
    s = std::move(*parsed);
  }
  auto applied = applyEnvironment(std::move(s), env);
  if (!applied) return applied;
  if (auto token = loadInternalToken(*applied); !token) return tl::unexpected(token.error());
  return applied;
}

Result<void> loadInternalToken(Settings& s) {
  if (s.internal_token_file.empty()) return {};
  const std::string name = "internal_token_file " + quoteForMessage(s.internal_token_file);
  const int fd = ::open(s.internal_token_file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return tl::unexpected(Error{ErrorCode::kConfigurationError, errno, name + " cannot be opened"});
  struct stat st {};
  std::string text;
  bool ok = ::fstat(fd, &st) == 0;
  if (ok && S_ISREG(st.st_mode) && (st.st_mode & 077) == 0 && st.st_size <= 4096) {
    char buf[4097];
    ssize_t n = 0;
    while ((n = ::read(fd, buf, sizeof buf)) > 0 && text.size() <= 4096)
      text.append(buf, static_cast<std::size_t>(n));
    ok = n == 0;
  }
  ::close(fd);
  if (!ok) return tl::unexpected(configError(name + " cannot be read"));
  if (!S_ISREG(st.st_mode)) return tl::unexpected(configError(name + " is not a regular file"));
  if ((st.st_mode & 077) != 0)
    return tl::unexpected(configError(name + " is readable by others than its owner (mode " +
                                      std::to_string((st.st_mode >> 6) & 7) +
                                      std::to_string((st.st_mode >> 3) & 7) +
                                      std::to_string(st.st_mode & 7) + "; use 0600)"));
  if (!text.empty() && text.back() == '\n') text.pop_back();
  if (!isToken(text))
    return tl::unexpected(
        configError(name + " must hold one token of at least 16 characters without spaces"));
  if (!s.internal_token.empty() && s.internal_token != text)
    return tl::unexpected(configError(
        name + " and AIRLOCK_INTERNAL_TOKEN hold different tokens (give one, or the same)"));
  s.internal_token = std::move(text);
  return {};
}

std::vector<std::string> gatewayOnlySettingsIn(const Settings& s) {
  std::vector<std::string> found;
  if (!s.schedule_database.empty()) found.emplace_back("schedule_database");
  if (s.artifacts_given) found.emplace_back("artifacts");
  if (!s.service_token.empty()) found.emplace_back("service_token");
  if (!s.execution_nodes.empty()) found.emplace_back("execution_nodes");
  if (!s.host_image_digest.empty()) found.emplace_back("host_image_digest");
  if (!s.tenant_keys_file.empty()) found.emplace_back("tenant_keys_file");
  return found;
}

namespace {

// The role's own conditions (checkStartup).
Result<void> checkRole(const Settings& s) {
  const std::string role = "role=" + std::string(serviceRoleName(s.role));
  switch (s.role) {
    case ServiceRole::kBoth:
      if (!s.execution_nodes.empty() || !s.gateways.empty() || !s.host_image_digest.empty())
        return tl::unexpected(configError(
            "refusing to start: execution_nodes, gateways and host_image_digest need role "
            "gateway or execution, but no role is set (both sides in one process)"));
      return {};
    case ServiceRole::kExecution: {
      const auto held = gatewayOnlySettingsIn(s);
      if (!held.empty()) {
        std::string names;
        for (const auto& n : held) names += (names.empty() ? "" : ", ") + n;
        return tl::unexpected(configError("refusing to start: " + role +
                                          " holds no database, no artifact store and no tenant " +
                                          "or API credential, but the settings set " + names +
                                          " (they belong to the gateway's settings)"));
      }
      if (s.node_name.empty())
        return tl::unexpected(configError(
            "refusing to start: " + role +
            " requires node_name (the name its environment ids carry, for the gateways to route "
            "by)"));
      if (s.internal_token.empty())
        return tl::unexpected(configError("refusing to start: " + role +
                                          " requires the service credential of the internal API "
                                          "(internal_token_file or AIRLOCK_INTERNAL_TOKEN)"));
      return {};
    }
    case ServiceRole::kGateway:
      if (s.execution_nodes.empty())
        return tl::unexpected(configError("refusing to start: " + role +
                                          " requires execution_nodes (the base URLs of the "
                                          "execution nodes it places environments on)"));
      if (s.internal_token.empty())
        return tl::unexpected(configError("refusing to start: " + role +
                                          " requires the service credential of the internal API "
                                          "(internal_token_file or AIRLOCK_INTERNAL_TOKEN)"));
      if (!s.gateways.empty() || s.node_capacity != 0)
        return tl::unexpected(configError(
            "refusing to start: " + role +
            " runs no environment itself: gateways and node_capacity are an execution node's "
            "settings"));
      for (const auto& image : s.images)
        if (!images::isDigest(image.reference))
          return tl::unexpected(configError(
              "refusing to start: " + role + " resolves no image reference (it holds no image " +
              "store): images entry " + quoteForMessage(image.name) +
              " must name a digest (sha256:...) the execution nodes hold"));
      if (s.host_image_digest.empty() && s.default_image == "host")
        return tl::unexpected(configError(
            "refusing to start: " + role +
            " requires host_image_digest (the execution nodes' host image, which they log at "
            "start) or a default_image naming an images entry"));
      return {};
  }
  return {};
}

}  // namespace

Result<void> checkTenantKeys(const Settings& s) {
  if (s.tenant_keys_file.empty()) return {};
  auto keys = TenantKeys::loadFile(s.tenant_keys_file);
  if (!keys) {
    Error error = keys.error();
    error.context = "tenant_keys_file: " + error.context;
    return tl::unexpected(std::move(error));
  }
  // The service token acts for every tenant: were it also a tenant's key,
  // that tenant would hold the operator's credential.
  if (auto tenant = keys->tenantOf(s.service_token))
    return tl::unexpected(
        configError("tenant_keys_file: the service_token is also a key of tenant " +
                    quoteForMessage(*tenant) + "; give the tenant a key of its own"));
  return {};
}

Result<void> checkStartup(const Settings& s) {
  if (auto r = checkRole(s); !r) return r;
  const std::string mech = "sandbox=" + std::string(mechanismName(s.sandbox));
  // A gateway runs no sandbox: its nodes check their own mechanism.
  if (!isolatesKernel(s.sandbox) && s.role != ServiceRole::kGateway) {
    if (s.deployment_mode == DeploymentMode::kProduction) {
      return tl::unexpected(configError(
          "refusing to start: deployment_mode=production requires sandbox gvisor or microvm, but " +
          mech + " (auth_mode=" + std::string(authModeName(s.auth_mode)) +
          "); the linux and fake mechanisms share or skip the kernel boundary and are for "
          "development only"));
    }
    if (s.auth_mode != AuthMode::kDev) {
      return tl::unexpected(configError(
          "refusing to start: auth_mode=" + std::string(authModeName(s.auth_mode)) +
          " requires sandbox gvisor or microvm, but " + mech +
          " (deployment_mode=" + std::string(deploymentModeName(s.deployment_mode)) +
          "); untrusted code is not run under a development sandbox with real credentials"));
    }
  }
  // Dev authentication is a random token in a file under state_dir: fine on
  // a laptop, not a credential the platform was given.
  if (s.deployment_mode == DeploymentMode::kProduction && s.auth_mode == AuthMode::kDev) {
    return tl::unexpected(configError(
        "refusing to start: deployment_mode=production requires auth_mode=token, but auth_mode=dev "
        "(" +
        mech +
        "); dev authentication is a random token written under state_dir, for development only; "
        "set auth_mode: token and service_token (or AIRLOCK_AUTH_MODE=token and "
        "AIRLOCK_SERVICE_TOKEN)"));
  }
  if (!s.egress_policy_path.empty()) {
    auto policy = egress::loadEgressPolicyFile(s.egress_policy_path);
    if (!policy) return tl::unexpected(configError("egress_policy: " + policy.error().message()));
  }
  if (auto r = checkTenantKeys(s); !r) return r;
  // An execution node's callers present the internal credential instead.
  if (s.auth_mode == AuthMode::kToken && s.service_token.empty() &&
      s.role != ServiceRole::kExecution)
    return tl::unexpected(
        configError("auth_mode=token requires service_token (or AIRLOCK_SERVICE_TOKEN)"));
  // The spec fixes three ceilings; an operator may lower them, not raise them.
  const LimitCeilings fixed = defaultCeilings();
  for (auto [name, value, most] :
       {std::tuple{"pids_max", s.limit_ceilings.pids_max, fixed.pids_max},
        {"inodes_max", s.limit_ceilings.inodes_max, fixed.inodes_max},
        {"wall_clock_seconds", s.limit_ceilings.wall_clock_seconds, fixed.wall_clock_seconds}}) {
    if (value > most)
      return tl::unexpected(
          configError("limits.ceilings." + std::string(name) + " " + std::to_string(value) +
                      " is above the spec's fixed ceiling of " + std::to_string(most)));
  }
  // The lifetime is where extend starts from, the hard cap how far it goes.
  if (s.environment_lifetime > s.environment_hard_cap)
    return tl::unexpected(configError(
        "environment_lifetime " + std::to_string(s.environment_lifetime.count()) +
        "s is above environment_hard_cap " + std::to_string(s.environment_hard_cap.count()) +
        "s: no environment lives longer than the hard cap"));
  if (auto r = checkLimits(s.limit_defaults, s.limit_ceilings); !r)
    return tl::unexpected(configError("limits.defaults: " + r.error().context));
  if (!s.images.empty() && s.sandbox == Mechanism::kFake && s.role != ServiceRole::kGateway)
    return tl::unexpected(configError(
        "refusing to start: images are set, but sandbox=fake runs no images (use linux or "
        "gvisor)"));
  if (s.default_image != "host" &&
      std::none_of(s.images.begin(), s.images.end(),
                   [&](const ImageSetting& i) { return i.name == s.default_image; })) {
    std::string names = "host";
    for (const auto& i : s.images) names += ", " + i.name;
    return tl::unexpected(configError("default_image " + quoteForMessage(s.default_image) +
                                      " is not host nor the name of an images entry (" + names +
                                      ")"));
  }
  return {};
}

}  // namespace airlock::service
