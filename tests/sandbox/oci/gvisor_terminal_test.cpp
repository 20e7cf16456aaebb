// Side processes on a pseudo-terminal on the real gvisor mechanism
// (SideCommand::terminal, SideProcess::resizeTerminal; the keeper's relay in
// gvisor_shim.cpp): an interactive shell answers typed input and sees its
// size change, every stream is the terminal, the end-of-file character is
// typed once, output the terminal still holds after the exit arrives whole,
// a kill ends the whole session and leaves nothing, and a process without a
// terminal refuses a resize. Needs root and runsc (skipped otherwise).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "gvisor_fixture.h"

namespace airlock::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A side process pumped on a thread of its own, its output collected, so a
// test can type into it and wait (with a deadline) for what comes back.
class PumpedProcess {
 public:
  explicit PumpedProcess(std::unique_ptr<SideProcess> process) : process_(std::move(process)) {
    pumping_ = std::thread([this] {
      SidePumpHooks hooks;
      hooks.output = [this](bool is_stdout, std::string_view chunk) {
        std::lock_guard lk(mu_);
        (is_stdout ? stdout_ : stderr_).append(chunk);
        changed_.notify_all();
      };
      hooks.exited = [this](int) {
        std::lock_guard lk(mu_);
        exited_at_ = Clock::now();
      };
      hooks.output_ended = [this](bool is_stdout) {
        std::lock_guard lk(mu_);
        if (is_stdout) stdout_ended_at_ = Clock::now();
      };
      hooks.deadline = Clock::now() + 120s;
      const SidePumpOutcome outcome = process_->pump(hooks);
      std::lock_guard lk(mu_);
      outcome_ = outcome;
      changed_.notify_all();
    });
  }
  ~PumpedProcess() {
    process_->killGroup();
    pumping_.join();
  }
  PumpedProcess(const PumpedProcess&) = delete;
  PumpedProcess& operator=(const PumpedProcess&) = delete;

  SideProcess& process() { return *process_; }

  // Waits until stdout holds `text` at or after `from`; the offset just past
  // it, or nullopt at the deadline.
  std::optional<std::size_t> waitFor(const std::string& text, std::size_t from = 0) {
    std::unique_lock lk(mu_);
    std::size_t at = std::string::npos;
    changed_.wait_for(lk, 60s, [&] {
      at = stdout_.size() > from ? stdout_.find(text, from) : std::string::npos;
      return at != std::string::npos;
    });
    if (at == std::string::npos) return std::nullopt;
    return at + text.size();
  }
  // Waits for the pump to return.
  std::optional<SidePumpOutcome> waitEnd() {
    std::unique_lock lk(mu_);
    changed_.wait_for(lk, 60s, [&] { return outcome_.has_value(); });
    return outcome_;
  }
  std::string out() {
    std::lock_guard lk(mu_);
    return stdout_;
  }
  std::string err() {
    std::lock_guard lk(mu_);
    return stderr_;
  }
  // From the process's exit to its stdout's end (end-of-file, or the pump's
  // cut after kSideDrain), once both were seen.
  std::optional<Clock::duration> exitToStdoutEnd() {
    std::lock_guard lk(mu_);
    if (!exited_at_ || !stdout_ended_at_) return std::nullopt;
    return *stdout_ended_at_ - *exited_at_;
  }
  // Types `text` (the terminal's input).
  void type(const std::string& text) {
    EXPECT_EQ(process_->writeStdin(text, Clock::now() + 30s, -1), SideInputEnd::kWritten) << text;
  }

 private:
  std::unique_ptr<SideProcess> process_;
  std::thread pumping_;
  std::mutex mu_;
  std::condition_variable changed_;
  std::string stdout_, stderr_;
  std::optional<SidePumpOutcome> outcome_;
  std::optional<Clock::time_point> exited_at_, stdout_ended_at_;
};

class GvisorTerminalTest : public GvisorFixture {
 protected:
  std::unique_ptr<PumpedProcess> startOnTerminal(std::vector<std::string> argv,
                                                 TerminalSize size = {24, 80}) {
    SideCommand command;
    command.argv = std::move(argv);
    command.terminal = size;
    auto started = env_->startSideProcess(handle_, command);
    EXPECT_TRUE(started) << started.error().message();
    if (!started) return nullptr;
    return std::make_unique<PumpedProcess>(std::move(*started));
  }
  // Runs `script` as a command until it prints `expected` or 30 s pass;
  // what it printed last.
  std::string commandUntil(const std::string& script, const std::string& expected) {
    const auto deadline = Clock::now() + 30s;
    std::string last;
    while (Clock::now() < deadline) {
      auto r = env_->execute(handle_, shell(script));
      EXPECT_TRUE(r) << r.error().message();
      if (!r) return last;
      last = r->stdout_data;
      if (last == expected) break;
    }
    return last;
  }
};

TEST_F(GvisorTerminalTest, AnInteractiveShellAnswersTypedInputAndSeesItsSizeChange) {
  auto sh = startOnTerminal({"sh", "-i"}, {31, 97});
  ASSERT_TRUE(sh);
  // One long-lived shell, asked twice: its size at the start, then after a
  // resize, which it also hears as SIGWINCH. The typed lines come back
  // echoed; each awaited answer is text the typed line does not contain.
  sh->type("trap 'echo got-sig$((10+18))' WINCH\n");
  sh->type("echo $((6*7))0; stty size\n");
  auto at = sh->waitFor("420\r\n31 97\r\n");
  ASSERT_TRUE(at) << "the typed line was answered with the start size: " << sh->out();

  ASSERT_TRUE(sh->process().resizeTerminal({40, 120}));
  // The shell runs its trap when it next looks (at the latest after the
  // next line).
  sh->type("stty size\n");
  EXPECT_TRUE(sh->waitFor("40 120\r\n", *at)) << "the new size: " << sh->out();
  EXPECT_TRUE(sh->waitFor("got-sig28", *at))
      << "the resize reached the shell as SIGWINCH: " << sh->out();

  sh->type("exit 3\n");
  auto end = sh->waitEnd();
  ASSERT_TRUE(end) << "the shell ended: " << sh->out();
  EXPECT_EQ(end->end, SidePumpEnd::kFinished);
  ASSERT_TRUE(end->wait_status);
  EXPECT_TRUE(WIFEXITED(*end->wait_status) && WEXITSTATUS(*end->wait_status) == 3)
      << *end->wait_status;
  EXPECT_EQ(sh->err(), "") << "a terminal has one output";
  // Exited: the terminal is gone.
  auto late = sh->process().resizeTerminal({10, 10});
  ASSERT_FALSE(late);
  EXPECT_EQ(late.error().code, ErrorCode::kExecutionRejected);
}

TEST_F(GvisorTerminalTest, EveryStreamIsTheTerminalAndItControlsTheSession) {
  // isatty on 0, 1 and 2; the process leads its session and its group is
  // the terminal's foreground; the terminal is the sandbox user's; what it
  // writes to stderr arrives as stdout, with the terminal's "\r\n".
  auto p = startOnTerminal(
      {"python3", "-c",
       "import os, sys\n"
       "print('ttys', os.isatty(0), os.isatty(1), os.isatty(2))\n"
       "print('leader', os.getsid(0) == os.getpid(), os.tcgetpgrp(0) == os.getpgrp())\n"
       "print('owner', os.fstat(0).st_uid, os.getuid())\n"
       "print('to-stderr', file=sys.stderr)\n"});
  ASSERT_TRUE(p);
  auto end = p->waitEnd();
  ASSERT_TRUE(end);
  EXPECT_EQ(end->wait_status, std::optional<int>(0)) << p->out();
  EXPECT_EQ(p->out(),
            "ttys True True True\r\nleader True True\r\nowner 1000 1000\r\nto-stderr\r\n");
  EXPECT_EQ(p->err(), "");
}

TEST_F(GvisorTerminalTest, CloseStdinTypesTheEndOfFileCharacterOnce) {
  // A raw-mode reader sees what was typed, then the end-of-file character
  // (^D, 0x04) once; nothing else follows (head would wait for a third
  // byte until the deadline).
  auto p = startOnTerminal(
      {"sh", "-c", "stty raw -echo && echo ready && head -c 2 | od -An -tx1 && echo done"});
  ASSERT_TRUE(p);
  ASSERT_TRUE(p->waitFor("ready")) << p->out();
  p->type("x");
  p->process().closeStdin();
  EXPECT_FALSE(p->process().stdinOpen());
  auto end = p->waitEnd();
  ASSERT_TRUE(end);
  EXPECT_EQ(end->wait_status, std::optional<int>(0)) << p->out();
  // raw: no "\r" is added to the output either.
  EXPECT_NE(p->out().find(" 78 04\ndone\n"), std::string::npos) << p->out();
}

TEST_F(GvisorTerminalTest, PythonInteractiveTakesInputAndEndsAtTheEndOfFileCharacter) {
  // The PTY job: `python3 -i` prompts, evaluates what is typed, and
  // its line editor ends the session at ^D.
  auto py = startOnTerminal({"python3", "-q", "-i"});
  ASSERT_TRUE(py);
  auto at = py->waitFor(">>> ");
  ASSERT_TRUE(at) << py->out();
  py->type("6 * 7 + 1000\n");
  ASSERT_TRUE(py->waitFor("1042", *at)) << py->out();
  py->process().closeStdin();
  auto end = py->waitEnd();
  ASSERT_TRUE(end);
  EXPECT_EQ(end->end, SidePumpEnd::kFinished);
  EXPECT_EQ(end->wait_status, std::optional<int>(0)) << py->out();
}

TEST_F(GvisorTerminalTest, OutputTheTerminalHoldsAtTheExitArrivesWhole) {
  // More than the keeper's buffers and the terminal's queue hold, written
  // just before the process exits: the keeper relays it all after the exit.
  auto p = startOnTerminal({"sh", "-c", "head -c 300000 /dev/zero | tr '\\0' a; echo; echo end"});
  ASSERT_TRUE(p);
  auto end = p->waitEnd();
  ASSERT_TRUE(end);
  EXPECT_EQ(end->wait_status, std::optional<int>(0));
  EXPECT_EQ(p->out(), std::string(300000, 'a') + "\r\nend\r\n");
  // The keeper ended stdout once the terminal was read dry (this gVisor
  // never says so on the master), not the pump's cut after kSideDrain.
  auto took = p->exitToStdoutEnd();
  ASSERT_TRUE(took);
  EXPECT_LT(*took, kSideDrain) << "stdout was cut, not ended";
}

TEST_F(GvisorTerminalTest, KillGroupEndsTheWholeSessionAndLeavesNothing) {
  auto sh = startOnTerminal({"sh", "-i"});
  ASSERT_TRUE(sh);
  // A background job: with job control on, it has a process group of its
  // own in the terminal's session.
  sh->type("sleep 1000 & echo job-$((1+1))\n");
  ASSERT_TRUE(sh->waitFor("job-2")) << sh->out();
  // The sandbox's processes outside this command's session, but pid 1: the
  // keeper (a fork of the shim), the shell and its job.
  const std::string others =
      "python3 -c \"import os\n"
      "def stat(p):\n"
      "  try:\n"
      "    with open(f'/proc/{p}/stat') as f: s = f.read()\n"
      "  except OSError: return None\n"
      "  return s[s.index('(') + 1:s.rindex(')')], s[s.rindex(')') + 2:].split()\n"
      "me = stat(os.getpid())[1][3]\n"
      "found = [stat(p) for p in os.listdir('/proc') if p.isdigit() and p != '1']\n"
      "print(sorted(c for c, f in filter(None, found) if f[3] != me and f[0] != 'Z'))\"";
  EXPECT_EQ(commandUntil(others, "['sh', 'shim', 'sleep']\n"), "['sh', 'shim', 'sleep']\n");

  sh->process().killGroup();
  sh->process().killGroup();  // idempotent
  auto end = sh->waitEnd();
  ASSERT_TRUE(end);
  ASSERT_TRUE(end->wait_status);
  EXPECT_TRUE(WIFSIGNALED(*end->wait_status) && WTERMSIG(*end->wait_status) == SIGKILL)
      << *end->wait_status;
  // Only pid 1 is left: no keeper, no shell, no job.
  EXPECT_EQ(commandUntil(others, "[]\n"), "[]\n");
  auto late = sh->process().resizeTerminal({10, 10});
  ASSERT_FALSE(late);
  EXPECT_EQ(late.error().code, ErrorCode::kExecutionRejected);
}

TEST_F(GvisorTerminalTest, SizesAreCheckedAndAProcessWithoutATerminalRefusesAResize) {
  SideCommand command;
  command.argv = {"true"};
  command.terminal = TerminalSize{0, 80};
  auto refused = env_->startSideProcess(handle_, command);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kToolValidationError);
  EXPECT_NE(refused.error().message().find("rows"), std::string::npos) << refused.error().message();

  // Pipes, as before: stdin is not a terminal and output keeps its "\n".
  SideCommand piped;
  piped.argv = {"sh", "-c", "test -t 0 || test -t 1 || echo no-tty"};
  auto started = env_->startSideProcess(handle_, piped);
  ASSERT_TRUE(started) << started.error().message();
  PumpedProcess p(std::move(*started));
  auto resize = p.process().resizeTerminal({24, 80});
  ASSERT_FALSE(resize);
  EXPECT_EQ(resize.error().code, ErrorCode::kToolValidationError);
  auto end = p.waitEnd();
  ASSERT_TRUE(end);
  EXPECT_EQ(end->wait_status, std::optional<int>(0));
  EXPECT_EQ(p.out(), "no-tty\n");

  auto sh = startOnTerminal({"sh", "-c", "cat"});
  ASSERT_TRUE(sh);
  auto too_wide = sh->process().resizeTerminal({24, kMaxTerminalCells + 1});
  ASSERT_FALSE(too_wide);
  EXPECT_EQ(too_wide.error().code, ErrorCode::kToolValidationError);
  EXPECT_NE(too_wide.error().message().find("columns"), std::string::npos)
      << too_wide.error().message();
}

}  // namespace
}  // namespace airlock::testing
