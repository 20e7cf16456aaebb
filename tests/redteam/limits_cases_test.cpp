// Red-team cases about limits and lifetimes, each named
// after its case: the limit holds and the result names the enforcer.
#include <gtest/gtest.h>

#include <cerrno>
#include <optional>
#include <sstream>
#include <thread>

#include "../sandbox/linux/linux_test_support.h"

namespace airlock::testing {
namespace {

class RedteamLimits : public SandboxTest {};

// B27: a command that sleeps or blocks instead of spinning is still bounded
// by the wall clock, not only by CPU time.
TEST_F(RedteamLimits, B27_SleepingIsBoundedByTheWallClock) {
  auto r = run(shell("echo waiting; sleep 600", 2));
  EXPECT_EQ(r.killed_by, KillReason::kTimeout);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.stdout_data, "waiting\n");
  EXPECT_LT(r.duration_ms, 10000);
  ASSERT_TRUE(r.cpu_time_ms.has_value());
  EXPECT_LT(*r.cpu_time_ms, 1000);
}

// B28: an out-of-memory kill is reported as MEMORY, also when the victim is
// a child and the parent shell survives it.
TEST_F(RedteamLimits, B28_OutOfMemoryIsReportedAsMemory) {
  reprovision([](ResourceLimits& l) { l.memory_bytes = 48 << 20; });
  auto r = run(shell("echo before; python3 -c 'b = b\"x\" * (400 << 20)'; echo survived"));
  EXPECT_EQ(r.killed_by, KillReason::kMemory) << r.stderr_data;
  EXPECT_FALSE(r.exit_code.has_value());
  EXPECT_EQ(r.stdout_data.rfind("before\n", 0), 0u);
}

// B30: /dev/shm and /tmp are tmpfs with their own size limits, charged to
// the sandbox: filling them is a kill, not growth on the host.
TEST_F(RedteamLimits, B30_DevShmCannotGetRoundTheLimits) {
  reprovision([](ResourceLimits& l) {
    l.workspace_bytes = 16 << 20;
    l.memory_bytes = 256 << 20;
  });
  auto r = run(shell("head -c 100M /dev/zero > /dev/shm/fill; sleep 30", 30));
  ASSERT_TRUE(r.killed_by.has_value()) << r.stderr_data;
  EXPECT_TRUE(*r.killed_by == KillReason::kDisk || *r.killed_by == KillReason::kMemory);
  auto df = run(shell("df -k /dev/shm | tail -1"));
  EXPECT_NE(df.stdout_data.find("16384"), std::string::npos) << df.stdout_data;
}

// B31: each of the case's three bombs (a shell function piping into itself
// in the background, a fork loop whose children pause, a thread bomb) meets
// pids.max: fork fails with EAGAIN inside, the run is reported as PIDS, and
// the sandbox is usable afterwards with its whole pids budget.
struct BombCase {
  const char* name;
  const char* script;
};
void PrintTo(const BombCase& c, std::ostream* os) {
  *os << c.name;
}
class RedteamForkBomb : public SandboxTest, public ::testing::WithParamInterface<BombCase> {};

TEST_P(RedteamForkBomb, B31_ForkBombIsReportedAsPids) {
  reprovision([](ResourceLimits& l) { l.pids_max = 64; });
  auto r = run(shell(GetParam().script, 30));
  EXPECT_EQ(r.killed_by, KillReason::kPids) << r.stderr_data.substr(0, 300);
  EXPECT_FALSE(r.exit_code.has_value());
  // Nothing of the bomb is left: 50 processes can be started again.
  auto again = run(shell("for i in $(seq 50); do sleep 30 >/dev/null 2>&1 & done; echo started"));
  EXPECT_EQ(again.stdout_data, "started\n") << again.stderr_data.substr(0, 300);
  EXPECT_FALSE(again.killed_by.has_value());
  EXPECT_EQ(again.stderr_data, "");
}

INSTANTIATE_TEST_SUITE_P(
    Bombs, RedteamForkBomb,
    ::testing::Values(
        BombCase{"ShellFunctionPipingIntoItself", "f(){ f | f & }; f"},
        BombCase{"ForkLoopWithPausingChildren",
                 "exec python3 -c 'import os, signal\n"
                 "while True:\n"
                 "    if os.fork() == 0:\n"
                 "        signal.pause()'"},
        BombCase{"ThreadBomb",
                 "exec python3 -c 'import threading, time\n"
                 "while True:\n"
                 "    threading.Thread(target=time.sleep, args=(300,), daemon=True).start()'"}),
    [](const ::testing::TestParamInfo<BombCase>& info) { return std::string(info.param.name); });

// B33: a command that makes small files until it cannot stops at the inode
// cap with ENOSPC and is reported as DISK; the snapshot and diff of 20,000
// new files finish and come back as a capped listing, and the next sandbox
// (and the host) can still create files.
TEST_F(RedteamLimits, B33_InodeExhaustionStopsAtTheCapAndTheDiffFinishes) {
  reprovision([](ResourceLimits& l) { l.inodes_max = 20000; });
  auto r =
      run(shell("exec python3 -c 'import os\n"
                "i = 0\n"
                "try:\n"
                "    while True:\n"
                "        open(\"f%d\" % i, \"w\").close()\n"
                "        i += 1\n"
                "except OSError as e:\n"
                "    print(e.errno, i)'",
                60));
  EXPECT_EQ(r.killed_by, KillReason::kDisk) << r.stderr_data;
  std::istringstream out(r.stdout_data);
  int err = 0;
  long made = 0;
  out >> err >> made;
  EXPECT_EQ(err, ENOSPC) << r.stdout_data;
  EXPECT_GT(made, 19000) << r.stdout_data;
  EXPECT_LT(made, 20000) << r.stdout_data;
  EXPECT_TRUE(r.files_changed_truncated);
  EXPECT_LE(static_cast<std::int64_t>(r.files_changed.size()), options_.files_changed_listing);
  EXPECT_FALSE(r.files_changed.empty());
  // Another sandbox is unaffected.
  auto other = env_->provision(linuxSpec(options_));
  ASSERT_TRUE(other) << other.error().message();
  auto o = env_->execute(*other, shell("touch a b c && ls | wc -l"));
  EXPECT_TRUE(env_->destroy(*other));
  ASSERT_TRUE(o) << o.error().message();
  EXPECT_EQ(o->stdout_data, "3\n") << o->stderr_data;
}

// B34: accounting does not carry from one command to the next.
TEST_F(RedteamLimits, B34_AccountingStartsFreshForEachCommand) {
  auto heavy =
      run(shell("python3 -c 'b = bytearray(150 << 20); b[::4096] = b\"x\" * len(b[::4096])'"));
  ASSERT_EQ(heavy.exit_code, 0) << heavy.stderr_data;
  ASSERT_TRUE(heavy.peak_memory_bytes.has_value());
  EXPECT_GE(*heavy.peak_memory_bytes, 150 << 20);
  auto light = run(shell("true"));
  ASSERT_TRUE(light.peak_memory_bytes.has_value());
  EXPECT_LT(*light.peak_memory_bytes, 32 << 20);
}

// B41: a sandbox that reaches expires_at while a command runs ends it with
// EXPIRED and is destroyed; later calls get a clear rejection.
TEST(RedteamLifetime, B41_ExpiryEndsTheCommandAndTheSandbox) {
  if (auto why = linuxJailUnavailable()) GTEST_SKIP() << *why;
  TempStateDir state;
  auto options = testOptions(state.path());
  options.service_hard_cap = std::chrono::seconds(2);
  auto env = linux_jail::createLinuxEnvironment(options);
  ASSERT_TRUE(env) << env.error().message();
  auto spec = linuxSpec(options);
  spec.limits.wall_clock_seconds = 1;  // within the 2 s cap
  auto h = (*env)->provision(spec);
  ASSERT_TRUE(h) << h.error().message();
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::seconds>(h->expires_at - h->created_at).count(),
            2);
  // One command that uses its second, then one that outlives the sandbox.
  auto first = (*env)->execute(*h, shell("sleep 5", 1));
  ASSERT_TRUE(first) << first.error().message();
  EXPECT_EQ(first->killed_by, KillReason::kTimeout);
  auto second = (*env)->execute(*h, shell("echo late; sleep 5", 1));
  if (second) {
    EXPECT_TRUE(second->killed_by == KillReason::kExpired ||
                second->killed_by == KillReason::kTimeout);
  }
  // Past expires_at the sandbox is gone and says so.
  while (std::chrono::system_clock::now() < h->expires_at) {
    auto r = (*env)->execute(*h, shell("sleep 5", 1));
    if (!r) break;
  }
  auto after = (*env)->execute(*h, shell("true"));
  ASSERT_FALSE(after);
  EXPECT_EQ(after.error().code, ErrorCode::kEnvironmentGone);
  EXPECT_NE(after.error().context.find("expired"), std::string::npos) << after.error().context;
  EXPECT_TRUE((*env)->destroy(*h));
}

}  // namespace
}  // namespace airlock::testing

namespace airlock::testing {
namespace {

// SERVICE_SHUTDOWN: a command running when the service stops ends with that
// reason and its partial output; afterwards nothing new starts.
TEST_F(RedteamLimits, ServiceShutdownEndsTheRunningCommand) {
  std::optional<Result<ExecutionResult>> result;
  std::thread runner([&] {
    result = env_->execute(handle_, shell("echo partial; echo started > ready; sleep 60", 120));
  });
  // Wait (bounded) until the command has visibly started, then stop.
  auto ws = env_->workspace(handle_);
  ASSERT_TRUE(ws);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!(*ws)->read("ready") && std::chrono::steady_clock::now() < until)
    std::this_thread::yield();
  env_->shutdown();
  runner.join();
  ASSERT_TRUE(result.has_value());
  ASSERT_TRUE(*result) << (*result).error().message();
  EXPECT_EQ((*result)->killed_by, KillReason::kServiceShutdown);
  EXPECT_FALSE((*result)->exit_code.has_value());
  EXPECT_EQ((*result)->stdout_data, "partial\n");
  auto refused = env_->execute(handle_, shell("true"));
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kExecutionUnavailable);
}

}  // namespace
}  // namespace airlock::testing
