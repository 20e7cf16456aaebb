// Background jobs through code mode and the HTTP API on the gvisor
// mechanism (api_jobs_cases.h has the cases; root and runsc, skipped
// otherwise).
#include <gtest/gtest.h>

#include <filesystem>

#include "api_jobs_cases.h"
#include "gvisor_test_support.h"

namespace airlock::testing {
namespace {

class ApiJobsGvisorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = gvisorUnavailableHere()) GTEST_SKIP() << *why;
    options_ = gvisorOptions(state_.path());
    auto env = gvisor::createGvisorEnvironment(options_);
    ASSERT_TRUE(env) << env.error().message();
    env_ = std::move(*env);
    store_ = state_.path() + "-store";
    ASSERT_TRUE(std::filesystem::create_directory(store_));
    api_.open(*env_, gvisor::gvisorImageDigest(options_).value(), store_);
  }
  void TearDown() override {
    api_.close();
    if (env_) {
      env_.reset();
      EXPECT_FALSE(mountedUnder(state_.path())) << "a mount of a sandbox remains";
    }
    std::error_code ec;
    std::filesystem::remove_all(store_, ec);
  }
  // The sandbox's host processes (runsc and the shim name the state
  // directory and the environment) and its mounts.
  int leftoversOf(const std::string& environment_id) {
    return processesNaming(state_.path(), environment_id) +
           (mountedUnder(state_.path() + "/gvisor/sandboxes/" + environment_id) ? 1 : 0);
  }

  GvisorStateDir state_;
  std::string store_;
  gvisor::GvisorEnvironmentOptions options_;
  std::unique_ptr<ExecutionEnvironment> env_;
  JobsApi api_;
};

TEST_F(ApiJobsGvisorTest, AJobOutlivesItsProgramAndEitherDoorDrivesIt) {
  expectAJobOutlivesItsProgramAndEitherDoorDrivesIt(api_);
}

TEST_F(ApiJobsGvisorTest, AServerJobServesAClientAndIsKilled) {
  expectAServerJobServesAClientAndIsKilled(api_);
}

TEST_F(ApiJobsGvisorTest, AProgramRunsAServerSessionThroughJobAndProc) {
  expectAProgramRunsAServerSessionThroughJobAndProc(api_);
}

TEST_F(ApiJobsGvisorTest, TheSpillHoldsTheWholeOutput) {
  expectTheSpillHoldsTheWholeOutput(api_);
}

TEST_F(ApiJobsGvisorTest, DestroyingTheEnvironmentMidJobLeavesNothing) {
  // The adapter's destructor waits for its teardown worker; the node then
  // holds no environment of it (the destroy removed the only one), so
  // nothing reaches the adapter afterwards.
  expectDestroyingTheEnvironmentMidJobLeavesNothing(
      api_, [this](const std::string& id) { return leftoversOf(id); },
      [this](const std::string& id) {
        env_.reset();
        return leftoversOf(id);
      });
}

TEST_F(ApiJobsGvisorTest, AJobIsKilledAtItsDeadline) {
  expectAJobIsKilledAtItsDeadline(api_);
}

TEST_F(ApiJobsGvisorTest, TheToolsDriveTheSameJobs) {
  expectTheToolsDriveTheSameJobs(api_);
}

TEST_F(ApiJobsGvisorTest, APtyJobIsATerminalThroughEveryDoor) {
  expectAPtyJobIsATerminalThroughEveryDoor(api_, /*eof_ends_a_line_reader=*/false);
}

TEST_F(ApiJobsGvisorTest, JobRoutesAreTheTenantsOwnAndCheckTheirInput) {
  expectJobRoutesAreTheTenantsOwnAndCheckTheirInput(api_);
}

}  // namespace
}  // namespace airlock::testing
