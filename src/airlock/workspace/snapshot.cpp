#include "airlock/workspace/snapshot.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <memory>
#include <utility>
#include <vector>

#include "airlock/core/encoding.h"
#include "airlock/sys/io.h"
#include "airlock/sys/sha256.h"
#include "airlock/sys/unique_fd.h"
#include "airlock/workspace/dir_entries.h"
#include "airlock/workspace/resolve.h"

namespace airlock::workspace {
namespace {

// The walk keeps open fds only for the deepest kHeldDirFds directories on
// its stack; an ancestor whose fd was closed is re-reached through ".." from
// its child and checked by (dev, ino). A 4096-deep tree therefore needs at
// most this many fds, whatever RLIMIT_NOFILE is, and we never change the
// process's limits from library code.
constexpr std::size_t kHeldDirFds = 64;
constexpr std::size_t kHashChunkBytes = 256 * 1024;
// Symlink targets are at most PATH_MAX on Linux filesystems; tmpfs allows a
// page. Anything longer is refused rather than truncated.
constexpr std::size_t kMaxLinkTarget = 64 * 1024;

std::int64_t toNs(const struct timespec& ts) {
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

SnapshotEntry entryFromStat(const struct stat& st) {
  SnapshotEntry e;
  e.type = S_ISLNK(st.st_mode) ? SnapshotEntry::Type::kSymlink : SnapshotEntry::Type::kFile;
  e.inode = st.st_ino;
  e.size_bytes = st.st_size;
  e.allocated_bytes = static_cast<std::int64_t>(st.st_blocks) * 512;
  e.mtime_ns = toNs(st.st_mtim);
  e.ctime_ns = toNs(st.st_ctim);
  e.mode = st.st_mode;
  return e;
}

bool sameMetadata(const SnapshotEntry& a, const SnapshotEntry& b) {
  return a.type == b.type && a.inode == b.inode && a.size_bytes == b.size_bytes &&
         a.mtime_ns == b.mtime_ns && a.ctime_ns == b.ctime_ns && a.mode == b.mode;
}

// Untrusted names are escaped (newlines, invalid UTF-8) inside messages.
std::string quoted(std::string_view path) {
  return quoteForMessage(path, 512);
}

// --- Snapshot walk -------------------------------------------------------

struct Frame {
  sys::UniqueFd fd;  // may be closed for frames far above the top
  dev_t dev = 0;
  ino_t ino = 0;
  std::vector<std::string> subdirs;
  std::size_t next = 0;
  std::size_t parent_path_len = 0;  // length of the parent's path, to restore
};

class SnapshotWalk {
 public:
  SnapshotWalk(const SnapshotLimits& limits, Snapshot& out) : limits_(limits), out_(out) {}

  Result<void> run(int root_dirfd) {
    int fd = sys::openAtRaw(root_dirfd, ".", O_RDONLY | O_DIRECTORY);
    if (fd < 0) return failErrno(ErrorCode::kExecutionUnavailable, "open workspace root", errno);
    Frame root;
    root.fd = sys::UniqueFd(fd);
    if (auto r = scan(root); !r) return r;
    stack_.push_back(std::move(root));

    while (!stack_.empty()) {
      Frame& top = stack_.back();
      if (top.next < top.subdirs.size()) {
        std::string name = top.subdirs[top.next++];
        if (auto r = enter(name); !r) return r;
      } else if (auto r = leave(); !r) {
        return r;
      }
    }
    return {};
  }

 private:
  Result<void> enter(const std::string& name) {
    if (static_cast<std::int64_t>(stack_.size()) > limits_.max_depth) {
      return fail(ErrorCode::kExecutionUnavailable, "workspace tree is deeper than " +
                                                        std::to_string(limits_.max_depth) +
                                                        " directories at " + quoted(path_));
    }
    const std::size_t parent_len = path_.size();
    if (!path_.empty()) path_.push_back('/');
    path_ += name;
    int fd = sys::openAtRaw(stack_.back().fd.get(), name.c_str(),
                            O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) {
      // The listing said directory; anything else now means the tree changed
      // under the walk (no command should be running during a snapshot).
      return failErrno(ErrorCode::kExecutionUnavailable,
                       "open directory " + quoted(path_) + " during snapshot", errno);
    }
    Frame child;
    child.fd = sys::UniqueFd(fd);
    child.parent_path_len = parent_len;
    if (auto r = scan(child); !r) return r;
    if (stack_.size() >= kHeldDirFds) stack_[stack_.size() - kHeldDirFds].fd.reset();
    stack_.push_back(std::move(child));
    return {};
  }

  Result<void> leave() {
    Frame done = std::move(stack_.back());
    stack_.pop_back();
    path_.resize(done.parent_path_len);
    if (stack_.empty() || stack_.back().fd.valid()) return {};
    Frame& parent = stack_.back();
    int fd = sys::openAtRaw(done.fd.get(), "..", O_RDONLY | O_DIRECTORY);
    if (fd < 0)
      return failErrno(ErrorCode::kExecutionUnavailable, "reopen parent during snapshot", errno);
    sys::UniqueFd reopened(fd);
    struct stat st {};
    if (::fstat(reopened.get(), &st) != 0) {
      return failErrno(ErrorCode::kExecutionUnavailable, "fstat during snapshot", errno);
    }
    if (st.st_dev != parent.dev || st.st_ino != parent.ino) {
      return fail(ErrorCode::kExecutionUnavailable,
                  "directory " + quoted(path_) + " was moved during the snapshot");
    }
    parent.fd = std::move(reopened);
    return {};
  }

  // Lists one directory: records its files and symlinks, queues its subdirs.
  Result<void> scan(Frame& frame) {
    struct stat self {};
    if (::fstat(frame.fd.get(), &self) != 0) {
      return failErrno(ErrorCode::kExecutionUnavailable, "fstat during snapshot", errno);
    }
    frame.dev = self.st_dev;
    frame.ino = self.st_ino;
    auto entries = detail::readDirEntries(frame.fd.get(), limits_.max_entries - count_);
    if (!entries) {
      return fail(ErrorCode::kExecutionUnavailable,
                  "snapshot of " + quoted(path_) + ": " + entries.error().message());
    }
    count_ += static_cast<std::int64_t>(entries->size());
    for (auto& ent : *entries) {
      if (ent.d_type == DT_DIR) {
        frame.subdirs.push_back(std::move(ent.name));
        continue;
      }
      if (ent.d_type != DT_REG && ent.d_type != DT_LNK && ent.d_type != DT_UNKNOWN) continue;
      struct stat st {};
      if (::fstatat(frame.fd.get(), ent.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) continue;  // vanished between getdents and stat
        return failErrno(ErrorCode::kExecutionUnavailable, "fstatat during snapshot", errno);
      }
      if (S_ISDIR(st.st_mode)) {
        frame.subdirs.push_back(std::move(ent.name));
        continue;
      }
      if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) continue;
      std::string key = path_;
      if (!key.empty()) key.push_back('/');
      key += ent.name;
      out_.insert_or_assign(std::move(key), entryFromStat(st));
    }
    return {};
  }

  const SnapshotLimits& limits_;
  Snapshot& out_;
  std::vector<Frame> stack_;
  std::string path_;  // relative path of the directory on top of the stack
  std::int64_t count_ = 0;
};

// --- Hashing -------------------------------------------------------------

// Streams the file in fixed chunks: memory stays bounded for any size,
// including a sparse file whose apparent size is far beyond its blocks.
Result<std::string> hashFd(int fd, std::int64_t size_hint) {
  sys::Sha256 sha;
  const std::size_t want =
      size_hint < 0
          ? kHashChunkBytes
          : std::min<std::size_t>(kHashChunkBytes, static_cast<std::size_t>(size_hint) + 1);
  std::vector<unsigned char> buf(std::max<std::size_t>(want, 4096));
  for (;;) {
    ssize_t n = sys::readSome(fd, buf.data(), buf.size());
    if (n < 0) return failErrno(ErrorCode::kExecutionUnavailable, "read while hashing", errno);
    if (n == 0) break;
    sha.update(buf.data(), static_cast<std::size_t>(n));
  }
  return sha.finishHex();
}

Result<std::string> hashBytes(std::string_view bytes) {
  return sys::sha256Hex(bytes);
}

// Parent directory of `relative` opened without following any symlink, and
// the final name. A path from a snapshot can exceed PATH_MAX (deep trees), so
// a path that long is walked one component at a time; a shorter one takes a
// single openat2(RESOLVE_NO_SYMLINKS) where the kernel has it.
Result<std::pair<sys::UniqueFd, std::string>> openParentNoFollow(int dirfd,
                                                                 const std::string& relative) {
  if (relative.empty() || relative.front() == '/' || relative.find('\0') != std::string::npos) {
    return fail(ErrorCode::kWorkspaceEscape, "invalid snapshot path " + quoted(relative));
  }
  std::vector<std::string> comps;
  for (std::size_t pos = 0; pos <= relative.size();) {
    std::size_t slash = relative.find('/', pos);
    if (slash == std::string::npos) slash = relative.size();
    std::string comp = relative.substr(pos, slash - pos);
    if (comp.empty() || comp == "." || comp == "..") {
      return fail(ErrorCode::kWorkspaceEscape, "invalid snapshot path " + quoted(relative));
    }
    comps.push_back(std::move(comp));
    pos = slash + 1;
  }
  std::string name = std::move(comps.back());
  comps.pop_back();
  const std::size_t parent_len = relative.size() - name.size();  // includes trailing '/'

  if (parent_len > 0 && parent_len < PATH_MAX && detectResolver() == ResolverKind::kOpenat2) {
    open_how how{};
    how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    std::string parent = relative.substr(0, parent_len - 1);
    for (;;) {
      const int fd = sys::openat2Raw(dirfd, parent.c_str(), how);
      if (fd >= 0) return std::make_pair(sys::UniqueFd(fd), std::move(name));
      if (errno == EAGAIN) continue;
      return failErrno(errno == ENOENT ? ErrorCode::kNotFound : ErrorCode::kExecutionUnavailable,
                       "open parent of " + quoted(relative), errno);
    }
  }
  int fd = sys::openAtRaw(dirfd, ".", O_PATH | O_DIRECTORY);
  if (fd < 0) return failErrno(ErrorCode::kExecutionUnavailable, "open workspace root", errno);
  sys::UniqueFd cur(fd);
  for (const auto& comp : comps) {
    int next = sys::openAtRaw(cur.get(), comp.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW);
    if (next < 0) {
      return failErrno(errno == ENOENT ? ErrorCode::kNotFound : ErrorCode::kExecutionUnavailable,
                       "open parent of " + quoted(relative), errno);
    }
    cur = sys::UniqueFd(next);
  }
  return std::make_pair(std::move(cur), std::move(name));
}

Result<std::string> readLinkTarget(int dirfd, const std::string& name) {
  std::string buf(4096, '\0');
  for (;;) {
    ssize_t n = ::readlinkat(dirfd, name.c_str(), buf.data(), buf.size());
    if (n < 0) {
      return failErrno(errno == ENOENT ? ErrorCode::kNotFound : ErrorCode::kExecutionUnavailable,
                       "readlinkat", errno);
    }
    if (static_cast<std::size_t>(n) < buf.size()) {
      buf.resize(static_cast<std::size_t>(n));
      return buf;
    }
    if (buf.size() >= kMaxLinkTarget) {
      return fail(ErrorCode::kExecutionUnavailable, "symlink target too long");
    }
    buf.resize(buf.size() * 2);
  }
}

Result<sys::UniqueFd> openRegularNoFollow(int parent, const std::string& name,
                                          const std::string& relative) {
  // O_NONBLOCK: if a FIFO took the file's place, opening must not hang.
  int fd = sys::openAtRaw(parent, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    return failErrno(errno == ENOENT ? ErrorCode::kNotFound : ErrorCode::kExecutionUnavailable,
                     "open " + quoted(relative) + " for hashing", errno);
  }
  sys::UniqueFd owned(fd);
  struct stat st {};
  if (::fstat(owned.get(), &st) != 0)
    return failErrno(ErrorCode::kExecutionUnavailable, "fstat", errno);
  if (!S_ISREG(st.st_mode)) {
    return fail(ErrorCode::kExecutionUnavailable, quoted(relative) + " is not a regular file");
  }
  return owned;
}

// Hashes the object at `path` and refreshes `entry`'s metadata from the
// object actually hashed, so the stored (metadata, sha256) pair is coherent
// even if the tree moved since the snapshot. A file that changes while it is
// being hashed is an error rather than a torn digest.
Result<void> hashEntry(int root_dirfd, const std::string& path, SnapshotEntry& entry) {
  auto parent = openParentNoFollow(root_dirfd, path);
  if (!parent) return tl::unexpected(parent.error());
  const int pfd = parent->first.get();
  const std::string& name = parent->second;
  struct stat st_before {};
  struct stat st_after {};
  std::string digest;
  if (entry.type == SnapshotEntry::Type::kFile) {
    auto fd = openRegularNoFollow(pfd, name, path);
    if (!fd) return tl::unexpected(fd.error());
    if (::fstat(fd->get(), &st_before) != 0) {
      return failErrno(ErrorCode::kExecutionUnavailable, "fstat", errno);
    }
    auto h = hashFd(fd->get(), st_before.st_size);
    if (!h) return tl::unexpected(h.error());
    digest = std::move(*h);
    if (::fstat(fd->get(), &st_after) != 0) {
      return failErrno(ErrorCode::kExecutionUnavailable, "fstat", errno);
    }
  } else {
    if (::fstatat(pfd, name.c_str(), &st_before, AT_SYMLINK_NOFOLLOW) != 0) {
      return failErrno(ErrorCode::kExecutionUnavailable, "fstatat " + quoted(path), errno);
    }
    auto target = readLinkTarget(pfd, name);
    if (!target) return tl::unexpected(target.error());
    auto h = hashBytes(*target);
    if (!h) return tl::unexpected(h.error());
    digest = std::move(*h);
    if (::fstatat(pfd, name.c_str(), &st_after, AT_SYMLINK_NOFOLLOW) != 0) {
      return failErrno(ErrorCode::kExecutionUnavailable, "fstatat " + quoted(path), errno);
    }
  }
  SnapshotEntry before = entryFromStat(st_before);
  SnapshotEntry after = entryFromStat(st_after);
  if (!sameMetadata(before, after) || after.type != entry.type) {
    return fail(ErrorCode::kExecutionUnavailable, quoted(path) + " changed while it was hashed");
  }
  after.sha256 = std::move(digest);
  entry = std::move(after);
  return {};
}

}  // namespace

Result<Snapshot> takeSnapshot(int root_dirfd, const SnapshotLimits& limits) {
  Snapshot out;
  SnapshotWalk walk(limits, out);
  if (auto r = walk.run(root_dirfd); !r) return tl::unexpected(r.error());
  return out;
}

Result<std::string> sha256At(int dirfd, const std::string& relative_path,
                             SnapshotEntry::Type type) {
  auto parent = openParentNoFollow(dirfd, relative_path);
  if (!parent) return tl::unexpected(parent.error());
  if (type == SnapshotEntry::Type::kSymlink) {
    auto target = readLinkTarget(parent->first.get(), parent->second);
    if (!target) return tl::unexpected(target.error());
    return hashBytes(*target);
  }
  auto fd = openRegularNoFollow(parent->first.get(), parent->second, relative_path);
  if (!fd) return tl::unexpected(fd.error());
  return hashFd(fd->get(), -1);
}

// A file over 1 MiB with less than half of its apparent size allocated:
// hashing it would mostly read zeros the kernel makes up for holes.
bool isMostlyHoles(const SnapshotEntry& e) {
  return e.size_bytes > (std::int64_t{1} << 20) && e.allocated_bytes * 2 < e.size_bytes;
}

Result<Diff> diffSnapshots(const Snapshot& before, Snapshot& after, int root_dirfd,
                           std::int64_t max_listing, std::int64_t hash_budget_bytes) {
  Diff diff;
  std::int64_t budget = hash_budget_bytes;
  // Hashes `entry` when it fits in the remaining budget; otherwise leaves its
  // sha256 unknown. Symlinks (a target string) always fit.
  auto hashWithinBudget = [&](const std::string& path, SnapshotEntry& entry) -> Result<void> {
    if (entry.type == SnapshotEntry::Type::kFile) {
      if (entry.size_bytes > budget || isMostlyHoles(entry)) return {};
      budget -= entry.size_bytes;
    }
    return hashEntry(root_dirfd, path, entry);
  };
  const std::size_t cap = max_listing > 0 ? static_cast<std::size_t>(max_listing) : 0;
  auto report = [&](FileChange change) {
    if (diff.changes.size() < cap) {
      diff.changes.push_back(std::move(change));
    } else {
      diff.truncated = true;
    }
  };

  // Both maps iterate in byte order of the path, so the merge emits changes
  // already sorted. Once the listing is known to be truncated nothing more
  // can be listed, so later entries are not hashed (their sha256 stays
  // unknown, which only means the next diff hashes them if they change).
  auto b = before.begin();
  auto a = after.begin();
  while (b != before.end() || a != after.end()) {
    if (a == after.end() || (b != before.end() && b->first < a->first)) {
      report(FileChange{b->first, ChangeKind::kDeleted, b->second.size_bytes, std::nullopt});
      ++b;
      continue;
    }
    if (b == before.end() || a->first < b->first) {
      if (!diff.truncated) {
        if (auto r = hashWithinBudget(a->first, a->second); !r) return tl::unexpected(r.error());
        report(FileChange{a->first, ChangeKind::kCreated, a->second.size_bytes, a->second.sha256});
      }
      ++a;
      continue;
    }
    const SnapshotEntry& old_entry = b->second;
    SnapshotEntry& new_entry = a->second;
    if (sameMetadata(old_entry, new_entry)) {
      if (!new_entry.sha256) new_entry.sha256 = old_entry.sha256;
    } else if (!diff.truncated) {
      if (auto r = hashWithinBudget(a->first, new_entry); !r) return tl::unexpected(r.error());
      const bool proven_same = old_entry.sha256.has_value() && old_entry.type == new_entry.type &&
                               *old_entry.sha256 == *new_entry.sha256;
      if (!proven_same) {
        report(FileChange{a->first, ChangeKind::kModified, new_entry.size_bytes, new_entry.sha256});
      }
    }
    ++a;
    ++b;
  }
  return diff;
}

}  // namespace airlock::workspace
