#include "airlock/sandbox/side_process_pump.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>

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

SidePumpOutcome pumpSideProcess(SideProcess& p, const SidePumpHooks& hooks) {
  SidePumpOutcome outcome;
  bool out_eof = p.stdoutFd() < 0, err_eof = p.stderrFd() < 0;
  bool deadline_passed = false;
  std::optional<Clock::time_point> drain_until;
  std::size_t stdin_off = 0;
  const bool feeds_stdin = hooks.stdin_data.has_value();
  char buf[65536];
  auto endStream = [&](bool is_out) {
    bool& eof = is_out ? out_eof : err_eof;
    if (eof) return;
    eof = true;
    if (hooks.output_ended) hooks.output_ended(is_out);
    if (out_eof && err_eof) p.closeOutput();
  };
  for (;;) {
    if (outcome.wait_status && out_eof && err_eof) return outcome;
    const auto now = Clock::now();
    if (!deadline_passed && hooks.deadline && now >= *hooks.deadline) {
      p.killGroup();
      deadline_passed = true;
      outcome.end = SidePumpEnd::kDeadline;
      if (!hooks.continue_after_deadline) return outcome;
    }
    if (outcome.wait_status && !drain_until) {
      // Nothing left in the main process's group outlives it; what escaped
      // the group may still hold the pipes: they are drained briefly.
      p.killGroup();
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
    if (!out_eof) watch(p.stdoutFd(), POLLIN, i_out);
    if (!err_eof) watch(p.stderrFd(), POLLIN, i_err);
    if (feeds_stdin && p.stdinFd() >= 0) watch(p.stdinFd(), POLLOUT, i_in);
    if (!outcome.wait_status) watch(p.exitFd(), POLLIN, i_exit);
    if (hooks.stop_fd >= 0) watch(hooks.stop_fd, POLLIN, i_stop);
    const int rc = sys::pollSome(
        fds, n, waitMs(earliest(drain_until, deadline_passed ? std::nullopt : hooks.deadline)));
    if (rc < 0) {
      p.killGroup();
      outcome.end = SidePumpEnd::kPollFailed;
      return outcome;
    }
    if (rc == 0) continue;  // a timeout or EINTR: look at the clock again
    if (i_stop >= 0 && (fds[i_stop].revents & POLLIN)) {
      p.killGroup();
      outcome.end = SidePumpEnd::kStopped;
      return outcome;
    }
    for (auto [index, is_out] : {std::pair{i_out, true}, std::pair{i_err, false}}) {
      if (index < 0 || !(fds[index].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t got = sys::readSome(is_out ? p.stdoutFd() : p.stderrFd(), buf, sizeof buf);
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
        const ssize_t w = sys::writeSome(p.stdinFd(), data.data() + stdin_off,
                                         std::min<std::size_t>(data.size() - stdin_off, 65536));
        if (w > 0)
          stdin_off += static_cast<std::size_t>(w);
        else if (w < 0 && errno != EAGAIN)
          p.closeStdin();
      }
      if (p.stdinFd() >= 0 && stdin_off >= data.size()) p.closeStdin();
    }
    if (i_exit >= 0 && (fds[i_exit].revents & (POLLIN | POLLHUP | POLLERR))) {
      if (auto status = p.exitStatus()) {
        outcome.wait_status = status;
        if (hooks.exited) hooks.exited(*status);
        if (feeds_stdin) p.closeStdin();
      }
    }
  }
}

}  // namespace airlock
