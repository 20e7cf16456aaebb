// The environment a sandbox sees, built from three tiers (spec 000, "The
// environment a sandbox sees, and the three tiers").
//
// The environment is built, never filtered: it starts empty.
// * Tier 0: platform and provider credentials. Never present, not
//   configurable. kTier0Names exists so tests can assert none appears.
// * Tier 1: names an operator lists; copied from the service's environment
//   when present there. A tier-1 name that is also tier 0 is a startup
//   configuration error. If the tier-1 list cannot be read or parsed, the
//   environment is tier 2 alone and the failure is reported (fail-closed).
// * Tier 2: synthesized: HOME=/workspace, PWD, PATH (the image PATH),
//   TMPDIR=/tmp, LANG=C.UTF-8, and the bridge socket/token when present.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/core/error.h"
#include "airlock/core/types.h"

namespace airlock {

// The fixed PATH inside every sandbox; argv[0] is resolved only against it.
inline constexpr std::string_view kImagePath = "/usr/local/bin:/usr/bin:/bin";
inline constexpr std::string_view kWorkspaceRoot = "/workspace";

// Tier 0: exact names and name patterns (prefix*, *suffix) that are never
// present. Matching is case-sensitive on exact names, case-insensitive on
// patterns.
std::span<const std::string_view> tier0Names() noexcept;
bool isTier0Name(std::string_view name) noexcept;

// A syntactically valid environment variable name: [A-Za-z_][A-Za-z0-9_]*.
bool isValidEnvName(std::string_view name) noexcept;

// Validates an operator's tier-1 list at startup: every name valid, none in
// tier 0, no duplicates. ConfigurationError names the first bad entry.
Result<std::vector<std::string>> validateTier1Names(std::span<const std::string> names);

struct BuiltEnvironment {
  std::map<std::string, std::string> variables;
  // Set when the tier-1 list was unusable and tier 2 alone was built; the
  // caller logs it as a configuration error and carries on (fail-closed).
  std::optional<Error> tier1_error;
};

// host_lookup returns the service's own value of a name, if set.
// working_directory is relative to /workspace (already resolved).
BuiltEnvironment buildEnvironment(
    const Result<std::vector<std::string>>& tier1_names,
    const std::function<std::optional<std::string>(std::string_view)>& host_lookup,
    std::string_view working_directory, const std::optional<BridgeEndpoint>& bridge);

}  // namespace airlock
