// Gate "nothing outlives its lease" (spec 000, hard gates; gate.sandbox.
// no_orphans). `airlock serve` is killed with SIGKILL while a command runs
// in one of its sandboxes; after a restart on the same state directory,
// within two reaper intervals (here: by the time it listens, since the
// restart sweeps before serving), no sandbox, process, cgroup, lock or mount
// of the killed service remains and no environment lives with a stale
// epoch. Then a clean SIGTERM leaves nothing either.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <thread>

#include "../sandbox/linux/linux_test_support.h"
#include "../service/serve_process.h"
#include "../support/sandbox_cgroups.h"
#include "airlock/sandbox/linux/linux_environment.h"

namespace airlock::testing {
namespace {

constexpr const char* kToken = "gate-no-orphans-0123456789abcdef";

std::vector<std::string> list(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d))
      if (std::string(e->d_name) != "." && std::string(e->d_name) != "..")
        out.emplace_back(e->d_name);
    ::closedir(d);
  }
  return out;
}

// Every trace of the service with this state directory on the machine.
std::vector<std::string> leftovers(const std::string& state_dir) {
  std::vector<std::string> found;
  const std::string prefix = linux_jail::cgroupNamePrefix(state_dir);
  for (const auto& dir : sandboxCgroupCandidates())
    if (baseName(dir).rfind(prefix, 0) == 0) found.push_back("cgroup " + dir);
  for (const auto& pid : list("/proc")) {
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream cg("/proc/" + pid + "/cgroup");
    std::string text((std::istreambuf_iterator<char>(cg)), std::istreambuf_iterator<char>());
    if (text.find(prefix) != std::string::npos) found.push_back("process " + pid);
  }
  for (const auto& lock : list(state_dir + "/sandboxes")) found.push_back("lock " + lock);
  std::ifstream mounts("/proc/self/mountinfo");
  for (std::string line; std::getline(mounts, line);)
    if (line.find(state_dir) != std::string::npos) found.push_back("mount " + line);
  return found;
}

std::vector<std::string> serveEnv(const std::string& state_dir) {
  return {"AIRLOCK_STATE_DIR=" + state_dir, "AIRLOCK_LISTEN=127.0.0.1:0",
          std::string("AIRLOCK_SERVICE_TOKEN=") + kToken, "AIRLOCK_REAPER_INTERVAL=1s",
          "PATH=/usr/bin:/bin"};
}

// The killed service's sandbox inits die with it (parent-death signal) and
// are re-parented to the nearest subreaper. A supervisor (systemd) reaps them
// at once; the machine's pid 1 may take a second or more, and until then an
// exited init still holds its cgroup busy. This test is the supervisor: it
// becomes the subreaper and reaps them, as systemd would.
void reapOrphanedInits() {
  int status = 0;
  while (::waitpid(-1, &status, __WALL) > 0 || errno == EINTR) {
  }
}

TEST(GateNoOrphans, AServiceKilledMidExecutionLeavesNothingAfterRestart) {
  if (auto why = linuxJailUnavailable()) GTEST_SKIP() << *why;
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  TempStateDir state;
  {
    ServeProcess first(serveEnv(state.path()));
    ASSERT_GT(first.port(), 0) << first.log();
    std::vector<std::string> ids;
    for (int i = 0; i < 2; ++i) {
      auto r = first.request("POST", "/v1/environments",
                             R"({"tenant_id": "t1", "run_id": "r1", "lease_epoch": 1})", kToken);
      ASSERT_EQ(r.status, 201) << r.body;
      ids.push_back(r.json()["environment_id"]);
    }
    // A command that says it started, then runs on.
    std::atomic<bool> returned{false};
    HttpReply executed;
    std::thread running([&] {
      executed = first.request(
          "POST", "/v1/environments/" + ids[0] + "/execute",
          R"({"argv": ["sh", "-c", "touch started; exec sleep 300"], "timeout_seconds": 300})",
          kToken, 30);
      returned = true;
    });
    // Until the command says it started (or the execute came back early,
    // which is a failure), bounded by the execute's own client timeout.
    HttpReply seen;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (seen.status != 200 && !returned && std::chrono::steady_clock::now() < deadline)
      seen = first.request("GET", "/v1/environments/" + ids[0] + "/files?path=started", "", kToken);
    if (seen.status != 200) {
      const std::string log = first.log();
      first.signalAndWait(SIGKILL);
      reapOrphanedInits();
      running.join();
      { ServeProcess sweeper(serveEnv(state.path())); }  // leave nothing behind even on failure
      FAIL() << "the command never started; execute answered " << executed.status << " "
             << executed.body << "\nservice log:\n"
             << log;
    }
    EXPECT_FALSE(leftovers(state.path()).empty())
        << "nothing to orphan: the test would pass vacuously";
    const int status = first.signalAndWait(SIGKILL);
    EXPECT_TRUE(WIFSIGNALED(status));
    reapOrphanedInits();
    running.join();
  }
  ServeProcess second(serveEnv(state.path()));
  ASSERT_GT(second.port(), 0) << second.log();
  const auto found = leftovers(state.path());
  EXPECT_TRUE(found.empty()) << "left by the killed service: " << found.front();
  auto live = second.request("GET", "/v1/environments", "", kToken);
  ASSERT_EQ(live.status, 200);
  EXPECT_TRUE(live.json()["environments"].empty()) << live.body;

  // A clean stop with a sandbox live leaves nothing either.
  auto r = second.request("POST", "/v1/environments",
                          R"({"tenant_id": "t1", "run_id": "r1", "lease_epoch": 2})", kToken);
  ASSERT_EQ(r.status, 201) << r.body;
  const int status = second.signalAndWait(SIGTERM);
  ASSERT_TRUE(WIFEXITED(status)) << second.log();
  EXPECT_EQ(WEXITSTATUS(status), 0) << second.log();
  const auto after = leftovers(state.path());
  EXPECT_TRUE(after.empty()) << "left by a clean stop: " << after.front();
}

}  // namespace
}  // namespace airlock::testing
