// SandboxMemory (gvisor_memory.h) against a fake v1 memory directory: plain
// files in a temporary directory stand for the cgroup's control files.
#include "airlock/sandbox/oci/gvisor_memory.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "airlock/sandbox/oci/gvisor_environment.h"

namespace airlock::gvisor {
namespace {

class FakeMemoryDir {
 public:
  explicit FakeMemoryDir(const std::string& dir) : dir_(dir) {
    std::filesystem::create_directories(dir_);
    set("memory.usage_in_bytes", 0);
    set("memory.limit_in_bytes", 0);
    set("memory.max_usage_in_bytes", 0);
    stall(false);
  }
  const std::string& path() const { return dir_; }
  void set(const std::string& file, std::int64_t value) { write(file, std::to_string(value)); }
  std::int64_t get(const std::string& file) const {
    std::ifstream in(dir_ + "/" + file);
    std::int64_t v = -1;
    in >> v;
    return v;
  }
  void stall(bool on) {
    write("memory.oom_control",
          std::string("oom_kill_disable 1\nunder_oom ") + (on ? "1" : "0") + "\noom_kill 0\n");
  }

 private:
  void write(const std::string& file, const std::string& text) {
    std::ofstream(dir_ + "/" + file, std::ios::trunc) << text;
  }
  std::string dir_;
};

// The sandbox's memory directory with its "commands" child, the
// application's.
class FakeSandboxMemory {
 public:
  FakeSandboxMemory() : root_(makeRoot()), sandbox(root_), application(root_ + "/commands") {}
  ~FakeSandboxMemory() { std::filesystem::remove_all(root_); }
  FakeSandboxMemory(const FakeSandboxMemory&) = delete;
  FakeSandboxMemory& operator=(const FakeSandboxMemory&) = delete;
  SandboxMemory make(std::int64_t memory_bytes) const {
    return SandboxMemory(sandbox.path(), application.path(), memory_bytes);
  }

 private:
  static std::string makeRoot() {
    char tmpl[] = "/tmp/airlock-memory-test-XXXXXX";
    return ::mkdtemp(tmpl);
  }
  std::string root_;

 public:
  FakeMemoryDir sandbox;
  FakeMemoryDir application;
};

constexpr std::int64_t kMiB = 1 << 20;
const char* const kLimit = "memory.limit_in_bytes";
const char* const kUsage = "memory.usage_in_bytes";

// The command's limit is on the application's cgroup, from what it holds at
// the start; the sandbox's limit sits memory_bytes plus kSentryRoom above
// what the sandbox holds, so the sentry is never the one at its limit.
TEST(SandboxMemory, TheCommandsLimitIsOnTheApplicationAndTheSentryKeepsRoom) {
  FakeSandboxMemory fake;
  fake.application.set(kUsage, 2 * kMiB);
  fake.sandbox.set(kUsage, 60 * kMiB);
  const std::int64_t memory = 75 * kMiB;
  SandboxMemory mem = fake.make(memory);
  ASSERT_TRUE(mem.beginCommand());
  EXPECT_EQ(fake.application.get(kLimit), 2 * kMiB + memory - kOomKillHeadroom);
  EXPECT_EQ(fake.sandbox.get(kLimit), 60 * kMiB + memory + kSentryRoom);
  // The command's peak is the application's, above its base.
  EXPECT_EQ(mem.commandPeak(50 * kMiB), 48 * kMiB);
  mem.endCommand();
}

// A MEMORY kill opens a quarter of the headroom in the application at
// once; a sandbox level stalled as well gets kOomKillHeadroom, and the
// command's peak is then the sandbox's growth.
TEST(SandboxMemory, AKillOpensRoomWhereTheSandboxIsStalled) {
  FakeSandboxMemory fake;
  fake.application.set(kUsage, 0);
  fake.sandbox.set(kUsage, 40 * kMiB);
  const std::int64_t memory = 64 * kMiB;
  SandboxMemory mem = fake.make(memory);
  ASSERT_TRUE(mem.beginCommand());
  const std::int64_t sandbox_limit = fake.sandbox.get(kLimit);
  fake.sandbox.set(kUsage, sandbox_limit);
  fake.sandbox.set("memory.max_usage_in_bytes", sandbox_limit);
  fake.sandbox.stall(true);
  fake.application.stall(true);
  EXPECT_TRUE(mem.underOom());
  mem.raiseForKill();
  EXPECT_EQ(fake.sandbox.get(kLimit), sandbox_limit + kOomKillHeadroom);
  EXPECT_GE(fake.application.get(kLimit), memory - kOomKillHeadroom + kOomKillHeadroom / 4);
  EXPECT_EQ(mem.commandPeak(10 * kMiB), sandbox_limit - 40 * kMiB);
  mem.endCommand();
}

// An application that has not given back the memory of a command its limit
// stopped, and holds so much that the next command would start with less
// than kStartRoom below its limit, refuses that command with a reason (the
// sentry, forking a stub for it, would die of a failed allocation), and
// keeps its limits where they were.
TEST(SandboxMemory, ACommandDoesNotStartWithoutRoomBelowItsLimit) {
  FakeSandboxMemory fake;
  const std::int64_t base = 2 * kMiB;
  const std::int64_t memory = 75 * kMiB;
  fake.application.set(kUsage, base);
  fake.sandbox.set(kUsage, 50 * kMiB);
  SandboxMemory mem = fake.make(memory);
  ASSERT_TRUE(mem.beginCommand());
  EXPECT_EQ(fake.application.get(kLimit), base + memory - kOomKillHeadroom);
  mem.raiseForKill();
  mem.endCommand();
  const std::int64_t raised = fake.application.get(kLimit);
  const std::int64_t sandbox_limit = fake.sandbox.get(kLimit);
  // Still held: enough that the next command's room, measured from the
  // earlier base, is under kStartRoom (yet not past the limit itself).
  const std::int64_t next_limit = base + kSettleSlack + memory - kOomKillHeadroom;
  fake.application.set(kUsage, next_limit - kStartRoom / 2);
  auto refused = mem.beginCommand();
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message().find("has not given back the memory"), std::string::npos)
      << refused.error().message();
  EXPECT_EQ(fake.application.get(kLimit), raised) << "a refused command changes no limit";
  EXPECT_EQ(fake.sandbox.get(kLimit), sandbox_limit) << "a refused command changes no limit";
  // Given back: the next try starts, with the room measured from what the
  // application holds now.
  fake.application.set(kUsage, base);
  ASSERT_TRUE(mem.beginCommand());
  EXPECT_EQ(fake.application.get(kLimit), base + memory - kOomKillHeadroom);
}

// Under the smallest limits the room to keep free is half the command's
// room, so a fresh sandbox always starts its command.
TEST(SandboxMemory, ASmallLimitStillStartsItsCommand) {
  FakeSandboxMemory fake;
  fake.application.set(kUsage, 1 * kMiB);
  fake.sandbox.set(kUsage, 40 * kMiB);
  SandboxMemory mem = fake.make(8 * kMiB);
  ASSERT_TRUE(mem.beginCommand());
  EXPECT_GT(fake.application.get(kLimit), 1 * kMiB);
}

}  // namespace
}  // namespace airlock::gvisor
