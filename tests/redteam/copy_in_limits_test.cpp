// Red-team case B07 (the limits half): an archive with many
// members, or with a member larger than the workspace, is stopped by the
// workspace's own inode and byte limits (the sandbox's tmpfs), with an error
// that names the member; nothing lands outside the workspace, and the
// oversized member leaves no partial file behind. The archives are made on
// the host with tar(1).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "../sandbox/linux/linux_test_support.h"
#include "airlock/workspace/local_workspace.h"

namespace airlock::testing {
namespace {

class RedteamCopyInLimits : public SandboxTest {
 protected:
  // A tar of `dir`'s contents, made by the host's tar.
  std::string tarOf(const std::string& dir, const std::string& name) {
    const std::string out = scratch_.path() + "/" + name;
    const std::string cmd = "tar -C '" + dir + "' -cf '" + out + "' .";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    return out;
  }
  TempStateDir scratch_;
};

TEST_F(RedteamCopyInLimits, B07_ManyMembersStopAtTheInodeLimit) {
  reprovision([](ResourceLimits& l) { l.inodes_max = 200; });
  const std::string src = scratch_.path() + "/many";
  std::filesystem::create_directory(src);
  for (int i = 0; i < 1000; ++i) std::ofstream(src + "/m" + std::to_string(i));
  const std::string archive = tarOf(src, "many.tar");
  auto ws = env_->workspace(handle_);
  ASSERT_TRUE(ws) << ws.error().message();
  auto r = workspace::copyInArchive(archive, **ws);
  ASSERT_FALSE(r.has_value()) << "1000 members fitted in 200 inodes";
  const std::string msg = r.error().message();
  EXPECT_NE(msg.find("\"m"), std::string::npos) << "the error does not name the member: " << msg;
  EXPECT_NE(msg.find("No space left on device"), std::string::npos) << msg;
  EXPECT_EQ(msg.find(scratch_.path()), std::string::npos) << "host path in: " << msg;
  // The sandbox still runs, inside its limits.
  auto after = run(shell("ls | wc -l"));
  EXPECT_LT(std::atoi(after.stdout_data.c_str()), 200);
}

TEST_F(RedteamCopyInLimits, B07_AMemberLargerThanTheWorkspaceLeavesNothing) {
  reprovision([](ResourceLimits& l) { l.workspace_bytes = 8 << 20; });
  const std::string src = scratch_.path() + "/big";
  std::filesystem::create_directory(src);
  std::ofstream(src + "/small.txt") << "small\n";
  {
    std::ofstream big(src + "/huge.bin", std::ios::binary);
    const std::string chunk(1 << 20, 'x');
    for (int i = 0; i < 16; ++i) big << chunk;
  }
  const std::string archive = tarOf(src, "big.tar");
  auto ws = env_->workspace(handle_);
  ASSERT_TRUE(ws) << ws.error().message();
  auto r = workspace::copyInArchive(archive, **ws);
  ASSERT_FALSE(r.has_value()) << "16 MiB fitted in an 8 MiB workspace";
  const std::string msg = r.error().message();
  EXPECT_NE(msg.find("huge.bin"), std::string::npos) << msg;
  EXPECT_NE(msg.find("No space left on device"), std::string::npos) << msg;
  // No partial huge.bin, no temporary file: the workspace holds only what
  // was placed before the refusal.
  auto list = (*ws)->listdir(".");
  ASSERT_TRUE(list) << list.error().message();
  for (const auto& e : *list) EXPECT_EQ(e.name, "small.txt") << "left behind: " << e.name;
  auto df = run(shell("du -sk . | cut -f1"));
  EXPECT_LT(std::atoi(df.stdout_data.c_str()), 1024) << "bytes of the refused member remain";
}

}  // namespace
}  // namespace airlock::testing
