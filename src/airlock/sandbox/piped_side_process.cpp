#include "airlock/sandbox/piped_side_process.h"

#include <fcntl.h>
#include <poll.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "airlock/core/command_validation.h"
#include "airlock/core/environment_tiers.h"
#include "airlock/sys/io.h"

namespace airlock {
namespace {

using Clock = SidePumpHooks::Clock;

// The poll's timeout until `wake` (none: a minute, then look again).
int waitMs(std::optional<Clock::time_point> wake) {
  if (!wake) return 60000;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*wake - Clock::now());
  return static_cast<int>(std::clamp<long long>(left.count() + 1, 0, 60000));
}

std::optional<Clock::time_point> earliest(std::optional<Clock::time_point> a,
                                          std::optional<Clock::time_point> b) {
  if (!a) return b;
  if (!b) return a;
  return std::min(*a, *b);
}

}  // namespace

Result<PreparedSideCommand> prepareSideCommand(
    const std::map<std::string, std::string>& sandbox_environment, const SideCommand& command) {
  if (command.argv.empty() || command.argv[0].empty())
    return fail(ErrorCode::kToolValidationError, "argv must name a program");
  for (const auto& a : command.argv)
    if (a.find('\0') != std::string::npos)
      return fail(ErrorCode::kToolValidationError, "argv must not contain NUL bytes");
  auto cwd = checkRelativePath(command.working_directory);
  if (!cwd) return fail(ErrorCode::kToolValidationError, cwd.error().context);
  std::map<std::string, std::string> env = sandbox_environment;
  for (const auto& [k, v] : command.env_additions) {
    if (!isValidEnvName(k) || v.find('\0') != std::string::npos)
      return fail(ErrorCode::kToolValidationError, "invalid environment variable " + k);
    env[k] = v;
  }
  env["PWD"] = cwd->empty() ? std::string("/workspace") : "/workspace/" + *cwd;
  PreparedSideCommand prepared;
  prepared.working_directory = std::move(*cwd);
  prepared.env.reserve(env.size());
  for (const auto& [k, v] : env) prepared.env.push_back(k + "=" + v);
  return prepared;
}

Result<void> makePipe(sys::UniqueFd& read_end, sys::UniqueFd& write_end) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return failErrno(ErrorCode::kExecutionUnavailable, "pipe", errno);
  read_end.reset(p[0]);
  write_end.reset(p[1]);
  return {};
}

Result<SidePipes> makeSidePipes(bool with_stdin) {
  SidePipes pipes;
  if (with_stdin)
    if (auto r = makePipe(pipes.stdin_read, pipes.stdin_write); !r)
      return tl::unexpected(r.error());
  if (auto r = makePipe(pipes.stdout_read, pipes.stdout_write); !r)
    return tl::unexpected(r.error());
  if (auto r = makePipe(pipes.stderr_read, pipes.stderr_write); !r)
    return tl::unexpected(r.error());
  return pipes;
}

PipedSideProcess::PipedSideProcess(sys::UniqueFd stdin_write, sys::UniqueFd stdout_read,
                                   sys::UniqueFd stderr_read, StdinEnd stdin_end) noexcept
    : stdin_(std::move(stdin_write)),
      stdout_(std::move(stdout_read)),
      stderr_(std::move(stderr_read)),
      stdin_end_(stdin_end) {
  for (const sys::UniqueFd* fd : {&stdin_, &stdout_, &stderr_})
    if (fd->valid()) ::fcntl(fd->get(), F_SETFL, O_NONBLOCK);
}

void PipedSideProcess::closeStdin() noexcept {
  if (stdin_end_ == StdinEnd::kPipe || !stdin_.valid()) {
    stdin_.reset();
    return;
  }
  char eof = '\x04';
  termios settings{};
  if (::tcgetattr(stdin_.get(), &settings) == 0 && settings.c_cc[VEOF] != _POSIX_VDISABLE)
    eof = static_cast<char>(settings.c_cc[VEOF]);
  if (sys::writeSome(stdin_.get(), &eof, 1) < 0 && errno != EAGAIN) stdin_.reset();
}

SidePumpOutcome PipedSideProcess::pump(const SidePumpHooks& hooks) {
  SidePumpOutcome outcome;
  bool out_eof = stdoutFd() < 0, err_eof = stderrFd() < 0;
  bool deadline_passed = false;
  std::optional<Clock::time_point> drain_until;
  std::size_t stdin_off = 0;
  bool stdin_fed = false;
  const bool feeds_stdin = hooks.stdin_data.has_value();
  char buf[65536];
  auto endStream = [&](bool is_out) {
    bool& eof = is_out ? out_eof : err_eof;
    if (eof) return;
    eof = true;
    if (hooks.output_ended) hooks.output_ended(is_out);
    if (out_eof && err_eof) closeOutput();
  };
  for (;;) {
    if (outcome.wait_status && out_eof && err_eof) return outcome;
    const auto now = Clock::now();
    if (!deadline_passed && hooks.deadline && now >= *hooks.deadline) {
      killGroup();
      deadline_passed = true;
      outcome.end = SidePumpEnd::kDeadline;
      if (!hooks.continue_after_deadline) return outcome;
    }
    if (outcome.wait_status && !drain_until) {
      // Nothing left in the main process's group outlives it; what escaped
      // the group may still hold the pipes: they are drained briefly.
      killGroup();
      drain_until = now + kSideDrain;
    }
    if (drain_until && now >= *drain_until) {
      endStream(true);
      endStream(false);
      continue;
    }
    pollfd fds[5];
    nfds_t n = 0;
    int i_out = -1, i_err = -1, i_in = -1, i_exit = -1, i_stop = -1;
    auto watch = [&](int fd, short events, int& index) {
      fds[n] = {fd, events, 0};
      index = static_cast<int>(n++);
    };
    if (!out_eof) watch(stdoutFd(), POLLIN, i_out);
    if (!err_eof) watch(stderrFd(), POLLIN, i_err);
    if (feeds_stdin && !stdin_fed && stdin_.get() >= 0) watch(stdin_.get(), POLLOUT, i_in);
    if (!outcome.wait_status) watch(exitFd(), POLLIN, i_exit);
    if (hooks.stop_fd >= 0) watch(hooks.stop_fd, POLLIN, i_stop);
    const int rc = sys::pollSome(
        fds, n, waitMs(earliest(drain_until, deadline_passed ? std::nullopt : hooks.deadline)));
    if (rc < 0) {
      killGroup();
      outcome.end = SidePumpEnd::kPollFailed;
      return outcome;
    }
    if (rc == 0) continue;  // a timeout or EINTR: look at the clock again
    if (i_stop >= 0 && (fds[i_stop].revents & POLLIN)) {
      killGroup();
      outcome.end = SidePumpEnd::kStopped;
      return outcome;
    }
    for (auto [index, is_out] : {std::pair{i_out, true}, std::pair{i_err, false}}) {
      if (index < 0 || !(fds[index].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t got = sys::readSome(is_out ? stdoutFd() : stderrFd(), buf, sizeof buf);
      if (got < 0 && errno == EAGAIN) continue;
      if (got <= 0) {
        endStream(is_out);
        continue;
      }
      hooks.output(is_out, std::string_view(buf, static_cast<std::size_t>(got)));
    }
    if (i_in >= 0 && (fds[i_in].revents & (POLLOUT | POLLERR | POLLHUP))) {
      const std::string_view data = *hooks.stdin_data;
      if (stdin_off < data.size()) {
        const ssize_t w = sys::writeSome(stdin_.get(), data.data() + stdin_off,
                                         std::min<std::size_t>(data.size() - stdin_off, 65536));
        if (w > 0)
          stdin_off += static_cast<std::size_t>(w);
        else if (w < 0 && errno != EAGAIN)
          stdin_.reset();
      }
      if (stdin_.get() >= 0 && stdin_off >= data.size()) {
        stdin_fed = true;  // a terminal's end stays open after its ^D
        closeStdin();
      }
    }
    if (i_exit >= 0 && (fds[i_exit].revents & (POLLIN | POLLHUP | POLLERR))) {
      if (auto status = exitStatus()) {
        outcome.wait_status = status;
        if (hooks.exited) hooks.exited(*status);
        if (feeds_stdin) stdin_.reset();
      }
    }
  }
}

SideInputEnd PipedSideProcess::writeStdin(std::string_view bytes, Clock::time_point deadline,
                                          int stop_fd) {
  std::size_t off = 0;
  while (off < bytes.size()) {
    if (!stdin_.valid()) return SideInputEnd::kClosed;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return SideInputEnd::kDeadline;
    pollfd fds[2] = {{stdin_.get(), POLLOUT, 0}, {stop_fd, POLLIN, 0}};
    const int rc = sys::pollSome(fds, stop_fd >= 0 ? 2 : 1,
                                 static_cast<int>(std::min<long long>(left.count() + 1, 60000)));
    if (rc < 0) return SideInputEnd::kDeadline;  // no way left to wait
    if (stop_fd >= 0 && (fds[1].revents & POLLIN)) return SideInputEnd::kStopped;
    if (rc == 0) continue;  // a timeout or EINTR: look at the clock again
    const ssize_t w = sys::writeSome(stdin_.get(), bytes.data() + off, bytes.size() - off);
    if (w < 0 && errno == EAGAIN) continue;
    if (w <= 0) {
      stdin_.reset();
      return SideInputEnd::kClosed;
    }
    off += static_cast<std::size_t>(w);
  }
  return SideInputEnd::kWritten;
}

}  // namespace airlock
