// The containment property (spec 000 gate workspace_containment; bug-log
// B03, B09): for generated paths over a tree with planted outward symlinks,
// openBeneath never yields an fd whose real path is outside the root, and
// resolve (checkRelativePath then openBeneath) yields an fd under the root
// or WorkspaceEscape / NotFound, never anything else.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <sys/stat.h>

#include <string>
#include <vector>

#include "airlock/core/command_validation.h"
#include "airlock/workspace/resolve.h"
#include "test_tree.h"

namespace airlock::workspace {
namespace {

using testing::TempDir;

class ContainmentTree {
 public:
  ContainmentTree() {
    const int r = root_.fd();
    ok_ = testing::mkdirs(r, "a/b") && testing::mkdirs(r, "dir") &&
          testing::writeFileAt(r, "a/b/c.txt", "c") && testing::writeFileAt(r, "dir/f", "f") &&
          testing::writeFileAt(r, "file", "file") && testing::symlinkAt(r, "../../..", "a/up") &&
          testing::symlinkAt(r, "../../dir", "a/b/inner") &&
          testing::symlinkAt(r, "../../../etc", "a/b/deep_up") &&
          testing::symlinkAt(r, "/etc", "out_abs") && testing::symlinkAt(r, "../", "out_rel") &&
          testing::symlinkAt(r, outside_.path(), "out_tmp") &&
          testing::symlinkAt(r, "/proc/self/root", "proc") &&
          testing::symlinkAt(r, "loop", "loop") && testing::symlinkAt(r, ".", "self") &&
          testing::symlinkAt(r, "a/b/inner", "chain") &&
          testing::symlinkAt(r, "a/b/../../out_rel", "sneaky") &&
          testing::writeFileAt(outside_.fd(), "secret", "outside");
  }
  bool ok() const { return ok_; }
  int fd() const { return root_.fd(); }
  bool isInside(const std::string& real) const {
    return real == root_.path() || real.rfind(root_.path() + "/", 0) == 0;
  }

 private:
  TempDir root_;
  TempDir outside_;
  bool ok_ = false;
};

rc::Gen<std::string> genPath() {
  static const std::vector<std::string> kParts = {
      "a",       "b",       "c.txt",   "up",     "inner", "deep_up", "dir",  "f",
      "out_abs", "out_rel", "out_tmp", "proc",   "loop",  "self",    "file", "chain",
      "sneaky",  "etc",     "passwd",  "secret", "..",    ".",       ""};
  auto component = rc::gen::weightedOneOf<std::string>(
      {{8, rc::gen::elementOf(kParts)}, {1, rc::gen::arbitrary<std::string>()}});
  return rc::gen::mapcat(rc::gen::inRange(0, 9), [component](int n) {
    return rc::gen::map(rc::gen::container<std::vector<std::string>>(n, component),
                        [](const std::vector<std::string>& parts) {
                          std::string out;
                          for (std::size_t i = 0; i < parts.size(); ++i) {
                            if (i > 0) out.push_back('/');
                            out += parts[i];
                          }
                          return out;
                        });
  });
}

std::vector<ResolverKind> kinds() {
  std::vector<ResolverKind> out = {ResolverKind::kNofollowWalk};
  if (detectResolver() == ResolverKind::kOpenat2) out.push_back(ResolverKind::kOpenat2);
  return out;
}

TEST(ContainmentProperty, OpenBeneathNeverReturnsAnFdOutsideTheRoot) {
  ContainmentTree tree;
  ASSERT_TRUE(tree.ok());
  EXPECT_TRUE(rc::check("openBeneath stays under the root", [&] {
    const std::string path = *genPath();
    const int flags =
        *rc::gen::element(O_PATH, O_RDONLY, O_RDONLY | O_DIRECTORY, O_PATH | O_NOFOLLOW);
    for (ResolverKind kind : kinds()) {
      auto fd = openBeneath(tree.fd(), path, flags, 0, kind);
      if (fd) {
        const std::string real = testing::fdPath(fd->get());
        RC_ASSERT(tree.isInside(real));
      }
    }
  }));
}

TEST(ContainmentProperty, ResolveIsUnderRootOrWorkspaceEscapeOrNotFound) {
  ContainmentTree tree;
  ASSERT_TRUE(tree.ok());
  EXPECT_TRUE(rc::check("resolve gives under-root, WorkspaceEscape or NotFound", [&] {
    const std::string path = *genPath();
    auto rel = checkRelativePath(path);
    if (!rel) {
      RC_ASSERT(rel.error().code == ErrorCode::kWorkspaceEscape);
      return;
    }
    for (ResolverKind kind : kinds()) {
      auto fd = openBeneath(tree.fd(), *rel, O_PATH, 0, kind);
      if (fd) {
        RC_ASSERT(tree.isInside(testing::fdPath(fd->get())));
      } else {
        RC_ASSERT(fd.error().code == ErrorCode::kWorkspaceEscape ||
                  fd.error().code == ErrorCode::kNotFound);
      }
    }
  }));
}

// The two implementations are interchangeable: on lexically valid paths they
// open the same object or fail with the same code.
TEST(ContainmentProperty, BothResolversAgreeOnCheckedPaths) {
  if (detectResolver() != ResolverKind::kOpenat2) GTEST_SKIP() << "kernel has no openat2";
  ContainmentTree tree;
  ASSERT_TRUE(tree.ok());
  EXPECT_TRUE(rc::check("openat2 and the walk agree", [&] {
    const std::string path = *genPath();
    auto rel = checkRelativePath(path);
    RC_PRE(rel.has_value());
    auto a = openBeneath(tree.fd(), *rel, O_PATH, 0, ResolverKind::kOpenat2);
    auto b = openBeneath(tree.fd(), *rel, O_PATH, 0, ResolverKind::kNofollowWalk);
    RC_ASSERT(a.has_value() == b.has_value());
    if (a) {
      struct stat sa {
      }, sb{};
      RC_ASSERT(::fstat(a->get(), &sa) == 0);
      RC_ASSERT(::fstat(b->get(), &sb) == 0);
      RC_ASSERT(sa.st_dev == sb.st_dev);
      RC_ASSERT(sa.st_ino == sb.st_ino);
    } else {
      RC_ASSERT(a.error().code == b.error().code);
    }
  }));
}

}  // namespace
}  // namespace airlock::workspace
