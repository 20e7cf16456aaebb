// The fake mechanism's half of a command (sandbox/host/command_supervisor.h):
// a CommandChannel whose "process" is a ScriptedBehaviour played step by
// step, the LimitSource that reports DISK from the in-memory workspace, and
// the simulated time the command runs on. Everything else of the command
// (the pipes, the output cap and truncation, the kill reasons, the timeout
// and expiry deadlines, cancel, destroy and shutdown under the command) is
// the host layer's supervisor, as for linux and gvisor. Spec 000, "The
// ExecutionEnvironment port" (execute) and "fake is a fourth
// SandboxMechanism value".
//
// The scripted process, one step each time the supervisor reads the
// channel (so a command cancelled before its first poll writes nothing, as
// a real one that has not yet been scheduled):
//   exec -> read stdin to end-of-file (echo_stdin_to_stdout only)
//        -> write stdout (stdin first when echoed, then stdout_data)
//        -> write stderr
//        -> apply `writes` in path order, then `deletes`
//        -> sleep `runs_for`, then exit with exit_code
//           (or, runs_until_cancelled: wait to be stopped)
//        -> with background_holds_stdout / _stderr: the main process has
//           exited but a background one keeps that stream open until it is
//           stopped (simulated time passes as for a sleep).
// Each stream is written into its pipe without blocking, and the next step
// waits until the supervisor has read all of it: a stream past the cap is
// cut by the supervisor's rule, and its kill comes before anything later in
// the script happens. A write that does not fit the workspace (bytes or
// inodes) is not applied, nor anything after it; the process waits there
// and the DISK limit source wakes the supervisor, which kills with DISK.
// A write that fails otherwise (a file where a directory must be) makes the
// process exit 1; failure() then holds the error, which execute returns.
// stop() ends the process (its pipes close, "every process gone" is
// reported once); effects already applied stay (a kill undoes nothing).
//
// Time: the channel is the supervisor's SupervisionClock. While the process
// sleeps out `runs_for` and nothing is ready, time jumps to the earlier of
// the supervisor's wake-up and the end of the sleep; no thread waits. While
// it waits for something from outside (runs_until_cancelled, or a full
// workspace), the clock waits in poll(2) for real and advances by the real
// time waited. So a scripted duration costs no wall time, and a command
// that runs until cancelled is ended by a real cancel, destroy or shutdown.
//
// Not thread-safe: one command, driven by its supervising thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "airlock/core/error.h"
#include "airlock/sandbox/fake/fake_environment.h"
#include "airlock/sandbox/host/command_supervisor.h"
#include "airlock/sys/unique_fd.h"

namespace airlock::fake {

// What a scripted process changes in its sandbox's workspace (paths
// normalized, relative to the workspace root).
class ScriptedWorkspace {
 public:
  virtual ~ScriptedWorkspace() = default;
  // Creates or replaces a file with its parents. false: it does not fit
  // (workspace_bytes or inodes_max), and nothing changed; an error for any
  // other refusal (ToolValidationError: a file in the way).
  virtual Result<bool> put(const std::string& path, const std::string& bytes) = 0;
  // Removes a file; a missing path is ignored.
  virtual void remove(const std::string& path) = 0;
};

// One command's script, checked before anything happens.
struct ScriptedRun {
  ScriptedBehaviour behaviour;
  std::vector<std::pair<std::string, std::string>> writes;  // normalized path -> bytes
  std::vector<std::string> deletes;                         // normalized paths
};

class ScriptedChannel final : public host::CommandChannel, public host::SupervisionClock {
 public:
  // ExecutionUnavailable when an eventfd cannot be made. `workspace` is
  // borrowed and must outlive the channel.
  static Result<std::unique_ptr<ScriptedChannel>> create(ScriptedRun run,
                                                         ScriptedWorkspace& workspace);

  // host::CommandChannel
  Result<void> start(host::SandboxPipeEnds ends) override;
  int eventFd() const noexcept override { return event_.get(); }
  bool readEvents(std::vector<host::ChannelEvent>& events) override;
  void noteKill(KillReason why) noexcept override;
  bool stop() override;
  void abandon() noexcept override;
  bool lost() const noexcept override { return false; }  // nothing to lose: no socket

  // host::SupervisionClock
  TimePoint now() override { return now_; }
  int poll(pollfd* fds, std::size_t count, TimePoint wake) override;

  // DISK, from the workspace: a write that did not fit.
  host::LimitSource& diskLimit() noexcept { return disk_; }
  // What the supervisor asked of this channel.
  const ChannelCalls& calls() const noexcept { return calls_; }
  // A write that failed for another reason than a full workspace.
  const std::optional<Error>& failure() const noexcept { return failure_; }

 private:
  enum class Step {
    kNotStarted,
    kExec,
    kReadStdin,
    kWriteStdout,
    kWriteStderr,
    kEffects,
    kSleeping,
    kUntilStopped,  // runs_until_cancelled, or stuck at a full workspace
    kExited,
    kBackground,  // the main process exited; a background one holds output open
    kGone,        // stopped or abandoned
  };

  class DiskLimit final : public host::LimitSource {
   public:
    explicit DiskLimit(sys::UniqueFd wake) : wake_(std::move(wake)) {}
    std::optional<KillReason> hit() override;
    int wakeFd() const noexcept override { return wake_.get(); }
    void drainWake() noexcept override;
    void fill() noexcept;  // a write did not fit: hit() says DISK from now on

   private:
    sys::UniqueFd wake_;
    bool full_ = false;
  };

  ScriptedChannel(ScriptedRun run, ScriptedWorkspace& workspace, sys::UniqueFd event,
                  sys::UniqueFd disk_wake);
  void step();
  // Writes the rest of `data` from `*offset`; true once all of it is
  // written and the supervisor has read it from the pipe.
  bool writeOut(int fd, const std::string& data, std::size_t* offset);
  bool readStdin();  // true at end-of-file
  void applyEffects();
  void exitWith(int code);
  void endProcess() noexcept;  // closes the process's pipe ends
  bool busy() const noexcept;  // the process has a step to take now
  void rearm() noexcept;       // event_ readable exactly when there is something to read

  ScriptedRun run_;
  ScriptedWorkspace& workspace_;
  sys::UniqueFd event_;
  bool armed_ = false;
  DiskLimit disk_;
  host::SandboxPipeEnds ends_;
  Step step_ = Step::kNotStarted;
  std::string stdout_;  // what the process writes to stdout (stdin echoed first)
  std::size_t written_ = 0;
  TimePoint now_;
  TimePoint sleep_until_;
  std::vector<host::ChannelEvent> pending_;
  int exit_status_ = 0;  // the main process's, once it exited (kBackground)
  ChannelCalls calls_;
  std::optional<Error> failure_;
};

}  // namespace airlock::fake
