// applyLayer (images/layer_unpack.h): layers built here with libarchive's
// writer, applied onto a root that has a sibling "outside" directory. Every
// case checks its result and, on teardown, that nothing beside the root
// changed and that no device node, FIFO, socket or setuid/setgid bit exists
// anywhere in the tree. A rapidcheck property applies random layers
// (hostile names, every entry type, whiteouts) with the same checks. The
// tests run as root here, where mknod would succeed: none may appear.
#include "airlock/images/layer_unpack.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "airlock/sys/io.h"
#include "airlock/sys/unique_fd.h"
#include "test_tree.h"

namespace airlock::images {
namespace {

using workspace::testing::TempDir;

constexpr time_t kMtime = 1'600'000'000;
constexpr const char* kSecret = "the outside secret";

struct Entry {
  enum Kind { kFile, kDir, kSymlink, kHardlink, kCharDevice, kBlockDevice, kFifo } kind = kFile;
  std::string name;
  std::string data;    // kFile
  std::string target;  // kSymlink, kHardlink
  int perm = 0644;
  time_t mtime = kMtime;
};

Entry file(std::string name, std::string data = "data", int perm = 0644) {
  return {Entry::kFile, std::move(name), std::move(data), {}, perm};
}
Entry dir(std::string name, int perm = 0755) {
  return {Entry::kDir, std::move(name), {}, {}, perm};
}
Entry symlink(std::string name, std::string target) {
  return {Entry::kSymlink, std::move(name), {}, std::move(target), 0777};
}
Entry hardlink(std::string name, std::string target) {
  return {Entry::kHardlink, std::move(name), {}, std::move(target), 0644};
}
Entry special(Entry::Kind kind, std::string name) {
  return {kind, std::move(name), {}, {}, 0644};
}

enum class Compression { kNone, kGzip, kZstd };

la_ssize_t appendTo(struct archive*, void* client, const void* buffer, size_t length) {
  static_cast<std::string*>(client)->append(static_cast<const char*>(buffer), length);
  return static_cast<la_ssize_t>(length);
}

// A pax tar stream of `entries`. An entry libarchive's writer refuses (an
// empty name, say) is left out; `written`, when given, counts the others.
std::string buildLayer(const std::vector<Entry>& entries, Compression c = Compression::kNone,
                       int* written = nullptr) {
  std::string out;
  struct archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  if (c == Compression::kGzip) archive_write_add_filter_gzip(a);
  if (c == Compression::kZstd) archive_write_add_filter_zstd(a);
  archive_write_set_bytes_in_last_block(a, 1);
  if (archive_write_open(a, &out, nullptr, appendTo, nullptr) != ARCHIVE_OK) {
    archive_write_free(a);
    return out;
  }
  int count = 0;
  for (const auto& m : entries) {
    struct archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, m.name.c_str());
    archive_entry_set_perm(e, static_cast<mode_t>(m.perm));
    archive_entry_set_mtime(e, m.mtime, 0);
    switch (m.kind) {
      case Entry::kFile:
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_size(e, static_cast<la_int64_t>(m.data.size()));
        break;
      case Entry::kDir:
        archive_entry_set_filetype(e, AE_IFDIR);
        break;
      case Entry::kSymlink:
        archive_entry_set_filetype(e, AE_IFLNK);
        archive_entry_set_symlink(e, m.target.c_str());
        break;
      case Entry::kHardlink:
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_hardlink(e, m.target.c_str());
        archive_entry_set_size(e, 0);
        break;
      case Entry::kCharDevice:
        archive_entry_set_filetype(e, AE_IFCHR);
        archive_entry_set_rdevmajor(e, 1);
        archive_entry_set_rdevminor(e, 3);
        break;
      case Entry::kBlockDevice:
        archive_entry_set_filetype(e, AE_IFBLK);
        archive_entry_set_rdevmajor(e, 8);
        archive_entry_set_rdevminor(e, 0);
        break;
      case Entry::kFifo:
        archive_entry_set_filetype(e, AE_IFIFO);
        break;
    }
    const int rc = archive_write_header(a, e);
    if (rc == ARCHIVE_OK || rc == ARCHIVE_WARN) {
      ++count;
      if (m.kind == Entry::kFile && !m.data.empty()) {
        archive_write_data(a, m.data.data(), m.data.size());
      }
    }
    archive_entry_free(e);
    if (rc == ARCHIVE_FATAL) break;
  }
  archive_write_close(a);
  archive_write_free(a);
  if (written != nullptr) *written = count;
  return out;
}

sys::UniqueFd memfdOf(const std::string& bytes) {
  sys::UniqueFd fd(::memfd_create("layer", MFD_CLOEXEC));
  if (!fd.valid()) return fd;
  if (!sys::writeAll(fd.get(), bytes.data(), bytes.size()) || ::lseek(fd.get(), 0, SEEK_SET) != 0) {
    fd.reset();
  }
  return fd;
}

bool listNames(int dirfd, std::vector<std::string>* names) {
  const int dup = ::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dup < 0) return false;
  DIR* d = ::fdopendir(dup);
  if (d == nullptr) {
    ::close(dup);
    return false;
  }
  names->clear();
  while (struct dirent* ent = ::readdir(d)) {
    if (std::strcmp(ent->d_name, ".") == 0 || std::strcmp(ent->d_name, "..") == 0) continue;
    names->emplace_back(ent->d_name);
  }
  ::closedir(d);
  return true;
}

// The first device node, FIFO, socket or setuid/setgid bit below dirfd,
// walked through fds without following links; nullopt when there is none.
std::optional<std::string> firstOffence(int dirfd, const std::string& path) {
  std::vector<std::string> names;
  if (!listNames(dirfd, &names)) return "cannot list " + path;
  for (const auto& n : names) {
    const std::string p = path + "/" + n;
    struct stat st {};
    if (::fstatat(dirfd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return "cannot stat " + p;
    if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) || S_ISFIFO(st.st_mode) ||
        S_ISSOCK(st.st_mode)) {
      return p + " is a device node, FIFO or socket";
    }
    if (!S_ISLNK(st.st_mode) && (st.st_mode & (S_ISUID | S_ISGID)) != 0) {
      return p + " has a setuid or setgid bit";
    }
    if (S_ISDIR(st.st_mode)) {
      sys::UniqueFd sub(
          ::openat(dirfd, n.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!sub.valid()) return "cannot open " + p;
      if (auto bad = firstOffence(sub.get(), p)) return bad;
    }
  }
  return std::nullopt;
}

// Host paths an escape through a symlink to "/" would create.
const std::vector<std::string> kHostProbes = {"/etc/airlock-escape-probe", "/airlock-escape-probe",
                                              "/zq1", "/etc/zq1", "/tmp/zq1"};

// A root beside an "outside" directory holding one secret file.
class Layout {
 public:
  Layout() {
    ok_ = ::mkdirat(top_.fd(), "root", 0755) == 0 && ::mkdirat(top_.fd(), "outside", 0755) == 0;
    root_ = sys::UniqueFd(::openat(top_.fd(), "root", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    outside_ = sys::UniqueFd(::openat(top_.fd(), "outside", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    ok_ = ok_ && root_.valid() && outside_.valid() &&
          workspace::testing::writeFileAt(outside_.get(), "secret", kSecret, 0644) &&
          ::fstatat(outside_.get(), "secret", &secret_, 0) == 0 &&
          ::stat("/etc/passwd", &passwd_) == 0;
    for (const auto& p : kHostProbes) {
      struct stat st {};
      present_before_.push_back(::lstat(p.c_str(), &st) == 0);
    }
  }

  bool ok() const { return ok_; }
  int root() const { return root_.get(); }
  int outside() const { return outside_.get(); }
  UnpackTally& tally() { return tally_; }

  Result<LayerStats> apply(const std::string& bytes, const UnpackLimits& limits = {}) {
    sys::UniqueFd fd = memfdOf(bytes);
    if (!fd.valid()) return fail(ErrorCode::kExecutionUnavailable, "memfd");
    return applyLayer(root_.get(), fd.get(), limits, tally_);
  }
  Result<LayerStats> apply(const std::vector<Entry>& entries, const UnpackLimits& limits = {}) {
    return apply(buildLayer(entries), limits);
  }

  // Nothing beside the root changed; no device, FIFO, socket or setid bit
  // anywhere; no host probe created.
  ::testing::AssertionResult contained() const {
    std::vector<std::string> names;
    if (!listNames(top_.fd(), &names)) return ::testing::AssertionFailure() << "list top";
    std::sort(names.begin(), names.end());
    if (names != std::vector<std::string>{"outside", "root"}) {
      return ::testing::AssertionFailure() << "something was created beside the root";
    }
    if (!listNames(outside_.get(), &names) || names != std::vector<std::string>{"secret"}) {
      return ::testing::AssertionFailure() << "the outside directory changed";
    }
    std::string data;
    struct stat st {};
    if (!workspace::testing::readFileAt(outside_.get(), "secret", &data) || data != kSecret ||
        ::fstatat(outside_.get(), "secret", &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        st.st_ino != secret_.st_ino || st.st_nlink != 1 || st.st_mode != secret_.st_mode ||
        st.st_mtim.tv_sec != secret_.st_mtim.tv_sec || st.st_uid != secret_.st_uid) {
      return ::testing::AssertionFailure() << "the outside secret changed";
    }
    struct stat pw {};
    if (::stat("/etc/passwd", &pw) != 0 || pw.st_nlink != passwd_.st_nlink ||
        pw.st_mode != passwd_.st_mode) {
      return ::testing::AssertionFailure() << "/etc/passwd changed";
    }
    for (std::size_t i = 0; i < kHostProbes.size(); ++i) {
      struct stat probe {};
      if (!present_before_[i] && ::lstat(kHostProbes[i].c_str(), &probe) == 0) {
        return ::testing::AssertionFailure() << kHostProbes[i] << " was created on the host";
      }
    }
    if (auto bad = firstOffence(top_.fd(), top_.path())) {
      return ::testing::AssertionFailure() << *bad;
    }
    return ::testing::AssertionSuccess();
  }

  bool exists(const std::string& rel) const {
    struct stat st {};
    return ::fstatat(root_.get(), rel.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
  }
  struct stat statOf(const std::string& rel) const {
    struct stat st {};
    if (::fstatat(root_.get(), rel.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) st.st_mode = 0;
    return st;
  }
  std::string read(const std::string& rel) const {
    std::string out;
    if (!workspace::testing::readFileAt(root_.get(), rel, &out)) return "<unreadable>";
    return out;
  }

 private:
  TempDir top_;
  sys::UniqueFd root_;
  sys::UniqueFd outside_;
  struct stat secret_ {};
  struct stat passwd_ {};
  std::vector<bool> present_before_;
  UnpackTally tally_;
  bool ok_ = false;
};

class LayerUnpack : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(layout_.ok()); }
  void TearDown() override { EXPECT_TRUE(layout_.contained()); }

  // The layer is refused with ExecutionRejected and a message naming
  // `entry` and containing `why`.
  void expectRefused(const Result<LayerStats>& r, const std::string& entry,
                     const std::string& why) {
    ASSERT_FALSE(r.has_value()) << "applied, expected a refusal of " << entry;
    EXPECT_EQ(r.error().code, ErrorCode::kExecutionRejected) << r.error().message();
    EXPECT_NE(r.error().context.find("layer entry \"" + entry + "\""), std::string::npos)
        << r.error().message();
    EXPECT_NE(r.error().message().find(why), std::string::npos) << r.error().message();
  }

  Layout layout_;
};

TEST_F(LayerUnpack, DotDotThatClimbsOutIsRefused) {
  expectRefused(layout_.apply({file("a/../../outside/x")}), "a/../../outside/x",
                "climbs out of the image root");
  expectRefused(layout_.apply({file("../outside/secret", "overwritten")}), "../outside/secret",
                "climbs out of the image root");
  expectRefused(layout_.apply({dir("ok"), file("ok/../b")}), "ok/../b", "\"..\" component");
  EXPECT_EQ(layout_.tally().entries, 0);
}

TEST_F(LayerUnpack, AbsoluteNameIsStrippedToTheRoot) {
  auto r = layout_.apply({file("/etc/airlock-escape-probe", "inside"), file("//top", "t")});
  ASSERT_TRUE(r.has_value()) << r.error().message();
  EXPECT_EQ(layout_.read("etc/airlock-escape-probe"), "inside");
  EXPECT_EQ(layout_.read("top"), "t");
  EXPECT_EQ(r->entries, 3);  // "etc" (implicit), the probe, "top"
  EXPECT_EQ(layout_.tally().entries, 3);
}

TEST_F(LayerUnpack, SymlinkThenWriteIsRefused) {
  expectRefused(layout_.apply({symlink("link", "../outside"), file("link/file")}), "link/file",
                "is a symlink");
  EXPECT_TRUE(layout_.exists("link"));
}

TEST_F(LayerUnpack, SymlinkToSlashThenWriteIsRefused) {
  expectRefused(layout_.apply({symlink("link", "/"), file("link/etc/airlock-escape-probe")}),
                "link/etc/airlock-escape-probe", "\"link\" is a symlink");
}

TEST_F(LayerUnpack, SymlinkParentIsRefusedEvenPointingInsideAndAcrossLayers) {
  ASSERT_TRUE(layout_.apply({dir("d"), symlink("in", "d")}).has_value());
  expectRefused(layout_.apply({file("in/x")}), "in/x", "\"in\" is a symlink");
  EXPECT_FALSE(layout_.exists("d/x"));
  expectRefused(layout_.apply({dir("in/sub")}), "in/sub/", "is a symlink");
}

TEST_F(LayerUnpack, EntryReplacingASymlinkReplacesTheLinkNotItsTarget) {
  ASSERT_TRUE(layout_.apply({symlink("s", "../outside/secret"), symlink("t", "/etc/passwd")}));
  auto r = layout_.apply({file("s", "new"), dir("t")});
  ASSERT_TRUE(r.has_value()) << r.error().message();
  EXPECT_EQ(layout_.read("s"), "new");
  EXPECT_TRUE(S_ISDIR(layout_.statOf("t").st_mode));
}

TEST_F(LayerUnpack, HardlinkOutwardIsRefused) {
  expectRefused(layout_.apply({hardlink("hard", "../outside/secret")}), "hard",
                "climbs out of the image root");
  expectRefused(layout_.apply({hardlink("hard", "/etc/passwd")}), "hard",
                "does not exist in the image root");
  expectRefused(layout_.apply({symlink("s", "../outside"), hardlink("hard", "s/secret")}), "hard",
                "\"s\" is a symlink");
  expectRefused(layout_.apply({symlink("p", "/etc/passwd"), hardlink("hard", "p")}), "hard",
                "is not a regular file");
  expectRefused(layout_.apply({dir("d"), hardlink("hard", "d")}), "hard", "is not a regular file");
  EXPECT_FALSE(layout_.exists("hard"));
}

TEST_F(LayerUnpack, HardlinkInsideTheRootSharesTheInode) {
  ASSERT_TRUE(layout_.apply({file("lower", "L")}).has_value());
  auto r = layout_.apply({file("f", "F"), hardlink("g", "f"), hardlink("h", "/lower")});
  ASSERT_TRUE(r.has_value()) << r.error().message();
  EXPECT_EQ(layout_.statOf("f").st_ino, layout_.statOf("g").st_ino);
  EXPECT_EQ(layout_.statOf("lower").st_ino, layout_.statOf("h").st_ino);
  EXPECT_EQ(layout_.read("h"), "L");
}

TEST_F(LayerUnpack, WhiteoutOfDotNamesIsRefused) {
  ASSERT_TRUE(layout_.apply({dir("d"), file("d/keep")}).has_value());
  for (const std::string name : {".wh...", ".wh..", ".wh.", "d/.wh...", "/.wh..", ".wh./"}) {
    SCOPED_TRACE(name);
    expectRefused(layout_.apply({file(name, "")}), name, "whiteout");
  }
  EXPECT_EQ(layout_.read("d/keep"), "data");
  expectRefused(layout_.apply({file("../outside/.wh.secret", "")}), "../outside/.wh.secret",
                "climbs out of the image root");
  expectRefused(layout_.apply({file("d/../../outside/.wh..wh..opq", "")}),
                "d/../../outside/.wh..wh..opq", "climbs out of the image root");
  expectRefused(layout_.apply({file(".wh.d/keep", "")}), ".wh.d/keep",
                "whiteout name as a parent component");
  // An absolute whiteout is stripped like any name: it removes "d" of the root.
  auto r = layout_.apply({file("/.wh.d", "")});
  ASSERT_TRUE(r.has_value()) << r.error().message();
  EXPECT_FALSE(layout_.exists("d"));
}

TEST_F(LayerUnpack, WhiteoutRemovesLowerEntriesOnly) {
  ASSERT_TRUE(layout_
                  .apply({dir("d"), file("d/a"), file("d/b"), dir("d/sub"), file("d/sub/x"),
                          symlink("d/l", "/etc")})
                  .has_value());
  auto r = layout_.apply({file("d/.wh.a", ""), file("d/.wh.sub", ""), file("d/.wh.l", ""),
                          file("d/c", "same layer"), file("d/.wh.c", ""), file("d/.wh.missing", ""),
                          file("nodir/.wh.x", "")});
  ASSERT_TRUE(r.has_value()) << r.error().message();
  EXPECT_FALSE(layout_.exists("d/a"));
  EXPECT_FALSE(layout_.exists("d/sub"));
  EXPECT_FALSE(layout_.exists("d/l"));
  EXPECT_EQ(layout_.read("d/b"), "data");
  EXPECT_EQ(layout_.read("d/c"), "same layer");
  EXPECT_FALSE(layout_.exists("d/.wh.a"));
  EXPECT_FALSE(layout_.exists("nodir"));
  EXPECT_EQ(r->whiteouts, 6);
}

TEST_F(LayerUnpack, OpaqueDirectoryClearsLowerEntriesAndKeepsSameLayerOnes) {
  ASSERT_TRUE(layout_
                  .apply({dir("d"), file("d/old"), dir("d/olddir"), file("d/olddir/y"),
                          dir("d/kept"), file("d/kept/lower"), file("other", "untouched")})
                  .has_value());
  auto r = layout_.apply({dir("d"), file("d/before", "b"), file("d/kept/upper", "u"),
                          file("d/.wh..wh..opq", ""), file("d/after", "a")});
  ASSERT_TRUE(r.has_value()) << r.error().message();
  EXPECT_FALSE(layout_.exists("d/old"));
  EXPECT_FALSE(layout_.exists("d/olddir"));
  EXPECT_FALSE(layout_.exists("d/kept/lower"));
  EXPECT_FALSE(layout_.exists("d/.wh..wh..opq"));
  EXPECT_EQ(layout_.read("d/before"), "b");
  EXPECT_EQ(layout_.read("d/kept/upper"), "u");
  EXPECT_EQ(layout_.read("d/after"), "a");
  EXPECT_EQ(layout_.read("other"), "untouched");
  EXPECT_EQ(r->whiteouts, 1);
}

TEST_F(LayerUnpack, DevicesAndFifosAreDropped) {
  ASSERT_TRUE(layout_.apply({file("was_file")}).has_value());
  auto r = layout_.apply({special(Entry::kCharDevice, "dev/null"),
                          special(Entry::kBlockDevice, "dev/sda"), special(Entry::kFifo, "pipe"),
                          special(Entry::kCharDevice, "was_file"), file("f", "kept")});
  ASSERT_TRUE(r.has_value()) << r.error().message();
  EXPECT_EQ(r->dropped_devices, 4);
  EXPECT_FALSE(layout_.exists("dev/null"));
  EXPECT_FALSE(layout_.exists("dev/sda"));
  EXPECT_FALSE(layout_.exists("pipe"));
  EXPECT_FALSE(layout_.exists("was_file"));
  EXPECT_EQ(layout_.read("f"), "kept");
}

// setuid, setgid and sticky go, and so do group and other write: nobody
// but the store may change a root every sandbox of the image shares.
TEST_F(LayerUnpack, SetidStickyAndSharedWriteBitsAreClearedAndFilesKept) {
  auto r = layout_.apply({file("su", "su", 04755), file("sg", "sg", 02750),
                          file("both", "b", 06777), file("sticky", "s", 01644), dir("tmp", 01777),
                          dir("sgdir", 02775), file("plain", "p", 0640), file("open", "o", 0666)});
  ASSERT_TRUE(r.has_value()) << r.error().message();
  EXPECT_EQ(layout_.statOf("su").st_mode & 07777, 0755u);
  EXPECT_EQ(layout_.statOf("sg").st_mode & 07777, 0750u);
  EXPECT_EQ(layout_.statOf("both").st_mode & 07777, 0755u);
  EXPECT_EQ(layout_.statOf("sticky").st_mode & 07777, 0644u);
  EXPECT_EQ(layout_.statOf("tmp").st_mode & 07777, 0755u);
  EXPECT_EQ(layout_.statOf("sgdir").st_mode & 07777, 0755u);
  EXPECT_EQ(layout_.statOf("plain").st_mode & 07777, 0640u);
  EXPECT_EQ(layout_.statOf("open").st_mode & 07777, 0644u);
  EXPECT_EQ(layout_.read("su"), "su");
  EXPECT_EQ(layout_.read("both"), "b");
  EXPECT_EQ(r->cleared_setid, 6);
}

// Entries that create nothing cost work too: an opaque whiteout repeated
// thousands of times walks its directory once, a directory declared again
// keeps one record, and past 4 * max_entries entries of any kind the layer
// is refused.
TEST_F(LayerUnpack, RepeatedWhiteoutsAndDirectoriesCostOnceAndAreCapped) {
  std::vector<Entry> lower;
  for (int i = 0; i < 200; ++i) lower.push_back(file("q/f" + std::to_string(i), "x"));
  ASSERT_TRUE(layout_.apply(lower).has_value());
  std::vector<Entry> upper = {dir("q", 0700)};
  for (int i = 0; i < 3000; ++i) upper.push_back(file("q/.wh..wh..opq", ""));
  for (int i = 0; i < 3000; ++i) upper.push_back(dir("q", 0750));
  auto r = layout_.apply(upper);
  ASSERT_TRUE(r.has_value()) << r.error().message();
  EXPECT_EQ(layout_.statOf("q").st_mode & 07777, 0750u) << "the last declaration's mode";
  EXPECT_FALSE(layout_.exists("q/f0"));

  UnpackLimits small;
  small.max_entries = 100;
  std::vector<Entry> many;
  for (int i = 0; i < 401; ++i) many.push_back(file("nothing/.wh.x" + std::to_string(i), ""));
  auto capped = layout_.apply(many, small);
  ASSERT_FALSE(capped.has_value());
  EXPECT_NE(capped.error().context.find("more than 400 entries"), std::string::npos)
      << capped.error().context;
}

TEST_F(LayerUnpack, ModesAndMtimesAreApplied) {
  Entry ro = dir("ro", 0555);
  ro.mtime = 1'000'000'000;
  Entry f = file("ro/f", "x", 0600);
  f.mtime = 1'234'567'890;
  auto r = layout_.apply({ro, f, symlink("ro/l", "f")});
  ASSERT_TRUE(r.has_value()) << r.error().message();
  EXPECT_EQ(layout_.statOf("ro").st_mode & 07777, 0555u);
  EXPECT_EQ(layout_.statOf("ro").st_mtim.tv_sec, 1'000'000'000);
  EXPECT_EQ(layout_.statOf("ro/f").st_mode & 07777, 0600u);
  EXPECT_EQ(layout_.statOf("ro/f").st_mtim.tv_sec, 1'234'567'890);
  EXPECT_EQ(layout_.statOf("ro/l").st_mtim.tv_sec, kMtime);
}

TEST_F(LayerUnpack, LayerOverTheByteCapIsRefused) {
  UnpackLimits limits;
  limits.max_bytes = 10;
  expectRefused(layout_.apply({file("big", "eleven byte")}, limits), "big",
                "byte cap (max_bytes 10)");
  ASSERT_TRUE(layout_.apply({file("a", "sixsix")}, limits).has_value());
  EXPECT_EQ(layout_.tally().bytes, 6);
  expectRefused(layout_.apply({file("b", "sixsix")}, limits), "b", "max_bytes 10");
  EXPECT_EQ(layout_.tally().bytes, 6);
}

TEST_F(LayerUnpack, LayerOverTheEntryCapIsRefused) {
  UnpackLimits limits;
  limits.max_entries = 3;
  expectRefused(layout_.apply({file("a"), file("b"), file("c"), file("d")}, limits), "d",
                "entry cap (max_entries 3)");
  ASSERT_TRUE(layout_.apply({file("x/y")}, limits).has_value());  // x is implicit: 2
  EXPECT_EQ(layout_.tally().entries, 2);
  expectRefused(layout_.apply({file("x/z"), file("x/w")}, limits), "x/w", "max_entries 3");
}

TEST_F(LayerUnpack, GzipAndZstdLayersAreDetectedFromTheBytes) {
  const std::string gz = buildLayer({dir("g"), file("g/f", "gzip data")}, Compression::kGzip);
  ASSERT_GE(gz.size(), 2u);
  EXPECT_EQ(gz.substr(0, 2), "\x1f\x8b");
  const std::string zst = buildLayer({dir("z"), file("z/f", "zstd data")}, Compression::kZstd);
  ASSERT_GE(zst.size(), 4u);
  EXPECT_EQ(zst.substr(0, 4), "\x28\xb5\x2f\xfd");
  auto r1 = layout_.apply(gz);
  ASSERT_TRUE(r1.has_value()) << r1.error().message();
  auto r2 = layout_.apply(zst);
  ASSERT_TRUE(r2.has_value()) << r2.error().message();
  EXPECT_EQ(layout_.read("g/f"), "gzip data");
  EXPECT_EQ(layout_.read("z/f"), "zstd data");
  EXPECT_EQ(r2->bytes, 9);
}

TEST_F(LayerUnpack, NonDirectoryReplacesADirectoryTree) {
  ASSERT_TRUE(layout_
                  .apply({dir("d"), dir("d/e"), file("d/e/f"), symlink("d/l", "../../outside"),
                          dir("d/e/deep/er"), file("d/e/deep/er/x")})
                  .has_value());
  auto r = layout_.apply({file("d", "now a file"), symlink("e", "x")});
  ASSERT_TRUE(r.has_value()) << r.error().message();
  EXPECT_TRUE(S_ISREG(layout_.statOf("d").st_mode));
  EXPECT_EQ(layout_.read("d"), "now a file");
}

TEST_F(LayerUnpack, DirectoryOverDirectoryKeepsItsContents) {
  ASSERT_TRUE(layout_.apply({dir("d", 0755), file("d/f", "lower")}).has_value());
  auto r = layout_.apply({dir("d", 0700)});
  ASSERT_TRUE(r.has_value()) << r.error().message();
  EXPECT_EQ(layout_.read("d/f"), "lower");
  EXPECT_EQ(layout_.statOf("d").st_mode & 07777, 0700u);
  EXPECT_EQ(r->entries, 0);
}

TEST_F(LayerUnpack, LaterEntriesReplaceEarlierOnesAndTheRootEntryIsSkipped) {
  auto r = layout_.apply(
      {dir("./"), dir("."), file("a", "1"), file("a", "2"), dir("b"), file("b", "3")});
  ASSERT_TRUE(r.has_value()) << r.error().message();
  EXPECT_EQ(layout_.read("a"), "2");
  EXPECT_EQ(layout_.read("b"), "3");
  expectRefused(layout_.apply({file(".", "x")}), ".", "names the image root");
}

TEST_F(LayerUnpack, GarbageAndTruncatedStreamsAreRefused) {
  for (const std::string& bytes : {std::string(), std::string("not a tar at all"),
                                   std::string(700, '\xff'), std::string("\x1f\x8bgarbage")}) {
    auto r = layout_.apply(bytes);
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().code, ErrorCode::kExecutionRejected) << r.error().message();
    EXPECT_NE(r.error().context.find("layer stream"), std::string::npos) << r.error().message();
  }
  const std::string whole = buildLayer({file("f", std::string(5000, 'x')), file("g")});
  auto cut = layout_.apply(whole.substr(0, 2000));
  ASSERT_FALSE(cut.has_value());
  EXPECT_EQ(cut.error().code, ErrorCode::kExecutionRejected) << cut.error().message();
  const std::string gz = buildLayer({file("f", std::string(5000, 'y'))}, Compression::kGzip);
  auto cutgz = layout_.apply(gz.substr(0, gz.size() / 2));
  ASSERT_FALSE(cutgz.has_value());
  EXPECT_EQ(cutgz.error().code, ErrorCode::kExecutionRejected) << cutgz.error().message();
}

// --- the property ----------------------------------------------------------

std::ostream& operator<<(std::ostream& os, const Entry& e) {
  static const char* const kKinds[] = {"file",    "dir",      "symlink", "hardlink",
                                       "chardev", "blockdev", "fifo"};
  return os << kKinds[e.kind] << " \"" << e.name << "\" -> \"" << e.target << "\" perm 0"
            << std::oct << e.perm << std::dec << " (" << e.data.size() << " bytes)";
}

std::ostream& operator<<(std::ostream& os, Compression c) {
  return os << (c == Compression::kNone   ? "uncompressed"
                : c == Compression::kGzip ? "gzip"
                                          : "zstd");
}

// Names from a small alphabet of hostile parts ("..", ".", "", "/", the
// whiteout forms, names at and over NAME_MAX), 1-3 parts, maybe absolute.
rc::Gen<std::string> genName() {
  // Mostly plain names, so that layers get far enough to exercise
  // replacement, links and whiteouts; the hostile parts are rarer.
  static const std::vector<std::string> kPlain = {"zq1", "zq2", "d", "outside", "secret", "etc"};
  static const std::vector<std::string> kWhiteouts = {".wh.zq1", ".wh.d", ".wh..wh..opq",
                                                      ".wh..wh.plnk"};
  static const std::vector<std::string> kHostile = {
      "..", ".", "", "/", ".wh.", ".wh..", ".wh...", std::string(255, 'L'), std::string(300, 'M')};
  static const auto kPart =
      rc::gen::weightedOneOf<std::string>({{24, rc::gen::elementOf(kPlain)},
                                           {3, rc::gen::elementOf(kWhiteouts)},
                                           {1, rc::gen::elementOf(kHostile)}});
  return rc::gen::mapcat(rc::gen::inRange(1, 4), [](int n) {
    return rc::gen::apply(
        [](const std::vector<std::string>& parts, bool absolute) {
          std::string out = absolute ? "/" : "";
          for (std::size_t i = 0; i < parts.size(); ++i) {
            if (i != 0) out += '/';
            out += parts[i];
          }
          return out;
        },
        rc::gen::container<std::vector<std::string>>(static_cast<std::size_t>(n), kPart),
        rc::gen::arbitrary<bool>());
  });
}

// Any entry type (devices and FIFOs included), setuid / setgid / sticky
// modes, symlink and hard link targets from the name pool or pointing out.
rc::Gen<Entry> genEntry() {
  static const std::vector<int> kPerms = {0644, 0755, 04755, 02755, 06777, 01777, 0, 0555};
  static const std::vector<std::string> kTargets = {
      "/", "..", "../outside", "../outside/secret", "/etc/passwd", "/etc", "zq1", "d/zq2", "."};
  static const std::vector<std::string> kData = {"", "x", "some bytes", std::string(3000, 'z')};
  return rc::gen::apply(
      [](int kind, const std::string& name, const std::string& named_target, bool pool_target,
         const std::string& pool, int perm, const std::string& data) {
        Entry e;
        e.kind = static_cast<Entry::Kind>(kind);
        e.name = name;
        e.target = pool_target ? pool : named_target;
        e.perm = perm;
        e.data = data;
        return e;
      },
      rc::gen::weightedElement<int>({{6, Entry::kFile},
                                     {4, Entry::kDir},
                                     {3, Entry::kSymlink},
                                     {3, Entry::kHardlink},
                                     {1, Entry::kCharDevice},
                                     {1, Entry::kBlockDevice},
                                     {1, Entry::kFifo}}),
      genName(), genName(), rc::gen::arbitrary<bool>(), rc::gen::elementOf(kTargets),
      rc::gen::elementOf(kPerms), rc::gen::elementOf(kData));
}

TEST(LayerUnpackProperty, RandomLayersStayInsideTheRoot) {
  EXPECT_TRUE(rc::check("random layers stay inside the root", [] {
    const int layers = *rc::gen::inRange(1, 4);
    Layout layout;
    RC_ASSERT(layout.ok());
    UnpackLimits limits;
    limits.max_bytes = 1 << 20;
    limits.max_entries = 10'000;
    int applied = 0;
    for (int i = 0; i < layers; ++i) {
      const auto entries = *rc::gen::resize(20, rc::gen::container<std::vector<Entry>>(genEntry()));
      const auto compression =
          *rc::gen::element(Compression::kNone, Compression::kGzip, Compression::kZstd);
      auto r = layout.apply(buildLayer(entries, compression), limits);
      if (auto c = layout.contained(); !c) RC_FAIL(c.message());
      if (r) {
        ++applied;
        continue;
      }
      if (r.error().code != ErrorCode::kExecutionRejected ||
          r.error().context.find("layer entry ") == std::string::npos) {
        RC_FAIL("not a refusal naming an entry: " + r.error().message());
      }
      // A caller would delete the root now; the next layer goes onto the
      // partial one instead: the invariants hold over any tree.
    }
    RC_TAG(std::to_string(applied) + " of " + std::to_string(layers) + " layers applied");
  }));
}

}  // namespace
}  // namespace airlock::images
