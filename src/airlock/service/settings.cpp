#include "airlock/service/settings.h"

#include <arpa/inet.h>
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
  if (key == "deployment_mode") {
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
    if (value.size() < 16 || value.find_first_of(" \t\r\n") != std::string::npos)
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
    } else if (key == "artifacts") {
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
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 13> kVars = {{
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
  return applyEnvironment(std::move(s), env);
}

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
  const std::string mech = "sandbox=" + std::string(mechanismName(s.sandbox));
  if (!isolatesKernel(s.sandbox)) {
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
  if (s.auth_mode == AuthMode::kToken && s.service_token.empty())
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
  if (!s.images.empty() && s.sandbox == Mechanism::kFake)
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
