// Background jobs through code mode and the HTTP API on the linux mechanism
// (api_jobs_cases.h has the cases; root, skipped otherwise).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "api_jobs_cases.h"
#include "linux_test_support.h"

namespace airlock::testing {
namespace {

// What of the environment is on the host: processes in its cgroup,
// cgroups and mounts naming it.
int leftoversOf(const std::string& environment_id) {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "cgroup");
    const std::string cgroups((std::istreambuf_iterator<char>(in)), {});
    if (cgroups.find(environment_id) != std::string::npos) ++n;
  }
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(
           "/sys/fs/cgroup", std::filesystem::directory_options::skip_permission_denied, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->path().filename().string().find(environment_id) != std::string::npos) ++n;
    if (it.depth() >= 3) it.disable_recursion_pending();
  }
  std::ifstream mounts("/proc/self/mountinfo");
  for (std::string line; std::getline(mounts, line);)
    if (line.find(environment_id) != std::string::npos) ++n;
  return n;
}

class ApiJobsLinuxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = linuxJailUnavailable()) GTEST_SKIP() << *why;
    options_ = testOptions(state_.path());
    auto env = linux_jail::createLinuxEnvironment(options_);
    ASSERT_TRUE(env) << env.error().message();
    env_ = std::move(*env);
    ASSERT_TRUE(std::filesystem::create_directory(state_.path() + "/store"));
    api_.open(*env_, airlock::computeImageDigest(options_).value(), state_.path() + "/store");
  }
  void TearDown() override { api_.close(); }

  TempStateDir state_;
  linux_jail::LinuxEnvironmentOptions options_;
  std::unique_ptr<ExecutionEnvironment> env_;
  JobsApi api_;
};

TEST_F(ApiJobsLinuxTest, AJobOutlivesItsProgramAndEitherDoorDrivesIt) {
  expectAJobOutlivesItsProgramAndEitherDoorDrivesIt(api_);
}

TEST_F(ApiJobsLinuxTest, AServerJobServesAClientAndIsKilled) {
  expectAServerJobServesAClientAndIsKilled(api_);
}

TEST_F(ApiJobsLinuxTest, AProgramRunsAServerSessionThroughJobAndProc) {
  expectAProgramRunsAServerSessionThroughJobAndProc(api_);
}

TEST_F(ApiJobsLinuxTest, TheSpillHoldsTheWholeOutput) {
  expectTheSpillHoldsTheWholeOutput(api_);
}

TEST_F(ApiJobsLinuxTest, DestroyingTheEnvironmentMidJobLeavesNothing) {
  expectDestroyingTheEnvironmentMidJobLeavesNothing(api_, leftoversOf, leftoversOf);
}

TEST_F(ApiJobsLinuxTest, AnExtensionMovesTheJobsDeadlines) {
  expectAnExtensionMovesTheJobsDeadlines(api_);
}

TEST_F(ApiJobsLinuxTest, AJobIsKilledAtItsDeadline) {
  expectAJobIsKilledAtItsDeadline(api_);
}

TEST_F(ApiJobsLinuxTest, TheToolsDriveTheSameJobs) {
  expectTheToolsDriveTheSameJobs(api_);
}

TEST_F(ApiJobsLinuxTest, APtyJobIsATerminalThroughEveryDoor) {
  expectAPtyJobIsATerminalThroughEveryDoor(api_);
}

TEST_F(ApiJobsLinuxTest, JobRoutesAreTheTenantsOwnAndCheckTheirInput) {
  expectJobRoutesAreTheTenantsOwnAndCheckTheirInput(api_);
}

}  // namespace
}  // namespace airlock::testing
