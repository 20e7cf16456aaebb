// Settings of `airlock serve` and the startup check (spec 000, "Development,
// production, and the refusal in between").
//
// Sources, later wins: built-in defaults, a YAML file, environment variables
// `AIRLOCK_<NAME>` for the top-level scalar settings (AIRLOCK_DEPLOYMENT_MODE,
// AIRLOCK_AUTH_MODE, AIRLOCK_SANDBOX, AIRLOCK_STATE_DIR, AIRLOCK_LISTEN,
// AIRLOCK_SERVICE_TOKEN, AIRLOCK_REAPER_INTERVAL, AIRLOCK_EGRESS_POLICY,
// AIRLOCK_SCHEDULE_DATABASE, AIRLOCK_ENVIRONMENT_LIFETIME,
// AIRLOCK_ENVIRONMENT_HARD_CAP, AIRLOCK_ROLE, AIRLOCK_INTERNAL_TOKEN,
// AIRLOCK_INTERNAL_TOKEN_FILE, AIRLOCK_NODE_CAPACITY, AIRLOCK_TENANT_KEYS_FILE;
// and the two lists AIRLOCK_EXECUTION_NODES and AIRLOCK_GATEWAYS,
// comma-separated).
// Every value is validated when loaded; an error is ConfigurationError whose
// message names the setting (and, for the file, its line and column) and the
// value, e.g.
//   settings file line 4, column 10: sandbox "dockr" is not one of linux,
//   gvisor, microvm, fake
// Unknown keys are errors, not ignored: a misspelt ceiling must not silently
// leave the default in force.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/core/error.h"
#include "airlock/core/limits_defaults.h"
#include "airlock/core/mechanism.h"
#include "airlock/core/types.h"

namespace airlock::service {

enum class DeploymentMode { kDevelopment, kProduction };
// Which side of the boundary this process is (spec 000, "Where the boundary
// is"): both in one process (no `role`, the default), the gateway (the
// public API, tenants, artifacts, schedules, in front of execution nodes
// reached over their internal API), or an execution node (sandboxes, limits,
// the egress proxy, the internal API; no database, no store, no tenant key).
enum class ServiceRole { kBoth, kGateway, kExecution };
enum class AuthMode { kDev, kToken };
// The SandboxMechanism setting: one of the mechanisms of core/mechanism.h.
using airlock::allMechanisms;
using airlock::isolatesKernel;
using airlock::Mechanism;
using airlock::mechanismName;

std::string_view deploymentModeName(DeploymentMode m) noexcept;
std::string_view authModeName(AuthMode m) noexcept;
std::string_view serviceRoleName(ServiceRole r) noexcept;

struct ArtifactSettings {
  std::int64_t retention_days = 30;
  std::int64_t tenant_byte_cap = std::int64_t{10} << 30;  // bytes per tenant
  std::int64_t max_artifact_bytes = std::int64_t{512} << 20;
};

// One entry of the `images` setting (docs/images.md): an image the service
// runs besides the host's, named by `name` in POST /v1/environments.
struct ImageSetting {
  std::string name;       // 1-63 of a-z 0-9 . _ -; defaults to the reference
  std::string reference;  // an image reference or a digest, as written
};

// One entry of `execution_nodes` (a gateway's nodes): the node's base URL
// ("http://host:port", no path) and, when written as a mapping
// {name, url}, the node name its environment ids carry. Without a name the
// gateway asks the node for it at start.
struct ExecutionNodeSetting {
  std::string name;
  std::string url;
  bool operator==(const ExecutionNodeSetting&) const = default;
};

struct Settings {
  ServiceRole role = ServiceRole::kBoth;
  DeploymentMode deployment_mode = DeploymentMode::kDevelopment;
  AuthMode auth_mode = AuthMode::kDev;
  Mechanism sandbox = Mechanism::kLinux;
  std::string state_dir = "/run/airlock";
  // This execution node's name, carried by every environment id it hands
  // out ("<node>.<UUIDv7>", core/ids.h) so that a gateway can route to it;
  // empty (the default, one node): ids are bare UUIDv7s.
  std::string node_name;
  // "host:port"; host is an IPv4 literal, a bracketed IPv6 literal or
  // "localhost". Port 0 lets the kernel choose (tests).
  std::string listen = "127.0.0.1:8420";
  // Bearer token callers present ("Authorization: Bearer <token>"). Empty
  // in dev auth mode means `serve` makes a random one at start and writes
  // it to <state_dir>/service-token (0600). Never logged.
  std::string service_token;
  std::string egress_policy_path;  // empty: no egress (deny)
  // The service credential of the internal API between gateways and
  // execution nodes (a bearer token, at least 16 characters without
  // spaces): from AIRLOCK_INTERNAL_TOKEN, or read at load from
  // internal_token_file (a regular file of mode 0600 or stricter holding
  // the token, a final newline ignored); both given must agree. Required
  // by both roles; unused without one. Never logged.
  std::string internal_token;
  std::string internal_token_file;
  // role gateway: the execution nodes it places environments on (required).
  std::vector<ExecutionNodeSetting> execution_nodes;
  // role execution: the gateways its reaper asks which leases are stale
  // (base URLs; empty: no stale-lease check, expiry still applies), and how
  // many environments it holds at once (0, the default: no bound; a
  // provision beyond it is EnvironmentBusy).
  std::vector<std::string> gateways;
  std::int64_t node_capacity = 0;
  // role gateway: the digest of the nodes' host image (the "host" entry of
  // the images a caller may name). A gateway runs no sandbox and cannot
  // compute it; an execution node logs it at start ("image host ... is
  // sha256:..."). Empty: no host image; default_image must then name an
  // images entry.
  std::string host_image_digest;
  // Tenant API keys (service/tenant_keys.h; docs/serve.md "Tenants and
  // keys"): an absolute path to the key file, or empty (the default: only
  // the service token, which may name any tenant). Read at start; the
  // startup check refuses a file that does not parse or that group or
  // others can read.
  std::string tenant_keys_file;
  // Images besides the host's, each resolved to a digest at start
  // (cli/image_command.h resolveImage) and logged with it.
  std::vector<ImageSetting> images;
  // The image of an environment that names none: "host" (the default) or
  // the name of an `images` entry.
  std::string default_image = "host";
  ResourceLimits limit_defaults = defaultLimits();
  LimitCeilings limit_ceilings = defaultCeilings();
  // An environment's lifetime (spec 000, "EnvironmentHandle": expires_at is
  // created_at plus the service's hard cap). A new environment expires
  // environment_lifetime after it was created; POST .../extend may move that
  // later, never past created_at + environment_hard_cap. Both are whole
  // seconds: the lifetime at most the hard cap, the hard cap at most
  // kEnvironmentHardCapCeiling (the spec gives the hard cap a value, 1800 s,
  // and no ceiling; 24 h is this implementation's).
  std::chrono::seconds environment_lifetime{kDefaultEnvironmentLifetimeSeconds};
  std::chrono::seconds environment_hard_cap{kDefaultEnvironmentLifetimeSeconds};
  // Spec 000's limits table, the rows the execution service enforces beside
  // the ResourceLimits: the sandbox start budget (default 30 s, ceiling 60 s:
  // a provision that takes longer is ExecutionUnavailable) and the
  // files_changed listing of a result (default 1000 paths, ceiling 10000).
  std::chrono::seconds start_budget{kDefaultStartBudgetSeconds};
  std::int64_t files_changed_listing = kDefaultFilesChangedListing;
  ArtifactSettings artifacts;
  bool artifacts_given = false;  // the file has an `artifacts` mapping
  std::chrono::seconds reaper_interval{60};
  // Code-mode schedules (docs/capabilities.md "schedule.*"): how often the
  // service moves due occurrences into the fire outbox, and where schedules
  // live: empty = the SQLite metadata database under state_dir; otherwise a
  // postgresql:// connection URI (several replicas may share it). Never logged.
  std::chrono::seconds schedule_fire_interval{1};
  std::string schedule_database;
  // Whether a background job may ask for its environment's whole life
  // (wall_ms 0; port/job_port.h JobSettings, docs/serve.md "Jobs"):
  // `session_jobs: allowed` (the default) or `refused`.
  bool allow_session_jobs = true;
  // Request bounds.
  std::int64_t max_header_bytes = 16 * 1024;
  std::int64_t max_body_bytes = std::int64_t{64} << 20;
  std::chrono::seconds request_timeout{30};  // reading a request; execute adds its own timeout
  std::int64_t max_concurrent_executions = 64;
  // Connection bounds. At most max_connections open at once, and at most
  // max_unauthenticated_connections of them that have not yet presented the
  // service token. Past a bound the connection that has waited longest for
  // its next request (unauthenticated ones first) is closed to make room; a
  // connection with a request in progress is never closed for this. A
  // connection that has not authenticated must send a whole request within
  // unauthenticated_request_timeout.
  std::int64_t max_connections = 4096;
  std::int64_t max_unauthenticated_connections = 1024;
  std::chrono::seconds unauthenticated_request_timeout{10};
};

// Returns an environment variable's value, if set (injectable for tests).
using EnvLookup = std::function<std::optional<std::string>(std::string_view)>;
EnvLookup processEnvironment();

// Parses YAML text (`source` names it in messages, e.g. the file path as
// given) over the defaults. An empty document gives the defaults.
Result<Settings> parseSettings(std::string_view yaml, std::string_view source);
// Applies AIRLOCK_* environment variables over `settings`.
Result<Settings> applyEnvironment(Settings settings, const EnvLookup& env);
// The defaults, then the file at `path` (if given), then the environment.
Result<Settings> loadSettings(const std::optional<std::string>& path, const EnvLookup& env);

// The startup check, one check with two conditions: production, or any
// auth_mode other than dev, requires a mechanism that isolates the kernel.
// A refusal is ConfigurationError naming both settings and their values:
//   "refusing to start: deployment_mode=production requires sandbox gvisor
//    or microvm, but sandbox=linux ..."
// Also checks that the defaults are within the ceilings, that
// environment_lifetime is at most environment_hard_cap, and the tenant key
// file (checkTenantKeys).
// The roles: an execution node refuses any setting that belongs to the
// gateway (a database URI, artifact store settings, the public API's
// service token, tenant keys), and starts only with a service credential
// and a node_name; a gateway only with execution_nodes and a service
// credential. Each refusal names the setting.
Result<void> checkStartup(const Settings& settings);

// The tenant_keys_file, when set, loads (service/tenant_keys.h
// TenantKeys::loadFile) and does not list the service_token as a tenant's
// key: ConfigurationError "tenant_keys_file: ..." naming the file and what
// is wrong otherwise.
Result<void> checkTenantKeys(const Settings& settings);
// The settings an execution node must not hold (spec 000, "The execution
// service holds nothing worth stealing"), by name, in the order checked:
// those `settings` sets. Empty for a clean node.
std::vector<std::string> gatewayOnlySettingsIn(const Settings& settings);

// Reads internal_token_file into internal_token (loadSettings calls it):
// ConfigurationError naming internal_token_file when the file cannot be
// read, is not a regular file, is readable by group or others, holds no
// valid token, or holds another token than AIRLOCK_INTERNAL_TOKEN.
Result<void> loadInternalToken(Settings& settings);

}  // namespace airlock::service
