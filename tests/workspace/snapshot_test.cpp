// takeSnapshot / diffSnapshots / sha256At (spec 000 FileChange and
// files_changed; red-team cases B08, B09, B32, B45).
#include "airlock/workspace/snapshot.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "airlock/sys/unique_fd.h"
#include "test_tree.h"

namespace airlock::workspace {
namespace {

using testing::TempDir;

constexpr char kHiSha[] = "98ea6e4f216f2fb4b69fff9b3a44842c38686ca685f3f55dc48c5d3fb1107be4";

const FileChange* findChange(const Diff& diff, const std::string& path) {
  for (const auto& c : diff.changes) {
    if (c.path == path) return &c;
  }
  return nullptr;
}

class SnapshotTest : public ::testing::Test {
 protected:
  int root() const { return tmp_.fd(); }
  Snapshot snap() {
    auto s = takeSnapshot(root());
    EXPECT_TRUE(s.has_value()) << s.error().message();
    return s ? *s : Snapshot{};
  }
  Diff diff(const Snapshot& before, Snapshot& after, std::int64_t max_listing = 1000) {
    auto d = diffSnapshots(before, after, root(), max_listing);
    EXPECT_TRUE(d.has_value()) << d.error().message();
    return d ? *d : Diff{};
  }
  void setMtime(const std::string& rel, const struct timespec& mtime) {
    struct timespec times[2] = {mtime, mtime};
    ASSERT_EQ(::utimensat(root(), rel.c_str(), times, AT_SYMLINK_NOFOLLOW), 0);
  }
  struct timespec mtimeOf(const std::string& rel) {
    struct stat st {};
    EXPECT_EQ(::fstatat(root(), rel.c_str(), &st, AT_SYMLINK_NOFOLLOW), 0);
    return st.st_mtim;
  }

  TempDir tmp_;
};

TEST_F(SnapshotTest, ListsFilesAndSymlinksNotDirectoriesOrSpecials) {
  ASSERT_TRUE(testing::mkdirs(root(), "d/e"));
  ASSERT_TRUE(testing::mkdirs(root(), "empty"));
  ASSERT_TRUE(testing::writeFileAt(root(), "d/e/f.txt", "hi\n"));
  ASSERT_TRUE(testing::symlinkAt(root(), "/etc/passwd", "d/link"));
  ASSERT_EQ(::mkfifoat(root(), "fifo", 0644), 0);
  Snapshot s = snap();
  ASSERT_EQ(s.size(), 2u);
  ASSERT_TRUE(s.count("d/e/f.txt"));
  EXPECT_EQ(s["d/e/f.txt"].type, SnapshotEntry::Type::kFile);
  EXPECT_EQ(s["d/e/f.txt"].size_bytes, 3);
  EXPECT_FALSE(s["d/e/f.txt"].sha256.has_value());  // takeSnapshot hashes nothing
  ASSERT_TRUE(s.count("d/link"));
  EXPECT_EQ(s["d/link"].type, SnapshotEntry::Type::kSymlink);
  EXPECT_EQ(s["d/link"].size_bytes, 11);  // strlen("/etc/passwd")
}

TEST_F(SnapshotTest, PathologicalNamesAreOneEntryEach) {
  const std::string names[] = {
      "a\nb", "a\rb", "\xff\xfe.txt", "\xed\xa0\x80", "tab\there",
      "-rf",  "   ",  "..data",       "\\",           std::string(255, 'x')};
  for (const auto& n : names) ASSERT_TRUE(testing::writeFileAt(root(), n, "hi\n")) << n;
  Snapshot before;
  Snapshot after = snap();
  ASSERT_EQ(after.size(), std::size(names));
  for (const auto& n : names) EXPECT_EQ(after.count(n), 1u) << n;
  Diff d = diff(before, after);
  ASSERT_EQ(d.changes.size(), std::size(names));
  for (const auto& c : d.changes) {
    EXPECT_EQ(c.change, ChangeKind::kCreated);
    EXPECT_EQ(c.sha256, std::optional<std::string>(kHiSha)) << c.path;
  }
}

TEST_F(SnapshotTest, DiffReportsCreatedModifiedDeletedSorted) {
  ASSERT_TRUE(testing::writeFileAt(root(), "keep", "same"));
  ASSERT_TRUE(testing::writeFileAt(root(), "mod", "old contents"));
  ASSERT_TRUE(testing::writeFileAt(root(), "gone", "12345"));
  Snapshot before = snap();
  ASSERT_TRUE(testing::writeFileAt(root(), "mod", "hi\n"));
  ASSERT_EQ(::unlinkat(root(), "gone", 0), 0);
  ASSERT_TRUE(testing::mkdirs(root(), "sub"));
  ASSERT_TRUE(testing::writeFileAt(root(), "sub/new", "hi\n"));
  ASSERT_TRUE(testing::writeFileAt(root(), "a_new", ""));
  Snapshot after = snap();
  Diff d = diff(before, after);
  EXPECT_FALSE(d.truncated);
  const std::vector<FileChange> want = {
      {"a_new", ChangeKind::kCreated, 0, testing::sha256Hex("")},
      {"gone", ChangeKind::kDeleted, 5, std::nullopt},
      {"mod", ChangeKind::kModified, 3, std::string(kHiSha)},
      {"sub/new", ChangeKind::kCreated, 3, std::string(kHiSha)},
  };
  EXPECT_EQ(d.changes, want);
  // Hashes computed by the diff are kept in `after`.
  EXPECT_EQ(after["mod"].sha256, std::optional<std::string>(kHiSha));
  EXPECT_FALSE(after["keep"].sha256.has_value());
}

TEST_F(SnapshotTest, NothingChangedMeansEmptyDiff) {
  ASSERT_TRUE(testing::writeFileAt(root(), "a", "x"));
  Snapshot before = snap();
  Snapshot after = snap();
  EXPECT_TRUE(diff(before, after).changes.empty());
}

// B45: same length, original mtime put back; ctime and content still differ.
TEST_F(SnapshotTest, SameSizeRestoredMtimeIsModified) {
  ASSERT_TRUE(testing::writeFileAt(root(), "a.txt", "AAAA"));
  struct timespec old = mtimeOf("a.txt");
  Snapshot before = snap();
  {
    // Overwrite in place: the inode stays the same.
    sys::UniqueFd fd(::openat(root(), "a.txt", O_WRONLY | O_CLOEXEC));
    ASSERT_TRUE(fd.valid());
    ASSERT_EQ(::pwrite(fd.get(), "BBBB", 4, 0), 4);
  }
  setMtime("a.txt", old);
  Snapshot after = snap();
  EXPECT_EQ(after["a.txt"].mtime_ns, before["a.txt"].mtime_ns);
  EXPECT_EQ(after["a.txt"].inode, before["a.txt"].inode);
  Diff d = diff(before, after);
  ASSERT_EQ(d.changes.size(), 1u);
  EXPECT_EQ(d.changes[0].change, ChangeKind::kModified);
  EXPECT_EQ(d.changes[0].sha256, testing::sha256Hex("BBBB"));
}

// B45: `mv b2.txt b.txt` where b2 has the same size and mtime.
TEST_F(SnapshotTest, MoveOverIsModified) {
  ASSERT_TRUE(testing::writeFileAt(root(), "b.txt", "one"));
  ASSERT_TRUE(testing::writeFileAt(root(), "b2.txt", "two"));
  setMtime("b2.txt", mtimeOf("b.txt"));
  Snapshot before = snap();
  ASSERT_EQ(::renameat(root(), "b2.txt", root(), "b.txt"), 0);
  Snapshot after = snap();
  Diff d = diff(before, after);
  const FileChange* b = findChange(d, "b.txt");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->change, ChangeKind::kModified);
  EXPECT_EQ(b->sha256, testing::sha256Hex("two"));
  const FileChange* b2 = findChange(d, "b2.txt");
  ASSERT_NE(b2, nullptr);
  EXPECT_EQ(b2->change, ChangeKind::kDeleted);
  EXPECT_EQ(b2->sha256, std::nullopt);
}

// B45: a symlink retargeted to a string of the same length.
TEST_F(SnapshotTest, SymlinkRetargetSameLengthIsModified) {
  ASSERT_TRUE(testing::symlinkAt(root(), "target-1", "ln"));
  Snapshot before = snap();
  ASSERT_EQ(::unlinkat(root(), "ln", 0), 0);
  ASSERT_TRUE(testing::symlinkAt(root(), "target-2", "ln"));
  Snapshot after = snap();
  Diff d = diff(before, after);
  ASSERT_EQ(d.changes.size(), 1u);
  EXPECT_EQ(d.changes[0].change, ChangeKind::kModified);
  EXPECT_EQ(d.changes[0].size_bytes, 8);
  EXPECT_EQ(d.changes[0].sha256, testing::sha256Hex("target-2"));
}

TEST_F(SnapshotTest, FileReplacedBySymlinkAndBackIsModified) {
  ASSERT_TRUE(testing::writeFileAt(root(), "x", "same"));
  ASSERT_TRUE(testing::symlinkAt(root(), "same", "y"));
  Snapshot before = snap();
  Snapshot hashed = before;
  ASSERT_TRUE(diffSnapshots({}, hashed, root(), 10).has_value());  // hashes known
  ASSERT_EQ(::unlinkat(root(), "x", 0), 0);
  ASSERT_TRUE(testing::symlinkAt(root(), "same", "x"));  // same bytes, other type
  ASSERT_EQ(::unlinkat(root(), "y", 0), 0);
  ASSERT_TRUE(testing::writeFileAt(root(), "y", "same"));
  Snapshot after = snap();
  Diff d = diff(hashed, after);
  ASSERT_EQ(d.changes.size(), 2u);
  EXPECT_EQ(d.changes[0], (FileChange{"x", ChangeKind::kModified, 4, testing::sha256Hex("same")}));
  EXPECT_EQ(d.changes[1], (FileChange{"y", ChangeKind::kModified, 4, testing::sha256Hex("same")}));
}

// Directories are not listed, so a file replaced by a directory is the file
// DELETED plus whatever the directory holds CREATED.
TEST_F(SnapshotTest, FileReplacedByDirectoryIsDeletedPlusCreated) {
  ASSERT_TRUE(testing::writeFileAt(root(), "c", "file"));
  Snapshot before = snap();
  ASSERT_EQ(::unlinkat(root(), "c", 0), 0);
  ASSERT_TRUE(testing::mkdirs(root(), "c"));
  ASSERT_TRUE(testing::writeFileAt(root(), "c/in", "hi\n"));
  Snapshot after = snap();
  Diff d = diff(before, after);
  const std::vector<FileChange> want = {{"c", ChangeKind::kDeleted, 4, std::nullopt},
                                        {"c/in", ChangeKind::kCreated, 3, std::string(kHiSha)}};
  EXPECT_EQ(d.changes, want);
}

// Documented behaviour: a rewrite with identical bytes is MODIFIED when the
// previous hash is unknown, and not reported once a diff has proven the
// content (the `after` of one diff is the `before` of the next).
TEST_F(SnapshotTest, IdenticalRecreateIsReportedOnlyWithoutAKnownHash) {
  ASSERT_TRUE(testing::writeFileAt(root(), "d", "hi\n"));
  Snapshot first = snap();

  ASSERT_EQ(::unlinkat(root(), "d", 0), 0);
  ASSERT_TRUE(testing::writeFileAt(root(), "d", "hi\n"));
  Snapshot second = snap();
  Diff unknown = diff(first, second);
  ASSERT_EQ(unknown.changes.size(), 1u);
  EXPECT_EQ(unknown.changes[0].change, ChangeKind::kModified);
  ASSERT_EQ(second["d"].sha256, std::optional<std::string>(kHiSha));

  ASSERT_EQ(::unlinkat(root(), "d", 0), 0);
  ASSERT_TRUE(testing::writeFileAt(root(), "d", "hi\n"));
  Snapshot third = snap();
  // ctime always moves on a rewrite (the kernel's multigrain timestamps give
  // a distinct ctime after our stat), so metadata alone cannot prove this.
  EXPECT_NE(third["d"].ctime_ns, second["d"].ctime_ns);
  Diff known = diff(second, third);
  EXPECT_TRUE(known.changes.empty());
  EXPECT_EQ(third["d"].sha256, std::optional<std::string>(kHiSha));

  // A mode-only change is likewise invisible once the hash is known.
  ASSERT_EQ(::fchmodat(root(), "d", 0600, 0), 0);
  Snapshot fourth = snap();
  EXPECT_TRUE(diff(third, fourth).changes.empty());
}

TEST_F(SnapshotTest, UnchangedEntriesCarryTheKnownHashForward) {
  ASSERT_TRUE(testing::writeFileAt(root(), "f", "hi\n"));
  Snapshot empty;
  Snapshot first = snap();
  diff(empty, first);
  ASSERT_TRUE(first["f"].sha256.has_value());
  Snapshot second = snap();
  EXPECT_TRUE(diff(first, second).changes.empty());
  EXPECT_EQ(second["f"].sha256, std::optional<std::string>(kHiSha));
}

TEST_F(SnapshotTest, ListingIsCappedWithTruncatedFlag) {
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(testing::writeFileAt(root(), "f" + std::to_string(i), "hi\n"));
  }
  Snapshot before;
  Snapshot after = snap();
  Diff capped = diff(before, after, 3);
  EXPECT_TRUE(capped.truncated);
  ASSERT_EQ(capped.changes.size(), 3u);
  EXPECT_EQ(capped.changes[0].path, "f0");
  EXPECT_EQ(capped.changes[2].path, "f2");

  Snapshot after2 = snap();
  Diff exact = diff(before, after2, 5);
  EXPECT_FALSE(exact.truncated);
  EXPECT_EQ(exact.changes.size(), 5u);

  Snapshot after3 = snap();
  Diff none = diff(before, after3, 0);
  EXPECT_TRUE(none.truncated);
  EXPECT_TRUE(none.changes.empty());
}

// B09: a tree whose paths exceed PATH_MAX is walked fd-relative, and the
// walk holds a bounded number of descriptors (RLIMIT_NOFILE lowered to 128).
TEST_F(SnapshotTest, DeepTreeBeyondPathMaxWithFewDescriptors) {
  constexpr int kDepth = 1500;
  const std::string name = "dddddddddd";  // 10 bytes
  std::string rel;
  sys::UniqueFd cur(::openat(root(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  for (int i = 0; i < kDepth; ++i) {
    ASSERT_EQ(::mkdirat(cur.get(), name.c_str(), 0755), 0);
    if (i == 700) {
      ASSERT_TRUE(testing::writeFileAt(cur.get(), "mid", "m"));
    }
    cur = sys::UniqueFd(::openat(cur.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(cur.valid());
    rel += rel.empty() ? name : "/" + name;
  }
  ASSERT_TRUE(testing::writeFileAt(cur.get(), "bottom", "before"));
  const std::string bottom = rel + "/bottom";
  ASSERT_GT(bottom.size(), 4096u);

  struct rlimit old {};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &old), 0);
  struct rlimit low = old;
  low.rlim_cur = 128;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  auto before = takeSnapshot(root());
  ASSERT_TRUE(testing::writeFileAt(cur.get(), "bottom", "hi\n"));
  auto after = takeSnapshot(root());
  Result<Diff> d =
      before && after ? diffSnapshots(*before, *after, root(), 10) : Result<Diff>(Diff{});
  auto direct = sha256At(root(), bottom, SnapshotEntry::Type::kFile);
  ::setrlimit(RLIMIT_NOFILE, &old);

  ASSERT_TRUE(before.has_value()) << before.error().message();
  ASSERT_TRUE(after.has_value()) << after.error().message();
  EXPECT_EQ(before->size(), 2u);
  EXPECT_EQ(before->count(bottom), 1u);
  ASSERT_TRUE(d.has_value()) << d.error().message();
  ASSERT_EQ(d->changes.size(), 1u);
  EXPECT_EQ(d->changes[0].path, bottom);
  EXPECT_EQ(d->changes[0].change, ChangeKind::kModified);
  EXPECT_EQ(d->changes[0].sha256, std::optional<std::string>(kHiSha));
  ASSERT_TRUE(direct.has_value()) << direct.error().message();
  EXPECT_EQ(*direct, kHiSha);
}

TEST_F(SnapshotTest, LimitsStopTheWalkWithAnError) {
  ASSERT_TRUE(testing::mkdirs(root(), "a/b/c"));
  for (int i = 0; i < 4; ++i)
    ASSERT_TRUE(testing::writeFileAt(root(), "f" + std::to_string(i), ""));
  SnapshotLimits few_entries;
  few_entries.max_entries = 3;
  EXPECT_FALSE(takeSnapshot(root(), few_entries).has_value());
  SnapshotLimits shallow;
  shallow.max_depth = 2;
  EXPECT_FALSE(takeSnapshot(root(), shallow).has_value());
  SnapshotLimits enough;
  enough.max_depth = 3;
  enough.max_entries = 7;
  EXPECT_TRUE(takeSnapshot(root(), enough).has_value());
}

// B32: a 1 GiB sparse file is hashed in bounded memory; size is st_size.
TEST_F(SnapshotTest, SparseGigabyteFileHashesInBoundedMemory) {
  constexpr off_t kSize = off_t{1} << 30;
  {
    sys::UniqueFd fd(::openat(root(), "sparse.bin", O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    ASSERT_TRUE(fd.valid());
    ASSERT_EQ(::ftruncate(fd.get(), kSize), 0);
  }
  // The diff lists a mostly-holes file without reading it (red-team case B32).
  Snapshot empty;
  Snapshot after = snap();
  Diff d = diff(empty, after);
  ASSERT_EQ(d.changes.size(), 1u);
  EXPECT_EQ(d.changes[0].size_bytes, kSize);
  EXPECT_FALSE(d.changes[0].sha256.has_value());
  // Hashing it explicitly streams: memory stays bounded.
  struct rusage before_usage {};
  ::getrusage(RUSAGE_SELF, &before_usage);
  auto digest = sha256At(root(), "sparse.bin", SnapshotEntry::Type::kFile);
  struct rusage after_usage {};
  ::getrusage(RUSAGE_SELF, &after_usage);
  // SHA-256 of 2^30 zero bytes (sha256sum of head -c 1073741824 /dev/zero).
  ASSERT_TRUE(digest.has_value()) << digest.error().message();
  EXPECT_EQ(*digest, "49bc20df15e412a64472421e13fe86ff1c5165e18b2afccf160d4dc19fe68a14");
  // ru_maxrss is in KiB; the peak may grow by the hash buffer, not by GiBs.
  EXPECT_LT(after_usage.ru_maxrss - before_usage.ru_maxrss, 32 * 1024);
}

TEST_F(SnapshotTest, Sha256AtHashesFilesAndLinkTargetsWithoutFollowing) {
  ASSERT_TRUE(testing::writeFileAt(root(), "f", "hi\n"));
  ASSERT_TRUE(testing::symlinkAt(root(), "/etc/passwd", "l"));
  ASSERT_TRUE(testing::mkdirs(root(), "d"));
  ASSERT_TRUE(testing::symlinkAt(root(), "/etc", "dl"));
  auto f = sha256At(root(), "f", SnapshotEntry::Type::kFile);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(*f, kHiSha);
  auto l = sha256At(root(), "l", SnapshotEntry::Type::kSymlink);
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(*l, testing::sha256Hex("/etc/passwd"));
  // A symlink where a file is expected, or a symlinked parent, is refused.
  EXPECT_FALSE(sha256At(root(), "l", SnapshotEntry::Type::kFile).has_value());
  EXPECT_FALSE(sha256At(root(), "dl/passwd", SnapshotEntry::Type::kFile).has_value());
  EXPECT_FALSE(sha256At(root(), "../etc/passwd", SnapshotEntry::Type::kFile).has_value());
  EXPECT_FALSE(sha256At(root(), "d", SnapshotEntry::Type::kFile).has_value());
}

// A FIFO swapped in where a snapshot saw a file must not hang the diff.
TEST_F(SnapshotTest, FifoInPlaceOfAFileDoesNotHang) {
  ASSERT_TRUE(testing::writeFileAt(root(), "p", "x"));
  Snapshot before;
  Snapshot after = snap();
  ASSERT_EQ(::unlinkat(root(), "p", 0), 0);
  ASSERT_EQ(::mkfifoat(root(), "p", 0644), 0);
  auto d = diffSnapshots(before, after, root(), 10);
  EXPECT_FALSE(d.has_value());
}

}  // namespace
}  // namespace airlock::workspace

namespace airlock::workspace {
namespace {

// Red-team case B32: a terabyte sparse file is listed without reading its holes.
TEST(SnapshotHashBudget, FileBeyondTheBudgetIsListedUnhashed) {
  char tmpl[] = "/tmp/airlock-budget-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  sys::UniqueFd root(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(root.valid());
  auto before = takeSnapshot(root.get());
  ASSERT_TRUE(before);
  {
    sys::UniqueFd f(::openat(root.get(), "sparse.bin", O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    ASSERT_TRUE(f.valid());
    ASSERT_EQ(::ftruncate(f.get(), std::int64_t{1} << 40), 0);  // 1 TiB apparent, no data
    sys::UniqueFd g(::openat(root.get(), "small.txt", O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    ASSERT_EQ(::write(g.get(), "hi\n", 3), 3);
  }
  auto after = takeSnapshot(root.get());
  ASSERT_TRUE(after);
  auto d = diffSnapshots(*before, *after, root.get(), 100, /*hash_budget_bytes=*/1 << 20);
  ASSERT_TRUE(d) << d.error().message();
  ASSERT_EQ(d->changes.size(), 2u);
  EXPECT_EQ(d->changes[0].path, "small.txt");
  EXPECT_EQ(d->changes[0].sha256,
            "98ea6e4f216f2fb4b69fff9b3a44842c38686ca685f3f55dc48c5d3fb1107be4");
  EXPECT_EQ(d->changes[1].path, "sparse.bin");
  EXPECT_EQ(d->changes[1].size_bytes, std::int64_t{1} << 40);
  EXPECT_FALSE(d->changes[1].sha256.has_value());
  ::unlinkat(root.get(), "sparse.bin", 0);
  ::unlinkat(root.get(), "small.txt", 0);
  ::rmdir(dir.c_str());
}

}  // namespace
}  // namespace airlock::workspace
