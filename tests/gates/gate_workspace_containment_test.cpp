// Gate workspace_containment (spec 000; red-team cases B03, B09), both resolution
// implementations (openat2 and the O_NOFOLLOW walk): for generated paths over a tree with planted
// outward symlinks, openBeneath never yields an fd whose real path is outside the root, and resolve
// (checkRelativePath then openBeneath) yields an fd under the root or WorkspaceEscape / NotFound,
// never anything else.
#include <dirent.h>
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

// Generated paths: components of the planted tree, dot segments, empty
// components (doubled separators), encoded and look-alike dots ("%2e%2e",
// overlong UTF-8, backslashes), NUL, components at and over the 255-byte
// limit, and arbitrary bytes; joined by '/', sometimes made absolute.
rc::Gen<std::string> genPath() {
  static const std::vector<std::string> kParts = {
      "a",       "b",       "c.txt",   "up",     "inner", "deep_up", "dir",  "f",
      "out_abs", "out_rel", "out_tmp", "proc",   "loop",  "self",    "file", "chain",
      "sneaky",  "etc",     "passwd",  "secret", "..",    ".",       ""};
  static const std::vector<std::string> kHostile = {"%2e%2e",
                                                    "%2f",
                                                    "\xc0\xae\xc0\xae",
                                                    "\xe2\x80\xa4\xe2\x80\xa4",
                                                    "..\\..",
                                                    "\\",
                                                    std::string("a\0b", 3),
                                                    std::string("\0", 1),
                                                    std::string(255, 'n'),
                                                    std::string(256, 'o'),
                                                    "...",
                                                    " ..",
                                                    ".. "};
  auto component = rc::gen::weightedOneOf<std::string>({{8, rc::gen::elementOf(kParts)},
                                                        {2, rc::gen::elementOf(kHostile)},
                                                        {1, rc::gen::arbitrary<std::string>()}});
  auto relative = rc::gen::mapcat(rc::gen::inRange(0, 9), [component](int n) {
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
  return rc::gen::weightedOneOf<std::string>(
      {{6, relative},
       {1, rc::gen::map(relative, [](std::string p) { return "/" + p; })},
       {1, rc::gen::map(relative, [](std::string p) { return "//" + p + "/"; })}});
}

std::vector<ResolverKind> kinds() {
  std::vector<ResolverKind> out = {ResolverKind::kNofollowWalk};
  if (detectResolver() == ResolverKind::kOpenat2) out.push_back(ResolverKind::kOpenat2);
  return out;
}

TEST(GateWorkspaceContainment, OpenBeneathNeverReturnsAnFdOutsideTheRoot) {
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

TEST(GateWorkspaceContainment, ResolveIsUnderRootOrWorkspaceEscapeOrNotFound) {
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
TEST(GateWorkspaceContainment, BothResolversAgreeOnCheckedPaths) {
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

#include <linux/fs.h>
#include <sys/syscall.h>

#include <atomic>
#include <thread>

namespace airlock::workspace {
namespace {

// Gate workspace_containment, the race half (red-team case B03): while another
// thread keeps exchanging a directory on the path with a symlink that leads
// out of the root (renameat2 RENAME_EXCHANGE, so the name is never missing),
// every open through either resolver lands under the root or fails.
TEST(GateWorkspaceContainment, SymlinkSwappedBetweenCheckAndUseNeverEscapes) {
  TempDir root;
  TempDir outside;
  const int r = root.fd();
  ASSERT_TRUE(testing::mkdirs(r, "a/b"));
  ASSERT_TRUE(testing::writeFileAt(r, "a/b/c.txt", "inside"));
  ASSERT_TRUE(testing::mkdirs(outside.fd(), "b"));
  ASSERT_TRUE(testing::writeFileAt(outside.fd(), "b/c.txt", "outside"));
  ASSERT_TRUE(testing::symlinkAt(r, outside.path() + "/b", "a/swap"));

  std::atomic<bool> stop{false};
  std::atomic<long> swaps{0};
  std::thread swapper([&] {
    while (!stop.load()) {
      if (::syscall(SYS_renameat2, r, "a/b", r, "a/swap", RENAME_EXCHANGE) == 0) ++swaps;
    }
  });
  long opened = 0, refused = 0;
  bool escaped = false;
  std::string where;
  for (int i = 0; i < 20000 && !escaped; ++i) {
    for (ResolverKind kind : kinds()) {
      auto fd = openBeneath(r, "a/b/c.txt", O_RDONLY, 0, kind);
      if (!fd) {
        ++refused;
        continue;
      }
      ++opened;
      const std::string real = testing::fdPath(fd->get());
      if (!(real == root.path() || real.rfind(root.path() + "/", 0) == 0)) {
        escaped = true;
        where = real;
      }
    }
  }
  stop = true;
  swapper.join();
  EXPECT_FALSE(escaped) << "opened " << where << " outside the root";
  EXPECT_GT(swaps.load(), 0) << "the swap never happened: the race was not exercised";
  EXPECT_GT(opened, 0) << "no open succeeded: the test would pass vacuously";
  EXPECT_GT(refused, 0) << "no open met the swapped symlink";
}

}  // namespace
}  // namespace airlock::workspace

#include <unistd.h>

#include "airlock/workspace/local_workspace.h"

namespace airlock::workspace {
namespace {

// A workspace at <outside>/ws whose symlinks lead out only into <outside>
// (never to / or /proc), so a bug this property finds damages nothing else.
class MutationTree {
 public:
  MutationTree() {
    const int o = outside_.fd();
    ok_ = testing::mkdirs(o, "ws/a/b") && testing::mkdirs(o, "ws/dir") &&
          testing::mkdirs(o, "od") && testing::writeFileAt(o, "secret", "outside") &&
          testing::writeFileAt(o, "od/kept", "o");
    const int raw = ::openat(o, "ws", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ok_ = ok_ && raw >= 0;
    if (!ok_) return;
    sys::UniqueFd root(raw);
    const int r = root.get();
    ok_ = testing::writeFileAt(r, "a/b/c.txt", "c") && testing::writeFileAt(r, "dir/f", "f") &&
          testing::writeFileAt(r, "file", "file") && testing::symlinkAt(r, "../..", "a/up") &&
          testing::symlinkAt(r, "../../dir", "a/b/inner") &&
          testing::symlinkAt(r, "../../../od", "a/b/deep_up") &&
          testing::symlinkAt(r, outside_.path(), "out_abs") &&
          testing::symlinkAt(r, "../", "out_rel") &&
          testing::symlinkAt(r, outside_.sub("od"), "out_od") &&
          testing::symlinkAt(r, "loop", "loop") && testing::symlinkAt(r, ".", "self") &&
          testing::symlinkAt(r, "a/b/inner", "chain");
    ws_ = makeLocalWorkspace(std::move(root), ::geteuid(), ::getegid());
  }
  bool ok() const { return ok_; }
  WorkspaceHandle& ws() { return *ws_; }
  // Everything outside the workspace is as it was made.
  bool outsideUntouched() const {
    std::string secret, kept;
    return testing::readFileAt(outside_.fd(), "secret", &secret) && secret == "outside" &&
           testing::readFileAt(outside_.fd(), "od/kept", &kept) && kept == "o" &&
           entries(outside_.fd()) == 3 && entries(outside_.fd(), "od") == 1;
  }

 private:
  static int entries(int dirfd, const char* sub = ".") {
    const int raw = ::openat(dirfd, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (raw < 0) return -1;
    sys::UniqueFd fd(raw);
    int n = 0;
    DIR* d = ::fdopendir(::dup(fd.get()));
    if (d == nullptr) return -1;
    while (const dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") ++n;
    }
    ::closedir(d);
    return n;
  }

  TempDir outside_;
  std::shared_ptr<LocalWorkspaceHandle> ws_;
  bool ok_ = false;
};

// Paths over the mutation tree's names, dot segments and hostile spellings.
rc::Gen<std::string> genMutationPath() {
  static const std::vector<std::string> kNames = {
      "a",       "b",       "c.txt",  "up",   "inner", "deep_up", "dir",    "f",    "file",
      "out_abs", "out_rel", "out_od", "loop", "self",  "chain",   "secret", "kept", "od"};
  static const std::vector<std::string> kHostile = {"..", ".", "", "%2e%2e", "ws"};
  auto component = rc::gen::weightedOneOf<std::string>(
      {{6, rc::gen::elementOf(kNames)}, {1, rc::gen::elementOf(kHostile)}});
  auto relative = rc::gen::mapcat(rc::gen::inRange(1, 5), [component](int n) {
    return rc::gen::map(rc::gen::container<std::vector<std::string>>(n, component),
                        [](const std::vector<std::string>& parts) {
                          std::string out;
                          for (std::size_t i = 0; i < parts.size(); ++i) {
                            out += (i > 0 ? "/" : "") + parts[i];
                          }
                          return out;
                        });
  });
  return rc::gen::weightedOneOf<std::string>(
      {{8, relative}, {1, rc::gen::map(relative, [](std::string p) { return "/" + p; })}});
}

// Gate workspace_containment for the operations that change names (remove,
// rename) and stat: whatever the generated paths, nothing outside the root
// is removed, moved in or out, or replaced, and a refusal is one of the
// port's codes, never anything else.
TEST(GateWorkspaceContainment, RemoveRenameAndStatNeverReachOutsideTheRoot) {
  EXPECT_TRUE(rc::check("remove, rename and stat stay under the root", [] {
    // Short paths over the planted names, so that some calls succeed (about one in ten).
    MutationTree tree;
    RC_ASSERT(tree.ok());
    const std::string from = *genMutationPath();
    const std::string to = *genMutationPath();
    const int op = *rc::gen::inRange(0, 4);
    const bool flag = *rc::gen::arbitrary<bool>();
    Result<void> done;
    if (op == 0) done = tree.ws().remove(from, flag);
    if (op == 1) done = tree.ws().rename(from, to, flag);
    if (op == 2) {
      auto st = tree.ws().stat(from);
      if (!st) done = tl::unexpected(st.error());
    }
    if (op == 3) {  // a second operation on what the first left
      (void)tree.ws().rename(from, to, flag);
      done = tree.ws().remove(to, true);
    }
    RC_ASSERT(tree.outsideUntouched());
    RC_CLASSIFY(done.has_value(), "the operation succeeded");
    if (!done) {
      const ErrorCode code = done.error().code;
      RC_ASSERT(code == ErrorCode::kWorkspaceEscape || code == ErrorCode::kNotFound ||
                code == ErrorCode::kToolValidationError || code == ErrorCode::kExecutionRejected);
    }
  }));
}

}  // namespace
}  // namespace airlock::workspace
