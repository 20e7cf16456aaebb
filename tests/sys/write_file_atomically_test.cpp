// sys::writeFileAtomically: the file holds exactly the text, with the mode
// asked for, and no "<path>.tmp" is left beside it, whether the write
// succeeds, replaces an older file, or fails.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "airlock/sys/io.h"

namespace airlock::sys {
namespace {

class WriteFileAtomically : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/airlock-write-atomic-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/token";
  }
  void TearDown() override {
    (void)::unlink(path_.c_str());
    (void)::unlink((path_ + ".tmp").c_str());
    (void)::rmdir(dir_.c_str());
  }
  static bool exists(const std::string& p) { return ::access(p.c_str(), F_OK) == 0; }
  static void create(const std::string& p, const std::string& text) {
    std::ofstream(p) << text;
    ASSERT_TRUE(exists(p)) << p;
  }

  std::string dir_;
  std::string path_;
};

TEST_F(WriteFileAtomically, WritesTheWholeTextWithTheModeAndNoTemporary) {
  const std::string text(100000, 'x');  // more than one write's worth
  ASSERT_TRUE(writeFileAtomically(AT_FDCWD, path_, text, 0600));
  auto read = readFile(AT_FDCWD, path_.c_str(), 1 << 20);
  ASSERT_TRUE(read) << read.error().message();
  EXPECT_EQ(*read, text);
  struct stat st {};
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_FALSE(exists(path_ + ".tmp"));
}

TEST_F(WriteFileAtomically, ReplacesAnOlderFileAndAStaleTemporary) {
  create(path_, "old contents, longer than the new\n");
  create(path_ + ".tmp", "stale");
  ASSERT_TRUE(writeFileAtomically(AT_FDCWD, path_, "new\n", 0600));
  auto read = readFile(AT_FDCWD, path_.c_str(), 4096);
  ASSERT_TRUE(read) << read.error().message();
  EXPECT_EQ(*read, "new\n");
  EXPECT_FALSE(exists(path_ + ".tmp"));
}

TEST_F(WriteFileAtomically, RelativeToADirectoryFd) {
  const int dirfd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(dirfd, 0);
  auto written = writeFileAtomically(dirfd, "token", "abc", 0600);
  ::close(dirfd);
  ASSERT_TRUE(written) << written.error().message();
  auto read = readFile(AT_FDCWD, path_.c_str(), 4096);
  ASSERT_TRUE(read) << read.error().message();
  EXPECT_EQ(*read, "abc");
  struct stat st {};
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
}

// A failed write names the path and leaves neither file behind.
TEST_F(WriteFileAtomically, AMissingDirectoryIsAnErrorNamingThePath) {
  const std::string missing = dir_ + "/absent/token";
  auto written = writeFileAtomically(AT_FDCWD, missing, "abc", 0600);
  ASSERT_FALSE(written);
  EXPECT_NE(written.error().message().find(missing), std::string::npos)
      << written.error().message();
  EXPECT_FALSE(exists(missing));
  EXPECT_FALSE(exists(missing + ".tmp"));
}

// The target being a directory makes the rename fail: the temporary file is
// removed, the directory stays.
TEST_F(WriteFileAtomically, AFailedRenameRemovesTheTemporary) {
  ASSERT_EQ(::mkdir(path_.c_str(), 0700), 0);
  auto written = writeFileAtomically(AT_FDCWD, path_, "abc", 0600);
  EXPECT_FALSE(written);
  EXPECT_FALSE(exists(path_ + ".tmp"));
  struct stat st {};
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  (void)::rmdir(path_.c_str());
}

}  // namespace
}  // namespace airlock::sys
