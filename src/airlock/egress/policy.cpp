#include "airlock/egress/policy.h"

#include <libpsl.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <sstream>

#include "airlock/egress/authority.h"

namespace airlock::egress {
namespace {

constexpr std::size_t kMaxPolicyBytes = 1 << 20;

// Last labels of special-use names that never belong on an allowlist: they
// resolve locally or not at all (RFC 6761, RFC 6762, RFC 7686, ICANN
// ".internal").
constexpr std::array<std::string_view, 6> kSpecialUseTlds = {"localhost", "local", "invalid",
                                                             "internal",  "onion", "arpa"};

class LoadError {
 public:
  LoadError(std::string_view source) : source_(source) {}
  tl::unexpected<Error> at(const YAML::Mark& mark, std::string_view path,
                           std::string_view what) const {
    std::string msg = std::string(source_);
    if (!mark.is_null())
      msg += ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
    msg += ": ";
    if (!path.empty()) msg += std::string(path) + ": ";
    msg += what;
    return fail(ErrorCode::kConfigurationError, std::move(msg));
  }

 private:
  std::string_view source_;
};

const psl_ctx_t* publicSuffixList() {
  // psl_latest picks the newer of the built-in list and the system file
  // (Debian's publicsuffix package). Loaded once, never freed.
  static const psl_ctx_t* psl = [] {
    const psl_ctx_t* latest = psl_latest(nullptr);
    return latest != nullptr ? latest : psl_builtin();
  }();
  return psl;
}

std::string quoted(std::string_view s) {
  return "\"" + sanitizeForLog(s) + "\"";
}

// Rejects duplicate and unknown keys of a mapping node.
tl::expected<void, Error> checkKeys(const YAML::Node& map, std::string_view path,
                                    std::initializer_list<std::string_view> allowed,
                                    const LoadError& err, std::string_view hint = {}) {
  std::vector<std::string> seen;
  for (auto it = map.begin(); it != map.end(); ++it) {
    const YAML::Node key = it->first;
    if (!key.IsScalar()) return err.at(key.Mark(), path, "keys must be plain names");
    const std::string& name = key.Scalar();
    if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
      std::string what = "unknown key " + quoted(name);
      if (!hint.empty()) what += std::string("; ") + std::string(hint);
      return err.at(key.Mark(), path, what);
    }
    if (std::find(seen.begin(), seen.end(), name) != seen.end())
      return err.at(key.Mark(), path, "duplicate key " + quoted(name));
    seen.push_back(name);
  }
  return {};
}

// Validates one destination host; returns it canonical ("*.base" for a
// wildcard) or an error message.
tl::expected<std::string, std::string> validateHost(const std::string& host) {
  if (host.empty()) return tl::unexpected(std::string("host is empty"));
  if (host.find("://") != std::string::npos)
    return tl::unexpected("host " + quoted(host) +
                          " contains a scheme; there is no scheme in the grammar (the tunnel is "
                          "opaque), write the bare name");
  if (host.front() == '[')
    return tl::unexpected("host " + quoted(host) +
                          " is an IP literal; destinations are names, never addresses");
  if (host.find(':') != std::string::npos)
    return tl::unexpected("host " + quoted(host) + " contains ':'; write the port under ports");
  if (host.find('/') != std::string::npos)
    return tl::unexpected("host " + quoted(host) + " contains a path; write the bare name");

  const bool wildcard = host.size() >= 2 && host[0] == '*' && host[1] == '.';
  const std::string_view name =
      wildcard ? std::string_view(host).substr(2) : std::string_view(host);
  if (name.find('*') != std::string_view::npos ||
      (!wildcard && host.find('*') != std::string::npos))
    return tl::unexpected("host " + quoted(host) +
                          ": a wildcard is exactly one leftmost label \"*.\" followed by a name");
  if (wildcard && name.empty())
    return tl::unexpected("host " + quoted(host) +
                          ": a wildcard needs a base name (\"*.\" matches "
                          "everything)");

  auto canonical = parseHostName(name);
  if (!canonical) {
    const AuthorityError& e = canonical.error();
    if (e.reason == Reason::kIpLiteral)
      return tl::unexpected("host " + quoted(host) +
                            " is an IP literal; destinations are names, never addresses");
    if (e.reason == Reason::kNonAsciiHost)
      return tl::unexpected("host " + quoted(host) +
                            " is not ASCII; write an internationalized name in Punycode (xn--)");
    return tl::unexpected("host " + quoted(host) + " is not a valid name: " + e.detail);
  }
  if (*canonical != name)
    return tl::unexpected("host " + quoted(host) + " is not canonical; write " +
                          quoted((wildcard ? "*." : "") + *canonical));

  const auto dot = canonical->rfind('.');
  const std::string_view tld = dot == std::string::npos
                                   ? std::string_view(*canonical)
                                   : std::string_view(*canonical).substr(dot + 1);
  if (std::find(kSpecialUseTlds.begin(), kSpecialUseTlds.end(), tld) != kSpecialUseTlds.end())
    return tl::unexpected("host " + quoted(host) + " is a special-use name (" + std::string(tld) +
                          ") that never resolves to a public destination");
  if (wildcard) {
    const psl_ctx_t* psl = publicSuffixList();
    if (psl == nullptr)
      return tl::unexpected(std::string("public suffix list unavailable; cannot check wildcard"));
    if (dot == std::string::npos ||
        psl_is_public_suffix2(psl, canonical->c_str(), PSL_TYPE_ICANN) != 0)
      return tl::unexpected("host " + quoted(host) + ": " + quoted(*canonical) +
                            " is a public suffix; a wildcard over it allows anyone's domain");
  }
  if (dot == std::string::npos)
    return tl::unexpected("host " + quoted(host) +
                          " has one label; write a fully qualified name such as example.com");
  return (wildcard ? "*." : "") + *canonical;
}

tl::expected<std::vector<std::uint16_t>, Error> loadPorts(const YAML::Node& node,
                                                          std::string_view path,
                                                          const LoadError& err) {
  if (!node.IsSequence())
    return tl::unexpected(
        err.at(node.Mark(), path, "ports must be a list of port numbers, e.g. [443]").value());
  if (node.size() == 0)
    return tl::unexpected(err.at(node.Mark(), path,
                                 "ports is empty; list every port explicitly (there is no "
                                 "default port)")
                              .value());
  std::vector<std::uint16_t> ports;
  std::size_t i = 0;
  for (const auto& item : node) {
    const std::string item_path = std::string(path) + "[" + std::to_string(i++) + "]";
    if (!item.IsScalar() || item.Tag() != "?")
      return tl::unexpected(
          err.at(item.Mark(), item_path, "a port is an unquoted number from 1 to 65535").value());
    auto port = parsePort(item.Scalar());
    if (!port)
      return tl::unexpected(err.at(item.Mark(), item_path,
                                   "invalid port " + quoted(item.Scalar()) +
                                       " (1-65535, decimal, no sign or leading zero)")
                                .value());
    if (std::find(ports.begin(), ports.end(), *port) != ports.end())
      return tl::unexpected(
          err.at(item.Mark(), item_path, "port " + std::to_string(*port) + " listed twice")
              .value());
    ports.push_back(*port);
  }
  std::sort(ports.begin(), ports.end());
  return ports;
}

// Counts YAML documents, stopping at two. yaml-cpp 0.7's LoadAll never
// returns on some inputs (a lone ","): its parser reports documents without
// consuming input, so the loop here is bounded instead.
struct DocumentCount {
  int count = 0;
  YAML::Mark second = YAML::Mark::null_mark();
};

class DocumentCounter final : public YAML::EventHandler {
 public:
  explicit DocumentCounter(DocumentCount& out) : out_(out) {}
  void OnDocumentStart(const YAML::Mark& mark) override {
    if (++out_.count == 2) out_.second = mark;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}

 private:
  DocumentCount& out_;
};

DocumentCount countDocuments(const std::string& text) {
  DocumentCount result;
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentCounter counter(result);
  for (int i = 0; i < 2 && parser.HandleNextDocument(counter); ++i) {
  }
  return result;
}

void unite(std::vector<std::uint16_t>& into, const std::vector<std::uint16_t>& more) {
  into.insert(into.end(), more.begin(), more.end());
  std::sort(into.begin(), into.end());
  into.erase(std::unique(into.begin(), into.end()), into.end());
}

}  // namespace

std::shared_ptr<const Policy> Policy::denyAll() {
  static const std::shared_ptr<const Policy> deny = [] {
    auto p = std::shared_ptr<Policy>(new Policy());
    p->source_ = "<default: deny>";
    return std::shared_ptr<const Policy>(std::move(p));
  }();
  return deny;
}

Reason Policy::check(std::string_view canonical_host, std::uint16_t port) const {
  if (mode_ != EgressMode::kAllowlist) return Reason::kModeDeny;
  bool host_matched = false;
  auto has_port = [port](const std::vector<std::uint16_t>& ports) {
    return std::binary_search(ports.begin(), ports.end(), port);
  };
  const std::string host(canonical_host);
  if (auto it = exact_.find(host); it != exact_.end()) {
    host_matched = true;
    if (has_port(it->second)) return Reason::kAllowed;
  }
  if (const auto dot = host.find('.'); dot != std::string::npos && dot > 0) {
    if (auto it = wildcard_base_.find(host.substr(dot + 1)); it != wildcard_base_.end()) {
      host_matched = true;
      if (has_port(it->second)) return Reason::kAllowed;
    }
  }
  return host_matched ? Reason::kPortNotAllowed : Reason::kHostNotAllowed;
}

Result<std::shared_ptr<const Policy>> loadEgressPolicy(std::string_view yaml_text,
                                                       std::string_view source_name) {
  const LoadError err(source_name);
  const YAML::Mark none = YAML::Mark::null_mark();
  if (yaml_text.size() > kMaxPolicyBytes) return err.at(none, "", "policy larger than 1 MiB");
  if (yaml_text.find('\0') != std::string_view::npos)
    return err.at(none, "", "policy contains a NUL byte");

  auto policy = std::shared_ptr<Policy>(new Policy());
  policy->source_ = std::string(source_name);
  try {
    const std::string text(yaml_text);
    const DocumentCount docs = countDocuments(text);
    if (docs.count == 0)
      return err.at(none, "", "empty policy; expected a top-level \"egress:\" key");
    if (docs.count > 1) return err.at(docs.second, "", "more than one YAML document");
    const YAML::Node root = YAML::Load(text);
    if (!root.IsMap())
      return err.at(root.Mark(), "", "expected a mapping with a top-level \"egress:\" key");
    if (auto ok = checkKeys(root, "", {"egress"}, err); !ok) return tl::unexpected(ok.error());
    const YAML::Node egress = root["egress"];
    if (!egress || !egress.IsMap())
      return err.at(egress ? egress.Mark() : root.Mark(), "egress",
                    "expected a mapping with mode and destinations");
    if (auto ok = checkKeys(egress, "egress", {"mode", "destinations"}, err); !ok)
      return tl::unexpected(ok.error());

    if (const YAML::Node mode = egress["mode"]) {
      if (!mode.IsScalar() || (mode.Scalar() != "deny" && mode.Scalar() != "allowlist"))
        return err.at(mode.Mark(), "egress.mode",
                      "mode must be deny or allowlist (there is no allow mode)");
      policy->mode_ = mode.Scalar() == "allowlist" ? EgressMode::kAllowlist : EgressMode::kDeny;
    }

    if (const YAML::Node dests = egress["destinations"]) {
      if (!dests.IsSequence() && !dests.IsNull())
        return err.at(dests.Mark(), "egress.destinations", "destinations must be a list");
      std::size_t i = 0;
      std::vector<YAML::Mark> marks;
      for (const auto& d : dests) {
        const std::string path = "egress.destinations[" + std::to_string(i++) + "]";
        if (!d.IsMap())
          return err.at(d.Mark(), path, "a destination is a mapping with host and ports");
        if (auto ok = checkKeys(d, path, {"host", "ports"}, err,
                                "a destination has only host and ports (no scheme, no default "
                                "port, no address)");
            !ok)
          return tl::unexpected(ok.error());
        const YAML::Node host = d["host"];
        if (!host) return err.at(d.Mark(), path, "host is required");
        if (!host.IsScalar()) return err.at(host.Mark(), path + ".host", "host must be a name");
        auto canonical = validateHost(host.Scalar());
        if (!canonical) return err.at(host.Mark(), path + ".host", canonical.error());
        const YAML::Node ports_node = d["ports"];
        if (!ports_node)
          return err.at(d.Mark(), path,
                        "ports is required (there is no default port), e.g. ports: [443]");
        auto ports = loadPorts(ports_node, path + ".ports", err);
        if (!ports) return tl::unexpected(ports.error());

        for (std::size_t j = 0; j < policy->destinations_.size(); ++j) {
          if (policy->destinations_[j].host == *canonical)
            return err.at(host.Mark(), path + ".host",
                          "host " + quoted(*canonical) + " is already listed at line " +
                              std::to_string(marks[j].line + 1) + "; merge the ports");
        }
        marks.push_back(host.Mark());
        if (canonical->starts_with("*."))
          unite(policy->wildcard_base_[canonical->substr(2)], *ports);
        else
          unite(policy->exact_[*canonical], *ports);
        policy->destinations_.push_back(Destination{std::move(*canonical), std::move(*ports)});
      }
    }
  } catch (const YAML::Exception& e) {
    // An unquoted wildcard (host: *.example.com) reads as a YAML alias.
    const bool alias = e.msg.find("anchor") != std::string::npos;
    return err.at(e.mark, "",
                  "YAML: " + e.msg +
                      (alias ? " (a wildcard host must be quoted: host: \"*.example.com\")" : ""));
  } catch (const std::exception& e) {
    return err.at(none, "", std::string("cannot load policy: ") + e.what());
  }
  return std::shared_ptr<const Policy>(std::move(policy));
}

airlock::EgressPolicy Policy::toValue() const {
  airlock::EgressPolicy value;
  value.mode = mode_;
  for (const auto& d : destinations_)
    value.destinations.push_back(
        EgressDestination{d.host, std::vector<int>(d.ports.begin(), d.ports.end())});
  return value;
}

Result<std::shared_ptr<const Policy>> compilePolicy(const airlock::EgressPolicy& value,
                                                    std::string_view source_name) {
  const LoadError err(source_name);
  const YAML::Mark none = YAML::Mark::null_mark();
  try {
    auto policy = std::shared_ptr<Policy>(new Policy());
    policy->source_ = std::string(source_name);
    policy->mode_ = value.mode;
    for (std::size_t i = 0; i < value.destinations.size(); ++i) {
      const auto& d = value.destinations[i];
      const std::string path = "egress.destinations[" + std::to_string(i) + "]";
      auto canonical = validateHost(d.host);
      if (!canonical) return err.at(none, path + ".host", canonical.error());
      if (d.ports.empty())
        return err.at(none, path + ".ports",
                      "ports is empty; list every port explicitly (there is no default port)");
      std::vector<std::uint16_t> ports;
      for (std::size_t j = 0; j < d.ports.size(); ++j) {
        const int port = d.ports[j];
        const std::string port_path = path + ".ports[" + std::to_string(j) + "]";
        if (port < 1 || port > 65535)
          return err.at(none, port_path, "port " + std::to_string(port) + " is not in 1-65535");
        if (std::find(ports.begin(), ports.end(), port) != ports.end())
          return err.at(none, port_path, "port " + std::to_string(port) + " listed twice");
        ports.push_back(static_cast<std::uint16_t>(port));
      }
      std::sort(ports.begin(), ports.end());
      for (const auto& existing : policy->destinations_)
        if (existing.host == *canonical)
          return err.at(none, path + ".host",
                        "host " + quoted(*canonical) + " is listed twice; merge the ports");
      if (canonical->starts_with("*."))
        unite(policy->wildcard_base_[canonical->substr(2)], ports);
      else
        unite(policy->exact_[*canonical], ports);
      policy->destinations_.push_back(Destination{std::move(*canonical), std::move(ports)});
    }
    return std::shared_ptr<const Policy>(std::move(policy));
  } catch (const std::exception& e) {
    return err.at(none, "", std::string("cannot compile policy: ") + e.what());
  }
}

Result<std::shared_ptr<const Policy>> loadEgressPolicyFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return failErrno(ErrorCode::kConfigurationError, "cannot open egress policy " + path, errno);
  std::string text;
  text.resize(kMaxPolicyBytes + 1);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad())
    return failErrno(ErrorCode::kConfigurationError, "cannot read egress policy " + path, errno);
  text.resize(static_cast<std::size_t>(in.gcount()));
  return loadEgressPolicy(text, path);
}

PolicyStore::PolicyStore(std::shared_ptr<const Policy> initial)
    : current_(initial ? std::move(initial) : Policy::denyAll()) {}

std::shared_ptr<const Policy> PolicyStore::current() const {
  std::lock_guard lock(mu_);
  return current_;
}

Result<void> PolicyStore::reload(std::string_view yaml_text, std::string_view source_name) {
  auto loaded = loadEgressPolicy(yaml_text, source_name);
  if (!loaded) return tl::unexpected(loaded.error());
  std::lock_guard lock(mu_);
  current_ = std::move(*loaded);
  return {};
}

}  // namespace airlock::egress
