// The ExecutionEnvironment port (spec 000, "The ExecutionEnvironment port") and the narrow
// workspace port beside it.
//
// Adapters: fake/ (scripted, in-memory), linux/ (shared-kernel jail) and
// oci/ (gvisor: runsc, the production mechanism).
// Every adapter passes tests/contract.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/core/error.h"
#include "airlock/core/types.h"
#include "airlock/port/cancel_token.h"
#include "airlock/port/capability_channel.h"
#include "airlock/port/workspace_file_stream.h"

namespace airlock {

// Where the capability directory appears inside a sandbox (code mode).
inline constexpr std::string_view kCapabilityDirInSandbox = "/run/airlock";

// One entry of a workspace listing.
struct WorkspaceEntry {
  std::string name;  // raw bytes of the name
  enum class Type { kFile, kDirectory, kSymlink, kOther } type = Type::kFile;
  std::int64_t size_bytes = 0;
  bool operator==(const WorkspaceEntry&) const = default;
};

// "file", "directory", "symlink" or "other": the `type` of a listing entry
// on the wire (the HTTP API and the workspace tools).
constexpr const char* workspaceEntryTypeName(WorkspaceEntry::Type t) {
  switch (t) {
    case WorkspaceEntry::Type::kFile:
      return "file";
    case WorkspaceEntry::Type::kDirectory:
      return "directory";
    case WorkspaceEntry::Type::kSymlink:
      return "symlink";
    case WorkspaceEntry::Type::kOther:
      break;
  }
  return "other";
}

// What WorkspaceHandle::stat reports of one path. A symlink is reported as
// itself (type kSymlink, its size the length of its target), never followed.
struct WorkspaceStat {
  WorkspaceEntry::Type type = WorkspaceEntry::Type::kFile;
  std::int64_t size_bytes = 0;  // st_size for files and symlinks, 0 otherwise (as listdir)
  std::uint32_t mode = 0;       // permission bits only (mode & 07777), e.g. 0644
  // Last modification, nanoseconds since the Unix epoch (UTC).
  std::int64_t mtime_ns = 0;
  bool operator==(const WorkspaceStat&) const = default;
};

// Who put a file where it is (spec 000, "Provenance, and why the handle
// answers it"). TOOL_WRITTEN: the handle's own write. SANDBOX_WRITTEN: a
// command created or modified it. UNKNOWN: anything else (copy-in, archive
// extraction, a path never seen, a record that was lost); it is the safe
// answer, the same as untrusted.
enum class WorkspaceProvenance { kUnknown, kToolWritten, kSandboxWritten };

constexpr const char* workspaceProvenanceName(WorkspaceProvenance p) {
  switch (p) {
    case WorkspaceProvenance::kToolWritten:
      return "tool_written";
    case WorkspaceProvenance::kSandboxWritten:
      return "sandbox_written";
    case WorkspaceProvenance::kUnknown:
      break;
  }
  return "unknown";
}

// Narrow file access to one sandbox's workspace (spec 000, "WorkspaceHandle").
// Paths are relative to /workspace and pass the containment rules; errors:
// WorkspaceEscape (path refused), NotFound, ExecutionRejected (handle gone).
// provenance() answers from an in-memory record held beside the volume
// (no syscalls, no existence check): a path it has no record for is UNKNOWN.
class WorkspaceHandle {
 public:
  virtual ~WorkspaceHandle() = default;
  virtual Result<std::string> read(const std::string& path) = 0;
  // Creates or replaces a regular file; creates missing parent directories.
  virtual Result<void> write(const std::string& path, std::string_view data) = 0;
  // Writes like write, but the path's provenance becomes UNKNOWN: for bytes
  // the platform did not produce (copy-in, archive extraction). Only write
  // records TOOL_WRITTEN.
  virtual Result<void> placeFile(const std::string& path, std::string_view data) = 0;
  virtual Result<void> mkdir(const std::string& path) = 0;
  virtual Result<std::vector<WorkspaceEntry>> listdir(const std::string& path) = 0;
  // The path passes the same lexical check as the other methods
  // (WorkspaceEscape when refused); ExecutionRejected when the handle is gone.
  virtual Result<WorkspaceProvenance> provenance(const std::string& path) = 0;

  // Removes a file, symlink (the link itself, never its target) or
  // directory. A directory with entries is removed only with `recursive`
  // (then everything below it goes, nothing below it is followed); an
  // empty one needs no flag. Errors: WorkspaceEscape (the path, or a
  // lookup leaving the workspace), ToolValidationError (the root, which is
  // never removed), NotFound (naming the path), ExecutionRejected (a
  // directory with entries without `recursive`: "not empty"; the handle
  // gone). Provenance: the record of the path and of everything below it
  // is dropped.
  virtual Result<void> remove(const std::string& path, bool recursive) = 0;
  // Moves `from` to `to`, both inside the workspace. The last component of
  // `from` is moved as it is (a symlink there is moved, not followed), and
  // the directory `to` goes in must exist (NotFound otherwise). A `to`
  // that exists is refused (ExecutionRejected "already exists") unless
  // `replace`; with `replace` a file or symlink replaces a file or
  // symlink and a directory replaces an empty directory, atomically (the
  // kernel's rename), never a file a directory or the reverse
  // (ToolValidationError). Refused with ToolValidationError: the root as
  // either side, a directory moved below itself. Other errors as remove.
  // Renaming a path onto itself succeeds and changes nothing. Provenance:
  // the records of `from` and below move to `to` and below when the moved
  // object is reachable as `to` without a symlink and no command is
  // running (else they are dropped); the records `to` had are dropped.
  virtual Result<void> rename(const std::string& from, const std::string& to, bool replace) = 0;
  // The type, size, permission bits and mtime of one path; "" is the root.
  // A symlink as the last component is reported as a symlink; symlinks
  // among the parents are followed only while they stay inside (as every
  // method). Errors: WorkspaceEscape, NotFound, ExecutionRejected (gone).
  virtual Result<WorkspaceStat> stat(const std::string& path) = 0;
  // One regular file as a byte stream, for export (artifact_export): its
  // size and SHA-256 measured at open (bounded by max_bytes), its bytes
  // pulled in chunks afterwards, so an export never needs a host fd and the
  // port can cross a wire. Errors: WorkspaceEscape (the path, or a symlink as
  // its last component), ToolValidationError (the root, or not a regular
  // file), ExecutionRejected (larger than max_bytes; the handle gone),
  // NotFound. This default reads the file whole through read(); a local
  // workspace streams it from its directory.
  virtual Result<WorkspaceFileStream> openExport(const std::string& path, std::int64_t max_bytes);
};

// A pseudo-terminal's size in character cells (struct winsize's ws_row and
// ws_col). Each is 1..kMaxTerminalCells; checkTerminalSize names the
// offending field.
struct TerminalSize {
  std::uint16_t rows = 24;
  std::uint16_t columns = 80;
  bool operator==(const TerminalSize&) const = default;
};
inline constexpr std::uint16_t kMaxTerminalCells = 1000;

// A process started beside the running command, inside the same live
// sandbox ("exec into the sandbox", like `docker exec`): the code-mode broker
// runs proc.run and job.start effects this way (spec 001 "cap/proc",
// "cap/job"; docs/capabilities.md). It shares the sandbox's
// namespaces, workspace, cgroup limits, uid, seccomp filter and lack of
// capabilities, exactly like a command, and leads a process group (session)
// of its own. It is not a command's: a command's end kills what the command
// started, never a side process or what stays in its session (jobs outlive
// commands; port/job_port.h). It dies with the sandbox at the latest.
struct SideCommand {
  std::vector<std::string> argv;        // argv[0] absolute or a bare name on the image PATH
  std::string working_directory = ".";  // relative to /workspace, containment-checked
  std::map<std::string, std::string> env_additions;  // over the sandbox's environment
  bool with_stdin = false;                           // false: stdin is /dev/null
  // Run on a pseudo-terminal of this size instead of pipes (E2B's "PTY"
  // process, `docker exec -t`): the process's stdin, stdout and stderr are
  // the terminal's slave side, and it is that terminal's controlling
  // process, so `sh -i`, `python3 -i` and `stty size` behave as at a
  // console. Then: with_stdin is forced on; everything the process writes
  // to either stream arrives as stdout (a terminal has one output; stderr
  // stays empty), with the terminal's line discipline applied (echo of
  // input, "\n" written as "\r\n"); writeStdin types into the terminal;
  // closeStdin types the terminal's end-of-file character (^D) once instead
  // of closing anything; resizeTerminal changes the size (the process gets
  // SIGWINCH). nullopt: pipes, as documented above.
  std::optional<TerminalSize> terminal;
};

// How long a side process's output is drained after its main process has
// exited (SideProcess::pump).
inline constexpr auto kSideDrain = std::chrono::seconds(2);

// How long a command's output is still drained after its main process has
// exited while a process it left behind holds stdout or stderr open; then
// the rest of the command is killed and execute ends with the main
// process's exit code and ExecutionResult::output_held_open
// (sandbox/host/command_supervisor.h). Like kSideDrain: long enough for a
// child's last writes, short enough that a forgotten redirect (`server &`
// without `> server.log`) costs two seconds, not the timeout.
inline constexpr auto kOutputGraceAfterExit = std::chrono::seconds(2);

// What SideProcess::pump reports to, and when it stops.
struct SidePumpHooks {
  using Clock = std::chrono::steady_clock;
  // Fed to the process's stdin, interleaved with reading its output (so
  // input larger than a pipe cannot deadlock against output), then stdin is
  // closed; it is also closed once the process has exited. nullopt: the
  // pump leaves stdin alone (the caller writes it with writeStdin, or there
  // is none).
  std::optional<std::string_view> stdin_data;
  // Each chunk as it is read (is_stdout false: stderr). Required.
  std::function<void(bool is_stdout, std::string_view chunk)> output;
  // A stream's end: end-of-file, or cut when the drain ran out. Optional.
  std::function<void(bool is_stdout)> output_ended;
  // The main process's wait status, once it has exited. Optional.
  std::function<void(int wait_status)> exited;
  int stop_fd = -1;                           // the caller's: readable means stop now; -1: none
  std::optional<Clock::time_point> deadline;  // none: no deadline
  // At the deadline the group is killed; with this set the pump still
  // collects the killed process's exit and the rest of its output.
  bool continue_after_deadline = false;
};

enum class SidePumpEnd {
  kFinished,    // the process exited and its output is drained
  kStopped,     // stop_fd became readable (the process group was killed)
  kDeadline,    // the deadline passed (the process group was killed)
  kPollFailed,  // waiting failed (the process group was killed)
};

struct SidePumpOutcome {
  SidePumpEnd end = SidePumpEnd::kFinished;
  std::optional<int> wait_status;  // the main process's, when it was seen to exit
};

// How a writeStdin ended.
enum class SideInputEnd {
  kWritten,   // every byte was taken
  kClosed,    // stdin is closed (never opened, closed, or the reader is gone)
  kDeadline,  // the deadline passed first (some bytes may have been taken)
  kStopped,   // stop_fd became readable first
};

// The service's handle on one side process. Its input and output move as
// bytes through these methods, never as host fds, so a handle can stand for
// a process on another machine; the in-process adapters keep their pipes
// underneath (piped_side_process.h). The destructor kills the process group
// and reaps what it must.
// Thread-safety: killGroup() may be called from any thread; writeStdin and
// closeStdin may run on one thread while pump runs on another (when the
// pump feeds no stdin_data); otherwise one thread at a time.
class SideProcess {
 public:
  using Clock = std::chrono::steady_clock;
  virtual ~SideProcess() = default;

  // Streams the process's output to `hooks` as it is written, and its exit,
  // on the calling thread until it is over:
  // * once the main process has exited, what is left of its process group
  //   is killed and the output drained for at most kSideDrain (a process
  //   that escaped the group may hold it open, and is not waited for);
  // * it ends early when hooks.stop_fd is readable (kStopped) or at
  //   hooks.deadline (kDeadline), killing the process group first.
  // Called once per process.
  virtual SidePumpOutcome pump(const SidePumpHooks& hooks) = 0;

  // Writes all of `bytes` to the process's stdin, waiting for room until
  // `deadline` or until stop_fd (the caller's; -1: none) is readable. A
  // reader that has gone closes stdin (kClosed).
  virtual SideInputEnd writeStdin(std::string_view bytes, Clock::time_point deadline,
                                  int stop_fd) = 0;
  virtual void closeStdin() noexcept = 0;  // end of input; idempotent
  virtual bool stdinOpen() const noexcept = 0;

  // The wait status (as waitpid's) once the process has exited, else
  // nullopt. Does not wait.
  virtual std::optional<int> exitStatus() = 0;
  // SIGKILL to the process's group: the process and everything it started
  // that stayed in its group. Idempotent; a no-op once the group is gone.
  virtual void killGroup() noexcept = 0;
  // A process started with SideCommand::terminal: sets its terminal's size
  // (the process gets SIGWINCH). Errors: ToolValidationError for a size
  // checkTerminalSize refuses, or a process started without a terminal;
  // ExecutionRejected once the process has exited or its terminal is gone.
  // This default is for adapters without terminals.
  virtual Result<void> resizeTerminal(const TerminalSize& /*size*/) {
    return fail(ErrorCode::kToolValidationError, "this process was not started with a terminal");
  }
};

// ToolValidationError naming the field ("rows" or "columns") and its range
// when either is 0 or above kMaxTerminalCells.
Result<void> checkTerminalSize(const TerminalSize& size);

class ExecutionEnvironment {
 public:
  virtual ~ExecutionEnvironment() = default;

  // Creates a sandbox for spec. ExecutionRejected for an invalid spec (limit
  // above ceiling, unknown image digest); ExecutionUnavailable when the
  // mechanism cannot start one within the start budget.
  virtual Result<EnvironmentHandle> provision(const EnvironmentSpec& spec) = 0;

  // Runs one command to completion in the sandbox. Not parallel-safe against
  // one handle. A cancelled token ends the command with killed_by CANCELLED.
  // Errors: ToolValidationError (invalid command, checked first);
  // ExecutionRejected (unknown or destroyed handle); SandboxEscapeSuspected
  // (the handle's tenant, run or epoch differs from the sandbox's record; the
  // sandbox is destroyed, as the spec requires for this class);
  // ExecutionUnavailable (the sandbox's init died on its own, or a syscall
  // failed). A sandbox destroyed under a running command (destroy, the
  // reaper at expires_at, shutdown) is not an error: the command ends with
  // killed_by CANCELLED, EXPIRED or SERVICE_SHUTDOWN and the output it had
  // written.
  virtual Result<ExecutionResult> execute(const EnvironmentHandle& handle,
                                          const ExecutionCommand& command,
                                          const CancelToken* cancel = nullptr) = 0;

  // Receives output as a command produces it (the streaming variant of
  // execute). Called on the thread that supervises the command (the thread
  // that called executeStreaming; host/command_supervisor.h), once per chunk
  // as it is read, in order, with at most the bytes that also land in the
  // result (the output cap applies to both).
  // A sink must not block: while it runs, nothing reads the command's pipes
  // and no timeout, limit, cancel or destroy is acted on, so a sink that
  // waits (on a slow client, say) holds the command past its timeout and
  // output cap. A sink that cannot deliver at once queues (bounded) or
  // drops, and cancels the command through its CancelToken when it gives
  // up. It must not call back into the adapter.
  enum class OutputStream { kStdout, kStderr };
  using OutputSink = std::function<void(OutputStream stream, std::string_view bytes)>;

  // execute, with each chunk of output passed to `sink` as it is read, and
  // the complete result (the same as execute's) returned at the end. The
  // default runs execute and then passes the whole output at once, for
  // adapters whose commands cannot stream.
  virtual Result<ExecutionResult> executeStreaming(const EnvironmentHandle& handle,
                                                   const ExecutionCommand& command,
                                                   const CancelToken* cancel,
                                                   const OutputSink& sink) {
    auto result = execute(handle, command, cancel);
    if (result && sink) {
      if (!result->stdout_data.empty()) sink(OutputStream::kStdout, result->stdout_data);
      if (!result->stderr_data.empty()) sink(OutputStream::kStderr, result->stderr_data);
    }
    return result;
  }

  // Cancels the running command of this sandbox that was started with
  // `execution_id` (ExecutionCommand::execution_id): it ends with killed_by
  // CANCELLED and the output it had written, as with a cancelled token; the
  // call does not wait for that end. A command that had already reached its
  // end when the cancel arrived (its main process gone, its output read)
  // reports that end instead. This is how a caller on the other side
  // of a wire cancels; the CancelToken of execute is the in-process form.
  // Errors: ToolValidationError (an empty or malformed id); EnvironmentGone
  // (unknown or destroyed handle); ExecutionRejected (another tenant's
  // handle); NotFound (no command of that id is running: not started yet,
  // or already over).
  virtual Result<void> cancel(const EnvironmentHandle& handle, std::string_view execution_id) = 0;

  // Destroys the sandbox and its workspace. Idempotent: a gone handle is OK.
  virtual Result<void> destroy(const EnvironmentHandle& handle) = 0;

  // Moves the live sandbox's expires_at (spec 000, "EnvironmentHandle") to
  // `expires_at` when that is later, never earlier (an earlier or equal time
  // changes nothing), and returns the sandbox's handle as it now is. How far
  // it may go (created_at plus the service's hard cap) is the caller's to
  // decide. A command already running keeps the expiry it was admitted
  // under (it still ends EXPIRED then; the sandbox lives on); commands
  // started later run under the new one. Errors: EnvironmentGone (unknown,
  // destroyed, or already past its expires_at); ExecutionRejected (another
  // tenant's handle); ExecutionUnavailable for an adapter that cannot (the
  // default).
  virtual Result<EnvironmentHandle> extend(const EnvironmentHandle& /*handle*/,
                                           Timestamp /*expires_at*/) {
    return fail(ErrorCode::kExecutionUnavailable,
                "this mechanism cannot extend an environment's lifetime");
  }

  // The workspace port of a live sandbox. ExecutionRejected when gone.
  virtual Result<std::shared_ptr<WorkspaceHandle>> workspace(const EnvironmentHandle& handle) = 0;

  // ---- code mode (spec 001). Optional: adapters without it
  // answer ExecutionUnavailable (fake today). linux: linux/side_process.h;
  // gvisor: oci/gvisor_environment.h.

  // Starts `command` as a side process in the live sandbox (see SideProcess).
  // Errors: ToolValidationError (empty argv, bad working directory);
  // ExecutionRejected (unknown or destroyed handle, tenant mismatch);
  // ExecutionUnavailable (no such facility, init gone, a syscall failed,
  // the sandbox's pids limit reached).
  virtual Result<std::unique_ptr<SideProcess>> startSideProcess(const EnvironmentHandle& /*handle*/,
                                                                const SideCommand& /*command*/) {
    return fail(ErrorCode::kExecutionUnavailable, "this mechanism cannot start side processes");
  }

  // The capability channel of a live sandbox (capability_channel.h): the
  // files the sandbox sees read-only at kCapabilityDirInSandbox
  // ("/run/airlock") and the socket there its programs connect to. A new
  // channel per call, owned by the caller (the broker writes the guest
  // library, the program and the token file through it, and listens on
  // it); files written by an earlier channel of the same sandbox are still
  // there. No host fd or host path crosses the port. Errors as
  // startSideProcess.
  virtual Result<std::unique_ptr<CapabilityChannel>> openCapabilityChannel(
      const EnvironmentHandle& /*handle*/) {
    return fail(ErrorCode::kExecutionUnavailable, "this mechanism has no capability channel");
  }

  // The service is stopping: every running command ends with killed_by
  // SERVICE_SHUTDOWN (partial output returned), and provision/execute fail
  // with ExecutionUnavailable from now on. Callers then destroy what they
  // hold. Thread-safe and async-signal-safe in the linux adapter. The
  // default (an adapter whose commands complete instantly) only refuses.
  virtual void shutdown() noexcept {}
};

}  // namespace airlock
