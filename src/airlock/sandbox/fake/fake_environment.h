// The `fake` mechanism (spec 000: "fake is a fourth SandboxMechanism value
// and a production adapter, not a test double"). It executes nothing: it
// records commands, plays scripted behaviour, and models each workspace as
// a map from path to bytes. It passes the ExecutionEnvironment contract
// suite (tests/contract) and runs under the host layer as linux and gvisor
// do (FakeEnvironment below): admission, the timeout rule, the output cap
// and truncation, the kill reasons, cancel, destroy and shutdown under a
// command are theirs. A command runs through the host layer's supervisor
// (sandbox/host/command_supervisor.h) over a scripted channel
// (scripted_channel.h), on simulated time. What is the fake's own: the
// scripts, the in-memory workspace, the DISK it reports from that
// workspace, and files_changed from a diff of it.
//
// The model of one command, which fixes every ordering question:
//   1. The scripted process takes one step each time the supervisor reads
//      its channel, the first being its start: a command whose cancel token
//      is already cancelled (or that is destroyed or shut down before its
//      first poll) writes nothing and changes nothing; killed_by CANCELLED
//      (or the destroy's reason), duration 0.
//   2. It writes stdout (the stdin first when echo_stdin_to_stdout), then
//      stderr, then applies `writes` (in path order) and then `deletes`;
//      then it runs for `runs_for` and exits with exit_code (0..255, as a
//      process's), or runs until it is stopped (runs_until_cancelled). Each
//      stream is read by the supervisor before the next step. A background
//      process it left (background_holds_stdout / _stderr) keeps its
//      streams open after the exit, until the supervisor stops it.
//   3. Output: the supervisor's rule. stdout and stderr share one cap,
//      maximum_output_bytes; the read that crosses it keeps what fits, flags
//      that stream *_truncated and kills with OUTPUT_LIMIT, and nothing
//      later in the script happens (no later output, no workspace effect).
//   4. Workspace: a write that would take the workspace past workspace_bytes
//      or inodes_max is not applied, nor anything after it; the fake's DISK
//      limit source tells the supervisor, which kills with DISK (as a full
//      tmpfs does to a real one).
//   5. Time: the supervisor's deadlines on simulated time. The effective
//      timeout (core/timeout_rule.h: the service hard cap, the spec's
//      wall_clock_seconds and the command's timeout_seconds) passing first
//      is a TIMEOUT kill; the sandbox's expires_at passing first is an
//      EXPIRED kill, and the sandbox is destroyed. A scripted runs_for
//      costs no wall time; a command that runs until cancelled waits in
//      real time for a cancel (its token, or cancel() by its execution id),
//      a destroy or the service stopping.
//   6. A kill never undoes the effects of step 2: a real process may well
//      have written its files before it was killed, and files_changed
//      reports them. duration_ms is the simulated time from the start to
//      the end (min(runs_for, time until the kill) for a scripted sleep).
// A command that is not scripted exits 127 with "command not found" on
// stderr. Scripted paths are relative to /workspace, not to the working
// directory, which must exist in the workspace.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "airlock/core/limits_defaults.h"
#include "airlock/port/execution_environment.h"
#include "airlock/sandbox/host/hosted_environment.h"

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
  // A process the command started in the background keeps stdout (and/or
  // stderr) open after the main process exits (`sleep 60 & echo started`):
  // the supervisor drains it for kOutputGraceAfterExit (simulated time),
  // then kills it, and the command ends with exit_code and
  // output_held_open naming the stream(s).
  bool background_holds_stdout = false;
  bool background_holds_stderr = false;
};

// The environment a command runs with, by name: the sandbox's, then the
// command's env_additions, then PWD (host::commandVariables).
using CommandVariables = std::map<std::string, std::string>;

// Decides the behaviour of a command that has no exact script, given the
// environment it runs with; nullopt means "not found" (exit 127). Called
// under the adapter's lock: it must not call back into the adapter.
using ScriptFallback = std::function<std::optional<ScriptedBehaviour>(const ExecutionCommand&,
                                                                      const CommandVariables&)>;

// A handful of familiar commands, for `airlock run --mechanism fake`:
// `true`, `false`, `echo ARGS...` (joined by spaces, newline-terminated),
// `cat` with no arguments (copies stdin), `sleep SECONDS` (simulated:
// nothing waits) and `printenv NAME` (its value and a newline, or exit 1
// when the command's environment has no NAME). Matched on the last
// component of argv[0]. Anything else: nullopt.
std::optional<ScriptedBehaviour> basicCommands(const ExecutionCommand& command,
                                               const CommandVariables& variables);

// What the host layer's supervisor asked of one command's scripted channel
// (host::CommandChannel): starts, stops and abandons, and the kill reasons
// it decided (noteKill), in order.
struct ChannelCalls {
  int starts = 0;
  int stops = 0;
  int abandons = 0;
  std::vector<KillReason> kills;
};

struct FakeOptions {
  std::chrono::seconds service_hard_cap{1800};
  LimitCeilings ceilings = defaultCeilings();
  std::int64_t files_changed_listing = kDefaultFilesChangedListing;
  // Wall clock for created_at / expires_at and the expiry check
  // (sandbox/host/wall_clock.h). Simulated run time does not advance it.
  std::function<Timestamp()> clock;  // empty: system_clock
  std::string node_name;             // named by every environment id (core/ids.h); "": none
};

class MemoryWorkspace;  // the in-memory workspace (fake_environment.cpp)

// The host layer's record of a fake sandbox: its workspace is kept in
// memory (the record's `workspace` is the same object), and it has no
// directory, cgroup, state file, control channel or capability directory.
struct FakeRecord : host::SandboxRecord {
  std::shared_ptr<MemoryWorkspace> memory;
};

// A mechanism under the host layer (sandbox/host/hosted_environment.h),
// whose commands are scripted: the host layer's provision checks and record
// (its clock is FakeOptions::clock), handle lookups, admission, busy rule,
// expiry, cancel by execution id, destroy and shutdown, and the command
// supervisor, are the ones linux and gvisor run, with their errors and
// kill reasons. The fake adds only its mechanism: the scripted channel and
// its simulated time (the model above), the in-memory workspace, and no
// side processes ("this mechanism cannot start side processes") or
// capability channel. Thread-safe.
//
// The workspace port over the in-memory workspace: read of a directory and
// listdir of a file are ToolValidationError; missing paths NotFound; mkdir
// creates parents and accepts an existing directory; a write past
// workspace_bytes / inodes_max is ExecutionRejected ("workspace full").
// Workspace handles fail with ExecutionRejected once their sandbox is
// destroyed (SandboxWorkspace).
class FakeEnvironment final : public host::HostedEnvironment<FakeRecord> {
 public:
  // provision also refuses an empty tenant or run (ExecutionRejected); an
  // unknown image digest (only kFakeImageDigest is known) or a limit above
  // its ceiling is the host layer's ExecutionRejected. Egress may be asked
  // for (the fake runs nothing, so it means nothing).
  explicit FakeEnvironment(FakeOptions options = {});
  ~FakeEnvironment() override;

  // Behaviour for an exact argv (replaces an earlier script for it).
  void script(std::vector<std::string> argv, ScriptedBehaviour behaviour);
  // Consulted for an argv that has no exact script.
  void setFallback(ScriptFallback fallback);
  // Every command executed (after validation and the handle checks), in order.
  std::vector<ExecutionCommand> history() const;
  // For every command that reached the supervisor, in order: what it asked
  // of the command's channel.
  std::vector<ChannelCalls> channelCalls() const;
  // Sandboxes provisioned and not yet destroyed.
  std::size_t liveCount() const;

 protected:
  // Makes the in-memory workspace; refuses an empty tenant or run.
  Result<void> setUp(FakeRecord& sandbox, const EnvironmentSpec& spec, bool egress) override;
  void teardown(FakeRecord& sandbox) override;
  // The model above, for an admitted command: its script on a scripted
  // channel through the host layer's supervisor (superviseNamed), then
  // files_changed from the workspace's diff. Output reaches the sink as the
  // supervisor reads it. The command is cancel()'s to name by its execution
  // id while it runs. A scripted write refused for another reason than a
  // full workspace (a file where a directory must be) is the execute's
  // error, after its effects so far.
  Result<ExecutionResult> runCommand(const CommandRun& run) override;
  void destroyTaken(std::shared_ptr<FakeRecord> sandbox) override;
  Result<std::unique_ptr<SideProcess>> launchSideProcess(const std::shared_ptr<FakeRecord>& sandbox,
                                                         const SideCommand& command) override;
  // The working directory must be a directory of the in-memory workspace.
  Result<void> checkWorkingDirectory(FakeRecord& sandbox, const std::string& cwd) override;

 private:
  // The command's script (exact, then the fallback, given the command's
  // environment, else "not found"), and the command joins the history.
  ScriptedBehaviour behaviourFor(const ExecutionCommand& command,
                                 const CommandVariables& variables);

  const FakeOptions options_;
  mutable std::mutex mu_;  // the scripts, the fallback, the history and the channel calls
  std::map<std::vector<std::string>, ScriptedBehaviour> scripts_;
  ScriptFallback fallback_;
  std::vector<ExecutionCommand> history_;
  std::vector<ChannelCalls> channel_calls_;
};

}  // namespace airlock::fake
