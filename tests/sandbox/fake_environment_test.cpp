// The fake adapter, beyond the contract suite: its command through the
// host layer's supervisor (the output cap split between the streams, the
// timeout minimum and expiry on simulated time), the disk limit, the
// listing cap, the workspace model and thread safety.
#include "airlock/sandbox/fake/fake_environment.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string_view>
#include <thread>

#include "airlock/core/limits_defaults.h"

namespace airlock::fake {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Optional;

EnvironmentSpec validSpec() {
  EnvironmentSpec spec;
  spec.tenant_id = "tenant-a";
  spec.run_id = "run-1";
  spec.lease_epoch = 1;
  spec.image_digest = kFakeImageDigest;
  spec.limits = defaultLimits();
  return spec;
}

template <class T>
std::optional<ErrorCode> codeOf(const Result<T>& result) {
  if (result) return std::nullopt;
  return result.error().code;
}

ExecutionCommand commandFor(std::vector<std::string> argv) {
  ExecutionCommand command;
  command.argv = std::move(argv);
  command.timeout_seconds = 30;
  command.maximum_output_bytes = 1 << 20;
  return command;
}

class FakeEnvironmentTest : public ::testing::Test {
 protected:
  EnvironmentHandle provision(const EnvironmentSpec& spec = validSpec()) {
    auto handle = env_.provision(spec);
    EXPECT_TRUE(handle.has_value()) << handle.error().message();
    return handle.value_or(EnvironmentHandle{});
  }
  ExecutionResult run(const EnvironmentHandle& handle, const ExecutionCommand& command) {
    auto result = env_.execute(handle, command);
    EXPECT_TRUE(result.has_value()) << result.error().message();
    return result.value_or(ExecutionResult{});
  }

  FakeEnvironment env_;
};

TEST_F(FakeEnvironmentTest, UnknownDigestIsRejectedNamingTheProblem) {
  EnvironmentSpec spec = validSpec();
  spec.image_digest = "sha256:" + std::string(64, '1');
  auto handle = env_.provision(spec);
  ASSERT_FALSE(handle.has_value());
  EXPECT_EQ(handle.error().code, ErrorCode::kExecutionRejected);
  EXPECT_THAT(handle.error().context, HasSubstr("unknown image digest"));
}

TEST_F(FakeEnvironmentTest, AZeroLimitIsRejected) {
  EnvironmentSpec spec = validSpec();
  spec.limits.memory_bytes = 0;
  auto handle = env_.provision(spec);
  ASSERT_FALSE(handle.has_value());
  EXPECT_EQ(handle.error().code, ErrorCode::kExecutionRejected);
}

TEST_F(FakeEnvironmentTest, AnEmptyTenantIsRejected) {
  EnvironmentSpec spec = validSpec();
  spec.tenant_id.clear();
  auto handle = env_.provision(spec);
  ASSERT_FALSE(handle.has_value());
  EXPECT_EQ(handle.error().code, ErrorCode::kExecutionRejected);
}

TEST(FakeEnvironmentClock, ExpiresAtIsCreatedAtPlusTheHardCap) {
  const Timestamp t0{milliseconds(1'700'000'000'000)};
  FakeOptions options;
  options.service_hard_cap = seconds(600);
  options.clock = [t0] { return t0; };
  FakeEnvironment env(options);
  auto handle = env.provision(validSpec());
  ASSERT_TRUE(handle.has_value());
  EXPECT_EQ(handle->created_at, t0);
  EXPECT_EQ(handle->expires_at, t0 + seconds(600));
}

TEST_F(FakeEnvironmentTest, UnscriptedCommandIsNotFound) {
  auto handle = provision();
  auto result = run(handle, commandFor({"no-such-program", "x"}));
  EXPECT_THAT(result.exit_code, Optional(127));
  EXPECT_THAT(result.stderr_data, HasSubstr("no-such-program: command not found"));
}

TEST_F(FakeEnvironmentTest, HistoryRecordsExecutedCommandsInOrder) {
  auto handle = provision();
  run(handle, commandFor({"first"}));
  run(handle, commandFor({"second"}));
  auto history = env_.history();
  ASSERT_EQ(history.size(), 2u);
  EXPECT_EQ(history[0].argv, std::vector<std::string>{"first"});
  EXPECT_EQ(history[1].argv, std::vector<std::string>{"second"});
}

TEST_F(FakeEnvironmentTest, FallbackAnswersUnscriptedCommands) {
  env_.setFallback(basicCommands);
  auto handle = provision();
  EXPECT_EQ(run(handle, commandFor({"echo", "a", "b"})).stdout_data, "a b\n");
  EXPECT_THAT(run(handle, commandFor({"/bin/false"})).exit_code, Optional(1));
  EXPECT_THAT(run(handle, commandFor({"true"})).exit_code, Optional(0));
  ExecutionCommand cat = commandFor({"cat"});
  cat.stdin_data = "piped";
  EXPECT_EQ(run(handle, cat).stdout_data, "piped");
  EXPECT_THAT(run(handle, commandFor({"ls"})).exit_code, Optional(127));
}

// --- output cap ------------------------------------------------------------

TEST_F(FakeEnvironmentTest, OutputExactlyAtTheCapIsNotTruncated) {
  ScriptedBehaviour b;
  b.stdout_data = "12345";
  b.stderr_data = "678";
  env_.script({"p"}, b);
  auto handle = provision();
  ExecutionCommand command = commandFor({"p"});
  command.maximum_output_bytes = 8;
  auto result = run(handle, command);
  EXPECT_THAT(result.exit_code, Optional(0));
  EXPECT_EQ(result.stdout_data, "12345");
  EXPECT_EQ(result.stderr_data, "678");
  EXPECT_FALSE(result.stdout_truncated);
  EXPECT_FALSE(result.stderr_truncated);
  EXPECT_EQ(result.killed_by, std::nullopt);
}

TEST_F(FakeEnvironmentTest, StderrOverflowingTheSharedCapIsCutAndFlagged) {
  ScriptedBehaviour b;
  b.stdout_data = "12345";
  b.stderr_data = "6789";
  env_.script({"p"}, b);
  auto handle = provision();
  ExecutionCommand command = commandFor({"p"});
  command.maximum_output_bytes = 8;
  auto result = run(handle, command);
  EXPECT_EQ(result.stdout_data, "12345");
  EXPECT_EQ(result.stderr_data, "678");
  EXPECT_FALSE(result.stdout_truncated);
  EXPECT_TRUE(result.stderr_truncated);
  EXPECT_EQ(result.killed_by, KillReason::kOutputLimit);
  EXPECT_EQ(result.exit_code, std::nullopt);
}

TEST_F(FakeEnvironmentTest, StdoutOverflowStopsTheCommandBeforeStderrAndWrites) {
  ScriptedBehaviour b;
  b.stdout_data = "123456789";
  b.stderr_data = "err";
  b.writes = {{"after.txt", "x"}};
  env_.script({"p"}, b);
  auto handle = provision();
  ExecutionCommand command = commandFor({"p"});
  command.maximum_output_bytes = 4;
  auto result = run(handle, command);
  EXPECT_EQ(result.stdout_data, "1234");
  EXPECT_TRUE(result.stdout_truncated);
  EXPECT_EQ(result.stderr_data, "");
  EXPECT_FALSE(result.stderr_truncated);
  EXPECT_EQ(result.killed_by, KillReason::kOutputLimit);
  EXPECT_TRUE(result.files_changed.empty());
}

// --- through the host layer's supervisor ------------------------------------

// The command runs on a scripted channel under the host layer's supervisor:
// stdout larger than a pipe holds is read in several reads, the read that
// crosses the cap keeps what fits, and the supervisor decides OUTPUT_LIMIT
// once and stops the channel exactly once. Nothing later in the script
// (stderr) happens.
TEST_F(FakeEnvironmentTest, OutputPastTheCapIsTheSupervisorsKillAndStopsTheChannelOnce) {
  ScriptedBehaviour b;
  b.stdout_data = std::string(300'000, 'x');
  b.stderr_data = "late";
  env_.script({"big"}, b);
  auto handle = provision();
  ExecutionCommand command = commandFor({"big"});
  command.maximum_output_bytes = 200'000;
  std::string streamed;
  auto result = env_.executeStreaming(
      handle, command, nullptr,
      [&](ExecutionEnvironment::OutputStream, std::string_view s) { streamed.append(s); });
  ASSERT_TRUE(result.has_value()) << result.error().message();
  EXPECT_EQ(result->killed_by, KillReason::kOutputLimit);
  EXPECT_EQ(result->stdout_data.size(), 200'000u);
  EXPECT_TRUE(result->stdout_truncated);
  EXPECT_EQ(result->stderr_data, "");
  EXPECT_FALSE(result->stderr_truncated);
  EXPECT_EQ(streamed, result->stdout_data) << "the sink saw each kept byte, once";
  const auto calls = env_.channelCalls();
  ASSERT_EQ(calls.size(), 1u) << "the command did not go through a channel";
  EXPECT_EQ(calls[0].starts, 1);
  EXPECT_EQ(calls[0].stops, 1);
  EXPECT_EQ(calls[0].abandons, 0);
  EXPECT_THAT(calls[0].kills, ElementsAre(KillReason::kOutputLimit));
}

// A normal end is the supervisor's too (one stop per command, no kill),
// and a scripted minute against a 1 s timeout is the supervisor's TIMEOUT
// on simulated time: it costs no wall time.
TEST_F(FakeEnvironmentTest, ANormalEndAndATimeoutAreTheSupervisors) {
  ScriptedBehaviour slow;
  slow.runs_for = seconds(60);
  env_.script({"slow"}, slow);
  env_.script({"ok"}, ScriptedBehaviour{});
  auto handle = provision();
  EXPECT_THAT(run(handle, commandFor({"ok"})).exit_code, Optional(0));
  ExecutionCommand command = commandFor({"slow"});
  command.timeout_seconds = 1;
  const auto called = std::chrono::steady_clock::now();
  auto result = run(handle, command);
  EXPECT_LT(std::chrono::steady_clock::now() - called, seconds(1));
  EXPECT_EQ(result.killed_by, KillReason::kTimeout);
  EXPECT_EQ(result.duration_ms, 1000);
  const auto calls = env_.channelCalls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].stops, 1);
  EXPECT_TRUE(calls[0].kills.empty());
  EXPECT_EQ(calls[1].stops, 1);
  EXPECT_THAT(calls[1].kills, ElementsAre(KillReason::kTimeout));
}

// --- time ------------------------------------------------------------------

TEST_F(FakeEnvironmentTest, TheSpecWallClockBoundsALongerCommandTimeout) {
  ScriptedBehaviour b;
  b.runs_for = seconds(3);
  env_.script({"slow"}, b);
  EnvironmentSpec spec = validSpec();
  spec.limits.wall_clock_seconds = 2;
  auto handle = provision(spec);
  ExecutionCommand command = commandFor({"slow"});
  command.timeout_seconds = 10;
  auto result = run(handle, command);
  EXPECT_TRUE(result.timed_out);
  EXPECT_EQ(result.killed_by, KillReason::kTimeout);
  EXPECT_EQ(result.duration_ms, 2000);
}

TEST_F(FakeEnvironmentTest, ACommandWithinItsTimeoutReportsItsDuration) {
  ScriptedBehaviour b;
  b.runs_for = milliseconds(1500);
  env_.script({"ok"}, b);
  auto handle = provision();
  auto result = run(handle, commandFor({"ok"}));
  EXPECT_THAT(result.exit_code, Optional(0));
  EXPECT_FALSE(result.timed_out);
  EXPECT_EQ(result.duration_ms, 1500);
}

TEST(FakeEnvironmentClock, TheHardCapBoundsEverything) {
  FakeOptions options;
  options.service_hard_cap = seconds(5);
  FakeEnvironment env(options);
  ScriptedBehaviour b;
  b.runs_for = seconds(6);
  env.script({"slow"}, b);
  auto handle = env.provision(validSpec());
  ASSERT_TRUE(handle.has_value());
  ExecutionCommand command = commandFor({"slow"});
  command.timeout_seconds = 10;
  auto result = env.execute(*handle, command);
  ASSERT_TRUE(result.has_value()) << result.error().message();
  EXPECT_EQ(result->killed_by, KillReason::kTimeout);
  EXPECT_EQ(result->duration_ms, 5000);
}

TEST_F(FakeEnvironmentTest, ATimedOutCommandKeepsTheFilesItWrote) {
  ScriptedBehaviour b;
  b.runs_for = seconds(60);
  b.writes = {{"partial.txt", "half"}};
  env_.script({"slow"}, b);
  auto handle = provision();
  ExecutionCommand command = commandFor({"slow"});
  command.timeout_seconds = 1;
  auto result = run(handle, command);
  EXPECT_EQ(result.killed_by, KillReason::kTimeout);
  ASSERT_EQ(result.files_changed.size(), 1u);
  EXPECT_EQ(result.files_changed[0].path, "partial.txt");
  EXPECT_EQ(result.files_changed[0].change, ChangeKind::kCreated);
}

TEST(FakeEnvironmentClock, RunningPastExpiresAtIsExpiredAndDestroys) {
  Timestamp now{milliseconds(1'700'000'000'000)};
  FakeOptions options;
  options.service_hard_cap = seconds(100);
  options.clock = [&now] { return now; };
  FakeEnvironment env(options);
  ScriptedBehaviour b;
  b.runs_for = seconds(20);
  env.script({"slow"}, b);
  auto handle = env.provision(validSpec());
  ASSERT_TRUE(handle.has_value());
  now += seconds(90);  // 10 s of life left, 30 s of timeout
  auto result = env.execute(*handle, commandFor({"slow"}));
  ASSERT_TRUE(result.has_value()) << result.error().message();
  EXPECT_EQ(result->killed_by, KillReason::kExpired);
  EXPECT_FALSE(result->timed_out);
  EXPECT_EQ(result->exit_code, std::nullopt);
  EXPECT_EQ(result->duration_ms, 10'000);
  auto again = env.execute(*handle, commandFor({"slow"}));
  ASSERT_FALSE(again.has_value());
  EXPECT_EQ(again.error().code, ErrorCode::kEnvironmentGone);
  EXPECT_THAT(again.error().context, HasSubstr("has expired"))
      << "the host layer remembers a sandbox destroyed at its expires_at";
  EXPECT_EQ(env.liveCount(), 0u);
}

TEST(FakeEnvironmentClock, ExecuteAfterExpiresAtIsRejected) {
  Timestamp now{milliseconds(1'700'000'000'000)};
  FakeOptions options;
  options.service_hard_cap = seconds(100);
  options.clock = [&now] { return now; };
  FakeEnvironment env(options);
  auto handle = env.provision(validSpec());
  ASSERT_TRUE(handle.has_value());
  now += seconds(100);
  auto result = env.execute(*handle, commandFor({"true"}));
  ASSERT_FALSE(result.has_value());
  EXPECT_EQ(result.error().code, ErrorCode::kEnvironmentGone);
  EXPECT_THAT(result.error().context, HasSubstr("expired"));
}

// --- cancellation ----------------------------------------------------------

TEST_F(FakeEnvironmentTest, APreCancelledCommandDoesNothing) {
  ScriptedBehaviour b;
  b.stdout_data = "should not appear";
  b.writes = {{"x.txt", "x"}};
  env_.script({"w"}, b);
  auto handle = provision();
  auto token = CancelToken::create();
  ASSERT_TRUE(token.has_value());
  token->cancel();
  auto result = env_.execute(handle, commandFor({"w"}), &*token);
  ASSERT_TRUE(result.has_value()) << result.error().message();
  EXPECT_EQ(result->killed_by, KillReason::kCancelled);
  EXPECT_EQ(result->stdout_data, "");
  EXPECT_TRUE(result->files_changed.empty());
  auto ws = env_.workspace(handle);
  ASSERT_TRUE(ws.has_value());
  EXPECT_EQ(codeOf((*ws)->read("x.txt")), ErrorCode::kNotFound);
}

TEST_F(FakeEnvironmentTest, AnUncancelledTokenChangesNothing) {
  auto handle = provision();
  auto token = CancelToken::create();
  ASSERT_TRUE(token.has_value());
  auto result = env_.execute(handle, commandFor({"x"}), &*token);
  ASSERT_TRUE(result.has_value());
  EXPECT_THAT(result->exit_code, Optional(127));
}

// --- workspace effects -----------------------------------------------------

TEST_F(FakeEnvironmentTest, TheListingIsCappedAndFlagged) {
  FakeOptions options;
  options.files_changed_listing = 2;
  FakeEnvironment env(options);
  ScriptedBehaviour b;
  b.writes = {{"a", "1"}, {"b", "2"}, {"c", "3"}};
  env.script({"w"}, b);
  auto handle = env.provision(validSpec());
  ASSERT_TRUE(handle.has_value());
  auto result = env.execute(*handle, commandFor({"w"}));
  ASSERT_TRUE(result.has_value());
  ASSERT_EQ(result->files_changed.size(), 2u);
  EXPECT_EQ(result->files_changed[0].path, "a");
  EXPECT_EQ(result->files_changed[1].path, "b");
  EXPECT_TRUE(result->files_changed_truncated);
}

TEST_F(FakeEnvironmentTest, RewritingIdenticalBytesIsNotAChange) {
  ScriptedBehaviour b;
  b.writes = {{"same.txt", "same"}};
  env_.script({"w"}, b);
  auto handle = provision();
  auto ws = env_.workspace(handle);
  ASSERT_TRUE(ws.has_value());
  ASSERT_TRUE((*ws)->write("same.txt", "same").has_value());
  auto result = run(handle, commandFor({"w"}));
  EXPECT_TRUE(result.files_changed.empty());
}

TEST_F(FakeEnvironmentTest, AFullWorkspaceKillsWithDisk) {
  ScriptedBehaviour b;
  b.writes = {{"a.bin", std::string(60, 'a')}, {"b.bin", std::string(60, 'b')}};
  env_.script({"fill"}, b);
  EnvironmentSpec spec = validSpec();
  spec.limits.workspace_bytes = 100;
  auto handle = provision(spec);
  auto result = run(handle, commandFor({"fill"}));
  EXPECT_EQ(result.killed_by, KillReason::kDisk);
  EXPECT_EQ(result.exit_code, std::nullopt);
  ASSERT_FALSE(env_.channelCalls().empty());
  EXPECT_THAT(env_.channelCalls().back().kills, ElementsAre(KillReason::kDisk))
      << "the supervisor learns DISK from the fake's limit source";
  ASSERT_EQ(result.files_changed.size(), 1u);
  EXPECT_EQ(result.files_changed[0].path, "a.bin");
}

TEST_F(FakeEnvironmentTest, TooManyInodesKillsWithDisk) {
  ScriptedBehaviour b;
  b.writes = {{"d/a", "1"}, {"d/b", "2"}};
  env_.script({"fill"}, b);
  EnvironmentSpec spec = validSpec();
  spec.limits.inodes_max = 3;  // root, d, d/a
  auto handle = provision(spec);
  auto result = run(handle, commandFor({"fill"}));
  EXPECT_EQ(result.killed_by, KillReason::kDisk);
}

TEST_F(FakeEnvironmentTest, AScriptedEscapingPathIsAWorkspaceEscape) {
  ScriptedBehaviour b;
  b.writes = {{"../outside", "x"}};
  env_.script({"bad"}, b);
  auto handle = provision();
  auto result = env_.execute(handle, commandFor({"bad"}));
  ASSERT_FALSE(result.has_value());
  EXPECT_EQ(result.error().code, ErrorCode::kWorkspaceEscape);
}

TEST_F(FakeEnvironmentTest, AMissingWorkingDirectoryIsAToolValidationError) {
  auto handle = provision();
  ExecutionCommand command = commandFor({"true"});
  command.working_directory = "src";
  auto result = env_.execute(handle, command);
  ASSERT_FALSE(result.has_value());
  EXPECT_EQ(result.error().code, ErrorCode::kToolValidationError);

  auto ws = env_.workspace(handle);
  ASSERT_TRUE(ws.has_value());
  ASSERT_TRUE((*ws)->mkdir("src").has_value());
  EXPECT_TRUE(env_.execute(handle, command).has_value());
}

// --- the workspace port ----------------------------------------------------

TEST_F(FakeEnvironmentTest, WorkspaceWriteCreatesParentsAndListdirShowsThem) {
  auto handle = provision();
  auto ws = env_.workspace(handle);
  ASSERT_TRUE(ws.has_value());
  ASSERT_TRUE((*ws)->write("a/b/c.txt", "abc").has_value());
  ASSERT_TRUE((*ws)->write("top.txt", "t").has_value());
  ASSERT_TRUE((*ws)->mkdir("empty").has_value());
  ASSERT_TRUE((*ws)->mkdir("empty").has_value());  // an existing directory is fine

  auto root = (*ws)->listdir(".");
  ASSERT_TRUE(root.has_value()) << root.error().message();
  EXPECT_THAT(*root, ElementsAre(WorkspaceEntry{"a", WorkspaceEntry::Type::kDirectory, 0},
                                 WorkspaceEntry{"empty", WorkspaceEntry::Type::kDirectory, 0},
                                 WorkspaceEntry{"top.txt", WorkspaceEntry::Type::kFile, 1}));
  auto inner = (*ws)->listdir("a/b");
  ASSERT_TRUE(inner.has_value());
  EXPECT_THAT(*inner, ElementsAre(WorkspaceEntry{"c.txt", WorkspaceEntry::Type::kFile, 3}));
  EXPECT_THAT((*ws)->read("a/b/c.txt"), Optional(std::string("abc")));
}

TEST_F(FakeEnvironmentTest, WorkspaceRefusesTypeConfusion) {
  auto handle = provision();
  auto ws = env_.workspace(handle);
  ASSERT_TRUE(ws.has_value());
  ASSERT_TRUE((*ws)->write("f", "x").has_value());
  ASSERT_TRUE((*ws)->mkdir("d").has_value());
  EXPECT_EQ(codeOf((*ws)->write("f/under", "x")), ErrorCode::kToolValidationError);
  EXPECT_EQ(codeOf((*ws)->write("d", "x")), ErrorCode::kToolValidationError);
  EXPECT_EQ(codeOf((*ws)->read("d")), ErrorCode::kToolValidationError);
  EXPECT_EQ(codeOf((*ws)->listdir("f")), ErrorCode::kToolValidationError);
  EXPECT_EQ(codeOf((*ws)->mkdir("f")), ErrorCode::kToolValidationError);
  EXPECT_EQ(codeOf((*ws)->listdir("nope")), ErrorCode::kNotFound);
  EXPECT_EQ(codeOf((*ws)->read("nope")), ErrorCode::kNotFound);
}

TEST_F(FakeEnvironmentTest, WorkspaceWritePastTheLimitFailsAndChangesNothing) {
  EnvironmentSpec spec = validSpec();
  spec.limits.workspace_bytes = 10;
  auto handle = provision(spec);
  auto ws = env_.workspace(handle);
  ASSERT_TRUE(ws.has_value());
  auto write = (*ws)->write("big", std::string(11, 'x'));
  ASSERT_FALSE(write.has_value());
  EXPECT_THAT(write.error().context, HasSubstr("workspace full"));
  EXPECT_EQ(codeOf((*ws)->read("big")), ErrorCode::kNotFound);
}

// The fake is a mechanism without side processes or a capability channel;
// the host layer's checks come first, so a foreign tenant is refused as it
// is everywhere.
TEST_F(FakeEnvironmentTest, NoSideProcessesAndNoCapabilityChannel) {
  auto handle = provision();
  SideCommand side;
  side.argv = {"true"};
  auto started = env_.startSideProcess(handle, side);
  ASSERT_FALSE(started.has_value());
  EXPECT_EQ(started.error().code, ErrorCode::kExecutionUnavailable);
  EXPECT_THAT(started.error().context, HasSubstr("cannot start side processes"));
  auto channel = env_.openCapabilityChannel(handle);
  ASSERT_FALSE(channel.has_value());
  EXPECT_EQ(channel.error().code, ErrorCode::kExecutionUnavailable);
  EXPECT_THAT(channel.error().context, HasSubstr("no capability channel"));
  EnvironmentHandle foreign = handle;
  foreign.tenant_id = "tenant-b";
  EXPECT_EQ(codeOf(env_.openCapabilityChannel(foreign)), ErrorCode::kExecutionRejected);
  EXPECT_EQ(env_.liveCount(), 1u) << "refusals leave the sandbox alone";
}

// The host layer's lookup for workspace(), as linux and gvisor answer it:
// refused as suspected, and the owner's sandbox is left alone.
TEST_F(FakeEnvironmentTest, AForeignTenantCannotOpenTheWorkspace) {
  auto handle = provision();
  EnvironmentHandle foreign = handle;
  foreign.tenant_id = "tenant-b";
  auto ws = env_.workspace(foreign);
  ASSERT_FALSE(ws.has_value());
  EXPECT_EQ(ws.error().code, ErrorCode::kSandboxEscapeSuspected);
  EXPECT_THAT(ws.error().context, HasSubstr("does not belong to this tenant"));
  EXPECT_EQ(env_.liveCount(), 1u);
  EXPECT_TRUE(env_.workspace(handle).has_value());
}

// --- concurrency -----------------------------------------------------------

TEST_F(FakeEnvironmentTest, ConcurrentUseFromManyThreadsIsConsistent) {
  env_.setFallback(basicCommands);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        EnvironmentSpec spec = validSpec();
        spec.tenant_id = "tenant-" + std::to_string(t);
        auto handle = env_.provision(spec);
        if (!handle) {
          ++failures;
          continue;
        }
        auto ws = env_.workspace(*handle);
        if (!ws || !(*ws)->write("f.txt", std::to_string(i))) ++failures;
        auto result = env_.execute(*handle, commandFor({"echo", std::to_string(i)}));
        if (!result || result->stdout_data != std::to_string(i) + "\n") ++failures;
        if (!env_.destroy(*handle)) ++failures;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(env_.liveCount(), 0u);
  EXPECT_EQ(env_.history().size(), 200u);
}

}  // namespace
}  // namespace airlock::fake
