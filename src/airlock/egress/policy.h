// The egress policy: grammar, validation and the compiled immutable form
// (spec 000, "The allowlist grammar").
//
// Grammar (YAML, one document, nothing else at the top level):
//
//   egress:
//     mode: allowlist          # deny (the default when absent) | allowlist
//     destinations:            # optional; absent or [] denies everything
//       - host: pypi.org       # a name; required
//         ports: [443]         # required, non-empty, 1..65535, no duplicates
//       - host: "*.pythonhosted.org"
//         ports: [443]
//
// Rules enforced at load (each violation is a ConfigurationError whose
// context is "<source>:<line>:<column>: <path>: <what>", 1-based):
//  * unknown or duplicate keys anywhere, a second YAML document, a mode
//    other than deny|allowlist (there is no allow mode);
//  * host: ASCII, already canonical (lowercase, no trailing dot), labels of
//    [a-z0-9_-], at least two labels; not an IP literal in any spelling
//    (10.0.0.1, 0x7f.1, 2130706433, [::1]); no scheme, port, path or
//    userinfo; not a special-use name (localhost, *.local, *.internal,
//    *.invalid, *.onion, *.arpa);
//  * a wildcard is exactly "*." followed by a name: one leftmost label, never
//    "**.", "*x.", "a.*.b" or "*."; its base has at least two labels and is
//    not an ICANN public suffix (libpsl), so "*.org" and "*.co.uk" are
//    refused. Private-section suffixes (githubusercontent.com, github.io)
//    are accepted: listing them is an operator's explicit choice;
//  * ports: plain (unquoted) decimal scalars, no leading zero or sign;
//  * the same host listed twice.
// Matching: an exact entry matches only its own name; "*.b.c" matches
// exactly one extra leftmost label ("a.b.c", never "b.c" or "x.a.b.c").
// When several entries match a name their ports are united.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "airlock/core/error.h"
#include "airlock/core/types.h"
#include "airlock/egress/reason.h"

namespace airlock::egress {

// The mode is core's airlock::EgressMode (deny | allowlist), shared with the
// EnvironmentSpec value type.

struct Destination {
  std::string host;                  // canonical name, or "*." + canonical base
  std::vector<std::uint16_t> ports;  // sorted, unique, non-empty
};

class Policy {
 public:
  // The default policy: mode deny, no destinations.
  static std::shared_ptr<const Policy> denyAll();

  EgressMode mode() const noexcept { return mode_; }
  // In file order (for approval prompts and logs).
  const std::vector<Destination>& destinations() const noexcept { return destinations_; }
  // Where the policy came from (file path or a caller-given name).
  const std::string& source() const noexcept { return source_; }
  // True when egress can ever be allowed: allowlist mode with at least one
  // destination (the operator's half of "two independent yeses").
  bool permitsAnything() const noexcept {
    return mode_ == EgressMode::kAllowlist && !destinations_.empty();
  }

  // The name-and-port stage of a decision, with no DNS. `canonical_host`
  // must come from parseAuthority(). Returns kAllowed, kModeDeny,
  // kHostNotAllowed or kPortNotAllowed.
  Reason check(std::string_view canonical_host, std::uint16_t port) const;

  // The same policy as the EnvironmentSpec value type (core/types.h), for a
  // sandbox's spec, JSON and approval prompts.
  airlock::EgressPolicy toValue() const;

 private:
  friend Result<std::shared_ptr<const Policy>> loadEgressPolicy(std::string_view, std::string_view);
  friend Result<std::shared_ptr<const Policy>> compilePolicy(const airlock::EgressPolicy&,
                                                             std::string_view);
  Policy() = default;

  EgressMode mode_ = EgressMode::kDeny;
  std::vector<Destination> destinations_;
  std::string source_;
  std::unordered_map<std::string, std::vector<std::uint16_t>> exact_;
  std::unordered_map<std::string, std::vector<std::uint16_t>> wildcard_base_;
};

// Parses and validates `yaml_text` (at most 1 MiB). `source_name` prefixes
// error messages. Never throws; errors are kConfigurationError.
Result<std::shared_ptr<const Policy>> loadEgressPolicy(std::string_view yaml_text,
                                                       std::string_view source_name);
// Reads `path` (at most 1 MiB) and loads it with the path as source name.
Result<std::shared_ptr<const Policy>> loadEgressPolicyFile(const std::string& path);

// Validates and compiles the value type (EnvironmentSpec.egress, an API
// body) by the same host and port rules as the loader. Errors are
// kConfigurationError "<source>: egress.destinations[i].host: <what>" (no
// line or column: there is no text).
Result<std::shared_ptr<const Policy>> compilePolicy(const airlock::EgressPolicy& value,
                                                    std::string_view source_name);

// Holds the current policy for new sandboxes. A reload that fails keeps the
// last good policy (a reload must never fail open by dropping the filter). Running sandboxes keep
// the pointer they were given.
class PolicyStore {
 public:
  explicit PolicyStore(std::shared_ptr<const Policy> initial = Policy::denyAll());
  std::shared_ptr<const Policy> current() const;
  // Replaces the current policy only if `yaml_text` loads.
  Result<void> reload(std::string_view yaml_text, std::string_view source_name);

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const Policy> current_;
};

}  // namespace airlock::egress
