// Red-team regression: output floods and unread stdin cannot hurt the
// service (red-team cases B35 output flood, B36 exact cap and consistent kill
// reason, B38 open stdin), and a cancel of a command that ignores every
// catchable signal still ends it (B40 c).
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "../sandbox/linux/linux_test_support.h"
#include "airlock/port/cancel_token.h"

namespace airlock::testing {
namespace {

class RedteamOutputStdinTest : public SandboxTest {};

// B35: eight threads flooding stdout and stderr at once. The command is
// killed as OUTPUT_LIMIT promptly, and stdout + stderr hold exactly the cap.
TEST_F(RedteamOutputStdinTest, B35_ConcurrentFloodOnBothStreamsStopsExactlyAtTheCap) {
  ExecutionCommand c;
  c.argv = {
      "python3", "-c",
      "import os, threading, time\n"
      "def w(fd):\n"
      "    b = b'y' * 65536\n"
      "    while True: os.write(fd, b)\n"
      "for i in range(8): threading.Thread(target=w, args=(1 + i % 2,), daemon=True).start()\n"
      "time.sleep(600)\n"};
  c.timeout_seconds = 120;
  c.maximum_output_bytes = 1 << 20;
  auto r = run(c);
  EXPECT_EQ(r.killed_by, KillReason::kOutputLimit);
  EXPECT_FALSE(r.exit_code.has_value());
  EXPECT_EQ(r.stdout_data.size() + r.stderr_data.size(), std::size_t{1} << 20)
      << "overrun or short capture";
  EXPECT_TRUE(r.stdout_truncated || r.stderr_truncated);
  EXPECT_LT(r.duration_ms, 20000) << "the flood was not stopped promptly";
}

// B36: one byte over the cap trips it, every time, with the same reason.
TEST_F(RedteamOutputStdinTest, B36_OneByteOverTheCapTripsItConsistently) {
  for (int i = 0; i < 5; ++i) {
    auto c = shell("head -c 4097 /dev/zero");
    c.maximum_output_bytes = 4096;
    auto r = run(c);
    EXPECT_EQ(r.killed_by, KillReason::kOutputLimit) << "run " << i;
    EXPECT_EQ(r.stdout_data.size(), 4096u) << "run " << i;
    EXPECT_TRUE(r.stdout_truncated) << "run " << i;
  }
}

// B38: with stdin the command never reads, the service neither blocks nor
// waits for the timeout; a reader gets every byte.
TEST_F(RedteamOutputStdinTest, B38_UnreadStdinNeverBlocksAndReadStdinIsExact) {
  auto sleeper = shell("sleep 1; exit 0", 60);
  sleeper.stdin_data = std::string(32u << 20, 'z');
  auto started = std::chrono::steady_clock::now();
  auto r = run(sleeper);
  auto took = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_FALSE(r.killed_by.has_value());
  EXPECT_LT(took, std::chrono::seconds(10));

  auto counter = shell("wc -c", 60);
  counter.stdin_data = std::string(32u << 20, 'z');
  EXPECT_EQ(run(counter).stdout_data, std::to_string(32u << 20) + "\n");

  // No stdin: tools that read it see end-of-file at once.
  ExecutionCommand py;
  py.argv = {"python3", "-c", "import sys; print(len(sys.stdin.read()))"};
  py.timeout_seconds = 30;
  py.maximum_output_bytes = 1024;
  auto e = run(py);
  EXPECT_EQ(e.stdout_data, "0\n");
  EXPECT_FALSE(e.killed_by.has_value());
}

// B40 (c): cancel while the command and its children ignore every catchable
// signal: the command still ends, as CANCELLED, well inside the grace period.
TEST_F(RedteamOutputStdinTest, B40_CancelEndsACommandThatIgnoresSignals) {
  auto token = CancelToken::create();
  ASSERT_TRUE(token);
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(800));
    token->cancel();
  });
  auto c = shell(
      "trap '' HUP INT TERM QUIT USR1 USR2; (trap '' HUP INT TERM; while :; do :; done) & "
      "while :; do :; done",
      120);
  c.argv.push_back("rt-cancel-marker");  // $0 of the shell and its subshell
  auto r = run(c, &*token);
  canceller.join();
  EXPECT_EQ(r.killed_by, KillReason::kCancelled);
  EXPECT_LT(r.duration_ms, 6000);
  ExecutionCommand ps;
  ps.argv = {
      "python3", "-c",
      "import os\n"
      "m = 'rt-cancel-' + 'marker'\n"
      "print(sum(1 for p in os.listdir('/proc') if p.isdigit() and p != str(os.getpid()) and\n"
      "          m.encode() in open('/proc/%s/cmdline' % p, 'rb').read()))\n"};
  ps.timeout_seconds = 30;
  ps.maximum_output_bytes = 1024;
  EXPECT_EQ(run(ps).stdout_data, "0\n") << "a process of the cancelled command survived";
}

}  // namespace
}  // namespace airlock::testing
