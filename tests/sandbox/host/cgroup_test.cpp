// cgroup v1 and v2 writers and parsers against a fake cgroup filesystem
// (this machine runs v1; production machines usually run v2).
#include "airlock/sandbox/host/cgroup.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

namespace airlock::host {
namespace {

class FakeCgroupFs : public CgroupFs {
 public:
  std::set<std::string> dirs;
  std::map<std::string, std::string> files;
  Result<void> makeDir(const std::string& p) override {
    dirs.insert(p);
    // The kernel populates interface files on mkdir; model the ones we read.
    for (const char* f : {"/cgroup.procs", "/memory.max", "/memory.swap.max", "/pids.max",
                          "/cpu.max", "/memory.limit_in_bytes", "/pids.events", "/memory.events",
                          "/cpu.cfs_period_us", "/cpu.cfs_quota_us", "/memory.oom_control",
                          "/cgroup.kill", "/memory.kmem.tcp.limit_in_bytes"})
      files.emplace(p + f, "");
    return {};
  }
  Result<void> removeDir(const std::string& p) override {
    if (!dirs.count(p)) return fail(ErrorCode::kNotFound, p);
    // rmdir refuses a cgroup that has children.
    for (const auto& d : dirs)
      if (d.rfind(p + "/", 0) == 0) return fail(ErrorCode::kExecutionUnavailable, p + ": busy");
    dirs.erase(p);
    return {};
  }
  Result<void> write(const std::string& p, const std::string& t) override {
    files[p] = t;
    return {};
  }
  Result<std::string> read(const std::string& p) override {
    auto it = files.find(p);
    if (it == files.end()) return fail(ErrorCode::kNotFound, p);
    return it->second;
  }
  bool exists(const std::string& p) override { return files.count(p) || dirs.count(p); }
  Result<sys::UniqueFd> open(const std::string& p) override {
    return fail(ErrorCode::kNotFound, p);
  }
  std::vector<std::string> list(const std::string& dir) override {
    std::vector<std::string> out;
    for (const auto& d : dirs)
      if (d.rfind(dir + "/", 0) == 0 && d.find('/', dir.size() + 1) == std::string::npos)
        out.push_back(d.substr(dir.size() + 1));
    return out;
  }
};

// The directories still there, or "".
std::string leftBehind(const FakeCgroupFs& fs) {
  std::string out;
  for (const auto& d : fs.dirs) out += d + " ";
  return out;
}

// Drops one holder of the sandboxes' parent: a driver or a cgroup.
void release(std::unique_ptr<Cgroup>& cgroup) {
  cgroup.reset();
}
template <typename T>
void release(Result<std::unique_ptr<T>>& held) {
  if (held) held->reset();
}

// The directories still there once every holder of the sandboxes' parent
// (the driver and its cgroups) is gone, or "".
template <typename... Held>
std::string leftBehindOnceReleased(const FakeCgroupFs& fs, Held&... held) {
  (release(held), ...);
  return leftBehind(fs);
}

// A v2 hierarchy at /cg with the three controllers.
CgroupMounts v2Mounts() {
  CgroupMounts m;
  m.v2_root = "/cg";
  m.v2_controllers = {"cpu", "memory", "pids"};
  return m;
}

// v1 hierarchies at /v1/<controller>.
CgroupMounts v1Mounts() {
  CgroupMounts m;
  m.v1_controller_mounts = {{"memory", "/v1/memory"}, {"pids", "/v1/pids"}, {"cpu", "/v1/cpu"}};
  return m;
}

ResourceLimits limits() {
  return {1500, 256 << 20, 64, 1 << 30, 1000, 30};
}

TEST(CgroupDetection, HybridV1HostChoosesV1) {
  auto fs = std::make_shared<FakeCgroupFs>();
  fs->files["/sys/fs/cgroup/unified/cgroup.controllers"] = "\n";  // hybrid: no controllers
  const std::string mountinfo =
      "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
      "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
      "39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"
      "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
  auto mounts = parseCgroupMounts(mountinfo, *fs);
  EXPECT_EQ(mounts.v1_controller_mounts.at("memory"), "/sys/fs/cgroup/memory");
  auto driver = makeCgroupDriver(mounts, fs);
  ASSERT_TRUE(driver) << driver.error().message();
  EXPECT_EQ((*driver)->version(), "v1");
}

TEST(CgroupDetection, UnifiedHierarchyWithControllersChoosesV2) {
  auto fs = std::make_shared<FakeCgroupFs>();
  fs->files["/sys/fs/cgroup/cgroup.controllers"] = "cpuset cpu io memory hugetlb pids rdma misc\n";
  auto mounts = parseCgroupMounts(
      "25 1 0:22 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n", *fs);
  auto driver = makeCgroupDriver(mounts, fs);
  ASSERT_TRUE(driver) << driver.error().message();
  EXPECT_EQ((*driver)->version(), "v2");
}

TEST(CgroupDetection, NeitherHierarchyUsableNamesWhatIsMissing) {
  auto fs = std::make_shared<FakeCgroupFs>();
  auto mounts =
      parseCgroupMounts("35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n", *fs);
  auto driver = makeCgroupDriver(mounts, fs);
  ASSERT_FALSE(driver);
  EXPECT_NE(driver.error().context.find("pids, cpu"), std::string::npos) << driver.error().context;
}

TEST(CgroupV2, CreateWritesEveryLimit) {
  auto fs = std::make_shared<FakeCgroupFs>();
  fs->files["/cg/cgroup.controllers"] = "cpu memory pids";
  auto driver = makeCgroupDriver(v2Mounts(), fs);
  ASSERT_TRUE(driver);
  auto cg = (*driver)->create("airlock-x", limits());
  ASSERT_TRUE(cg) << cg.error().message();
  EXPECT_EQ(fs->files["/cg/cgroup.subtree_control"], "+memory +pids +cpu");
  EXPECT_EQ(fs->files["/cg/airlock/airlock-x/memory.max"], std::to_string(256 << 20));
  EXPECT_EQ(fs->files["/cg/airlock/airlock-x/memory.swap.max"], "0");
  EXPECT_EQ(fs->files["/cg/airlock/airlock-x/pids.max"], "64");
  EXPECT_EQ(fs->files["/cg/airlock/airlock-x/cpu.max"], "150000 100000");
  ASSERT_TRUE((*cg)->addProcess(4242));
  EXPECT_EQ(fs->files["/cg/airlock/airlock-x/cgroup.procs"], "4242");
  ASSERT_TRUE((*cg)->killAll());
  EXPECT_EQ(fs->files["/cg/airlock/airlock-x/cgroup.kill"], "1");
  EXPECT_EQ((*driver)->list("airlock-"), std::vector<std::string>{"airlock-x"});
  ASSERT_TRUE((*cg)->remove());
  EXPECT_FALSE(fs->dirs.count("/cg/airlock/airlock-x"));
}

// Every sandbox sits below one parent with the controllers delegated to it.
// The parent stays while the driver or any of its cgroups lives, so a cycle
// of sandboxes does not make it again each time, and goes with the last of
// them.
TEST(CgroupV2, SandboxesShareOneParentThatStaysWhileItsDriverLives) {
  auto fs = std::make_shared<FakeCgroupFs>();
  auto driver = makeCgroupDriver(v2Mounts(), fs);
  ASSERT_TRUE(driver);
  auto a = (*driver)->create("airlock-p1", limits());
  auto b = (*driver)->create("airlock-p2", limits());
  ASSERT_TRUE(a && b);
  EXPECT_EQ(fs->files["/cg/airlock/cgroup.subtree_control"], "+memory +pids +cpu");
  EXPECT_EQ((*driver)->list("airlock-p"), (std::vector<std::string>{"airlock-p1", "airlock-p2"}));
  EXPECT_EQ((*a)->memoryDirectory(), "/cg/airlock/airlock-p1");
  ASSERT_TRUE((*a)->remove());
  ASSERT_TRUE((*b)->remove());
  EXPECT_EQ(leftBehind(*fs), "/cg/airlock ");
  auto again = (*driver)->create("airlock-p3", limits());
  ASSERT_TRUE(again) << again.error().message();
  ASSERT_TRUE((*again)->remove());
  release(driver);
  EXPECT_EQ(leftBehind(*fs), "/cg/airlock ") << "a cgroup of the driver still holds the parent";
  release(a);
  release(b);
  EXPECT_EQ(leftBehindOnceReleased(*fs, again), "");
}

// Two services on one machine share the parent: the one that goes first
// leaves it to the other's sandbox, and the last one removes it.
TEST(CgroupV1, TheParentOutlivesADriverWhileAnotherServicesSandboxIsInIt) {
  auto fs = std::make_shared<FakeCgroupFs>();
  auto first = makeCgroupDriver(v1Mounts(), fs);
  auto second = makeCgroupDriver(v1Mounts(), fs);
  ASSERT_TRUE(first && second);
  auto mine = (*first)->create("airlock-s1", limits());
  auto theirs = (*second)->create("airlock-s2", limits());
  ASSERT_TRUE(mine && theirs);
  ASSERT_TRUE((*mine)->remove());
  release(mine);
  release(first);
  for (const char* ctl : {"memory", "pids", "cpu"})
    EXPECT_TRUE(fs->dirs.count(std::string("/v1/") + ctl + "/airlock/airlock-s2")) << ctl;
  ASSERT_TRUE((*theirs)->remove());
  EXPECT_EQ(leftBehindOnceReleased(*fs, theirs, second), "");
}

// A fake whose sandboxes' parent another service removes, and a third makes
// again, between this service's two mkdirs: the sandbox's mkdir fails with
// NotFound though the parent exists by the time it is looked at.
class ParentRaceFs final : public FakeCgroupFs {
 public:
  explicit ParentRaceFs(std::string parent) : parent_(std::move(parent)) {}
  int races = 2;
  Result<void> makeDir(const std::string& p) override {
    if (races > 0 && p.rfind(parent_ + "/", 0) == 0) {
      --races;
      return fail(ErrorCode::kNotFound, "mkdir " + p + ": its parent is gone");
    }
    return FakeCgroupFs::makeDir(p);
  }

 private:
  std::string parent_;
};

TEST(CgroupV1, ACreateThatLosesTheParentToAnotherServiceMakesItAgain) {
  auto fs = std::make_shared<ParentRaceFs>("/v1/memory/airlock");
  auto driver = makeCgroupDriver(v1Mounts(), fs);
  ASSERT_TRUE(driver);
  auto cg = (*driver)->create("airlock-race", limits(), MemoryLayout::kCommandsApart);
  ASSERT_TRUE(cg) << cg.error().message();
  EXPECT_EQ(fs->races, 0);
  EXPECT_TRUE(fs->dirs.count("/v1/memory/airlock/airlock-race/commands"));
  EXPECT_EQ((*cg)->commandsMemoryDirectory(), "/v1/memory/airlock/airlock-race/commands");
  ASSERT_TRUE((*cg)->remove());
  EXPECT_EQ(leftBehindOnceReleased(*fs, cg, driver), "");
}

// A sandbox an earlier release created at the top of the hierarchy is still
// listed, attached and removed (the sweep after an upgrade).
TEST(CgroupV2, ASandboxAtTheTopFromAnEarlierReleaseIsStillSwept) {
  auto fs = std::make_shared<FakeCgroupFs>();
  auto driver = makeCgroupDriver(v2Mounts(), fs);
  ASSERT_TRUE(driver);
  ASSERT_TRUE(fs->makeDir("/cg/airlock-old"));
  ASSERT_TRUE(fs->makeDir("/cg/airlock-old/commands"));
  EXPECT_EQ((*driver)->list("airlock-"), std::vector<std::string>{"airlock-old"});
  auto old = (*driver)->attach("airlock-old");
  EXPECT_EQ(old->memoryDirectory(), "/cg/airlock-old");
  ASSERT_TRUE(old->remove());
  EXPECT_EQ(leftBehindOnceReleased(*fs, old, driver), "");
}

TEST(CgroupV1, ASandboxAtTheTopFromAnEarlierReleaseIsStillSwept) {
  auto fs = std::make_shared<FakeCgroupFs>();
  auto driver = makeCgroupDriver(v1Mounts(), fs);
  ASSERT_TRUE(driver);
  for (const char* ctl : {"memory", "pids", "cpu"})
    ASSERT_TRUE(fs->makeDir(std::string("/v1/") + ctl + "/airlock-old"));
  auto fresh = (*driver)->create("airlock-new", limits());
  ASSERT_TRUE(fresh);
  EXPECT_EQ((*fresh)->memoryDirectory(), "/v1/memory/airlock/airlock-new");
  EXPECT_EQ((*driver)->list("airlock-"), (std::vector<std::string>{"airlock-new", "airlock-old"}));
  auto old = (*driver)->attach("airlock-old");
  EXPECT_EQ(old->memoryDirectory(), "/v1/memory/airlock-old");
  ASSERT_TRUE(old->remove());
  ASSERT_TRUE((*fresh)->remove());
  EXPECT_EQ(leftBehindOnceReleased(*fs, old, fresh, driver), "");
}

TEST(CgroupV2, CountersParseEventFiles) {
  auto fs = std::make_shared<FakeCgroupFs>();
  auto driver = makeCgroupDriver(v2Mounts(), fs);
  auto cg = (*driver)->create("airlock-y", limits());
  ASSERT_TRUE(cg);
  fs->files["/cg/airlock/airlock-y/memory.events"] =
      "low 0\nhigh 0\nmax 12\noom 2\noom_kill 1\noom_group_kill 0\n";
  fs->files["/cg/airlock/airlock-y/pids.events"] = "max 7\n";
  fs->files["/cg/airlock/airlock-y/memory.peak"] = "123456\n";
  auto c = (*cg)->counters();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->oom_kills, 1);
  EXPECT_EQ(c->pids_max_events, 7);
  EXPECT_EQ(c->memory_peak_bytes, 123456);
}

TEST(CgroupV1, CreateWritesEveryControllerAndRemovesAll) {
  auto fs = std::make_shared<FakeCgroupFs>();
  auto driver = makeCgroupDriver(v1Mounts(), fs);
  ASSERT_TRUE(driver);
  EXPECT_EQ((*driver)->version(), "v1");
  auto cg = (*driver)->create("airlock-z", limits());
  ASSERT_TRUE(cg) << cg.error().message();
  EXPECT_EQ(fs->files["/v1/memory/airlock/airlock-z/memory.limit_in_bytes"],
            std::to_string(256 << 20));
  EXPECT_EQ(fs->files["/v1/pids/airlock/airlock-z/pids.max"], "64");
  EXPECT_EQ(fs->files["/v1/cpu/airlock/airlock-z/cpu.cfs_quota_us"], "150000");
  EXPECT_EQ(fs->files["/v1/cpu/airlock/airlock-z/cpu.cfs_period_us"], "100000");
  fs->files["/v1/memory/airlock/airlock-z/memory.oom_control"] =
      "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n";
  auto c = (*cg)->counters();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->oom_kills, 3);
  fs->files["/v1/memory/airlock/airlock-z/memory.max_usage_in_bytes"] = "999999";
  (*cg)->beginExecution();
  EXPECT_EQ(fs->files["/v1/memory/airlock/airlock-z/memory.max_usage_in_bytes"], "0");
  ASSERT_TRUE((*cg)->remove());
  EXPECT_EQ(leftBehindOnceReleased(*fs, cg, driver), "");
}

// kCommandsApart on v2: init and the commands are two leaves of the
// sandbox's cgroup; the limit sits on the commands' leaf, the sandbox's own
// ceiling adds the supervisor's slack, and removal goes children first.
TEST(CgroupV2, CommandsApartPutsTheLimitOnTheCommandsLeaf) {
  auto fs = std::make_shared<FakeCgroupFs>();
  auto driver = makeCgroupDriver(v2Mounts(), fs);
  ASSERT_TRUE(driver);
  auto cg = (*driver)->create("airlock-a", limits(), MemoryLayout::kCommandsApart);
  ASSERT_TRUE(cg) << cg.error().message();
  EXPECT_EQ(fs->files["/cg/airlock/airlock-a/memory.max"],
            std::to_string((256 << 20) + kSupervisorMemorySlack));
  EXPECT_EQ(fs->files["/cg/airlock/airlock-a/pids.max"], "64");
  EXPECT_EQ(fs->files["/cg/airlock/airlock-a/cgroup.subtree_control"], "+memory");
  EXPECT_EQ(fs->files["/cg/airlock/airlock-a/commands/memory.max"], std::to_string(256 << 20));
  EXPECT_EQ(fs->files["/cg/airlock/airlock-a/commands/memory.swap.max"], "0");
  EXPECT_TRUE(fs->dirs.count("/cg/airlock/airlock-a/init"));
  ASSERT_TRUE((*cg)->addProcess(10));
  EXPECT_EQ(fs->files["/cg/airlock/airlock-a/init/cgroup.procs"], "10");
  EXPECT_EQ(fs->files["/cg/airlock/airlock-a/cgroup.procs"], "");
  ASSERT_TRUE((*cg)->addCommandProcess(11));
  EXPECT_EQ(fs->files["/cg/airlock/airlock-a/commands/cgroup.procs"], "11");
  // Kills under the commands' limit and at the sandbox's ceiling both count.
  fs->files["/cg/airlock/airlock-a/commands/memory.events"] = "oom 2\noom_kill 2\n";
  fs->files["/cg/airlock/airlock-a/memory.events.local"] = "oom 1\noom_kill 1\n";
  fs->files["/cg/airlock/airlock-a/commands/memory.peak"] = "4096\n";
  fs->files["/cg/airlock/airlock-a/memory.peak"] = "999999\n";
  auto c = (*cg)->counters();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->oom_kills, 3);
  EXPECT_EQ(c->memory_peak_bytes, 4096);
  // A crashed service's sweep attaches by name and removes every level.
  auto attached = (*driver)->attach("airlock-a");
  ASSERT_TRUE(attached->remove());
  EXPECT_EQ(leftBehindOnceReleased(*fs, cg, attached, driver), "");
}

// kCommandsApart on v1: only the memory hierarchy has the commands child;
// a command's entry into it keeps the pids and cpu cgroups of init.
TEST(CgroupV1, CommandsApartSplitsOnlyTheMemoryHierarchy) {
  auto fs = std::make_shared<FakeCgroupFs>();
  auto driver = makeCgroupDriver(v1Mounts(), fs);
  ASSERT_TRUE(driver);
  auto cg = (*driver)->create("airlock-b", limits(), MemoryLayout::kCommandsApart);
  ASSERT_TRUE(cg) << cg.error().message();
  EXPECT_EQ(fs->files["/v1/memory/airlock/airlock-b/memory.limit_in_bytes"],
            std::to_string((256 << 20) + kSupervisorMemorySlack));
  EXPECT_EQ(fs->files["/v1/memory/airlock/airlock-b/commands/memory.limit_in_bytes"],
            std::to_string(256 << 20));
  EXPECT_EQ(fs->files["/v1/memory/airlock/airlock-b/commands/memory.kmem.tcp.limit_in_bytes"],
            std::to_string(256 << 20));
  EXPECT_FALSE(fs->dirs.count("/v1/pids/airlock/airlock-b/commands"));
  ASSERT_TRUE((*cg)->addCommandProcess(21));
  EXPECT_EQ(fs->files["/v1/memory/airlock/airlock-b/commands/cgroup.procs"], "21");
  EXPECT_EQ(fs->files["/v1/pids/airlock/airlock-b/cgroup.procs"], "21");
  EXPECT_EQ(fs->files["/v1/cpu/airlock/airlock-b/cgroup.procs"], "21");
  EXPECT_EQ(fs->files["/v1/memory/airlock/airlock-b/cgroup.procs"], "");
  // v1 counts a kill only where the limit was hit: the two are summed.
  fs->files["/v1/memory/airlock/airlock-b/commands/memory.oom_control"] = "oom_kill 4\n";
  fs->files["/v1/memory/airlock/airlock-b/memory.oom_control"] = "oom_kill 1\n";
  fs->files["/v1/memory/airlock/airlock-b/commands/memory.max_usage_in_bytes"] = "777";
  auto c = (*cg)->counters();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->oom_kills, 5);
  EXPECT_EQ(c->memory_peak_bytes, 777);
  (*cg)->beginExecution();
  EXPECT_EQ(fs->files["/v1/memory/airlock/airlock-b/commands/memory.max_usage_in_bytes"], "0");
  ASSERT_TRUE((*cg)->remove());
  EXPECT_EQ(leftBehindOnceReleased(*fs, cg, driver), "");
}

// A failed limit write leaves no directory behind, at any level.
TEST(CgroupV2, CommandsApartFailureLeavesNothing) {
  struct FailingFs : FakeCgroupFs {
    Result<void> write(const std::string& p, const std::string& t) override {
      if (p.find("/commands/memory.max") != std::string::npos)
        return fail(ErrorCode::kExecutionUnavailable, "refused " + p);
      return FakeCgroupFs::write(p, t);
    }
  };
  auto fs = std::make_shared<FailingFs>();
  auto driver = makeCgroupDriver(v2Mounts(), fs);
  ASSERT_TRUE(driver);
  auto cg = (*driver)->create("airlock-c", limits(), MemoryLayout::kCommandsApart);
  ASSERT_FALSE(cg);
  EXPECT_NE(cg.error().message().find("commands/memory.max"), std::string::npos)
      << cg.error().message();
  EXPECT_EQ(leftBehindOnceReleased(*fs, cg, driver), "");
}

TEST(CgroupCounters, KeyedCounterIgnoresOtherKeysAndGarbage) {
  EXPECT_EQ(parseKeyedCounter("oom 5\noom_kill 2\n", "oom_kill"), 2);
  EXPECT_EQ(parseKeyedCounter("oom_kill_disable 1\n", "oom_kill"), std::nullopt);
  EXPECT_EQ(parseKeyedCounter("garbage\n\n", "max"), std::nullopt);
}

}  // namespace
}  // namespace airlock::host

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace airlock::host {
namespace {

// The real kernel path: the memory controller's OOM notification fd fires
// when a process in the cgroup is OOM-killed, and the counter says so.
TEST(RealCgroup, MemoryEventFdFiresOnAnOomKill) {
  if (::geteuid() != 0) GTEST_SKIP() << "creating cgroups needs root";
  std::ifstream in("/proc/self/mountinfo");
  std::stringstream text;
  text << in.rdbuf();
  std::shared_ptr<CgroupFs> fs = makeRealCgroupFs();
  auto driver = makeCgroupDriver(parseCgroupMounts(text.str(), *fs), fs);
  if (!driver) GTEST_SKIP() << driver.error().message();
  ResourceLimits l{1000, 32 << 20, 16, 1 << 20, 16, 10};
  auto cg = (*driver)->create("airlock-test-oom-" + std::to_string(::getpid()), l);
  ASSERT_TRUE(cg) << cg.error().message();
  (*cg)->beginExecution();
  ASSERT_GE((*cg)->memoryEventFd(), 0) << "no OOM notification on this cgroup version";

  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    char c;
    if (::read(go[0], &c, 1) != 1) ::_exit(2);
    const std::size_t n = 256u << 20;
    volatile char* p = static_cast<volatile char*>(std::malloc(n));
    if (p != nullptr)
      for (std::size_t i = 0; i < n; i += 4096) p[i] = 1;  // touch every page: over the limit
    ::_exit(0);
  }
  ::close(go[0]);
  ASSERT_TRUE((*cg)->addProcess(child));
  ASSERT_EQ(::write(go[1], "g", 1), 1);
  ::close(go[1]);
  pollfd p{(*cg)->memoryEventFd(), POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 10000), 1) << "no OOM event within 10 s";
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  auto c = (*cg)->counters();
  ASSERT_TRUE(c);
  EXPECT_GE(c->oom_kills, 1);
  ASSERT_TRUE((*cg)->remove());
}

}  // namespace
}  // namespace airlock::host
