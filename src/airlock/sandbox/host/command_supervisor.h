// The command supervisor: the one host-side owner of a running command, for
// every mechanism (spec 000, "The ExecutionEnvironment port": execute, its
// kill reasons and its output cap; docs/cli.md "When a command ends").
//
// A mechanism supplies only what is its own: a CommandChannel that starts
// the process in its sandbox and reports the process's life (main process
// exited, every process gone, start refused), and the LimitSources that
// report which enforcer stopped it (cgroup counters, full filesystems). The
// supervisor owns everything else, identically for every mechanism:
// * stdout and stderr pipes, drained under one output cap
//   (maximum_output_bytes, shared by both streams); each chunk read goes to
//   the OutputSink as it is read, and into the result; past the cap the
//   overflowing stream is cut, flagged *_truncated, and the command killed
//   with OUTPUT_LIMIT; a stream that writes after that is flagged too;
// * stdin, fed from the command's stdin_data without blocking;
// * the kill reasons, each from the thing that enforced it: TIMEOUT and
//   EXPIRED (the supervision clock: the host's unless the mechanism gives its
//   own), MEMORY / PIDS / DISK (LimitSources, and a
//   channel's own limit reports), OUTPUT_LIMIT (the pump), CANCELLED (the
//   cancel token, or the sandbox destroyed under the command: EndRequest),
//   EXPIRED / SERVICE_SHUTDOWN (likewise an EndRequest, or the shutdown fd);
//   the first reason decided is the one reported;
// * the end of a command: it ends when its main process has exited and
//   stdout and stderr reached end-of-file, or at a kill; or, when a process
//   the main process left behind holds a stream open (`sleep 60 & echo
//   started`), once kOutputGraceAfterExit has passed since the main
//   process's exit (or the timeout came first): what is left of the command
//   is then killed, and it ends with the main process's exit code (no kill
//   reason) and output_held_open naming the streams; then the channel is
//   told to stop (exactly once), and the supervisor waits, at most
//   kKillGrace, for the channel to report that every process is gone (what
//   the channel said is read before the grace is judged: a supervisor that
//   was not scheduled for a while does not abandon an answer that came in
//   time);
// * the ExecutionResult: output, truncation flags, killed_by / timed_out or
//   exit_code (128 + signal for a signalled main process), output_held_open,
//   duration_ms,
//   cpu_time_ms (the channel's report) and peak_memory_bytes (the limit
//   sources'). files_changed is the mechanism's (workspace_scan.h).
//
// Lifecycle of one command, as an explicit state (command_supervisor.cpp):
//   Running --(main exited)--> MainExited
//   Running | MainExited --(a kill)--> Stopping
//   MainExited --(both pipes at EOF | kOutputGraceAfterExit or the
//                 timeout with a pipe open: held open)--> Stopping
//   Stopping --(the channel reports every process gone)--> Draining
//   Draining --(both pipes at EOF, or kKillGrace)--> Finished
//   any --(channel lost | start refused | kKillGrace without an answer)--> Finished
//
// Threading: superviseCommand runs on the calling thread and calls the sink
// there; nothing else of the supervisor is shared. EndRequest::request is
// thread-safe and async-signal-safe.
#pragma once

#include <poll.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "airlock/core/error.h"
#include "airlock/core/types.h"
#include "airlock/port/cancel_token.h"
#include "airlock/port/execution_environment.h"
#include "airlock/sys/unique_fd.h"

namespace airlock::host {

// How long a stopped command's channel has to report that every process is
// gone, and how long the pipes may stay open after that. Only a wedged
// sandbox uses it up, so it is generous: on a loaded machine (two cores,
// load average 60) linux inits took up to 2.5 s to kill and reap a command
// and some more than 5 s, which a shorter grace turned into lost sandboxes.
inline constexpr auto kKillGrace = std::chrono::seconds(20);
// How often the limit sources are asked while a command runs.
inline constexpr auto kWatchInterval = std::chrono::milliseconds(10);

// A reason to end a running command that comes from outside it: the sandbox
// is being destroyed (CANCELLED), it expired under the command (EXPIRED),
// the service stops (SERVICE_SHUTDOWN). One per sandbox, reusable across
// commands until a reason is set; the first reason set stays.
class EndRequest {
 public:
  static Result<EndRequest> create();
  // Thread-safe, async-signal-safe; later calls keep the first reason.
  void request(KillReason why) noexcept;
  std::optional<KillReason> reason() const noexcept;
  int pollFd() const noexcept { return fd_.get(); }  // readable once requested

 private:
  explicit EndRequest(sys::UniqueFd fd);
  sys::UniqueFd fd_;
  std::unique_ptr<std::atomic<int>> reason_;  // a KillReason, or -1
};

// The kill reason of a command whose sandbox is destroyed under it at
// `now`: the service stopping (SERVICE_SHUTDOWN), the sandbox past its
// expires_at (EXPIRED, the reaper's destroy), else CANCELLED (a caller's
// destroy).
KillReason destroyKillReason(bool shutting_down, Timestamp expires_at, Timestamp now) noexcept;

// What a channel reports about the command it started.
struct ChannelEvent {
  enum class Kind {
    kMainExited,   // the main process exited (wait_status when known)
    kAllGone,      // every process of the command is gone (wait_status, cpu_usec when known)
    kStartFailed,  // the command never started (start_errno)
    kLimit,        // the mechanism's own enforcer stopped it (limit)
  };
  Kind kind;
  std::optional<int> wait_status;
  std::optional<std::int64_t> cpu_usec;
  int start_errno = 0;
  KillReason limit = KillReason::kPids;
};

// The pipe ends that go into the sandbox: stdin's read end (invalid when
// the command has no stdin_data), stdout's and stderr's write ends. The
// supervisor closes its copies once start() returns.
struct SandboxPipeEnds {
  sys::UniqueFd stdin_read;
  sys::UniqueFd stdout_write;
  sys::UniqueFd stderr_write;
};

// The mechanism's half of one command. Called only from the supervising
// thread. A channel that breaks (its socket closed, a malformed message, a
// failed send) remembers it: lost() is then true and the sandbox unusable.
class CommandChannel {
 public:
  virtual ~CommandChannel() = default;
  // Hands the command and the pipe ends to the sandbox. An error ends the
  // execute with it (ExecutionUnavailable).
  virtual Result<void> start(SandboxPipeEnds ends) = 0;
  // Polled for POLLIN while the command runs.
  virtual int eventFd() const noexcept = 0;
  // Appends what the channel has to say, without blocking. false: the
  // channel is lost.
  virtual bool readEvents(std::vector<ChannelEvent>& events) = 0;
  // A kill reason was decided (once per command, before the stop() it
  // causes, or after the stop of a normal end that no process answered
  // yet). A mechanism whose enforcer must make room for the kill does it
  // here (gvisor raises a stalled memory limit).
  virtual void noteKill(KillReason /*why*/) noexcept {}
  // End the command now: kill every process it left. Called exactly once
  // per started command (unless the channel was lost first). false: the
  // channel is lost.
  virtual bool stop() = 0;
  // The channel did not report kAllGone within kKillGrace of stop(): make
  // certain nothing of the command runs (kill the sandbox).
  virtual void abandon() noexcept = 0;
  virtual bool lost() const noexcept = 0;
};

// An enforcer a mechanism watches: which limit, if any, it stopped since the
// command started. Asked every kWatchInterval, when wakeFd() is readable,
// and once more at the end (a limit hit just before the exit still counts:
// a child the OOM killer took makes `sh -c` exit 137, and the model learns
// MEMORY, not 137).
class LimitSource {
 public:
  virtual ~LimitSource() = default;
  virtual std::optional<KillReason> hit() = 0;
  // Readable when hit() should be asked at once, or -1. drainWake() then.
  virtual int wakeFd() const noexcept { return -1; }
  virtual void drainWake() noexcept {}
  // The command's peak memory, for the result, if this source knows it.
  virtual std::optional<std::int64_t> peakMemoryBytes() { return std::nullopt; }
};

// DISK: a filesystem the command fills (no byte or no inode left; fstatfs).
// One that was already full when the command started is not its kill.
// The fds are borrowed and must outlive the source.
class FilesystemFullLimit final : public LimitSource {
 public:
  explicit FilesystemFullLimit(std::vector<int> directory_fds);
  std::optional<KillReason> hit() override;

 private:
  std::vector<int> fds_;
  std::vector<bool> full_at_start_;
};

// True when the filesystem of `fd` has no byte or no inode left.
bool filesystemFull(int fd) noexcept;

// The time a supervisor runs on. Without one (SupervisionInputs::clock
// null) it is the steady clock, and the supervisor waits in poll(2); a
// mechanism whose commands run on simulated time (the fake) supplies its
// own, and every deadline, the kill grace, the watch interval and
// duration_ms are then in its time. Called only from the supervising
// thread.
class SupervisionClock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  virtual ~SupervisionClock() = default;
  virtual TimePoint now() = 0;
  // Waits, as poll(2) over `fds` does, until one of them is ready or
  // `wake` (in this clock's time) is reached. poll's answer: the number of
  // ready fds, 0 at `wake`, -1 with errno set.
  virtual int poll(pollfd* fds, std::size_t count, TimePoint wake) = 0;
};

struct SupervisionInputs {
  const ExecutionCommand* command = nullptr;  // stdin_data, maximum_output_bytes
  std::chrono::milliseconds timeout{0};       // the effective timeout (timeout_rule.h)
  std::chrono::milliseconds until_expiry{0};  // time left before expires_at
  std::int64_t pids_max = 0;                  // for the message of a refused start
  const CancelToken* cancel = nullptr;        // CANCELLED; may be null
  int shutdown_fd = -1;                       // readable: SERVICE_SHUTDOWN; -1: none
  const EndRequest* end_request = nullptr;    // destroy / expiry under the command; may be null
  const ExecutionEnvironment::OutputSink* sink = nullptr;  // may be null or empty
  const CancelToken* cancel_by_id =
      nullptr;  // ExecutionEnvironment::cancel: CANCELLED; may be null
  // How long the channel has to answer a stop (kKillGrace; tests shorten it).
  std::chrono::milliseconds kill_grace = kKillGrace;
  // How long output held open after the main process's exit is drained
  // (kOutputGraceAfterExit; tests shorten it).
  std::chrono::milliseconds output_grace = kOutputGraceAfterExit;
  // The time the command runs on; null: the steady clock and poll(2).
  SupervisionClock* clock = nullptr;
  // How far the sandbox's expires_at has moved since the command was
  // admitted (0 when not), asked when the expiry the supervisor knows is
  // reached: an extension while the command runs moves its expiry later by
  // as much. Empty: the expiry is fixed at `until_expiry`.
  std::function<std::chrono::milliseconds()> expiry_moved;
};

// Runs one command through `channel` to its end and builds its result
// (everything but files_changed). Errors: ExecutionUnavailable when the
// command could not be started (errno kept; EAGAIN names the pids limit),
// when the channel was lost with no kill reason to report (the sandbox died
// on its own), or when poll fails. A channel lost after a kill reason was
// decided (destroy, shutdown, a limit) still returns the result with the
// output read so far; channel.lost() tells the caller the sandbox is gone.
Result<ExecutionResult> superviseCommand(CommandChannel& channel,
                                         std::span<LimitSource* const> limits,
                                         const SupervisionInputs& inputs);

}  // namespace airlock::host
