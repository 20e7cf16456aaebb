// The environment a sandbox sees, built from three tiers (spec 000, "The
// environment a sandbox sees, and the three tiers").
//
// The environment is built, never filtered: it starts empty.
// * Tier 0: platform and provider credentials. Never present, not
//   configurable. tier0Names() exists so tests can assert none appears.
// * Tier 1: names an operator lists; copied from the service's environment
//   when present there. A tier-1 name that is also tier 0 is a startup
//   configuration error. If the tier-1 list cannot be read or parsed, the
//   environment is tier 2 alone and the failure is reported (fail-closed).
// * Tier 2: synthesized: HOME=/workspace, PWD, PATH (the image PATH),
//   TMPDIR=/tmp, LANG=C.UTF-8, and the bridge socket/token when present.
//   HTTPS_PROXY, HTTP_PROXY, ALL_PROXY (and their lowercase spellings) are
//   tier-2 names too: only the adapter sets them, and only for a sandbox
//   with egress (port/egress_route.h); NO_PROXY is reserved, never set.
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

// Tier-2 names for the programmatic-orchestration bridge (spec 001). They
// start with AIRLOCK_ and so match a tier-0 pattern: tier 0 governs names
// copied from the host, and these are synthesized, never copied.
inline constexpr std::string_view kBridgeSocketVariable = "AIRLOCK_BRIDGE_SOCKET";
inline constexpr std::string_view kBridgeTokenVariable = "AIRLOCK_BRIDGE_TOKEN";

// Tier 0: exact names and name patterns ("PREFIX*", "*SUFFIX") that are
// never copied from the host. Matching is case-insensitive for both exact
// names and patterns (stricter than the shell, on purpose: "database_url"
// is refused just like "DATABASE_URL").
std::span<const std::string_view> tier0Names() noexcept;
bool isTier0Name(std::string_view name) noexcept;

// Names the platform synthesizes (tier 2), including the bridge names.
std::span<const std::string_view> tier2Names() noexcept;
bool isTier2Name(std::string_view name) noexcept;

// A syntactically valid environment variable name: [A-Za-z_][A-Za-z0-9_]*.
bool isValidEnvName(std::string_view name) noexcept;

// A variable a caller adds over a sandbox's environment for one command
// (ExecutionCommand::env_additions): the rules of a spec's environment. The
// name is valid (isValidEnvName), not tier 0 (a credential never enters a
// sandbox) and not tier 2 (set by Airlock itself: PATH, HOME, PWD, the
// proxy and bridge names); the value has no NUL byte. ToolValidationError
// naming the variable, prefixed with `what` ("env"): `env variable
// "GITHUB_TOKEN" names a credential ...`.
Result<void> checkAddedVariable(std::string_view what, std::string_view name,
                                std::string_view value);

// Validates an operator's tier-1 list at startup: every name valid, none in
// tier 0, none a tier-2 name (tier 2 always wins, so listing one would be a
// silent drop), no duplicates. ConfigurationError names the first bad entry
// by its index and value.
Result<std::vector<std::string>> validateTier1Names(std::span<const std::string> names);

struct BuiltEnvironment {
  std::map<std::string, std::string> variables;
  // Set when the tier-1 list was unusable and tier 2 alone was built; the
  // caller logs it as a configuration error and carries on (fail-closed).
  std::optional<Error> tier1_error;
};

// host_lookup returns the service's own value of a name, if set.
// working_directory is relative to /workspace (already resolved; "" or "."
// is the root). tier1_names is re-validated here (validateTier1Names): an
// error, or a list that fails validation, yields tier 2 alone with
// tier1_error set. A host value containing a NUL byte is not copied.
BuiltEnvironment buildEnvironment(
    const Result<std::vector<std::string>>& tier1_names,
    const std::function<std::optional<std::string>(std::string_view)>& host_lookup,
    std::string_view working_directory, const std::optional<BridgeEndpoint>& bridge);

// Adds an image config's Env ("NAME=value" entries, spec 000 "The
// environment a sandbox sees": the image's variables are platform ones) to
// a built environment: the image's PATH replaces the fixed one (argv[0] is
// then found on the image's PATH), other names are added where the
// environment has no value for them. Never added: a tier-0 name, any other
// tier-2 name (HOME, PWD, TMPDIR, LANG, the bridge and proxy names keep the
// platform's values), an invalid name, an entry without "=", a value with a
// NUL byte.
void addImageEnvironment(std::map<std::string, std::string>& variables,
                         std::span<const std::string> image_env);

}  // namespace airlock
