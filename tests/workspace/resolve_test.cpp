// openBeneath: both implementations run the same list of containment cases
// (red-team cases B01, B03, B04, B05; spec 000 WorkspaceHandle rule 3).
#include "airlock/workspace/resolve.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "test_tree.h"

namespace airlock::workspace {
namespace {

using testing::TempDir;

class OpenBeneathTest : public ::testing::TestWithParam<ResolverKind> {
 protected:
  void SetUp() override {
    if (GetParam() == ResolverKind::kOpenat2 && detectResolver() != ResolverKind::kOpenat2) {
      GTEST_SKIP() << "kernel has no openat2";
    }
    const int r = tmp_.fd();
    ASSERT_TRUE(testing::writeFileAt(r, "file", "hi\n"));
    ASSERT_TRUE(testing::mkdirs(r, "dir/sub"));
    ASSERT_TRUE(testing::writeFileAt(r, "dir/inner.txt", "inner"));
    ASSERT_TRUE(testing::symlinkAt(r, "/etc/passwd", "link_passwd"));
    ASSERT_TRUE(testing::symlinkAt(r, "../..", "link_up"));
    ASSERT_TRUE(testing::symlinkAt(r, "/tmp", "link_abs"));
    ASSERT_TRUE(testing::symlinkAt(r, "chain2", "chain1"));
    ASSERT_TRUE(testing::symlinkAt(r, "chain3", "chain2"));
    ASSERT_TRUE(testing::symlinkAt(r, "dir", "chain3"));
    ASSERT_TRUE(testing::symlinkAt(r, "../file", "dir/up_one"));
    ASSERT_TRUE(testing::symlinkAt(r, "../../x", "dir/up_two"));
    ASSERT_TRUE(testing::symlinkAt(r, "sub/../../dir/inner.txt", "dir/wander"));
    ASSERT_TRUE(testing::symlinkAt(r, "missing", "dangle"));
    ASSERT_TRUE(testing::symlinkAt(r, "loop", "loop"));
    ASSERT_TRUE(testing::symlinkAt(r, "/proc/self/root", "proc_root"));
    ASSERT_TRUE(testing::symlinkAt(r, "file/", "file_slash"));
  }

  Result<sys::UniqueFd> open(const std::string& rel, int flags = O_RDONLY) {
    return openBeneath(tmp_.fd(), rel, flags, 0644, GetParam());
  }

  // The opened object is under the root (by its real path) and reads `want`.
  void expectReads(const std::string& rel, const std::string& want) {
    auto fd = open(rel);
    ASSERT_TRUE(fd.has_value()) << rel << ": " << fd.error().message();
    std::string path = testing::fdPath(fd->get());
    EXPECT_EQ(path.rfind(tmp_.path() + "/", 0), 0u) << path;
    char buf[64];
    ssize_t n = ::read(fd->get(), buf, sizeof buf);
    ASSERT_GE(n, 0);
    EXPECT_EQ(std::string(buf, static_cast<std::size_t>(n)), want);
  }

  void expectCode(const std::string& rel, ErrorCode code, int flags = O_RDONLY) {
    auto fd = open(rel, flags);
    ASSERT_FALSE(fd.has_value()) << rel << " opened " << testing::fdPath(fd->get());
    EXPECT_EQ(fd.error().code, code) << rel << ": " << fd.error().message();
  }

  TempDir tmp_;
};

TEST_P(OpenBeneathTest, OpensPlainFilesAndTheRoot) {
  expectReads("file", "hi\n");
  expectReads("dir/inner.txt", "inner");
  auto root = open("", O_RDONLY | O_DIRECTORY);
  ASSERT_TRUE(root.has_value());
  struct stat a {
  }, b{};
  ASSERT_EQ(::fstat(root->get(), &a), 0);
  ASSERT_EQ(::fstat(tmp_.fd(), &b), 0);
  EXPECT_EQ(a.st_ino, b.st_ino);
}

TEST_P(OpenBeneathTest, SymlinkToEtcPasswdEscapes) {
  expectCode("link_passwd", ErrorCode::kWorkspaceEscape);
}

TEST_P(OpenBeneathTest, SymlinkUpwardEscapes) {
  expectCode("link_up", ErrorCode::kWorkspaceEscape, O_RDONLY | O_DIRECTORY);
  // The refusal says what happened, not the kernel's word for it.
  auto fd = open("link_up/etc/passwd", O_RDONLY);
  ASSERT_FALSE(fd.has_value());
  EXPECT_NE(fd.error().message().find("a symlink or .. in it leads outside"), std::string::npos)
      << fd.error().message();
  EXPECT_EQ(fd.error().message().find("cross-device"), std::string::npos) << fd.error().message();
  expectCode("link_up/etc/passwd", ErrorCode::kWorkspaceEscape);
  expectCode("dir/up_two", ErrorCode::kWorkspaceEscape);
}

TEST_P(OpenBeneathTest, AbsoluteSymlinkEscapesEvenWhenTargetExists) {
  expectCode("link_abs", ErrorCode::kWorkspaceEscape, O_RDONLY | O_DIRECTORY);
  expectCode("link_abs/" + tmp_.path().substr(5) + "/file", ErrorCode::kWorkspaceEscape);
}

// Both implementations follow relative symlinks whose resolution stays
// beneath the root (the walk splices the target, as RESOLVE_BENEATH does).
TEST_P(OpenBeneathTest, SymlinkChainInsideIsFollowed) {
  expectReads("chain1/inner.txt", "inner");
  expectReads("dir/up_one", "hi\n");
  expectReads("dir/wander", "inner");
}

TEST_P(OpenBeneathTest, FinalSymlinkWithNofollowIsRefused) {
  expectCode("dir/up_one", ErrorCode::kWorkspaceEscape, O_RDONLY | O_NOFOLLOW);
  // O_PATH | O_NOFOLLOW gives the link itself, as openat does.
  auto fd = open("chain1", O_PATH | O_NOFOLLOW);
  ASSERT_TRUE(fd.has_value()) << fd.error().message();
  struct stat st {};
  ASSERT_EQ(::fstat(fd->get(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
}

TEST_P(OpenBeneathTest, MagicLinkThroughProcEscapes) {
  expectCode("proc_root", ErrorCode::kWorkspaceEscape, O_RDONLY | O_DIRECTORY);
  expectCode("proc_root/etc/passwd", ErrorCode::kWorkspaceEscape);
  // With /proc/self itself as the root, "root" and "cwd" are magic links.
  sys::UniqueFd proc(::open("/proc/self", O_PATH | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(proc.valid());
  for (const char* rel : {"root/etc/passwd", "cwd", "root"}) {
    auto fd = openBeneath(proc.get(), rel, O_RDONLY, 0, GetParam());
    ASSERT_FALSE(fd.has_value()) << rel << " opened " << testing::fdPath(fd->get());
    EXPECT_EQ(fd.error().code, ErrorCode::kWorkspaceEscape) << rel;
  }
}

TEST_P(OpenBeneathTest, DirectoryReplacedBySymlinkEscapes) {
  ASSERT_TRUE(testing::mkdirs(tmp_.fd(), "swap"));
  ASSERT_TRUE(testing::writeFileAt(tmp_.fd(), "swap/passwd", "mine"));
  expectReads("swap/passwd", "mine");
  ASSERT_EQ(::renameat(tmp_.fd(), "swap", tmp_.fd(), "swap_old"), 0);
  ASSERT_TRUE(testing::symlinkAt(tmp_.fd(), "/etc", "swap"));
  expectCode("swap/passwd", ErrorCode::kWorkspaceEscape);
}

TEST_P(OpenBeneathTest, MissingIsNotFound) {
  expectCode("nope", ErrorCode::kNotFound);
  expectCode("nope/deeper", ErrorCode::kNotFound);
  expectCode("file/below_a_file", ErrorCode::kNotFound);
  expectCode("dangle", ErrorCode::kNotFound);
  expectCode("file_slash", ErrorCode::kNotFound);  // "file/" names a directory
}

TEST_P(OpenBeneathTest, SymlinkLoopIsRefused) {
  auto fd = open("loop");
  ASSERT_FALSE(fd.has_value());
  EXPECT_EQ(fd.error().code, ErrorCode::kWorkspaceEscape);
  EXPECT_EQ(fd.error().sys_errno, ELOOP);
}

TEST_P(OpenBeneathTest, LexicalEscapesAreRefusedEvenUnchecked) {
  // openBeneath is normally given checkRelativePath output; it must still hold.
  expectCode("../x", ErrorCode::kWorkspaceEscape);
  expectCode("dir/../../x", ErrorCode::kWorkspaceEscape);
  expectCode("/etc/passwd", ErrorCode::kWorkspaceEscape);
  expectCode(std::string("fi\0le", 5), ErrorCode::kWorkspaceEscape);
  expectReads("dir/../file", "hi\n");
}

TEST_P(OpenBeneathTest, CreateStaysBeneath) {
  auto fd = open("dir/new.txt", O_WRONLY | O_CREAT | O_EXCL);
  ASSERT_TRUE(fd.has_value()) << fd.error().message();
  struct stat st {};
  EXPECT_EQ(::fstatat(tmp_.fd(), "dir/new.txt", &st, 0), 0);

  // O_CREAT through a dangling symlink aimed outside creates nothing there.
  TempDir outside;
  const std::string target = outside.sub("created");
  ASSERT_TRUE(testing::symlinkAt(tmp_.fd(), target, "dangle_out"));
  expectCode("dangle_out", ErrorCode::kWorkspaceEscape, O_WRONLY | O_CREAT);
  EXPECT_NE(::access(target.c_str(), F_OK), 0);

  // O_CREAT through a dangling symlink that stays inside creates the target.
  auto inside = open("dangle", O_WRONLY | O_CREAT);
  ASSERT_TRUE(inside.has_value()) << inside.error().message();
  EXPECT_EQ(::fstatat(tmp_.fd(), "missing", &st, AT_SYMLINK_NOFOLLOW), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
}

INSTANTIATE_TEST_SUITE_P(BothResolvers, OpenBeneathTest,
                         ::testing::Values(ResolverKind::kOpenat2, ResolverKind::kNofollowWalk),
                         [](const auto& info) {
                           return info.param == ResolverKind::kOpenat2 ? "Openat2" : "NofollowWalk";
                         });

TEST(DetectResolver, IsStableAndOpenat2OnThisKernel) {
  ResolverKind first = detectResolver();
  EXPECT_EQ(first, detectResolver());
  // The development VM runs a kernel with openat2 (5.6+); if this fails the
  // walk is what production would use and the parametrized tests say so.
  EXPECT_EQ(first, ResolverKind::kOpenat2);
}

// The walk holds one directory fd at a time, so a path of 2000 components
// resolves even with a small descriptor limit.
TEST(OpenBeneathWalk, DeepPathNeedsFewDescriptors) {
  TempDir tmp;
  std::string rel;
  sys::UniqueFd cur(::openat(tmp.fd(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  for (int i = 0; i < 2000; ++i) {
    ASSERT_EQ(::mkdirat(cur.get(), "d", 0755), 0);
    cur = sys::UniqueFd(::openat(cur.get(), "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(cur.valid());
    rel += rel.empty() ? "d" : "/d";
  }
  ASSERT_TRUE(testing::writeFileAt(cur.get(), "f", "deep"));
  rel += "/f";
  cur.reset();
  struct rlimit old {};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &old), 0);
  struct rlimit low = old;
  low.rlim_cur = 64;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  auto fd = openBeneath(tmp.fd(), rel, O_RDONLY, 0, ResolverKind::kNofollowWalk);
  auto up = openBeneath(tmp.fd(), rel.substr(0, rel.size() - 2) + "/../d/f", O_RDONLY, 0,
                        ResolverKind::kNofollowWalk);
  ::setrlimit(RLIMIT_NOFILE, &old);
  ASSERT_TRUE(fd.has_value()) << fd.error().message();
  ASSERT_TRUE(up.has_value()) << up.error().message();
  char buf[8];
  EXPECT_EQ(::read(fd->get(), buf, sizeof buf), 4);
}

}  // namespace
}  // namespace airlock::workspace
