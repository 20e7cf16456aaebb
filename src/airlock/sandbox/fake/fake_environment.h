// The `fake` mechanism (spec 000: "fake is a fourth SandboxMechanism value
// and a production adapter, not a test double"). It executes nothing: it
// records commands, returns scripted behaviour, and models each workspace as
// a map from path to bytes. Port semantics (timeout rule, output cap and
// truncation, files_changed from a snapshot diff, handle and tenant checks)
// are computed by the adapter exactly as a real mechanism would, and it
// passes the ExecutionEnvironment contract suite (tests/contract). The rules
// it shares with the real mechanisms are the host layer's
// (sandbox/host/hosted_environment.h), called rather than restated, so their
// errors are the same: provision's checks (shutdown, image, ceilings) and
// its record (id, created_at, expires_at from FakeOptions::clock), the
// handle lookups (unknown, expired, another tenant or owner), one command at
// a time (the sandbox's lifecycle), expiry before a command, the command's
// validation and timeout, cancel by execution id and destroy's kill reason.
//
// The model of one command, which fixes every ordering question:
//   1. If the cancel token is already cancelled, nothing runs: no output, no
//      workspace change, duration 0, killed_by CANCELLED.
//   2. Otherwise the command does all its effects at once when it starts:
//      it writes stdout, then stderr, then applies `writes` (in path order)
//      and then `deletes`. Then it "runs" for `runs_for`.
//   3. Output: stdout and stderr share one cap, maximum_output_bytes. The
//      first byte past the cap is where the service stops reading: the
//      overflowing stream is cut and flagged *_truncated, nothing after it
//      happens (no later output, no workspace effect), and the command is
//      killed with OUTPUT_LIMIT.
//   4. Workspace: a write that would take the workspace past workspace_bytes
//      or inodes_max is not applied, nor anything after it; the command is
//      killed with DISK (as a full tmpfs does to a real one).
//   5. Time: the effective timeout is the spec's minimum rule
//      (core/timeout_rule.h) over the service hard cap, the spec's
//      wall_clock_seconds and the command's timeout_seconds; the tool's
//      declared timeout was applied above the port, so here it is the hard
//      cap. runs_for beyond it is a TIMEOUT kill. runs_for beyond the
//      sandbox's expires_at is an EXPIRED kill, and the sandbox is destroyed.
//   6. A kill never undoes the effects of step 2: a real process may well
//      have written its files before it was killed, and files_changed
//      reports them. duration_ms is min(runs_for, time until the kill).
// A command that is not scripted exits 127 with "command not found" on
// stderr. Scripted paths are relative to /workspace, not to the working
// directory, which must exist in the workspace.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "airlock/core/limits_defaults.h"
#include "airlock/port/execution_environment.h"

namespace airlock::fake {

inline constexpr const char* kFakeImageDigest =
    "sha256:0000000000000000000000000000000000000000000000000000000000000000";

// What a scripted command "does" when run.
struct ScriptedBehaviour {
  std::string stdout_data;
  std::string stderr_data;
  bool echo_stdin_to_stdout = false;  // like `cat`: stdin first, then stdout_data
  int exit_code = 0;
  std::chrono::milliseconds runs_for{0};      // simulated duration; > timeout => TIMEOUT
  std::map<std::string, std::string> writes;  // path -> bytes (create or modify)
  std::vector<std::string> deletes;           // missing paths are ignored
  // Instead of runs_for: after its output and effects, the command runs in
  // real time (the sandbox is busy) until its cancel token is cancelled,
  // cancel() names its execution id or the sandbox is destroyed (CANCELLED), the service shuts down
  // (SERVICE_SHUTDOWN), or its effective timeout (TIMEOUT) or the sandbox's
  // expiry (EXPIRED) passes. Its output reaches a streaming sink before that.
  bool runs_until_cancelled = false;
};

// Decides the behaviour of a command that has no exact script; nullopt means
// "not found" (exit 127). Called under the adapter's lock: it must not call
// back into the adapter.
using ScriptFallback = std::function<std::optional<ScriptedBehaviour>(const ExecutionCommand&)>;

// A handful of familiar commands, for `airlock run --mechanism fake`:
// `true`, `false`, `echo ARGS...` (joined by spaces, newline-terminated),
// `cat` with no arguments (copies stdin) and `sleep SECONDS` (simulated:
// nothing waits). Matched on the last component of argv[0]. Anything else:
// nullopt.
std::optional<ScriptedBehaviour> basicCommands(const ExecutionCommand& command);

struct FakeOptions {
  std::chrono::seconds service_hard_cap{1800};
  LimitCeilings ceilings = defaultCeilings();
  std::int64_t files_changed_listing = kDefaultFilesChangedListing;
  // Wall clock for created_at / expires_at and the expiry check
  // (sandbox/host/wall_clock.h). Simulated run time does not advance it.
  std::function<Timestamp()> clock;  // empty: system_clock
  std::string node_name;             // named by every environment id (core/ids.h); "": none
};

// Thread-safe: every method takes one internal mutex. Workspace handles keep
// the adapter's state alive and fail with ExecutionRejected once their
// sandbox is destroyed.
class FakeEnvironment : public ExecutionEnvironment {
 public:
  explicit FakeEnvironment(FakeOptions options = {});
  ~FakeEnvironment() override;

  // Behaviour for an exact argv (replaces an earlier script for it).
  void script(std::vector<std::string> argv, ScriptedBehaviour behaviour);
  // Consulted for an argv that has no exact script.
  void setFallback(ScriptFallback fallback);
  // Every command executed (after validation and the handle checks), in order.
  std::vector<ExecutionCommand> history() const;
  // Sandboxes provisioned and not yet destroyed.
  std::size_t liveCount() const;

  // ExecutionRejected: unknown image digest (only kFakeImageDigest is
  // known), a limit above its ceiling or not positive, empty tenant or run.
  // Egress may be asked for (the fake runs nothing, so it means nothing).
  Result<EnvironmentHandle> provision(const EnvironmentSpec& spec) override;
  Result<ExecutionResult> execute(const EnvironmentHandle& handle, const ExecutionCommand& command,
                                  const CancelToken* cancel = nullptr) override {
    return executeStreaming(handle, command, cancel, {});
  }
  // The output, cut at the cap, reaches the sink when the command starts
  // (model step 2), before it runs; a second command while one runs until
  // cancelled is refused (EnvironmentBusy, "another command is running in
  // this environment").
  Result<ExecutionResult> executeStreaming(const EnvironmentHandle& handle,
                                           const ExecutionCommand& command,
                                           const CancelToken* cancel,
                                           const OutputSink& sink) override;
  // Cancels a command that runs until cancelled; every other command is
  // over before execute returns (NotFound).
  Result<void> cancel(const EnvironmentHandle& handle, std::string_view execution_id) override;
  Result<void> destroy(const EnvironmentHandle& handle) override;
  // The map-backed workspace (another tenant's handle:
  // SandboxEscapeSuspected, as the host layer's lookup answers it). read of a directory and listdir
  // of a file are ToolValidationError; missing paths NotFound; mkdir creates parents and accepts an
  // existing directory; a write past workspace_bytes / inodes_max is ExecutionRejected ("workspace
  // full").
  Result<std::shared_ptr<WorkspaceHandle>> workspace(const EnvironmentHandle& handle) override;
  // Makes provision and execute refuse (ExecutionUnavailable); a command
  // that runs until cancelled ends with SERVICE_SHUTDOWN.
  void shutdown() noexcept override;

  struct State;  // internal; public only so the workspace handle can name it

 private:
  std::shared_ptr<State> state_;
};

}  // namespace airlock::fake
