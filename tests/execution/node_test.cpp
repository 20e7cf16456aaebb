// LocalNode over the fake mechanism: the registry follows provision and
// destroy, execute adds busy time, claims keep a program and a command
// apart, and the reaper destroys by expiry, by the stale leases the reverse
// port names, and retries a destroy that failed.
#include "airlock/execution/node.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "airlock/sandbox/fake/fake_environment.h"

namespace airlock::execution {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The fake, with destroy failing while `failing_destroys` is above zero.
class FlakyDestroy final : public ExecutionEnvironment {
 public:
  explicit FlakyDestroy(fake::FakeEnvironment& inner) : inner_(inner) {}
  Result<EnvironmentHandle> provision(const EnvironmentSpec& spec) override {
    return inner_.provision(spec);
  }
  Result<ExecutionResult> execute(const EnvironmentHandle& handle, const ExecutionCommand& command,
                                  const CancelToken* cancel) override {
    return inner_.execute(handle, command, cancel);
  }
  Result<void> cancel(const EnvironmentHandle& handle, std::string_view execution_id) override {
    return inner_.cancel(handle, execution_id);
  }
  Result<void> destroy(const EnvironmentHandle& handle) override {
    if (failing_destroys > 0) {
      --failing_destroys;
      return fail(ErrorCode::kExecutionUnavailable, "the mechanism could not destroy it");
    }
    return inner_.destroy(handle);
  }
  Result<std::shared_ptr<WorkspaceHandle>> workspace(const EnvironmentHandle& handle) override {
    return inner_.workspace(handle);
  }
  Result<EnvironmentHandle> extend(const EnvironmentHandle& handle, Timestamp at) override {
    return inner_.extend(handle, at);
  }
  int failing_destroys = 0;

 private:
  fake::FakeEnvironment& inner_;
};

class LocalNodeTest : public ::testing::Test {
 protected:
  LocalNodeTest() {
    fake::FakeOptions options;
    options.clock = [this] { return now_; };
    fake_ = std::make_unique<fake::FakeEnvironment>(options);
    fake_->setFallback(fake::basicCommands);
    adapter_ = std::make_unique<FlakyDestroy>(*fake_);
    ExecutionNodeEvents events;
    events.live_count = [this](std::size_t n) { gauge_ = n; };
    events.destroy_failed = [this] { ++destroy_failures_; };
    events.reaped = [this](std::string_view why) { reaped_.emplace_back(why); };
    node_ = std::make_unique<LocalNode>(
        *adapter_, [this] { return now_; }, events);
  }
  EnvironmentHandle provision(const std::string& tenant, const std::string& run,
                              std::int64_t epoch) {
    EnvironmentSpec spec;
    spec.tenant_id = tenant;
    spec.run_id = run;
    spec.lease_epoch = epoch;
    spec.image_digest = fake::kFakeImageDigest;
    spec.limits = defaultLimits();
    auto handle = node_->provision(spec);
    EXPECT_TRUE(handle.has_value()) << handle.error().message();
    return handle.value_or(EnvironmentHandle{});
  }

  Timestamp now_ =
      std::chrono::time_point_cast<std::chrono::milliseconds>(std::chrono::system_clock::now());
  std::unique_ptr<fake::FakeEnvironment> fake_;
  std::unique_ptr<FlakyDestroy> adapter_;
  std::unique_ptr<LocalNode> node_;
  std::size_t gauge_ = 0;
  int destroy_failures_ = 0;
  std::vector<std::string> reaped_;
};

TEST_F(LocalNodeTest, TheRegistryFollowsProvisionAndDestroy) {
  const auto a = provision("t1", "r1", 1);
  const auto b = provision("t2", "r1", 1);
  EXPECT_EQ(node_->liveCount(), 2u);
  EXPECT_EQ(gauge_, 2u);
  ASSERT_EQ(node_->live("t2").size(), 1u);
  EXPECT_EQ(node_->live("t2").front().handle, b);
  EXPECT_EQ(node_->live().size(), 2u);
  auto found = node_->find(a.environment_id);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->image_digest, fake::kFakeImageDigest);
  EXPECT_EQ(found->wall_clock_seconds, defaultLimits().wall_clock_seconds);

  ExecutionCommand command;
  command.argv = {"echo", "hi"};
  command.timeout_seconds = 5;
  command.maximum_output_bytes = 1024;
  auto executed = node_->execute(a, command);
  ASSERT_TRUE(executed.has_value()) << executed.error().message();
  EXPECT_GT(node_->find(a.environment_id)->busy.count(), 0) << "execute adds busy time";

  ASSERT_TRUE(node_->destroy(a).has_value());
  EXPECT_FALSE(node_->find(a.environment_id).has_value());
  EXPECT_EQ(fake_->liveCount(), 1u) << "the adapter's sandbox is gone too";
  EXPECT_EQ(gauge_, 1u);
  EXPECT_TRUE(node_->destroy(a).has_value()) << "destroy is idempotent";
  node_->destroyAll();
  EXPECT_EQ(node_->liveCount(), 0u);
  EXPECT_EQ(fake_->liveCount(), 0u);
}

// The node's jobs (port/job_port.h) answer for a live environment of the
// handle's tenant only, and refuse a session-lifetime job where the node's
// JobSettings disallow it. (The fake starts no side processes: real jobs
// are in tests/service/api_jobs_cases.h.)
TEST_F(LocalNodeTest, JobsAreAnsweredForALiveEnvironmentOfItsTenant) {
  const auto a = provision("t1", "r1", 1);
  auto listed = node_->listJobs(a);
  ASSERT_TRUE(listed.has_value()) << listed.error().message();
  EXPECT_TRUE(listed->empty());
  JobStartRequest start;
  start.command.argv = {"sleep", "60"};
  auto started = node_->startJob(a, start);
  ASSERT_FALSE(started.has_value());
  EXPECT_EQ(started.error().code, ErrorCode::kExecutionUnavailable);
  auto polled = node_->pollJob(a, JobPollRequest{"job-1"});
  ASSERT_FALSE(polled.has_value());
  EXPECT_EQ(polled.error().code, ErrorCode::kNotFound);
  EXPECT_THAT(polled.error().message(), HasSubstr("job-1"));
  EXPECT_EQ(node_->killJob(a, "job-1").error().code, ErrorCode::kNotFound);

  EnvironmentHandle other = a;
  other.tenant_id = "t2";
  EXPECT_EQ(node_->listJobs(other).error().code, ErrorCode::kExecutionRejected);

  LocalNode strict(
      *adapter_, [this] { return now_; }, {}, JobSettings{.allow_session_lifetime = false});
  EnvironmentSpec spec;
  spec.tenant_id = "t1";
  spec.run_id = "r2";
  spec.lease_epoch = 1;
  spec.image_digest = fake::kFakeImageDigest;
  spec.limits = defaultLimits();
  const auto b = strict.provision(spec);
  ASSERT_TRUE(b.has_value()) << b.error().message();
  start.wall_ms = 0;
  auto session = strict.startJob(*b, start);
  ASSERT_FALSE(session.has_value());
  EXPECT_EQ(session.error().code, ErrorCode::kExecutionRejected);
  EXPECT_THAT(session.error().message(), HasSubstr("not allowed"));
  strict.destroyAll();

  ASSERT_TRUE(node_->destroy(a).has_value());
  EXPECT_EQ(node_->listJobs(a).error().code, ErrorCode::kExecutionRejected)
      << "a destroyed environment has no jobs";
}

TEST_F(LocalNodeTest, AProgramIsRefusedWhileAnythingRunsACommandWhileAProgramRuns) {
  const std::string id = provision("t1", "r1", 1).environment_id;
  {
    auto command = node_->claim(id, RunKind::kCommand);
    ASSERT_TRUE(command.has_value());
    auto program = node_->claim(id, RunKind::kProgram);
    ASSERT_FALSE(program.has_value());
    EXPECT_EQ(program.error().code, ErrorCode::kExecutionRejected);
    EXPECT_EQ(program.error().context, "another command is running in environment \"" + id + "\"");
    EXPECT_TRUE(node_->claim(id, RunKind::kCommand).has_value())
        << "two commands are the adapter's to refuse";
  }
  {
    auto program = node_->claim(id, RunKind::kProgram);
    ASSERT_TRUE(program.has_value()) << "the commands' claims were released";
    for (RunKind kind : {RunKind::kCommand, RunKind::kProgram}) {
      auto refused = node_->claim(id, kind);
      ASSERT_FALSE(refused.has_value());
      EXPECT_EQ(refused.error().code, ErrorCode::kExecutionRejected);
      EXPECT_EQ(refused.error().context, "a program is running in environment \"" + id + "\"");
    }
  }
  EXPECT_TRUE(node_->claim(id, RunKind::kCommand).has_value()) << "the program's was released";
}

TEST_F(LocalNodeTest, TheReaperAsksAboutLiveLeasesAndDestroysOnlyTheStaleOnesNamed) {
  const auto a = provision("t1", "run-a", 3);
  const auto b = provision("t1", "run-b", 1);
  std::vector<LiveLease> asked;
  auto stale = [&](const std::vector<LiveLease>& leases) {
    asked = leases;
    return std::vector<std::string>{a.environment_id, "not-a-live-id"};
  };
  EXPECT_EQ(node_->reap([](const std::vector<LiveLease>&) { return std::vector<std::string>{}; }),
            0);
  EXPECT_EQ(node_->reap(stale), 1);
  std::vector<LiveLease> expected{{"t1", "run-a", 3, a.environment_id},
                                  {"t1", "run-b", 1, b.environment_id}};
  if (b.environment_id < a.environment_id) std::swap(expected[0], expected[1]);
  EXPECT_EQ(asked, expected);
  EXPECT_FALSE(node_->find(a.environment_id).has_value());
  EXPECT_TRUE(node_->find(b.environment_id).has_value());
  EXPECT_THAT(reaped_, ElementsAre("stale_lease"));
}

TEST_F(LocalNodeTest, TheReaperDestroysPastExpiresAtWhateverTheLease) {
  const auto a = provision("t1", "r1", 1);
  now_ += std::chrono::hours(1);
  int asked = 0;
  EXPECT_EQ(node_->reap([&](const std::vector<LiveLease>&) {
    ++asked;
    return std::vector<std::string>{};
  }),
            1);
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(node_->liveCount(), 0u);
  EXPECT_EQ(fake_->liveCount(), 0u);
  EXPECT_THAT(reaped_, ElementsAre("expired"));
  EXPECT_EQ(node_->reap({}), 0) << "nothing is left, and no query is needed";
  (void)a;
}

// extend moves the adapter's record and the node's registry together: the
// reaper passes the old expires_at by and destroys at the new one.
TEST_F(LocalNodeTest, AnExtendedEnvironmentSurvivesAReapAtItsOldExpiry) {
  const auto a = provision("t1", "r1", 1);
  const Timestamp old_expiry = a.expires_at;
  auto extended = node_->extend(a, old_expiry + std::chrono::minutes(10));
  ASSERT_TRUE(extended.has_value()) << extended.error().message();
  EXPECT_EQ(extended->expires_at, old_expiry + std::chrono::minutes(10));
  EXPECT_EQ(node_->find(a.environment_id)->handle.expires_at, extended->expires_at);
  auto earlier = node_->extend(a, old_expiry);
  ASSERT_TRUE(earlier.has_value());
  EXPECT_EQ(earlier->expires_at, extended->expires_at) << "never earlier";

  now_ = old_expiry + std::chrono::minutes(1);
  EXPECT_EQ(node_->reap({}), 0);
  EXPECT_EQ(node_->liveCount(), 1u);
  ExecutionCommand command;
  command.argv = {"true"};
  command.timeout_seconds = 5;
  command.maximum_output_bytes = 1024;
  auto ran = node_->execute(a, command);
  ASSERT_TRUE(ran.has_value()) << ran.error().message();

  EnvironmentHandle foreign = a;
  foreign.tenant_id = "t2";
  auto refused = node_->extend(foreign, old_expiry + std::chrono::hours(1));
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, ErrorCode::kExecutionRejected);

  now_ = extended->expires_at;
  auto late = node_->extend(a, now_ + std::chrono::minutes(5));
  ASSERT_FALSE(late.has_value()) << "past expires_at it is gone, not revived";
  EXPECT_EQ(late.error().code, ErrorCode::kEnvironmentGone);
  EXPECT_EQ(node_->reap({}), 1);
  EXPECT_THAT(reaped_, ElementsAre("expired"));
}

TEST_F(LocalNodeTest, AFailedDestroyIsCountedAndRetriedByTheReaper) {
  const auto a = provision("t1", "r1", 1);
  adapter_->failing_destroys = 1;
  auto r = node_->destroy(a);
  ASSERT_FALSE(r.has_value());
  EXPECT_THAT(r.error().context, HasSubstr("could not destroy"));
  EXPECT_EQ(destroy_failures_, 1);
  ASSERT_TRUE(node_->find(a.environment_id).has_value()) << "still live, still tracked";
  EXPECT_EQ(node_->find(a.environment_id)->destroy_failures, 1);
  EXPECT_EQ(node_->reap({}), 1);
  EXPECT_THAT(reaped_, ElementsAre("retried"));
  EXPECT_EQ(node_->liveCount(), 0u);
  EXPECT_EQ(fake_->liveCount(), 0u);
}

}  // namespace
}  // namespace airlock::execution
