// copyInDirectory: regular files and directories only (`--copy-in DIR`; red-team case B07's member
// rules applied to a host directory).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "airlock/workspace/local_workspace.h"
#include "test_tree.h"

namespace airlock::workspace {
namespace {

using testing::TempDir;

class CopyInTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ws_ = makeLocalWorkspace(
        sys::UniqueFd(::openat(dest_.fd(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)), 4242, 4243);
  }
  void expectRefused(const std::string& source, const std::string& message) {
    auto r = copyInDirectory(source, *ws_);
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().code, ErrorCode::kToolValidationError);
    EXPECT_EQ(r.error().context, message);
    // The check pass runs first: nothing was written.
    auto list = ws_->listdir(".");
    ASSERT_TRUE(list.has_value());
    EXPECT_TRUE(list->empty());
  }

  TempDir src_;
  TempDir dest_;
  std::shared_ptr<WorkspaceHandle> ws_;
};

TEST_F(CopyInTest, MirrorsFilesAndDirectoriesIncludingEmptyOnes) {
  const int s = src_.fd();
  ASSERT_TRUE(testing::mkdirs(s, "pkg/sub"));
  ASSERT_TRUE(testing::mkdirs(s, "empty/nested_empty"));
  ASSERT_TRUE(testing::writeFileAt(s, "top.txt", "hi\n"));
  ASSERT_TRUE(testing::writeFileAt(s, "pkg/sub/data.bin", std::string("\0\x01\xff", 3)));
  ASSERT_TRUE(testing::writeFileAt(s, "pkg/a\nb", "odd name"));
  ASSERT_TRUE(testing::writeFileAt(s, "zero", ""));
  auto r = copyInDirectory(src_.path(), *ws_);
  ASSERT_TRUE(r.has_value()) << r.error().message();
  EXPECT_EQ(*ws_->read("top.txt"), "hi\n");
  EXPECT_EQ(*ws_->read("pkg/sub/data.bin"), std::string("\0\x01\xff", 3));
  EXPECT_EQ(*ws_->read("pkg/a\nb"), "odd name");
  EXPECT_EQ(*ws_->read("zero"), "");
  auto empty = ws_->listdir("empty");
  ASSERT_TRUE(empty.has_value());
  ASSERT_EQ(empty->size(), 1u);
  EXPECT_EQ((*empty)[0], (WorkspaceEntry{"nested_empty", WorkspaceEntry::Type::kDirectory, 0}));
  struct stat st {};
  ASSERT_EQ(::fstatat(dest_.fd(), "pkg/sub/data.bin", &st, 0), 0);
  EXPECT_EQ(st.st_uid, 4242u);
  ASSERT_EQ(::fstatat(dest_.fd(), "empty/nested_empty", &st, 0), 0);
  EXPECT_EQ(st.st_gid, 4243u);
}

TEST_F(CopyInTest, CopyInTakesADirectoryAndNamesTheFlagOnceWhenItRefuses) {
  ASSERT_TRUE(testing::writeFileAt(src_.fd(), "top.txt", "hi\n"));
  ASSERT_TRUE(copyIn(src_.path(), *ws_).has_value());
  EXPECT_EQ(*ws_->read("top.txt"), "hi\n");
  ASSERT_TRUE(testing::symlinkAt(src_.fd(), "/etc/passwd", "link"));
  auto refused = copyIn(src_.path(), *ws_);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, ErrorCode::kToolValidationError);
  EXPECT_EQ(refused.error().context,
            "--copy-in: \"link\" is a symlink; only regular files and directories are copied");
  // Not a directory: read as an archive, and refused as neither.
  auto not_archive = copyIn(src_.sub("top.txt"), *ws_);
  ASSERT_FALSE(not_archive.has_value());
  EXPECT_EQ(not_archive.error().context.rfind("--copy-in: ", 0), 0u) << not_archive.error().context;
  EXPECT_EQ(not_archive.error().context.find("copy-in: ", 3), std::string::npos)
      << "the flag is named once: " << not_archive.error().context;
}

TEST_F(CopyInTest, SymlinkMemberIsRefused) {
  ASSERT_TRUE(testing::mkdirs(src_.fd(), "a"));
  ASSERT_TRUE(testing::writeFileAt(src_.fd(), "a/first", "x"));
  ASSERT_TRUE(testing::symlinkAt(src_.fd(), "/etc/passwd", "a/link"));
  expectRefused(src_.path(),
                "copy-in: \"a/link\" is a symlink; only regular files and directories are copied");
}

TEST_F(CopyInTest, FifoMemberIsRefused) {
  ASSERT_EQ(::mkfifoat(src_.fd(), "pipe", 0644), 0);
  expectRefused(src_.path(),
                "copy-in: \"pipe\" is a FIFO; only regular files and directories are copied");
}

TEST_F(CopyInTest, SocketMemberIsRefused) {
  sys::UniqueFd sock(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(sock.valid());
  struct sockaddr_un addr {};
  addr.sun_family = AF_UNIX;
  const std::string path = src_.sub("sock");
  ASSERT_LT(path.size(), sizeof addr.sun_path);
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  ASSERT_EQ(::bind(sock.get(), reinterpret_cast<struct sockaddr*>(&addr), sizeof addr), 0);
  expectRefused(src_.path(),
                "copy-in: \"sock\" is a socket; only regular files and directories are copied");
}

TEST_F(CopyInTest, DeviceMemberIsRefused) {
  if (::mknodat(src_.fd(), "null", S_IFCHR | 0666, makedev(1, 3)) != 0) {
    GTEST_SKIP() << "mknod not permitted here: " << std::strerror(errno);
  }
  expectRefused(src_.path(),
                "copy-in: \"null\" is a device; only regular files and directories are copied");
}

TEST_F(CopyInTest, MissingSourceIsRefused) {
  const std::string missing = src_.sub("nope");
  expectRefused(missing, "copy-in: directory \"" + missing + "\" does not exist");
}

TEST_F(CopyInTest, SourceThatIsAFileIsRefused) {
  ASSERT_TRUE(testing::writeFileAt(src_.fd(), "plain", "x"));
  const std::string file = src_.sub("plain");
  expectRefused(file, "copy-in: \"" + file + "\" is not a directory");
}

}  // namespace
}  // namespace airlock::workspace
