#include "airlock/images/layer_unpack.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "airlock/core/encoding.h"
#include "airlock/sys/io.h"
#include "airlock/sys/sha256.h"
#include "airlock/sys/unique_fd.h"
#include "airlock/workspace/resolve.h"

namespace airlock::images {
namespace {

// PATH_MAX less the NUL: a longer name could not be addressed in one call
// inside the sandbox, and the bound keeps every tree at most 2048 deep.
constexpr std::size_t kMaxNameBytes = 4095;
constexpr std::string_view kWhiteoutPrefix = ".wh.";
constexpr std::string_view kWhiteoutMetaPrefix = ".wh..wh.";
constexpr std::string_view kOpaqueWhiteout = ".wh..wh..opq";
constexpr std::size_t kReadBlock = 64 * 1024;
// Same-layer paths longer than this are remembered by digest, so hostile
// long names cannot make the set grow by more than a bounded size per entry.
constexpr std::size_t kMaxPlainKey = 64;

std::string quoted(std::string_view text) {
  return quoteForMessage(text, 256);
}

// The host's fault (retriable, ExecutionUnavailable) or the entry's.
bool hostFault(int err) {
  switch (err) {
    case ENOSPC:
    case EDQUOT:
    case EIO:
    case ENOMEM:
    case EMFILE:
    case ENFILE:
    case EROFS:
    case EBADF:
    case EFAULT:
    case EAGAIN:
      return true;
    default:
      return false;
  }
}

tl::unexpected<Error> rejectEntry(std::string_view spelled, const std::string& why) {
  return fail(ErrorCode::kExecutionRejected, "layer entry " + quoted(spelled) + ": " + why);
}

tl::unexpected<Error> entryErrno(std::string_view spelled, const std::string& what, int err) {
  return failErrno(
      hostFault(err) ? ErrorCode::kExecutionUnavailable : ErrorCode::kExecutionRejected,
      "layer entry " + quoted(spelled) + ": " + what, err);
}

// A lookup error of openBeneath, re-worded for the entry; keeps its errno.
tl::unexpected<Error> entryLookup(std::string_view spelled, const std::string& what,
                                  const Error& err) {
  const int e = err.sys_errno != 0 ? err.sys_errno : EINVAL;
  return entryErrno(spelled, what, e);
}

// Splits an archive name into components: a leading "/" stripped, empty and
// "." parts dropped. On a ".." part, `why` says how the name was refused.
bool splitName(std::string_view raw, std::vector<std::string>& parts, std::string& why) {
  parts.clear();
  if (raw.size() > kMaxNameBytes) {
    why = "is longer than " + std::to_string(kMaxNameBytes) + " bytes";
    return false;
  }
  bool dotdot = false;
  int depth = 0;
  bool climbs = false;
  std::size_t pos = 0;
  while (pos <= raw.size()) {
    std::size_t slash = raw.find('/', pos);
    if (slash == std::string_view::npos) slash = raw.size();
    std::string_view part = raw.substr(pos, slash - pos);
    pos = slash + 1;
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      dotdot = true;
      if (--depth < 0) climbs = true;
      continue;
    }
    ++depth;
    parts.emplace_back(part);
  }
  if (climbs) {
    why = "climbs out of the image root";
    return false;
  }
  if (dotdot) {
    why = "has a \"..\" component";
    return false;
  }
  return true;
}

std::string joinParts(const std::vector<std::string>& parts, std::size_t count) {
  std::string out;
  for (std::size_t i = 0; i < count; ++i) {
    if (i != 0) out += '/';
    out += parts[i];
  }
  return out;
}

std::string childPath(const std::string& dir, const std::string& name) {
  return dir.empty() ? name : dir + "/" + name;
}

struct DirId {
  dev_t dev = 0;
  ino_t ino = 0;
};

Result<DirId> idOf(int fd, std::string_view spelled) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return entryErrno(spelled, "fstat", errno);
  return DirId{st.st_dev, st.st_ino};
}

// Every name of the directory open (O_RDONLY | O_DIRECTORY) on dirfd but
// "." and "..", from the fd's current offset.
Result<std::vector<std::string>> listNames(int dirfd, std::string_view spelled) {
  auto buffer = std::make_unique<std::max_align_t[]>(kReadBlock / sizeof(std::max_align_t));
  char* base = reinterpret_cast<char*>(buffer.get());
  std::vector<std::string> out;
  for (;;) {
    const ssize_t n = sys::getdentsSome(dirfd, base, kReadBlock);
    if (n < 0) return entryErrno(spelled, "read a directory", errno);
    if (n == 0) return out;
    for (ssize_t off = 0; off < n;) {
      const auto* ent = reinterpret_cast<const struct dirent64*>(base + off);
      off += ent->d_reclen;
      if (std::strcmp(ent->d_name, ".") == 0 || std::strcmp(ent->d_name, "..") == 0) continue;
      out.emplace_back(ent->d_name);
    }
  }
}

Result<sys::UniqueFd> openDirNoFollow(int dirfd, const std::string& name, std::string_view spelled,
                                      int flags = O_RDONLY) {
  const int fd = sys::openAtRaw(dirfd, name.c_str(), flags | O_DIRECTORY | O_NOFOLLOW);
  if (fd < 0) return entryErrno(spelled, "open directory " + quoted(name), errno);
  return sys::UniqueFd(fd);
}

// Depth-first over the directories below `top` (an O_RDONLY directory fd,
// taken), holding one directory fd at a time whatever the depth: a child is
// entered by name without following links, and its parent re-reached
// through "..", checked against the (dev, ino) recorded on the way down.
// enter(dirfd, path) handles one directory and returns the names of its
// subdirectories to visit; leave(parent_fd, name) runs after a visited
// subdirectory is done. `path` is the top's path in the root ("" = root).
template <class Enter, class Leave>
Result<void> walkDirs(sys::UniqueFd top, const std::string& path, std::string_view spelled,
                      Enter enter, Leave leave) {
  struct Level {
    DirId id;
    std::string name;
    std::string path;
    std::vector<std::string> pending;
  };
  std::vector<Level> stack;
  sys::UniqueFd cur = std::move(top);
  {
    auto id = idOf(cur.get(), spelled);
    if (!id) return tl::unexpected(id.error());
    auto subs = enter(cur.get(), path);
    if (!subs) return tl::unexpected(subs.error());
    stack.push_back(Level{*id, std::string(), path, std::move(*subs)});
  }
  while (!stack.empty()) {
    if (!stack.back().pending.empty()) {
      std::string sub = std::move(stack.back().pending.back());
      stack.back().pending.pop_back();
      auto next = openDirNoFollow(cur.get(), sub, spelled);
      if (!next) return tl::unexpected(next.error());
      auto id = idOf(next->get(), spelled);
      if (!id) return tl::unexpected(id.error());
      std::string sub_path = childPath(stack.back().path, sub);
      cur = std::move(*next);
      auto subs = enter(cur.get(), sub_path);
      if (!subs) return tl::unexpected(subs.error());
      stack.push_back(Level{*id, std::move(sub), std::move(sub_path), std::move(*subs)});
      continue;
    }
    const std::string name = std::move(stack.back().name);
    stack.pop_back();
    if (stack.empty()) break;
    auto up = openDirNoFollow(cur.get(), "..", spelled);
    if (!up) return tl::unexpected(up.error());
    auto id = idOf(up->get(), spelled);
    if (!id) return tl::unexpected(id.error());
    if (id->dev != stack.back().id.dev || id->ino != stack.back().id.ino) {
      return entryErrno(spelled, "a directory moved during removal", EAGAIN);
    }
    cur = std::move(*up);
    if (auto done = leave(cur.get(), name); !done) return done;
  }
  return {};
}

// Removes the directory `name` in `parent` and everything below it, never
// following a link.
Result<void> removeTree(int parent, const std::string& name, std::string_view spelled) {
  auto top = openDirNoFollow(parent, name, spelled);
  if (!top) return tl::unexpected(top.error());
  auto clearFiles = [spelled](int dirfd, const std::string&) -> Result<std::vector<std::string>> {
    auto names = listNames(dirfd, spelled);
    if (!names) return tl::unexpected(names.error());
    std::vector<std::string> subdirs;
    for (auto& n : *names) {
      if (::unlinkat(dirfd, n.c_str(), 0) == 0 || errno == ENOENT) continue;
      if (errno != EISDIR) return entryErrno(spelled, "remove " + quoted(n), errno);
      subdirs.push_back(std::move(n));
    }
    return subdirs;
  };
  auto rmdir = [spelled](int dirfd, const std::string& n) -> Result<void> {
    if (::unlinkat(dirfd, n.c_str(), AT_REMOVEDIR) != 0) {
      return entryErrno(spelled, "remove directory " + quoted(n), errno);
    }
    return {};
  };
  if (auto r = walkDirs(std::move(*top), std::string(), spelled, clearFiles, rmdir); !r) return r;
  return rmdir(parent, name);
}

// Removes what is at `name` in `parent`, if anything; a directory is kept
// when keep_dir. Returns whether a directory remains there.
Result<bool> clearName(int parent, const std::string& name, bool keep_dir,
                       std::string_view spelled) {
  struct stat st {};
  if (::fstatat(parent, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return false;
    return entryErrno(spelled, "stat " + quoted(name), errno);
  }
  if (S_ISDIR(st.st_mode)) {
    if (keep_dir) return true;
    if (auto r = removeTree(parent, name, spelled); !r) return tl::unexpected(r.error());
    return false;
  }
  if (::unlinkat(parent, name.c_str(), 0) != 0 && errno != ENOENT) {
    return entryErrno(spelled, "remove " + quoted(name), errno);
  }
  return false;
}

// --- the stream --------------------------------------------------------

struct ArchiveFree {
  void operator()(struct archive* a) const { archive_read_free(a); }
};
using ArchivePtr = std::unique_ptr<struct archive, ArchiveFree>;

// libarchive pulls the layer through this callback (EINTR handled by
// sys::readSome); a failed read keeps its errno so the error says whose
// fault it was.
struct LayerReader {
  int fd = -1;
  int read_errno = 0;
  std::array<char, kReadBlock> buffer{};
};

la_ssize_t readLayer(struct archive* a, void* client, const void** out) {
  auto* reader = static_cast<LayerReader*>(client);
  const ssize_t n = sys::readSome(reader->fd, reader->buffer.data(), reader->buffer.size());
  if (n < 0) {
    reader->read_errno = errno;
    archive_set_error(a, errno, "read layer");
    return -1;
  }
  *out = reader->buffer.data();
  return n;
}

std::string archiveError(struct archive* a) {
  const char* text = archive_error_string(a);
  return text != nullptr ? quoteForMessage(text, 256) : std::string("unknown libarchive error");
}

struct EntryTimes {
  std::array<timespec, 2> times{};  // atime, mtime for utimensat / futimens
};

long clampNsec(long nsec) {
  return nsec >= 0 && nsec < 1'000'000'000 ? nsec : 0;
}

EntryTimes timesOf(struct archive_entry* e) {
  EntryTimes t;
  t.times[1].tv_nsec = UTIME_OMIT;
  t.times[0].tv_nsec = UTIME_OMIT;
  if (archive_entry_mtime_is_set(e) != 0) {
    t.times[1].tv_sec = archive_entry_mtime(e);
    t.times[1].tv_nsec = clampNsec(archive_entry_mtime_nsec(e));
    t.times[0] = t.times[1];
  }
  if (archive_entry_atime_is_set(e) != 0) {
    t.times[0].tv_sec = archive_entry_atime(e);
    t.times[0].tv_nsec = clampNsec(archive_entry_atime_nsec(e));
  }
  return t;
}

struct DeferredDir {
  std::vector<std::string> parts;
  mode_t mode = 0;
  EntryTimes times;
  std::string spelled;
};

// --- one layer -----------------------------------------------------------

class LayerApplier {
 public:
  LayerApplier(int root, const UnpackLimits& limits, const UnpackTally& tally)
      : root_(root), limits_(limits), tally_(tally) {}

  Result<LayerStats> run(struct archive* a, const LayerReader& reader) {
    for (;;) {
      struct archive_entry* entry = nullptr;
      const int rc = archive_read_next_header(a, &entry);
      if (rc == ARCHIVE_EOF) break;
      if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN) return streamError(a, reader);
      // Entries that create nothing (whiteouts, a directory declared again,
      // dropped devices) still cost work: at most 4 per name of the cap.
      if (++headers_ > 4 * limits_.max_entries)
        return fail(ErrorCode::kExecutionRejected,
                    "layer has more than " + std::to_string(4 * limits_.max_entries) +
                        " entries (4 times the image's max_entries)");
      if (auto r = applyEntry(a, reader, entry); !r) return tl::unexpected(r.error());
    }
    if (auto r = finishDirectories(); !r) return tl::unexpected(r.error());
    return stats_;
  }

 private:
  tl::unexpected<Error> streamError(struct archive* a, const LayerReader& reader) const {
    if (reader.read_errno != 0) {
      return failErrno(ErrorCode::kExecutionUnavailable, "layer stream: read", reader.read_errno);
    }
    if (!last_entry_.empty()) {
      return fail(ErrorCode::kExecutionRejected, "layer stream: unreadable after layer entry " +
                                                     quoted(last_entry_) + ": " + archiveError(a));
    }
    return fail(ErrorCode::kExecutionRejected,
                "layer stream: not a readable tar archive (uncompressed, gzip or zstd): " +
                    archiveError(a));
  }

  Result<void> countEntry(std::string_view spelled) {
    if (tally_.entries + stats_.entries + 1 > limits_.max_entries) {
      return rejectEntry(spelled, "exceeds the image's entry cap (max_entries " +
                                      std::to_string(limits_.max_entries) + ")");
    }
    ++stats_.entries;
    return {};
  }

  Result<void> countBytes(std::string_view spelled, std::int64_t more) {
    if (more < 0 || tally_.bytes + stats_.bytes > limits_.max_bytes - more) {
      return rejectEntry(spelled, "exceeds the image's byte cap (max_bytes " +
                                      std::to_string(limits_.max_bytes) + ")");
    }
    return {};
  }

  static std::string keyOf(const std::string& path) {
    if (path.size() <= kMaxPlainKey) return path;
    // A NUL never occurs in a path, so a digest key cannot equal a plain one.
    return std::string(1, '\0') + sys::sha256Hex(path);
  }

  // Records `path` and its ancestors as this layer's.
  void markLayer(const std::string& path) {
    std::string p = path;
    for (;;) {
      if (!layer_paths_.insert(keyOf(p)).second) return;
      const std::size_t slash = p.rfind('/');
      if (slash == std::string::npos) return;
      p.resize(slash);
    }
  }

  bool inLayer(const std::string& path) const { return layer_paths_.count(keyOf(path)) != 0; }

  // The directory holding parts[0..count) (the root for count 0), opened
  // O_PATH one component at a time without following any symlink. With
  // `create`, a missing component is made; without, a missing or
  // non-directory component yields an invalid fd (nothing there).
  Result<sys::UniqueFd> openParent(const std::vector<std::string>& parts, std::size_t count,
                                   bool create, std::string_view spelled, const char* role) {
    auto cur = workspace::openBeneath(root_, "", O_PATH | O_DIRECTORY);
    if (!cur) return entryLookup(spelled, "open the image root", cur.error());
    std::string prefix;
    for (std::size_t i = 0; i < count; ++i) {
      const std::string& comp = parts[i];
      prefix = childPath(prefix, comp);
      struct stat st {};
      if (::fstatat(cur->get(), comp.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno != ENOENT) return entryErrno(spelled, "stat " + quoted(prefix), errno);
        if (!create) return sys::UniqueFd();
        if (auto c = countEntry(spelled); !c) return tl::unexpected(c.error());
        if (::mkdirat(cur->get(), comp.c_str(), 0700) != 0) {
          return entryErrno(spelled, "create parent directory " + quoted(prefix), errno);
        }
        markLayer(prefix);
        // Implicit parents get 0755 exactly, whatever the umask.
        auto made = openDirNoFollow(cur->get(), comp, spelled);
        if (!made) return tl::unexpected(made.error());
        if (::fchmod(made->get(), 0755) != 0) {
          return entryErrno(spelled, "chmod parent directory " + quoted(prefix), errno);
        }
      } else if (S_ISLNK(st.st_mode)) {
        return rejectEntry(spelled, std::string(role) + " " + quoted(prefix) +
                                        " is a symlink (not followed when unpacking)");
      } else if (!S_ISDIR(st.st_mode)) {
        if (!create) return sys::UniqueFd();
        return rejectEntry(spelled,
                           std::string(role) + " " + quoted(prefix) + " is not a directory");
      }
      auto next = workspace::openBeneath(cur->get(), comp, O_PATH | O_DIRECTORY | O_NOFOLLOW);
      if (!next) return entryLookup(spelled, "open " + quoted(prefix), next.error());
      cur = std::move(next);
    }
    return cur;
  }

  // The entry's permission bits less setuid, setgid and sticky, and less
  // group and other write: a root is shared by every sandbox of its image
  // and nobody but the store may change it.
  mode_t cleanMode(struct archive_entry* e, bool /*is_dir*/) {
    const mode_t perm = archive_entry_perm(e) & 07777;
    if ((perm & (S_ISUID | S_ISGID | S_ISVTX)) != 0) ++stats_.cleared_setid;
    return perm & 0755;
  }

  Result<void> applyEntry(struct archive* a, const LayerReader& reader, struct archive_entry* e) {
    const char* raw = archive_entry_pathname(e);
    if (raw == nullptr) raw = archive_entry_pathname_utf8(e);
    if (raw == nullptr) {
      return fail(ErrorCode::kExecutionRejected, "layer entry without a readable name");
    }
    const std::string spelled(raw);
    last_entry_ = spelled;
    std::vector<std::string> parts;
    std::string why;
    if (!splitName(spelled, parts, why)) return rejectEntry(spelled, why);
    // A whiteout name marks a removal; as a directory on the way it would
    // make one on disk that later layers misread.
    for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
      if (parts[i].compare(0, kWhiteoutPrefix.size(), kWhiteoutPrefix) == 0) {
        return rejectEntry(spelled, "has a whiteout name as a parent component");
      }
    }

    if (!parts.empty() && parts.back().compare(0, kWhiteoutPrefix.size(), kWhiteoutPrefix) == 0) {
      return applyWhiteout(parts, spelled);
    }
    const char* hardlink = archive_entry_hardlink(e);
    if (hardlink != nullptr) return applyHardlink(parts, spelled, hardlink);

    const mode_t type = archive_entry_filetype(e);
    switch (type) {
      case AE_IFREG:
      case AE_IFDIR:
      case AE_IFLNK:
        break;
      case AE_IFCHR:
      case AE_IFBLK:
      case AE_IFIFO:
      case AE_IFSOCK:
        return dropEntry(parts, spelled);
      default:
        return rejectEntry(spelled, "has an entry type that is not supported");
    }
    if (parts.empty()) {
      if (type == AE_IFDIR) return {};  // the root keeps its own mode and mtime
      return rejectEntry(spelled, "names the image root but is not a directory");
    }
    const std::string& name = parts.back();
    auto parent = openParent(parts, parts.size() - 1, true, spelled, "parent");
    if (!parent) return tl::unexpected(parent.error());
    const std::string path = joinParts(parts, parts.size());

    if (type == AE_IFDIR) {
      auto kept = clearName(parent->get(), name, true, spelled);
      if (!kept) return tl::unexpected(kept.error());
      if (*kept) {
        // A lower directory stays; until the layer ends it is writable by us.
        auto dir = openDirNoFollow(parent->get(), name, spelled);
        if (!dir) return tl::unexpected(dir.error());
        struct stat st {};
        if (::fstat(dir->get(), &st) != 0) return entryErrno(spelled, "fstat", errno);
        if ((st.st_mode & 0700) != 0700 && ::fchmod(dir->get(), (st.st_mode & 07777) | 0700) != 0) {
          return entryErrno(spelled, "chmod", errno);
        }
      } else {
        if (auto c = countEntry(spelled); !c) return c;
        if (::mkdirat(parent->get(), name.c_str(), 0700) != 0) {
          return entryErrno(spelled, "create directory", errno);
        }
      }
      markLayer(path);
      // One deferred record per directory: a directory declared again takes
      // the later mode and times instead of another record.
      DeferredDir d{parts, cleanMode(e, true), timesOf(e), spelled};
      if (auto it = deferred_at_.find(path); it != deferred_at_.end()) {
        deferred_[it->second] = std::move(d);
      } else {
        deferred_at_.emplace(path, deferred_.size());
        deferred_.push_back(std::move(d));
      }
      return {};
    }

    if (auto r = clearName(parent->get(), name, false, spelled); !r) {
      return tl::unexpected(r.error());
    }
    if (type == AE_IFLNK) {
      const char* target = archive_entry_symlink(e);
      if (target == nullptr) target = archive_entry_symlink_utf8(e);
      if (target == nullptr || *target == '\0') {
        return rejectEntry(spelled, "is a symlink without a target");
      }
      if (auto c = countEntry(spelled); !c) return c;
      if (::symlinkat(target, parent->get(), name.c_str()) != 0) {
        return entryErrno(spelled, "create symlink", errno);
      }
      markLayer(path);
      const EntryTimes t = timesOf(e);
      if (::utimensat(parent->get(), name.c_str(), t.times.data(), AT_SYMLINK_NOFOLLOW) != 0) {
        return entryErrno(spelled, "set symlink times", errno);
      }
      return {};
    }
    return writeFile(a, reader, e, parent->get(), name, path, spelled);
  }

  Result<void> writeFile(struct archive* a, const LayerReader& reader, struct archive_entry* e,
                         int parent, const std::string& name, const std::string& path,
                         const std::string& spelled) {
    if (archive_entry_size_is_set(e) != 0) {
      if (auto c = countBytes(spelled, archive_entry_size(e)); !c) return c;
    }
    if (auto c = countEntry(spelled); !c) return c;
    const int raw_fd = sys::openAtRaw(parent, name.c_str(),
                                      O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY, 0600);
    if (raw_fd < 0) return entryErrno(spelled, "create file", errno);
    sys::UniqueFd fd(raw_fd);
    markLayer(path);
    auto buffer = std::make_unique<char[]>(kReadBlock);
    for (;;) {
      const la_ssize_t n = archive_read_data(a, buffer.get(), kReadBlock);
      if (n < 0) {
        if (reader.read_errno != 0) {
          return failErrno(ErrorCode::kExecutionUnavailable,
                           "layer entry " + quoted(spelled) + ": read layer", reader.read_errno);
        }
        return rejectEntry(spelled, "data cannot be read (" + archiveError(a) + ")");
      }
      if (n == 0) break;
      if (auto c = countBytes(spelled, n); !c) return c;
      if (!sys::writeAll(fd.get(), buffer.get(), static_cast<std::size_t>(n))) {
        return entryErrno(spelled, "write file", errno);
      }
      stats_.bytes += n;
    }
    if (::fchmod(fd.get(), cleanMode(e, false)) != 0) return entryErrno(spelled, "chmod", errno);
    const EntryTimes t = timesOf(e);
    if (::futimens(fd.get(), t.times.data()) != 0) return entryErrno(spelled, "set times", errno);
    return {};
  }

  Result<void> applyHardlink(const std::vector<std::string>& parts, const std::string& spelled,
                             const char* target_raw) {
    std::vector<std::string> tparts;
    std::string why;
    if (!splitName(target_raw, tparts, why)) {
      return rejectEntry(spelled, "hard link target " + quoted(target_raw) + " " + why);
    }
    if (tparts.empty()) return rejectEntry(spelled, "hard link target is the image root");
    if (parts.empty()) return rejectEntry(spelled, "a hard link cannot name the image root");
    auto tparent = openParent(tparts, tparts.size() - 1, false, spelled, "hard link target parent");
    if (!tparent) return tl::unexpected(tparent.error());
    const std::string& tname = tparts.back();
    struct stat tst {};
    if (!tparent->valid() ||
        ::fstatat(tparent->get(), tname.c_str(), &tst, AT_SYMLINK_NOFOLLOW) != 0) {
      if (tparent->valid() && errno != ENOENT && errno != ENOTDIR) {
        return entryErrno(spelled, "stat hard link target", errno);
      }
      return rejectEntry(
          spelled, "hard link target " + quoted(target_raw) + " does not exist in the image root");
    }
    if (!S_ISREG(tst.st_mode)) {
      return rejectEntry(spelled,
                         "hard link target " + quoted(target_raw) + " is not a regular file");
    }
    const std::string& name = parts.back();
    auto parent = openParent(parts, parts.size() - 1, true, spelled, "parent");
    if (!parent) return tl::unexpected(parent.error());
    struct stat st {};
    if (::fstatat(parent->get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        st.st_dev == tst.st_dev && st.st_ino == tst.st_ino) {
      markLayer(joinParts(parts, parts.size()));
      return {};  // already this very file
    }
    if (auto r = clearName(parent->get(), name, false, spelled); !r) {
      return tl::unexpected(r.error());
    }
    if (auto c = countEntry(spelled); !c) return c;
    if (::linkat(tparent->get(), tname.c_str(), parent->get(), name.c_str(), 0) != 0) {
      return entryErrno(spelled, "create hard link", errno);
    }
    markLayer(joinParts(parts, parts.size()));
    return {};
  }

  // A device, FIFO or socket is not made; what it replaces is still removed.
  Result<void> dropEntry(const std::vector<std::string>& parts, const std::string& spelled) {
    ++stats_.dropped_devices;
    if (parts.empty()) return rejectEntry(spelled, "names the image root but is not a directory");
    auto parent = openParent(parts, parts.size() - 1, false, spelled, "parent");
    if (!parent) return tl::unexpected(parent.error());
    if (!parent->valid()) return {};
    if (auto r = clearName(parent->get(), parts.back(), false, spelled); !r) {
      return tl::unexpected(r.error());
    }
    return {};
  }

  Result<void> applyWhiteout(const std::vector<std::string>& parts, const std::string& spelled) {
    const std::string& base = parts.back();
    const bool opaque = base == kOpaqueWhiteout;
    if (!opaque && base.compare(0, kWhiteoutMetaPrefix.size(), kWhiteoutMetaPrefix) == 0) {
      return {};  // aufs metadata (".wh..wh.plnk" and the like): not content
    }
    const std::string hidden = base.substr(kWhiteoutPrefix.size());
    if (!opaque && (hidden.empty() || hidden == "." || hidden == "..")) {
      return rejectEntry(spelled, "is a whiteout of " + quoted(hidden) +
                                      ", which names no entry of its directory");
    }
    auto parent = openParent(parts, parts.size() - 1, false, spelled, "whiteout parent");
    if (!parent) return tl::unexpected(parent.error());
    ++stats_.whiteouts;
    if (!parent->valid()) return {};
    const std::string dir_path = joinParts(parts, parts.size() - 1);
    if (!opaque) {
      if (inLayer(childPath(dir_path, hidden))) return {};  // same-layer entries stay
      if (auto r = clearName(parent->get(), hidden, false, spelled); !r) {
        return tl::unexpected(r.error());
      }
      return {};
    }
    // Once per directory and layer: what it removes is gone after the first.
    if (!opaque_done_.insert(dir_path).second) return {};
    auto top = openDirNoFollow(parent->get(), ".", spelled);
    if (!top) return tl::unexpected(top.error());
    // Keeps exactly this layer's entries and their ancestors; the lower
    // content of a kept directory goes too (the directory is opaque).
    auto clearLower = [this, &spelled](
                          int dirfd, const std::string& path) -> Result<std::vector<std::string>> {
      auto names = listNames(dirfd, spelled);
      if (!names) return tl::unexpected(names.error());
      std::vector<std::string> visit;
      for (auto& n : *names) {
        if (!inLayer(childPath(path, n))) {
          if (auto r = clearName(dirfd, n, false, spelled); !r) return tl::unexpected(r.error());
          continue;
        }
        struct stat st {};
        if (::fstatat(dirfd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
          return entryErrno(spelled, "stat " + quoted(n), errno);
        }
        if (S_ISDIR(st.st_mode)) visit.push_back(std::move(n));
      }
      return visit;
    };
    auto nothing = [](int, const std::string&) -> Result<void> { return {}; };
    return walkDirs(std::move(*top), dir_path, spelled, clearLower, nothing);
  }

  // Directory modes and mtimes, deepest first, once nothing more is written
  // into them. A directory replaced later in the layer is skipped.
  Result<void> finishDirectories() {
    std::stable_sort(
        deferred_.begin(), deferred_.end(),
        [](const DeferredDir& x, const DeferredDir& y) { return x.parts.size() > y.parts.size(); });
    for (const DeferredDir& d : deferred_) {
      auto parent = openParent(d.parts, d.parts.size() - 1, false, d.spelled, "parent");
      // A parent replaced later in the layer (by a symlink, say): gone too.
      if (!parent && parent.error().code == ErrorCode::kExecutionRejected) continue;
      if (!parent) return tl::unexpected(parent.error());
      if (!parent->valid()) continue;
      const int raw = sys::openAtRaw(parent->get(), d.parts.back().c_str(),
                                     O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
      if (raw < 0) {
        if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP) continue;
        return entryErrno(d.spelled, "open directory", errno);
      }
      sys::UniqueFd dir(raw);
      if (::fchmod(dir.get(), d.mode) != 0) return entryErrno(d.spelled, "chmod", errno);
      if (::futimens(dir.get(), d.times.times.data()) != 0) {
        return entryErrno(d.spelled, "set times", errno);
      }
    }
    return {};
  }

  int root_;
  const UnpackLimits& limits_;
  const UnpackTally& tally_;
  LayerStats stats_;
  std::unordered_set<std::string> layer_paths_;
  std::vector<DeferredDir> deferred_;
  std::map<std::string, std::size_t> deferred_at_;  // path -> its deferred_ index
  std::set<std::string> opaque_done_;               // directories this layer already made opaque
  std::int64_t headers_ = 0;                        // entries read, whatever they do
  std::string last_entry_;                          // for a stream that breaks after it
};

}  // namespace

Result<LayerStats> applyLayer(int root_dirfd, int layer_fd, const UnpackLimits& limits,
                              UnpackTally& tally) {
  ArchivePtr a(archive_read_new());
  if (!a) return fail(ErrorCode::kExecutionUnavailable, "layer stream: archive_read_new failed");
  // Tar only (ustar, pax, GNU); gzip and zstd only in process: ARCHIVE_WARN
  // from a filter means libarchive would run an external program instead.
  if (archive_read_support_format_tar(a.get()) != ARCHIVE_OK ||
      archive_read_support_filter_gzip(a.get()) != ARCHIVE_OK ||
      archive_read_support_filter_zstd(a.get()) != ARCHIVE_OK) {
    return fail(ErrorCode::kExecutionUnavailable,
                "layer stream: libarchive lacks built-in tar, gzip or zstd support");
  }
  auto reader = std::make_unique<LayerReader>();
  reader->fd = layer_fd;
  if (archive_read_open(a.get(), reader.get(), nullptr, readLayer, nullptr) != ARCHIVE_OK) {
    if (reader->read_errno != 0) {
      return failErrno(ErrorCode::kExecutionUnavailable, "layer stream: read", reader->read_errno);
    }
    return fail(ErrorCode::kExecutionRejected,
                "layer stream: not a readable tar archive (uncompressed, gzip or zstd): " +
                    archiveError(a.get()));
  }
  LayerApplier applier(root_dirfd, limits, tally);
  auto stats = applier.run(a.get(), *reader);
  if (!stats) return stats;
  tally.bytes += stats->bytes;
  tally.entries += stats->entries;
  return stats;
}

}  // namespace airlock::images
