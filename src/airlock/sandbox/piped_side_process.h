// What every adapter's side processes share (execution_environment.h,
// SideProcess and startSideProcess; implemented by linux/side_process.h and
// oci/gvisor_environment.h; spec 001 "cap/proc", "cap/job"):
// the service-side check of a SideCommand and the environment it runs with,
// its three stdio pipes, and the in-process half of the SideProcess interface.
// How the process is started, how its exit status arrives and how its group
// is killed differ per mechanism and stay in the adapters.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "airlock/core/error.h"
#include "airlock/port/execution_environment.h"
#include "airlock/sys/unique_fd.h"

namespace airlock {

// A SideCommand that passed the service-side checks.
struct PreparedSideCommand {
  // checkRelativePath's answer: relative to /workspace, "" for its root.
  // Not yet checked to exist: the adapter opens it beneath its workspace.
  std::string working_directory;
  // "NAME=value" strings, sorted by name: the sandbox's environment, then
  // env_additions over it, then PWD (/workspace[/working_directory]).
  std::vector<std::string> env;
};

// Errors (ToolValidationError, naming the problem): empty argv or argv[0],
// a NUL byte in argv, an invalid variable name or a NUL in its value, a
// working directory that checkRelativePath refuses.
Result<PreparedSideCommand> prepareSideCommand(
    const std::map<std::string, std::string>& sandbox_environment, const SideCommand& command);

// A side process's stdio pipes, every end close-on-exec and blocking. The
// stdin pair exists only when asked for (both ends -1 otherwise).
struct SidePipes {
  sys::UniqueFd stdin_read, stdin_write;
  sys::UniqueFd stdout_read, stdout_write;
  sys::UniqueFd stderr_read, stderr_write;
};
// ExecutionUnavailable ("pipe", errno) when the service is out of fds.
Result<SidePipes> makeSidePipes(bool with_stdin);
// One close-on-exec, blocking pipe into `read_end` and `write_end` (a
// side process's status and control pipes); errors as makeSidePipes.
Result<void> makePipe(sys::UniqueFd& read_end, sys::UniqueFd& write_end);

// How a side process's stdin end takes closeStdin.
enum class StdinEnd : bool {
  kPipe,  // closeStdin closes it: the process reads end-of-file
  // It feeds a terminal (SideCommand::terminal): closeStdin types the
  // terminal's end-of-file character once and keeps it open, so the
  // terminal, and later input, stay usable. The character is the one the
  // terminal's settings name (tcgetattr on the end, which answers for a
  // pseudo-terminal's master) or ^D where the end is no terminal (a pipe
  // to a terminal inside the sandbox) or the character is disabled.
  kTerminal,
};

// The in-process half of SideProcess: owns the service's ends of the stdio
// pipes (stdin's write end, stdout's and stderr's read ends), which the
// constructor makes non-blocking, and moves bytes through them: pump polls
// the read ends, the exit fd and the caller's stop fd; writeStdin polls the
// write end. Adapters add exitFd, exitStatus and killGroup.
//
// A read that fails with EIO ends its stream like end-of-file: that is how
// a pseudo-terminal's master reports that the last holder of its slave has
// closed it. A write to stdin that fails (EPIPE, or EIO from a master whose
// slave is gone) drops the stdin end without typing anything; so does the
// main process's exit while pump feeds stdin_data.
class PipedSideProcess : public SideProcess {
 public:
  SidePumpOutcome pump(const SidePumpHooks& hooks) final;
  SideInputEnd writeStdin(std::string_view bytes, Clock::time_point deadline, int stop_fd) final;
  // kPipe: closes the stdin end. kTerminal: types the end-of-file character
  // once (one non-blocking write: a terminal whose input buffer is full
  // drops it, as a console would).
  void closeStdin() noexcept final;
  bool stdinOpen() const noexcept final { return stdin_.valid(); }

 protected:
  // Any end may be invalid (-1): stdin without with_stdin, stderr of a
  // terminal (whose one output is stdout). For a terminal's master, stdin
  // and stdout are two descriptors of it (dup), so that dropping one leaves
  // the other.
  PipedSideProcess(sys::UniqueFd stdin_write, sys::UniqueFd stdout_read, sys::UniqueFd stderr_read,
                   StdinEnd stdin_end = StdinEnd::kPipe) noexcept;
  // Readable (poll POLLIN) once the process has exited; then exitStatus()
  // answers without blocking.
  virtual int exitFd() const noexcept = 0;
  int stdoutFd() const noexcept { return stdout_.get(); }
  int stderrFd() const noexcept { return stderr_.get(); }
  void closeOutput() noexcept {
    stdout_.reset();
    stderr_.reset();
  }
  // Closes all three ends (the process then reads end-of-file and gets
  // EPIPE on output), whatever StdinEnd says.
  void closePipes() noexcept {
    stdin_.reset();
    closeOutput();
  }

 private:
  sys::UniqueFd stdin_, stdout_, stderr_;
  StdinEnd stdin_end_;
};

}  // namespace airlock
