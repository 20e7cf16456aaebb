// Value types of the ExecutionEnvironment port.
//
// Spec 000, "The ExecutionEnvironment port": EnvironmentSpec, ResourceLimits,
// EnvironmentHandle, ExecutionCommand, ExecutionResult, KillReason,
// FileChange, ChangeKind. Field names follow the spec exactly. No type here
// holds a host filesystem path (spec gate: spec_has_no_host_path).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace airlock {

using Timestamp = std::chrono::time_point<std::chrono::system_clock, std::chrono::milliseconds>;

// Every field is required; there are no defaults at this layer (spec:
// "ResourceLimits"). Defaults live in configuration (core/limits_defaults.h).
struct ResourceLimits {
  std::int64_t cpu_millicores;      // 1000 = one CPU; enforced by cpu.max / cfs quota
  std::int64_t memory_bytes;        // memory.max; exceeding it is an OOM kill (MEMORY)
  std::int64_t pids_max;            // pids.max for the whole sandbox
  std::int64_t workspace_bytes;     // tmpfs size= of /workspace (and /tmp)
  std::int64_t inodes_max;          // tmpfs nr_inodes= of /workspace (and /tmp)
  std::int64_t wall_clock_seconds;  // per-command wall clock bound
  bool operator==(const ResourceLimits&) const = default;
};

// Spec 000 "The egress boundary". The grammar is egress/policy.h; here it is data.
enum class EgressMode { kDeny, kAllowlist };
struct EgressDestination {
  std::string host;        // a name or a one-leftmost-label wildcard
  std::vector<int> ports;  // explicit, non-empty
  bool operator==(const EgressDestination&) const = default;
};
struct EgressPolicy {
  EgressMode mode = EgressMode::kDeny;
  std::vector<EgressDestination> destinations;
  bool operator==(const EgressPolicy&) const = default;
};

// Present only for a programmatic-orchestration turn (spec 001).
struct BridgeEndpoint {
  std::string socket_path;  // path inside the sandbox
  std::string token;        // one-time token; never logged
  bool operator==(const BridgeEndpoint&) const = default;
};

struct EnvironmentSpec {
  std::string tenant_id;
  std::string run_id;
  std::int64_t lease_epoch = 0;
  std::string image_digest;  // "sha256:<64 hex>", never a tag
  ResourceLimits limits;
  EgressPolicy egress;
  // Already built from the three tiers (core/environment_tiers.h).
  std::map<std::string, std::string> environment;
  std::optional<BridgeEndpoint> bridge;
  bool operator==(const EnvironmentSpec&) const = default;
};

// Opaque name of a live sandbox. No path, no container id, no host.
struct EnvironmentHandle {
  std::string environment_id;  // UUIDv7
  std::string tenant_id;
  std::string run_id;
  std::int64_t lease_epoch = 0;
  Timestamp created_at;
  Timestamp expires_at;  // created_at + service hard cap
  bool operator==(const EnvironmentHandle&) const = default;
};

struct ExecutionCommand {
  std::vector<std::string> argv;          // argv[0] absolute or a bare name on the image PATH
  std::string working_directory = ".";    // relative to /workspace
  std::int64_t timeout_seconds = 0;       // already clamped to the tool's declared timeout
  std::optional<std::string> stdin_data;  // bytes; nullopt means /dev/null
  std::int64_t maximum_output_bytes = 0;  // cap on stdout+stderr together
  // Variables set for this command only, over the sandbox's environment
  // (EnvironmentSpec::environment with the image's and egress's): the next
  // command does not see them. Each passes the tier rules of a spec's
  // environment (core/environment_tiers.h checkAddedVariable: no credential
  // name, none Airlock sets itself such as PATH or HOME, no NUL byte).
  std::map<std::string, std::string> env_additions;
  // The caller's name for this execution, by which it can be cancelled
  // while it runs (ExecutionEnvironment::cancel); "" (default): none. At
  // most 128 bytes of letters, digits and ".", "_", ":", "-".
  std::string execution_id;
  bool operator==(const ExecutionCommand&) const = default;
};

// Closed vocabulary (spec: KillReason). Each value is detected by the thing
// that enforced it, never guessed from a signal.
enum class KillReason {
  kTimeout,
  kMemory,
  kOutputLimit,
  kPids,
  kDisk,
  kCancelled,
  kExpired,
  kServiceShutdown,
};
std::string_view killReasonName(KillReason reason) noexcept;  // "TIMEOUT", ...
std::optional<KillReason> parseKillReason(std::string_view name) noexcept;

enum class ChangeKind { kCreated, kModified, kDeleted };
std::string_view changeKindName(ChangeKind kind) noexcept;  // "CREATED", ...
std::optional<ChangeKind> parseChangeKind(std::string_view name) noexcept;

struct FileChange {
  // Relative to /workspace, never absolute. Raw bytes: a name need not be
  // valid UTF-8 (red-team case B08); JSON carries such names base64-encoded.
  std::string path;
  ChangeKind change = ChangeKind::kCreated;
  std::int64_t size_bytes = 0;
  // Lowercase hex. nullopt for DELETED, and for a file too large to hash
  // within the diff's budget (a sparse file whose apparent size exceeds the
  // workspace's byte limit; red-team case B32).
  std::optional<std::string> sha256;
  bool operator==(const FileChange&) const = default;
};

struct ExecutionResult {
  std::optional<int> exit_code;  // nullopt exactly when killed_by is set
  std::string stdout_data;       // bytes, at most the cap
  std::string stderr_data;
  bool stdout_truncated = false;
  bool stderr_truncated = false;
  bool timed_out = false;  // true exactly when killed_by == kTimeout
  std::optional<KillReason> killed_by;
  std::vector<FileChange> files_changed;
  bool files_changed_truncated = false;  // listing capped (spec: files_changed listing)
  std::int64_t duration_ms = 0;          // wall time of the command
  // Beyond the spec: the streams ("stdout", "stderr", in that order) that
  // were still open when the command ended after its main process had
  // exited: a process it left running (`sleep 60 & echo started`) held
  // them. The command then ends kOutputGraceAfterExit (2 s) after the main
  // process's exit (sandbox/host/command_supervisor.h), or at its timeout
  // if that comes first, with the main process's exit_code and no kill
  // reason; what was left running is killed. Empty for every other end.
  // (kOutputGraceAfterExit is in port/execution_environment.h.)
  std::vector<std::string> output_held_open;
  // Accounting beyond the spec, for this execution only (nothing carries
  // over from a previous command): the sandbox's peak memory while the
  // command ran, and the CPU time (user + system) of every process it
  // started. nullopt where the mechanism cannot measure it.
  std::optional<std::int64_t> peak_memory_bytes;
  std::optional<std::int64_t> cpu_time_ms;
  bool operator==(const ExecutionResult&) const = default;
};

}  // namespace airlock
