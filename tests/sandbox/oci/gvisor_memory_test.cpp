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
  FakeMemoryDir() {
    char tmpl[] = "/tmp/airlock-memory-test-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    set("memory.usage_in_bytes", 0);
    set("memory.limit_in_bytes", 0);
    write("memory.oom_control", "oom_kill_disable 1\nunder_oom 0\noom_kill 0\n");
  }
  ~FakeMemoryDir() { std::filesystem::remove_all(dir_); }
  FakeMemoryDir(const FakeMemoryDir&) = delete;
  FakeMemoryDir& operator=(const FakeMemoryDir&) = delete;
  const std::string& path() const { return dir_; }
  void set(const std::string& file, std::int64_t value) { write(file, std::to_string(value)); }
  std::int64_t get(const std::string& file) const {
    std::ifstream in(dir_ + "/" + file);
    std::int64_t v = -1;
    in >> v;
    return v;
  }

 private:
  void write(const std::string& file, const std::string& text) {
    std::ofstream(dir_ + "/" + file, std::ios::trunc) << text;
  }
  std::string dir_;
};

constexpr std::int64_t kMiB = 1 << 20;

// A sandbox that has not given back the memory of a command its limit
// stopped, and holds so much that the next command would start with less
// than kStartRoom below its limit, refuses that command with a reason (the
// sentry, starting it, would die of a failed allocation), and keeps its
// limit where it was.
TEST(SandboxMemory, ACommandDoesNotStartWithoutRoomBelowItsLimit) {
  FakeMemoryDir dir;
  const std::int64_t base = 100 * kMiB;
  const std::int64_t memory = 75 * kMiB;
  dir.set("memory.usage_in_bytes", base);
  SandboxMemory mem(dir.path(), memory, {});
  ASSERT_TRUE(mem.beginCommand());
  EXPECT_EQ(dir.get("memory.limit_in_bytes"), base + memory - kOomKillHeadroom);
  mem.raiseForKill();
  mem.endCommand();
  const std::int64_t raised = dir.get("memory.limit_in_bytes");
  // Still held: enough that the next command's room, measured from the
  // earlier base, is under kStartRoom (yet not past the limit itself).
  const std::int64_t next_limit = base + kSettleSlack + memory - kOomKillHeadroom;
  dir.set("memory.usage_in_bytes", next_limit - kStartRoom / 2);
  auto refused = mem.beginCommand();
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message().find("has not given back the memory"), std::string::npos)
      << refused.error().message();
  EXPECT_EQ(dir.get("memory.limit_in_bytes"), raised) << "a refused command changes no limit";
  // Given back: the next try starts, with the room measured from what the
  // sandbox holds now.
  dir.set("memory.usage_in_bytes", base);
  ASSERT_TRUE(mem.beginCommand());
  EXPECT_EQ(dir.get("memory.limit_in_bytes"), base + memory - kOomKillHeadroom);
}

// Under the smallest limits the room to keep free is half the command's
// room, so a fresh sandbox always starts its command.
TEST(SandboxMemory, ASmallLimitStillStartsItsCommand) {
  FakeMemoryDir dir;
  dir.set("memory.usage_in_bytes", 40 * kMiB);
  SandboxMemory mem(dir.path(), 8 * kMiB, {});
  ASSERT_TRUE(mem.beginCommand());
  EXPECT_GT(dir.get("memory.limit_in_bytes"), 40 * kMiB);
}

}  // namespace
}  // namespace airlock::gvisor
