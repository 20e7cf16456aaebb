// The local-directory WorkspaceHandle (spec 000 WorkspaceHandle; red-team cases
// B01, B02, B04, B05, B08, B09).
#include "airlock/workspace/local_workspace.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "test_tree.h"

namespace airlock::workspace {
namespace {

using testing::TempDir;

constexpr uid_t kUid = 12345;
constexpr gid_t kGid = 12346;

class LocalWorkspaceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ws_ = makeLocalWorkspace(
        sys::UniqueFd(::openat(tmp_.fd(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)), kUid, kGid);
    ASSERT_TRUE(testing::writeFileAt(outside_.fd(), "canary", "host canary"));
    ASSERT_EQ(::fstatat(outside_.fd(), "canary", &canary_before_, 0), 0);
  }

  int root() const { return tmp_.fd(); }
  struct stat statAt(const std::string& rel) {
    struct stat st {};
    EXPECT_EQ(::fstatat(root(), rel.c_str(), &st, AT_SYMLINK_NOFOLLOW), 0) << rel;
    return st;
  }
  void expectCanaryUntouched() {
    std::string bytes;
    ASSERT_TRUE(testing::readFileAt(outside_.fd(), "canary", &bytes));
    EXPECT_EQ(bytes, "host canary");
    struct stat st {};
    ASSERT_EQ(::fstatat(outside_.fd(), "canary", &st, 0), 0);
    EXPECT_EQ(st.st_ino, canary_before_.st_ino);
    EXPECT_EQ(st.st_uid, canary_before_.st_uid);
    EXPECT_EQ(st.st_mode, canary_before_.st_mode);
    EXPECT_EQ(st.st_mtim.tv_nsec, canary_before_.st_mtim.tv_nsec);
    EXPECT_EQ(st.st_mtim.tv_sec, canary_before_.st_mtim.tv_sec);
  }

  TempDir tmp_;
  TempDir outside_;
  struct stat canary_before_ {};
  std::shared_ptr<WorkspaceHandle> ws_;
};

TEST_F(LocalWorkspaceTest, WriteThenReadRoundTripsWithOwnerAndMode) {
  ASSERT_TRUE(ws_->write("a/b/c.txt", "hi\n").has_value());
  auto bytes = ws_->read("a/b/c.txt");
  ASSERT_TRUE(bytes.has_value()) << bytes.error().message();
  EXPECT_EQ(*bytes, "hi\n");
  struct stat f = statAt("a/b/c.txt");
  EXPECT_TRUE(S_ISREG(f.st_mode));
  EXPECT_EQ(f.st_mode & 07777, 0644u);
  EXPECT_EQ(f.st_uid, kUid);
  EXPECT_EQ(f.st_gid, kGid);
  for (const char* dir : {"a", "a/b"}) {
    struct stat d = statAt(dir);
    EXPECT_TRUE(S_ISDIR(d.st_mode));
    EXPECT_EQ(d.st_mode & 07777, 0755u);
    EXPECT_EQ(d.st_uid, kUid) << dir;
    EXPECT_EQ(d.st_gid, kGid) << dir;
  }
}

TEST_F(LocalWorkspaceTest, WriteReplacesAtomicallyAndLeavesNoTemporaryFiles) {
  ASSERT_TRUE(ws_->write("f", "first version").has_value());
  const ino_t first = statAt("f").st_ino;
  ASSERT_TRUE(ws_->write("f", "2").has_value());
  EXPECT_NE(statAt("f").st_ino, first);  // a new inode renamed over the name
  EXPECT_EQ(*ws_->read("f"), "2");
  ASSERT_TRUE(ws_->write("empty", "").has_value());
  EXPECT_EQ(*ws_->read("empty"), "");
  auto list = ws_->listdir(".");
  ASSERT_TRUE(list.has_value());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].name, "empty");
  EXPECT_EQ((*list)[1].name, "f");
}

// B01: a planted symlink at the name is replaced, never written through.
TEST_F(LocalWorkspaceTest, WriteOverPlantedSymlinkReplacesTheLink) {
  ASSERT_TRUE(testing::symlinkAt(root(), outside_.sub("canary"), "evil_abs"));
  ASSERT_TRUE(
      testing::symlinkAt(root(), "../" + outside_.path().substr(5) + "/canary", "evil_rel"));
  ASSERT_TRUE(ws_->write("evil_abs", "mine").has_value());
  ASSERT_TRUE(ws_->write("evil_rel", "mine").has_value());
  for (const char* rel : {"evil_abs", "evil_rel"}) {
    struct stat st = statAt(rel);
    EXPECT_TRUE(S_ISREG(st.st_mode)) << rel;
    EXPECT_EQ(st.st_uid, kUid);
    EXPECT_EQ(*ws_->read(rel), "mine");
  }
  expectCanaryUntouched();
}

// B04: a symlinked directory pointing outside is refused for writes.
TEST_F(LocalWorkspaceTest, WriteIntoOutwardSymlinkedDirectoryIsRefused) {
  ASSERT_TRUE(testing::symlinkAt(root(), outside_.path(), "up"));
  ASSERT_TRUE(testing::symlinkAt(root(), "../../../../../../../../" + outside_.path(), "up2"));
  for (const char* rel : {"up/f.txt", "up2/f.txt", "up/canary", "up/new/dir/f"}) {
    auto r = ws_->write(rel, "x");
    ASSERT_FALSE(r.has_value()) << rel;
    EXPECT_EQ(r.error().code, ErrorCode::kWorkspaceEscape) << rel << ": " << r.error().message();
    auto m = ws_->mkdir(std::string(rel) + "_d");
    ASSERT_FALSE(m.has_value()) << rel;
    EXPECT_EQ(m.error().code, ErrorCode::kWorkspaceEscape);
  }
  EXPECT_NE(::faccessat(outside_.fd(), "f.txt", F_OK, 0), 0);
  EXPECT_NE(::faccessat(outside_.fd(), "new", F_OK, 0), 0);
  expectCanaryUntouched();
}

TEST_F(LocalWorkspaceTest, WriteFollowsInsideSymlinkedDirectory) {
  ASSERT_TRUE(ws_->mkdir("real").has_value());
  ASSERT_TRUE(testing::symlinkAt(root(), "real", "alias"));
  ASSERT_TRUE(ws_->write("alias/f", "x").has_value());
  EXPECT_EQ(*ws_->read("real/f"), "x");
}

TEST_F(LocalWorkspaceTest, LexicalRulesApplyToEveryMethod) {
  for (const std::string& bad :
       std::vector<std::string>{"../x", "/etc/passwd", "a//b", "a/./b", "", std::string("a\0b", 3),
                                std::string(256, 'n')}) {
    EXPECT_EQ(ws_->write(bad, "x").error().code, ErrorCode::kWorkspaceEscape);
    EXPECT_EQ(ws_->read(bad).error().code, ErrorCode::kWorkspaceEscape);
    EXPECT_EQ(ws_->mkdir(bad).error().code, ErrorCode::kWorkspaceEscape);
    EXPECT_EQ(ws_->listdir(bad).error().code, ErrorCode::kWorkspaceEscape);
  }
  auto root_write = ws_->write(".", "x");
  ASSERT_FALSE(root_write.has_value());
  EXPECT_EQ(root_write.error().code, ErrorCode::kToolValidationError);
  // 255-byte names are fine.
  EXPECT_TRUE(ws_->write(std::string(255, 'n'), "x").has_value());
}

// B05: a symlink is never read through, whatever it points at.
TEST_F(LocalWorkspaceTest, ReadRefusesSymlinksAndNonRegularFiles) {
  ASSERT_TRUE(testing::symlinkAt(root(), "/etc/hostname", "result.json"));
  ASSERT_TRUE(testing::writeFileAt(root(), "inside", "in"));
  ASSERT_TRUE(testing::symlinkAt(root(), "inside", "alias"));
  ASSERT_TRUE(testing::symlinkAt(root(), "loop", "loop"));
  for (const char* rel : {"result.json", "alias", "loop"}) {
    auto r = ws_->read(rel);
    ASSERT_FALSE(r.has_value()) << rel;
    EXPECT_EQ(r.error().code, ErrorCode::kWorkspaceEscape) << rel;
    EXPECT_NE(r.error().context.find(rel), std::string::npos) << r.error().context;
  }
  ASSERT_TRUE(testing::mkdirs(root(), "dir"));
  ASSERT_EQ(::mkfifoat(root(), "fifo", 0644), 0);
  for (const char* rel : {"dir", "fifo", "."}) {
    auto r = ws_->read(rel);
    ASSERT_FALSE(r.has_value()) << rel;
    EXPECT_EQ(r.error().code, ErrorCode::kToolValidationError) << rel;
    EXPECT_NE(r.error().context.find("not a regular file"), std::string::npos);
  }
  auto missing = ws_->read("nope");
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
}

TEST_F(LocalWorkspaceTest, ReadIsCappedAt64MiB) {
  {
    sys::UniqueFd fd(::openat(root(), "big", O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    ASSERT_TRUE(fd.valid());
    ASSERT_EQ(::ftruncate(fd.get(), (off_t{64} << 20) + 1), 0);
  }
  auto r = ws_->read("big");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kToolValidationError);
  EXPECT_NE(r.error().context.find("64 MiB"), std::string::npos);
  {
    sys::UniqueFd fd(::openat(root(), "big", O_WRONLY | O_CLOEXEC));
    ASSERT_EQ(::ftruncate(fd.get(), off_t{64} << 20), 0);
  }
  auto ok = ws_->read("big");
  ASSERT_TRUE(ok.has_value()) << ok.error().message();
  EXPECT_EQ(ok->size(), std::size_t{64} << 20);
}

TEST_F(LocalWorkspaceTest, WriteOntoADirectoryIsRefused) {
  ASSERT_TRUE(ws_->mkdir("d").has_value());
  auto r = ws_->write("d", "x");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kToolValidationError);
  ASSERT_TRUE(ws_->write("file", "x").has_value());
  auto under = ws_->write("file/below", "x");
  ASSERT_FALSE(under.has_value());
  EXPECT_EQ(under.error().code, ErrorCode::kToolValidationError);
}

TEST_F(LocalWorkspaceTest, MkdirCreatesParentsIsIdempotentAndChowns) {
  ASSERT_TRUE(ws_->mkdir("x/y/z").has_value());
  ASSERT_TRUE(ws_->mkdir("x/y/z").has_value());
  ASSERT_TRUE(ws_->mkdir(".").has_value());
  for (const char* dir : {"x", "x/y", "x/y/z"}) {
    struct stat st = statAt(dir);
    EXPECT_TRUE(S_ISDIR(st.st_mode));
    EXPECT_EQ(st.st_uid, kUid);
    EXPECT_EQ(st.st_gid, kGid);
  }
  ASSERT_TRUE(ws_->write("file", "x").has_value());
  auto r = ws_->mkdir("file");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kToolValidationError);
}

TEST_F(LocalWorkspaceTest, ListdirGivesSortedTypedEntriesWithRawNames) {
  ASSERT_TRUE(ws_->write("b.txt", "12345").has_value());
  ASSERT_TRUE(ws_->write("a\nb", "1").has_value());
  ASSERT_TRUE(ws_->write("\xff\xfe.txt", "").has_value());
  ASSERT_TRUE(ws_->mkdir("dir").has_value());
  ASSERT_TRUE(testing::symlinkAt(root(), "/etc/passwd", "link"));
  ASSERT_EQ(::mkfifoat(root(), "fifo", 0644), 0);
  auto list = ws_->listdir(".");
  ASSERT_TRUE(list.has_value()) << list.error().message();
  const std::vector<WorkspaceEntry> want = {
      {"a\nb", WorkspaceEntry::Type::kFile, 1},
      {"b.txt", WorkspaceEntry::Type::kFile, 5},
      {"dir", WorkspaceEntry::Type::kDirectory, 0},
      {"fifo", WorkspaceEntry::Type::kOther, 0},
      {"link", WorkspaceEntry::Type::kSymlink, 11},
      {"\xff\xfe.txt", WorkspaceEntry::Type::kFile, 0},
  };
  EXPECT_EQ(*list, want);
  // The name from the listing reads that same file (B08).
  EXPECT_EQ(*ws_->read((*list)[0].name), "1");

  auto of_file = ws_->listdir("b.txt");
  ASSERT_FALSE(of_file.has_value());
  EXPECT_EQ(of_file.error().code, ErrorCode::kToolValidationError);
  auto missing = ws_->listdir("nope");
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  ASSERT_TRUE(testing::symlinkAt(root(), outside_.path(), "out"));
  auto out = ws_->listdir("out");
  ASSERT_FALSE(out.has_value());
  EXPECT_EQ(out.error().code, ErrorCode::kWorkspaceEscape);
}

}  // namespace
}  // namespace airlock::workspace
