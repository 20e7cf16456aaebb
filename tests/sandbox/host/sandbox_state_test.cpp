// The state file of a sandbox and the crash-recovery sweep, against a temp
// directory and a fake cgroup driver (no sandbox, no root).
#include "airlock/sandbox/host/sandbox_state.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "airlock/sys/io.h"

namespace airlock::host {
namespace {

namespace fs = std::filesystem;

// What the sweep did to each cgroup, by name.
struct CgroupLog {
  std::map<std::string, int> kills;
  std::set<std::string> removed;
  std::set<std::string> existing;
  std::map<std::string, int> busy_removes;  // EBUSY answers left
};

class FakeCgroup final : public Cgroup {
 public:
  FakeCgroup(std::shared_ptr<CgroupLog> log, std::string name)
      : log_(std::move(log)), name_(std::move(name)) {}
  Result<void> addProcess(pid_t) override { return {}; }
  Result<void> addCommandProcess(pid_t) override { return {}; }
  Result<sys::UniqueFd> openCommandEntry() override { return fail(ErrorCode::kNotFound, "fake"); }
  Result<CgroupCounters> counters() override { return CgroupCounters{}; }
  void beginExecution() override {}
  std::string memoryDirectory() const override { return "/fake/" + name_; }
  Result<void> killAll() override {
    ++log_->kills[name_];
    return {};
  }
  Result<void> remove() override {
    if (log_->busy_removes[name_] > 0) {
      --log_->busy_removes[name_];
      return failErrno(ErrorCode::kExecutionUnavailable, "rmdir", EBUSY);
    }
    log_->existing.erase(name_);
    log_->removed.insert(name_);
    return {};
  }

 private:
  std::shared_ptr<CgroupLog> log_;
  std::string name_;
};

class FakeDriver final : public CgroupDriver {
 public:
  explicit FakeDriver(std::shared_ptr<CgroupLog> log) : log_(std::move(log)) {}
  std::string version() const override { return "v2"; }
  std::vector<std::string> controllers() const override { return {}; }
  Result<std::unique_ptr<Cgroup>> create(const std::string&, const ResourceLimits&,
                                         MemoryLayout) override {
    return fail(ErrorCode::kExecutionUnavailable, "fake");
  }
  std::unique_ptr<Cgroup> attach(const std::string& name) override {
    return std::make_unique<FakeCgroup>(log_, name);
  }
  std::vector<std::string> list(const std::string& prefix) override {
    std::vector<std::string> out;
    for (const auto& n : log_->existing)
      if (n.rfind(prefix, 0) == 0) out.push_back(n);
    return out;
  }

 private:
  std::shared_ptr<CgroupLog> log_;
};

class SandboxStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/airlock-state-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string lockPath(const std::string& id) const { return dir_ + "/" + id + ".lock"; }

  // A state file whose owner exited without removing it (a killed service).
  void leaveStateFileOfDeadOwner(const SandboxStateRecord& record) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      auto file = SandboxStateFile::create(dir_, record);
      ::_exit(file ? 0 : 1);  // no destructor runs: the file stays, unlocked
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ASSERT_TRUE(fs::exists(lockPath(record.environment_id)));
  }

  OrphanSweep sweepOf(CgroupDriver* driver) {
    OrphanSweep sweep;
    sweep.dir = dir_;
    sweep.cgroups = driver;
    sweep.cgroup_prefix = "airlock-t-";
    sweep.remove_state = [this](const std::string& id) { removed_state_.insert(id); };
    return sweep;
  }

  std::string dir_;
  std::set<std::string> removed_state_;
};

TEST(SandboxStateRecord, RoundTripsAndRefusesOtherBytes) {
  const SandboxStateRecord record{"0190-abcd", "airlock-t-0190-abcd"};
  const std::string text = encodeStateRecord(record);
  auto back = decodeStateRecord(text);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->environment_id, record.environment_id);
  EXPECT_EQ(back->cgroup_name, record.cgroup_name);
  EXPECT_FALSE(decodeStateRecord(""));
  EXPECT_FALSE(decodeStateRecord("airlock-sandbox-state v2\nid x\ncgroup y\n"));
  EXPECT_FALSE(decodeStateRecord(text.substr(0, text.size() - 1)));  // cut short
  EXPECT_FALSE(decodeStateRecord(text + "more\n"));
  EXPECT_FALSE(decodeStateRecord("airlock-sandbox-state v1\nid \ncgroup y\n"));
}

TEST_F(SandboxStateTest, AStateFileIsHeldWithItsRecordAndRemovedOnce) {
  auto file = SandboxStateFile::create(dir_, {"env-1", "airlock-t-env-1"});
  ASSERT_TRUE(file) << file.error().message();
  EXPECT_TRUE(file->held());
  EXPECT_EQ(file->path(), lockPath("env-1"));
  auto text = sys::readFile(AT_FDCWD, lockPath("env-1").c_str());
  ASSERT_TRUE(text);
  auto record = decodeStateRecord(*text);
  ASSERT_TRUE(record);
  EXPECT_EQ(record->cgroup_name, "airlock-t-env-1");
  // Another open file cannot take the lock while the sandbox lives.
  const int other = ::open(lockPath("env-1").c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(other, 0);
  EXPECT_NE(::flock(other, LOCK_EX | LOCK_NB), 0);
  EXPECT_EQ(errno, EWOULDBLOCK);
  ::close(other);
  // A second sandbox of the same id cannot claim the name.
  EXPECT_FALSE(SandboxStateFile::create(dir_, {"env-1", "airlock-t-env-1"}));
  file->remove();
  EXPECT_FALSE(file->held());
  EXPECT_FALSE(fs::exists(lockPath("env-1")));
  file->remove();  // idempotent
}

TEST_F(SandboxStateTest, ARecordWithANewlineOrASlashIsRefused) {
  EXPECT_FALSE(SandboxStateFile::create(dir_, {"a/b", "airlock-t-x"}));
  EXPECT_FALSE(SandboxStateFile::create(dir_, {"env-1", "airlock-t-x\nid y"}));
  EXPECT_FALSE(SandboxStateFile::create(dir_ + "/missing", {"env-1", "airlock-t-x"}));
  EXPECT_TRUE(fs::is_empty(dir_));
}

TEST_F(SandboxStateTest, TheSweepRemovesWhatADeadOwnerLeft) {
  auto log = std::make_shared<CgroupLog>();
  log->existing = {"airlock-t-env-1"};
  log->busy_removes["airlock-t-env-1"] = 2;  // the kernel is still finishing it
  FakeDriver driver(log);
  leaveStateFileOfDeadOwner({"env-1", "airlock-t-env-1"});
  sweepOrphans(sweepOf(&driver));
  EXPECT_EQ(log->removed.count("airlock-t-env-1"), 1u);
  EXPECT_GE(log->kills["airlock-t-env-1"], 3);  // killed again before each retry
  EXPECT_EQ(removed_state_.count("env-1"), 1u);
  EXPECT_FALSE(fs::exists(lockPath("env-1")));
}

TEST_F(SandboxStateTest, TheSweepLeavesALiveOwnersSandboxAlone) {
  auto log = std::make_shared<CgroupLog>();
  log->existing = {"airlock-t-env-2"};
  FakeDriver driver(log);
  auto held = SandboxStateFile::create(dir_, {"env-2", "airlock-t-env-2"});
  ASSERT_TRUE(held);
  ASSERT_TRUE(fs::create_directory(dir_ + "/env-2"));
  sweepOrphans(sweepOf(&driver));
  EXPECT_TRUE(log->removed.empty());
  EXPECT_TRUE(log->kills.empty());
  EXPECT_TRUE(removed_state_.empty());
  EXPECT_TRUE(fs::exists(lockPath("env-2")));
}

TEST_F(SandboxStateTest, TheSweepSkipsTheSweepersOwnSandboxes) {
  auto log = std::make_shared<CgroupLog>();
  log->existing = {"airlock-t-env-3"};
  FakeDriver driver(log);
  leaveStateFileOfDeadOwner({"env-3", "airlock-t-env-3"});
  auto sweep = sweepOf(&driver);
  sweep.live = {"env-3"};
  sweepOrphans(sweep);
  EXPECT_TRUE(log->removed.empty());
  EXPECT_TRUE(removed_state_.empty());
  EXPECT_TRUE(fs::exists(lockPath("env-3")));
}

TEST_F(SandboxStateTest, StateWithoutAStateFileAndStrayCgroupsAreRemoved) {
  auto log = std::make_shared<CgroupLog>();
  log->existing = {"airlock-t-env-4", "someone-else-env-4"};
  FakeDriver driver(log);
  ASSERT_TRUE(fs::create_directory(dir_ + "/env-4"));  // a provision that crashed early
  sweepOrphans(sweepOf(&driver));
  EXPECT_EQ(removed_state_.count("env-4"), 1u);
  EXPECT_EQ(log->removed.count("airlock-t-env-4"), 1u);
  EXPECT_EQ(log->removed.count("someone-else-env-4"), 0u);  // not this service's
}

TEST_F(SandboxStateTest, ARecordNamingAnotherServicesCgroupDoesNotReachIt) {
  auto log = std::make_shared<CgroupLog>();
  log->existing = {"victim"};
  FakeDriver driver(log);
  leaveStateFileOfDeadOwner({"env-5", "victim"});
  sweepOrphans(sweepOf(&driver));
  EXPECT_EQ(log->kills.count("victim"), 0u);
  EXPECT_EQ(log->removed.count("victim"), 0u);
  EXPECT_EQ(removed_state_.count("env-5"), 1u);  // the rest of its state still goes
  EXPECT_FALSE(fs::exists(lockPath("env-5")));
}

TEST_F(SandboxStateTest, AnUnreadableRecordStillLetsTheCgroupPassFindTheCgroup) {
  auto log = std::make_shared<CgroupLog>();
  log->existing = {"airlock-t-env-6"};
  FakeDriver driver(log);
  // An empty lock file, as an older service wrote them, with no owner.
  const int fd = ::open(lockPath("env-6").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  ::close(fd);
  sweepOrphans(sweepOf(&driver));
  EXPECT_FALSE(fs::exists(lockPath("env-6")));
  EXPECT_EQ(log->removed.count("airlock-t-env-6"), 1u);
  EXPECT_EQ(removed_state_.count("env-6"), 1u);
}

}  // namespace
}  // namespace airlock::host
