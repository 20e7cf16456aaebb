// Side processes on a pseudo-terminal (SideCommand::terminal) on the linux
// mechanism: an interactive shell runs what is typed, sees its terminal on
// 0, 1 and 2 and the size it was started with and resized to; closeStdin
// types ^D; bad sizes are refused naming the field; and the process cannot
// push bytes into its own terminal's input (TIOCSTI stays denied).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "linux_test_support.h"

namespace airlock::testing {
namespace {

using Clock = std::chrono::steady_clock;

// One side process and a thread pumping its output into `out`.
class TerminalSession {
 public:
  explicit TerminalSession(std::unique_ptr<SideProcess> proc) : proc_(std::move(proc)) {
    pump_ = std::thread([this] {
      SidePumpHooks hooks;
      hooks.output = [this](bool is_stdout, std::string_view chunk) {
        std::lock_guard lk(mu_);
        (is_stdout ? out_ : err_).append(chunk);
        cv_.notify_all();
      };
      hooks.exited = [this](int status) {
        std::lock_guard lk(mu_);
        status_ = status;
        cv_.notify_all();
      };
      (void)proc_->pump(hooks);
      std::lock_guard lk(mu_);
      pumped_ = true;
      cv_.notify_all();
    });
  }
  ~TerminalSession() {
    proc_->killGroup();
    if (pump_.joinable()) pump_.join();
  }
  SideProcess& proc() { return *proc_; }
  void type(std::string_view text) {
    ASSERT_EQ(proc_->writeStdin(text, Clock::now() + std::chrono::seconds(10), -1),
              SideInputEnd::kWritten);
  }
  // Waits (at most 30 s) until stdout after `from` holds `text`; returns
  // stdout from `from` on and moves `from` past the text.
  std::string waitFor(std::size_t& from, const std::string& text) {
    std::unique_lock lk(mu_);
    cv_.wait_until(lk, Clock::now() + std::chrono::seconds(30),
                   [&] { return out_.find(text, from) != std::string::npos || pumped_; });
    std::string seen = out_.substr(std::min(from, out_.size()));
    const auto at = out_.find(text, from);
    if (at != std::string::npos) from = at + text.size();
    return seen;
  }
  // Waits (at most 30 s) for the pump to finish: the wait status.
  std::optional<int> waitForExit() {
    std::unique_lock lk(mu_);
    cv_.wait_until(lk, Clock::now() + std::chrono::seconds(30), [&] { return pumped_; });
    return status_;
  }
  std::string err() {
    std::lock_guard lk(mu_);
    return err_;
  }

 private:
  std::unique_ptr<SideProcess> proc_;
  std::thread pump_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string out_, err_;
  std::optional<int> status_;
  bool pumped_ = false;
};

class LinuxTerminalTest : public SandboxTest {
 protected:
  std::unique_ptr<TerminalSession> start(std::vector<std::string> argv, TerminalSize size) {
    SideCommand side;
    side.argv = std::move(argv);
    side.terminal = size;
    auto started = env_->startSideProcess(handle_, side);
    EXPECT_TRUE(started) << started.error().message();
    if (!started) return nullptr;
    return std::make_unique<TerminalSession>(std::move(*started));
  }
};

TEST_F(LinuxTerminalTest, AnInteractiveShellRunsWhatIsTypedAndSeesItsSizeChange) {
  auto session = start({"sh", "-i"}, TerminalSize{24, 80});
  ASSERT_TRUE(session);
  std::size_t at = 0;
  session->type("for f in 0 1 2; do test -t $f && echo fd$f-tty; done; echo to-err >&2\n");
  const std::string ttys = session->waitFor(at, "to-err\r\n");
  EXPECT_NE(ttys.find("fd0-tty\r\n"), std::string::npos) << ttys;
  EXPECT_NE(ttys.find("fd1-tty\r\n"), std::string::npos) << ttys;
  EXPECT_NE(ttys.find("fd2-tty\r\n"), std::string::npos) << ttys;

  session->type("stty size\n");
  EXPECT_NE(session->waitFor(at, "24 80\r\n").find("24 80\r\n"), std::string::npos);
  auto resized = session->proc().resizeTerminal(TerminalSize{30, 100});
  ASSERT_TRUE(resized) << resized.error().message();
  session->type("stty size\n");
  EXPECT_NE(session->waitFor(at, "30 100\r\n").find("30 100\r\n"), std::string::npos);

  // A size out of range is refused naming the field, and changes nothing.
  auto zero = session->proc().resizeTerminal(TerminalSize{0, 100});
  ASSERT_FALSE(zero);
  EXPECT_EQ(zero.error().code, ErrorCode::kToolValidationError);
  EXPECT_NE(zero.error().context.find("rows"), std::string::npos) << zero.error().context;
  auto wide = session->proc().resizeTerminal(TerminalSize{30, 1001});
  ASSERT_FALSE(wide);
  EXPECT_NE(wide.error().context.find("columns"), std::string::npos) << wide.error().context;
  session->type("stty size\n");
  EXPECT_NE(session->waitFor(at, "30 100\r\n").find("30 100\r\n"), std::string::npos);

  // ^D at the prompt: the shell exits; the terminal's end stays open.
  session->proc().closeStdin();
  EXPECT_TRUE(session->proc().stdinOpen());
  auto status = session->waitForExit();
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status)) << *status;
  EXPECT_EQ(session->err(), "") << "a terminal has one output";
  auto late = session->proc().resizeTerminal(TerminalSize{10, 10});
  ASSERT_FALSE(late);
  EXPECT_EQ(late.error().code, ErrorCode::kExecutionRejected);
}

TEST_F(LinuxTerminalTest, CloseStdinTypesEndOfFileOnce) {
  auto session = start({"cat"}, TerminalSize{5, 20});
  ASSERT_TRUE(session);
  std::size_t at = 0;
  session->type("line\n");
  // The terminal's echo, then cat's copy.
  const std::string seen = session->waitFor(at, "line\r\nline\r\n");
  EXPECT_EQ(seen, "line\r\nline\r\n");
  session->proc().closeStdin();
  auto status = session->waitForExit();
  ASSERT_TRUE(status.has_value());
  ASSERT_TRUE(WIFEXITED(*status));
  EXPECT_EQ(WEXITSTATUS(*status), 0);
}

TEST_F(LinuxTerminalTest, BadSizesAndPipesAreRefusedNamingWhy) {
  SideCommand side;
  side.argv = {"true"};
  side.terminal = TerminalSize{0, 80};
  auto rows = env_->startSideProcess(handle_, side);
  ASSERT_FALSE(rows);
  EXPECT_EQ(rows.error().code, ErrorCode::kToolValidationError);
  EXPECT_NE(rows.error().context.find("rows must be 1 to 1000, not 0"), std::string::npos)
      << rows.error().context;
  side.terminal = TerminalSize{24, 1001};
  auto columns = env_->startSideProcess(handle_, side);
  ASSERT_FALSE(columns);
  EXPECT_NE(columns.error().context.find("columns must be 1 to 1000, not 1001"), std::string::npos)
      << columns.error().context;

  side.argv = {"sleep", "600"};
  side.terminal.reset();
  auto piped = env_->startSideProcess(handle_, side);
  ASSERT_TRUE(piped) << piped.error().message();
  auto refused = (*piped)->resizeTerminal(TerminalSize{24, 80});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kToolValidationError);
  EXPECT_NE(refused.error().context.find("not started with a terminal"), std::string::npos);
  (*piped)->killGroup();
}

// Adversarial: a process on a terminal tries to type into its own input
// with TIOCSTI (plainly, and with high bits set in the request, which the
// kernel ignores but a careless filter would compare), to have its shell or
// a later reader run what it planted. Both are refused, and the next line
// read is exactly what the test typed.
TEST_F(LinuxTerminalTest, APtyProcessCannotInjectIntoItsTerminalsInput) {
  const std::string script = R"(import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
TIOCSTI = 0x5412
results = []
for request in (TIOCSTI, TIOCSTI | (1 << 32)):
    c = ctypes.c_char(b"X")
    rc = libc.ioctl(0, ctypes.c_ulong(request), ctypes.byref(c))
    results.append("injected" if rc == 0 else "refused-%d" % ctypes.get_errno())
print("attempts:", " ".join(results), flush=True)
print("read:%r" % sys.stdin.readline(), flush=True)
)";
  auto session = start({"python3", "-c", script}, TerminalSize{24, 80});
  ASSERT_TRUE(session);
  std::size_t at = 0;
  const std::string attempts = session->waitFor(at, "\r\n");
  EXPECT_NE(attempts.find("attempts: refused-1 refused-1"), std::string::npos) << attempts;
  EXPECT_EQ(attempts.find("injected"), std::string::npos) << attempts;
  session->type("clean\n");
  const std::string read = session->waitFor(at, "read:'clean\\n'");
  EXPECT_NE(read.find("read:'clean\\n'"), std::string::npos) << read;
  EXPECT_EQ(read.find('X'), std::string::npos) << read;
  auto status = session->waitForExit();
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << *status;
}

}  // namespace
}  // namespace airlock::testing
