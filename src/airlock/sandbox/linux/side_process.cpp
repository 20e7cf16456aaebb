#include "airlock/sandbox/linux/side_process.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "airlock/core/command_validation.h"
#include "airlock/core/environment_tiers.h"
#include "airlock/sandbox/host/cgroup.h"
#include "airlock/sandbox/linux/sandboxed_exec.h"
#include "airlock/sandbox/piped_side_process.h"
#include "airlock/sys/io.h"
#include "airlock/sys/unique_fd.h"
#include "airlock/workspace/resolve.h"

namespace airlock::linux_jail {
namespace {

using sys::UniqueFd;

// One record on the status pipe, helper -> service.
struct StatusRecord {
  enum Kind : std::int32_t { kStarted = 1, kExited = 2, kFailed = 3 };
  std::int32_t kind;
  std::int32_t step;   // kFailed: which step
  std::int32_t value;  // kStarted: the effect's pid; kExited: wait status; kFailed: errno
};

constexpr const char* kStepNames[] = {"", "wait for the cgroup", "enter the sandbox's namespaces",
                                      "fork into the sandbox's pid namespace"};

// --- after fork: no allocation, no locks, no logging ------------------------

void writeRecord(int fd, StatusRecord r) noexcept {
  (void)sys::writeAll(fd, &r, sizeof r);  // a service that is gone reads nothing
}

struct Prepared {
  // The effect process: exactly a command's steps (sandboxed_exec.h), and it
  // dies with its helper (die_with_parent).
  SandboxedExec effect_exec;
  int go_fd;      // read end: one byte once the helper is in the cgroup
  int status_fd;  // write end of the status pipe
  int init_pidfd;
};

// The helper: waits to be in the cgroup, enters the namespaces, forks the
// effect, reports its pid and later its wait status.
[[noreturn]] void runHelper(const Prepared& p) noexcept {
  resetSignalDispositions();
  // Not dumpable from here until the effect's execve: no process of the
  // sandbox may ptrace or open /proc/<pid>/{mem,exe,fd} of the helper or of
  // the effect while they still hold the service's memory and fds.
  ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  char go = 0;
  ssize_t n = sys::readSome(p.go_fd, &go, 1);
  if (n != 1) {
    writeRecord(p.status_fd, {StatusRecord::kFailed, 1, n < 0 ? errno : EPIPE});
    ::_exit(1);
  }
  if (::setns(p.init_pidfd, CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET |
                                CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP) != 0) {
    writeRecord(p.status_fd, {StatusRecord::kFailed, 2, errno});
    ::_exit(1);
  }
  pid_t effect = ::_Fork();
  if (effect < 0) {
    writeRecord(p.status_fd, {StatusRecord::kFailed, 3, errno});
    ::_exit(1);
  }
  if (effect == 0) execSandboxed(p.effect_exec);
  writeRecord(p.status_fd, {StatusRecord::kStarted, 0, effect});
  // Not reaped before the service holds a pidfd of it: until then its pid
  // cannot be reused, so the pidfd is the effect's and no other process's.
  // (A service that died instead of answering ends the read with EOF.)
  n = sys::readSome(p.go_fd, &go, 1);
  // Only the status pipe stays open here: the pipes belong to the effect
  // and the service, and no other descriptor of the service may linger.
  const unsigned keep = static_cast<unsigned>(p.status_fd);
  if (keep > 3) ::syscall(SYS_close_range, 3U, keep - 1, 0U);
  ::syscall(SYS_close_range, keep + 1, ~0U, 0U);
  int status = 0;
  pid_t w;
  do {
    w = ::waitpid(effect, &status, __WALL);
  } while (w < 0 && errno == EINTR);
  writeRecord(p.status_fd, {StatusRecord::kExited, 0, w == effect ? status : (SIGKILL)});
  ::_exit(0);
}

// A pseudo-terminal pair of `size`: the master stays with the service, the
// slave goes to the effect process as its stdio. The slave is opened from
// the master (TIOCGPTPEER), never by a path under /dev/pts, and without
// becoming the service's controlling terminal.
struct TerminalPair {
  UniqueFd master, slave;
};
Result<TerminalPair> openTerminal(const TerminalSize& size) {
  TerminalPair pair;
  pair.master.reset(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!pair.master.valid())
    return failErrno(ErrorCode::kExecutionUnavailable, "posix_openpt", errno);
  if (::unlockpt(pair.master.get()) != 0)
    return failErrno(ErrorCode::kExecutionUnavailable, "unlockpt", errno);
  pair.slave.reset(::ioctl(pair.master.get(), TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!pair.slave.valid())
    return failErrno(ErrorCode::kExecutionUnavailable, "ioctl TIOCGPTPEER", errno);
  const winsize ws{.ws_row = size.rows, .ws_col = size.columns, .ws_xpixel = 0, .ws_ypixel = 0};
  if (::ioctl(pair.master.get(), TIOCSWINSZ, &ws) != 0)
    return failErrno(ErrorCode::kExecutionUnavailable, "ioctl TIOCSWINSZ", errno);
  return pair;
}

Result<UniqueFd> duplicate(int fd) {
  UniqueFd copy(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
  if (!copy.valid()) return failErrno(ErrorCode::kExecutionUnavailable, "dup", errno);
  return copy;
}

// The effect's stdio and the service's ends of it. On a terminal, the
// slave is the effect's stdin, stdout and stderr (in_r), and the service
// holds three descriptors of the master: stdin's end, stdout's end and one
// for resizes (`terminal`). On pipes, the three pipes.
struct EffectStdio {
  UniqueFd in_r, in_w, out_r, out_w, err_r, err_w, terminal;
};
Result<EffectStdio> openStdio(const SideCommand& command) {
  EffectStdio io;
  if (command.terminal) {
    if (auto ok = checkTerminalSize(*command.terminal); !ok) return tl::unexpected(ok.error());
    auto pair = openTerminal(*command.terminal);
    if (!pair) return tl::unexpected(pair.error());
    auto in = duplicate(pair->master.get());
    if (!in) return tl::unexpected(in.error());
    auto control = duplicate(pair->master.get());
    if (!control) return tl::unexpected(control.error());
    io.in_w = std::move(*in);
    io.terminal = std::move(*control);
    io.out_r = std::move(pair->master);
    io.in_r = std::move(pair->slave);
    return io;
  }
  auto pipes = makeSidePipes(command.with_stdin);
  if (!pipes) return tl::unexpected(pipes.error());
  io.in_r = std::move(pipes->stdin_read);
  io.in_w = std::move(pipes->stdin_write);
  io.out_r = std::move(pipes->stdout_read);
  io.out_w = std::move(pipes->stdout_write);
  io.err_r = std::move(pipes->stderr_read);
  io.err_w = std::move(pipes->stderr_write);
  return io;
}

class LinuxSideProcess final : public PipedSideProcess {
 public:
  // `terminal`: a pseudo-terminal's master (its own descriptor, besides
  // `in` and `out`), or invalid for a process on pipes.
  LinuxSideProcess(pid_t helper, pid_t effect, UniqueFd effect_pidfd, UniqueFd in, UniqueFd out,
                   UniqueFd err, UniqueFd status, UniqueFd terminal)
      : PipedSideProcess(std::move(in), std::move(out), std::move(err),
                         terminal.valid() ? StdinEnd::kTerminal : StdinEnd::kPipe),
        helper_(helper),
        effect_(effect),
        effect_pidfd_(std::move(effect_pidfd)),
        status_(std::move(status)),
        terminal_(std::move(terminal)) {}
  Result<void> resizeTerminal(const TerminalSize& size) override {
    if (!terminal_.valid())
      return fail(ErrorCode::kToolValidationError, "this process was not started with a terminal");
    if (auto ok = checkTerminalSize(size); !ok) return ok;
    // The master reports POLLHUP once every descriptor of the slave is
    // closed: the process and whatever it started have let go of it.
    pollfd pfd{terminal_.get(), 0, 0};
    if (sys::pollSome(&pfd, 1, 0) == 1 && (pfd.revents & POLLHUP))
      return fail(ErrorCode::kExecutionRejected, "the process's terminal is closed");
    const winsize ws{.ws_row = size.rows, .ws_col = size.columns, .ws_xpixel = 0, .ws_ypixel = 0};
    if (::ioctl(terminal_.get(), TIOCSWINSZ, &ws) != 0)
      return failErrno(ErrorCode::kExecutionRejected, "resize the terminal", errno);
    return {};
  }
  ~LinuxSideProcess() override {
    killGroup();
    closePipes();
    // The effect is dead or dying (SIGKILL): its helper exits as soon as it
    // has reaped it. Killing the helper too is harmless (the effect has a
    // parent-death signal) and bounds the wait.
    if (!exited_) ::kill(helper_, SIGKILL);
    if (!helper_reaped_) reapHelper();
  }
  int exitFd() const noexcept override { return status_.get(); }
  std::optional<int> exitStatus() override {
    if (exited_) return status_value_;
    if (!status_.valid()) return std::nullopt;
    StatusRecord r{};
    ssize_t n = sys::readSome(status_.get(), &r, sizeof r);
    if (n < 0 && errno == EAGAIN) return std::nullopt;
    if (n == static_cast<ssize_t>(sizeof r) && r.kind == StatusRecord::kExited) {
      status_value_ = r.value;
      // The helper exits right after this report: reaped now, a job that
      // keeps its record until its environment goes leaves no zombie.
      reapHelper();
      helper_reaped_ = true;
    } else {
      status_value_ = SIGKILL;  // the helper died without a report: count it killed
    }
    exited_ = true;
    return status_value_;
  }
  // The effect leads its own process group (setsid), whose id is its pid.
  // That id cannot be reused while the effect exists, reaped or not (the
  // pidfd says which): only then is the group signalled. Once the effect is
  // reaped, a kill(-pgid) could hit any host process that took the number,
  // so nothing is sent; what the effect left running in its group ends with
  // the sandbox's command.
  void killGroup() noexcept override {
    std::lock_guard lk(kill_mu_);
    if (effect_ <= 0 || !effect_pidfd_.valid()) return;
    if (::syscall(SYS_pidfd_send_signal, effect_pidfd_.get(), 0, nullptr, 0) != 0)
      return;  // reaped
    ::kill(-effect_, SIGKILL);
    ::syscall(SYS_pidfd_send_signal, effect_pidfd_.get(), SIGKILL, nullptr, 0);
  }

 private:
  void reapHelper() noexcept {
    int st;
    while (::waitpid(helper_, &st, 0) < 0 && errno == EINTR) {
    }
  }

  pid_t helper_;
  bool helper_reaped_ = false;
  pid_t effect_;
  UniqueFd effect_pidfd_;
  UniqueFd status_;
  UniqueFd terminal_;  // only ioctls: the pump may close its own copies meanwhile
  bool exited_ = false;
  int status_value_ = 0;
  std::mutex kill_mu_;
};

}  // namespace

Result<std::unique_ptr<SideProcess>> startSideProcessIn(const SideProcessTarget& target,
                                                        const SideCommand& command) {
  auto prepared = prepareSideCommand(target.environment, command);
  if (!prepared) return tl::unexpected(prepared.error());
  if (target.init_pidfd < 0 || target.cgroup == nullptr || target.seccomp == nullptr)
    return fail(ErrorCode::kExecutionUnavailable, "the sandbox's init is gone");

  // argv and envp, prepared here: the children only read them.
  std::vector<char*> argv, envp;
  for (const auto& a : command.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (auto& e : prepared->env) envp.push_back(e.data());
  envp.push_back(nullptr);

  auto stdio = openStdio(command);
  if (!stdio) return tl::unexpected(stdio.error());
  UniqueFd in_r = std::move(stdio->in_r), in_w = std::move(stdio->in_w);
  UniqueFd out_r = std::move(stdio->out_r), out_w = std::move(stdio->out_w);
  UniqueFd err_r = std::move(stdio->err_r), err_w = std::move(stdio->err_w);
  UniqueFd terminal = std::move(stdio->terminal);
  const int slave = command.terminal ? in_r.get() : -1;
  UniqueFd go_r, go_w, st_r, st_w;
  if (auto r = makePipe(go_r, go_w); !r) return tl::unexpected(r.error());
  if (auto r = makePipe(st_r, st_w); !r) return tl::unexpected(r.error());

  Prepared p{.effect_exec = {.argv = argv.data(),
                             .envp = envp.data(),
                             .cwd = prepared->working_directory.c_str(),
                             .stdin_fd = in_r.valid() ? in_r.get() : -1,
                             .stdout_fd = slave >= 0 ? slave : out_w.get(),
                             .stderr_fd = slave >= 0 ? slave : err_w.get(),
                             .seccomp = target.seccomp,
                             .uid = target.sandbox_uid,
                             .gid = target.sandbox_gid,
                             .die_with_parent = true,
                             .controlling_terminal = slave >= 0},
             .go_fd = go_r.get(),
             .status_fd = st_w.get(),
             .init_pidfd = target.init_pidfd};
  // _Fork: the service is multi-threaded; the child must take no lock that
  // another thread may hold (see init_process.cpp).
  pid_t helper = ::_Fork();
  if (helper < 0) return failErrno(ErrorCode::kExecutionUnavailable, "fork (side process)", errno);
  if (helper == 0) runHelper(p);

  in_r.reset();
  out_w.reset();
  err_w.reset();
  go_r.reset();
  st_w.reset();
  auto reapHelper = [helper] {
    ::kill(helper, SIGKILL);
    int st;
    while (::waitpid(helper, &st, 0) < 0 && errno == EINTR) {
    }
  };
  if (auto added = target.cgroup->addCommandProcess(helper); !added) {
    reapHelper();
    return tl::unexpected(added.error());
  }
  const char go = 1;
  if (!sys::writeAll(go_w.get(), &go, 1)) {
    reapHelper();
    return failErrno(ErrorCode::kExecutionUnavailable, "start side process", errno);
  }

  StatusRecord first{};
  pollfd pfd{st_r.get(), POLLIN, 0};
  int rc;
  do {
    rc = ::poll(&pfd, 1, 10000);
  } while (rc < 0 && errno == EINTR);
  ssize_t n = rc > 0 ? sys::readFull(st_r.get(), &first, sizeof first) : -1;
  if (n != static_cast<ssize_t>(sizeof first) || first.kind != StatusRecord::kStarted) {
    reapHelper();
    if (n == static_cast<ssize_t>(sizeof first) && first.kind == StatusRecord::kFailed) {
      const int step = first.step;
      const char* what = step > 0 && step < 4 ? kStepNames[step] : "start";
      if (step == 3 && first.value == EAGAIN)
        return fail(
            ErrorCode::kExecutionUnavailable,
            "the side process could not be started: the sandbox's process limit is reached");
      return failErrno(ErrorCode::kExecutionUnavailable, std::string("side process: ") + what,
                       first.value);
    }
    return fail(ErrorCode::kExecutionUnavailable, "side process: the helper did not start");
  }
  // The helper does not reap the effect until this answer: the pidfd is
  // the effect's own (see killGroup).
  UniqueFd effect_pidfd(
      static_cast<int>(::syscall(SYS_pidfd_open, static_cast<pid_t>(first.value), 0)));
  const int open_errno = errno;
  const bool acked = sys::writeAll(go_w.get(), &go, 1);
  go_w.reset();
  if (!effect_pidfd.valid() || !acked) {
    reapHelper();
    return failErrno(ErrorCode::kExecutionUnavailable, "side process: pidfd_open",
                     effect_pidfd.valid() ? EPIPE : open_errno);
  }
  ::fcntl(st_r.get(), F_SETFL, O_NONBLOCK);
  return std::unique_ptr<SideProcess>(std::make_unique<LinuxSideProcess>(
      helper, static_cast<pid_t>(first.value), std::move(effect_pidfd), std::move(in_w),
      std::move(out_r), std::move(err_r), std::move(st_r), std::move(terminal)));
}

namespace {
void removeTreeAt(int parent, const char* name, int depth) noexcept {
  if (::unlinkat(parent, name, 0) == 0 || errno == ENOENT) return;
  if (errno != EISDIR && errno != EPERM) return;
  int fd = ::openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  if (depth < 8) {
    if (DIR* d = ::fdopendir(::dup(fd))) {
      std::vector<std::string> names;
      while (dirent* e = ::readdir(d)) {
        if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
          names.emplace_back(e->d_name);
      }
      ::closedir(d);
      for (const auto& n : names) removeTreeAt(fd, n.c_str(), depth + 1);
    }
  }
  ::close(fd);
  ::unlinkat(parent, name, AT_REMOVEDIR);
}
}  // namespace

void removeCapabilityDirectory(const std::string& path) noexcept {
  try {
    removeTreeAt(AT_FDCWD, path.c_str(), 0);
  } catch (...) {
  }
}

}  // namespace airlock::linux_jail
