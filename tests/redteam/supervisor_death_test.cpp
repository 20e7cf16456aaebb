// Red-team regression: when the service that supervises a sandbox dies
// (SIGKILL, at any moment: during provision or while the command runs), no
// workload keeps running unsupervised, and the next service started on the
// same state directory removes what was left (red-team case B42; B40 disconnect).
//
// The "service" is a forked child of this test that provisions a sandbox and
// runs a CPU loop whose argv carries a unique marker; the test kills the
// child and then looks for the marker among all host processes.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>

#include "../sandbox/linux/linux_test_support.h"
#include "../support/sandbox_cgroups.h"

namespace airlock::testing {
namespace {

using namespace std::chrono_literals;

// Host pids whose cmdline contains `marker` (excluding this test process).
std::vector<pid_t> processesWith(const std::string& marker) {
  std::vector<pid_t> out;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::ifstream in(std::string("/proc/") + e->d_name + "/cmdline");
    std::stringstream s;
    s << in.rdbuf();
    const pid_t pid = static_cast<pid_t>(std::stol(e->d_name));
    if (pid != ::getpid() && s.str().find(marker) != std::string::npos) {
      // Zombies have an empty cmdline; a match is a live process.
      out.push_back(pid);
    }
  }
  ::closedir(d);
  return out;
}

// The child "service": provision, then run a spinning command forever.
[[noreturn]] void serviceChild(const std::string& state_dir, const std::string& marker) {
  auto options = testOptions(state_dir);
  auto env = linux_jail::createLinuxEnvironment(options);
  if (!env) ::_exit(10);
  auto h = (*env)->provision(linuxSpec(options));
  if (!h) ::_exit(11);
  ExecutionCommand c;
  c.argv = {"python3", "-c", "import os\nos.fork()\nwhile True: pass", marker};
  c.timeout_seconds = 600;
  c.maximum_output_bytes = 1024;
  (void)(*env)->execute(*h, c);
  ::_exit(12);
}

std::string newMarker() {
  std::random_device rd;
  return "airlock-rt-b42-" + std::to_string(rd()) + std::to_string(::getpid());
}

class RedteamSupervisorDeathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = linuxJailUnavailable()) GTEST_SKIP() << *why;
  }
  // After the service is gone: the next service on the same state directory
  // sweeps the orphaned sandbox (lock files and cgroups).
  void expectSweptByNextService() {
    auto options = testOptions(state_.path());
    auto env = linux_jail::createLinuxEnvironment(options);
    ASSERT_TRUE(env) << env.error().message();
    EXPECT_TRUE(std::filesystem::is_empty(state_.path() + "/sandboxes"))
        << "a lock file of a dead service's sandbox was not swept";
    for (const auto& id : lock_ids_) {
      for (const auto& dir : sandboxCgroupCandidates())
        EXPECT_EQ(baseName(dir).find(id), std::string::npos) << "cgroup left behind: " << dir;
    }
  }
  void rememberLocks() {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(state_.path() + "/sandboxes", ec)) {
      std::string n = e.path().filename().string();
      if (n.size() > 5) lock_ids_.push_back(n.substr(0, n.size() - 5));
    }
  }

  TempStateDir state_;
  std::vector<std::string> lock_ids_;
};

TEST_F(RedteamSupervisorDeathTest, B42_WorkloadDiesWithItsServiceMidRun) {
  const std::string marker = newMarker();
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) serviceChild(state_.path(), marker);

  // Wait until the workload (and its forked copy) spins on the host.
  auto deadline = std::chrono::steady_clock::now() + 20s;
  while (processesWith(marker).size() < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  ASSERT_GE(processesWith(marker).size(), 2u) << "the workload never started";
  rememberLocks();

  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);

  deadline = std::chrono::steady_clock::now() + 3s;
  while (!processesWith(marker).empty() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  auto left = processesWith(marker);
  EXPECT_TRUE(left.empty()) << left.size() << " workload process(es) outlived their service";
  for (pid_t p : left) ::kill(p, SIGKILL);  // do not leak a spinner from a failing run
  expectSweptByNextService();
}

TEST_F(RedteamSupervisorDeathTest, B42_WorkloadNeverRunsWhenTheServiceDiesDuringSetup) {
  const std::string marker = newMarker();
  std::mt19937 rng(std::random_device{}());
  for (int i = 0; i < 25; ++i) {
    pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) serviceChild(state_.path(), marker);
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 60000));
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
  }
  std::this_thread::sleep_for(500ms);
  auto left = processesWith(marker);
  EXPECT_TRUE(left.empty()) << left.size() << " workload process(es) run without a service";
  for (pid_t p : left) ::kill(p, SIGKILL);
  rememberLocks();
  expectSweptByNextService();
}

}  // namespace
}  // namespace airlock::testing
