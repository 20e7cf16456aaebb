// PipedSideProcess's pump and writeStdin (piped_side_process.h) against a
// real host process: a /bin/sh child with the port's pipes, leading its own
// process group.
#include "airlock/sandbox/piped_side_process.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

extern char** environ;

namespace airlock {
namespace {

using Clock = SidePumpHooks::Clock;

// A host shell command as a SideProcess (the adapters' sandboxed ones have
// the same shape: pipes, an exit fd, a process group).
class HostShellProcess final : public PipedSideProcess {
 public:
  static std::unique_ptr<HostShellProcess> start(const std::string& script, bool with_stdin) {
    auto pipes = makeSidePipes(with_stdin);
    EXPECT_TRUE(pipes) << pipes.error().message();
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    if (with_stdin) posix_spawn_file_actions_adddup2(&actions, pipes->stdin_read.get(), 0);
    posix_spawn_file_actions_adddup2(&actions, pipes->stdout_write.get(), 1);
    posix_spawn_file_actions_adddup2(&actions, pipes->stderr_write.get(), 2);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
    const char* argv[] = {"/bin/sh", "-c", script.c_str(), nullptr};
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, "/bin/sh", &actions, &attr, const_cast<char**>(argv), environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    EXPECT_EQ(rc, 0);
    sys::UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
    EXPECT_TRUE(pidfd.valid());
    return std::unique_ptr<HostShellProcess>(
        new HostShellProcess(pid, std::move(pidfd), std::move(pipes->stdin_write),
                             std::move(pipes->stdout_read), std::move(pipes->stderr_read)));
  }
  ~HostShellProcess() override {
    killGroup();
    if (!status_) (void)::waitpid(pid_, nullptr, 0);
  }
  using PipedSideProcess::stdoutFd;
  int exitFd() const noexcept override { return pidfd_.get(); }
  std::optional<int> exitStatus() override {
    if (status_) return status_;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) status_ = status;
    return status_;
  }
  void killGroup() noexcept override {
    if (!status_) (void)::kill(-pid_, SIGKILL);
  }

 private:
  HostShellProcess(pid_t pid, sys::UniqueFd pidfd, sys::UniqueFd in, sys::UniqueFd out,
                   sys::UniqueFd err)
      : PipedSideProcess(std::move(in), std::move(out), std::move(err)),
        pid_(pid),
        pidfd_(std::move(pidfd)) {}
  pid_t pid_;
  sys::UniqueFd pidfd_;
  std::optional<int> status_;
};

struct Collected {
  std::string out, err;
  int ended = 0;
  std::optional<int> exited;
};

SidePumpHooks collectInto(Collected& c) {
  SidePumpHooks hooks;
  hooks.output = [&c](bool is_stdout, std::string_view chunk) {
    (is_stdout ? c.out : c.err).append(chunk);
  };
  hooks.output_ended = [&c](bool) { ++c.ended; };
  hooks.exited = [&c](int status) { c.exited = status; };
  return hooks;
}

TEST(PipedSideProcess, CollectsBothStreamsAndTheExitStatus) {
  auto p = HostShellProcess::start("printf out; printf err >&2; exit 3", false);
  Collected c;
  const auto outcome = p->pump(collectInto(c));
  EXPECT_EQ(outcome.end, SidePumpEnd::kFinished);
  ASSERT_TRUE(outcome.wait_status);
  EXPECT_TRUE(WIFEXITED(*outcome.wait_status));
  EXPECT_EQ(WEXITSTATUS(*outcome.wait_status), 3);
  EXPECT_EQ(c.exited, outcome.wait_status);
  EXPECT_EQ(c.out, "out");
  EXPECT_EQ(c.err, "err");
  EXPECT_EQ(c.ended, 2);
  EXPECT_EQ(p->stdoutFd(), -1) << "both read ends are closed at their end";
}

TEST(PipedSideProcess, FeedsStdinDataLargerThanAPipeThenClosesIt) {
  auto p = HostShellProcess::start("wc -c", true);
  const std::string input(300000, 'x');  // more than a pipe holds: fed as it drains
  Collected c;
  SidePumpHooks hooks = collectInto(c);
  hooks.stdin_data = input;
  const auto outcome = p->pump(hooks);
  EXPECT_EQ(outcome.end, SidePumpEnd::kFinished);
  EXPECT_EQ(std::stoul(c.out), input.size());
  EXPECT_FALSE(p->stdinOpen());
}

TEST(PipedSideProcess, AProcessThatEscapedTheGroupDoesNotHoldThePumpPastTheDrain) {
  // The escaped sleep keeps stdout open; its pid comes first on stdout.
  auto p = HostShellProcess::start("setsid sleep 60 & echo $!", false);
  Collected c;
  const auto before = Clock::now();
  const auto outcome = p->pump(collectInto(c));
  const auto took = Clock::now() - before;
  const pid_t escaped = static_cast<pid_t>(std::stol(c.out));
  (void)::kill(escaped, SIGKILL);
  EXPECT_EQ(outcome.end, SidePumpEnd::kFinished);
  EXPECT_GE(took, kSideDrain - std::chrono::milliseconds(50)) << "it waited for the drain";
  EXPECT_LT(took, kSideDrain + std::chrono::seconds(20)) << "and not for the escaped process";
  EXPECT_EQ(c.ended, 2);
}

TEST(PipedSideProcess, TheDeadlineKillsTheGroupAndEndsTheCallAtOnce) {
  auto p = HostShellProcess::start("echo started; sleep 60", false);
  Collected c;
  SidePumpHooks hooks = collectInto(c);
  hooks.deadline = Clock::now() + std::chrono::milliseconds(200);
  const auto outcome = p->pump(hooks);
  EXPECT_EQ(outcome.end, SidePumpEnd::kDeadline);
  EXPECT_FALSE(outcome.wait_status);
  // The group was killed: the process exits by SIGKILL.
  int status = 0;
  pollfd fd{p->exitFd(), POLLIN, 0};
  ASSERT_EQ(::poll(&fd, 1, 20000), 1);
  auto st = p->exitStatus();
  ASSERT_TRUE(st);
  status = *st;
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
}

TEST(PipedSideProcess, PastTheDeadlineItCanStillCollectTheKilledProcess) {
  auto p = HostShellProcess::start("echo started; sleep 60", false);
  Collected c;
  SidePumpHooks hooks = collectInto(c);
  hooks.deadline = Clock::now() + std::chrono::milliseconds(200);
  hooks.continue_after_deadline = true;
  const auto outcome = p->pump(hooks);
  EXPECT_EQ(outcome.end, SidePumpEnd::kDeadline);
  ASSERT_TRUE(outcome.wait_status);
  EXPECT_TRUE(WIFSIGNALED(*outcome.wait_status));
  EXPECT_EQ(WTERMSIG(*outcome.wait_status), SIGKILL);
  EXPECT_EQ(c.out, "started\n");
  EXPECT_EQ(c.ended, 2);
}

TEST(PipedSideProcess, AReadableStopFdEndsItAsStopped) {
  auto p = HostShellProcess::start("sleep 60", false);
  sys::UniqueFd stop(::eventfd(1, EFD_CLOEXEC));
  ASSERT_TRUE(stop.valid());
  Collected c;
  SidePumpHooks hooks = collectInto(c);
  hooks.stop_fd = stop.get();
  const auto outcome = p->pump(hooks);
  EXPECT_EQ(outcome.end, SidePumpEnd::kStopped);
  pollfd fd{p->exitFd(), POLLIN, 0};
  EXPECT_EQ(::poll(&fd, 1, 20000), 1) << "the stop killed the process group";
}

TEST(PipedSideProcess, WriteStdinDeliversInputWhileAnotherThreadPumps) {
  auto p = HostShellProcess::start("head -c 5; echo; cat >/dev/null; echo after", true);
  Collected c;
  std::thread pumping([&] {
    SidePumpHooks hooks = collectInto(c);
    hooks.deadline = Clock::now() + std::chrono::seconds(60);
    (void)p->pump(hooks);
  });
  EXPECT_EQ(p->writeStdin("hello, more", Clock::now() + std::chrono::seconds(30), -1),
            SideInputEnd::kWritten);
  p->closeStdin();
  EXPECT_FALSE(p->stdinOpen());
  EXPECT_EQ(p->writeStdin("x", Clock::now() + std::chrono::seconds(30), -1), SideInputEnd::kClosed);
  pumping.join();
  EXPECT_EQ(c.out, "hello\nafter\n");
  ASSERT_TRUE(c.exited);
  EXPECT_TRUE(WIFEXITED(*c.exited));
}

TEST(PipedSideProcess, WriteStdinStopsAtTheDeadlineOrTheStopFdWhenNobodyReads) {
  auto p = HostShellProcess::start("sleep 60", true);
  const std::string big(1 << 20, 'x');  // more than a pipe holds
  EXPECT_EQ(p->writeStdin(big, Clock::now() + std::chrono::milliseconds(200), -1),
            SideInputEnd::kDeadline);
  sys::UniqueFd stop(::eventfd(1, EFD_CLOEXEC));
  ASSERT_TRUE(stop.valid());
  EXPECT_EQ(p->writeStdin(big, Clock::now() + std::chrono::seconds(60), stop.get()),
            SideInputEnd::kStopped);
  EXPECT_TRUE(p->stdinOpen()) << "neither closes the input";
}

}  // namespace
}  // namespace airlock
