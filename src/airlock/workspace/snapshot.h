// Snapshots of a workspace tree and the files_changed diff (spec 000,
// "FileChange"). Computed on the service side from a
// directory fd; never follows a symlink and never uses a host path.
//
// What is listed: regular files and symlinks (a symlink's "content" is its
// target string). Directories appear only through the files in them.
// A change is detected when any of (type, inode, size, mtime, ctime, mode)
// differs; the new content is then hashed, and reported MODIFIED unless the
// previous hash is known and equal. Identical size+mtime cannot hide a
// rewrite because ctime and inode are compared too (red-team case B45); ctime
// cannot be set from user space, and since Linux 6.13 (multigrain
// timestamps) a change after our stat always gets a distinct ctime, so the
// racy-git case of a rewrite within one clock tick is closed by the kernel.
//
// Consequences, documented for files_changed (B45):
// * a mode-only change, or a delete-and-recreate with identical bytes, is
//   MODIFIED when the previous hash is unknown (the first diff after
//   takeSnapshot) and not reported once a diff has hashed the file (the
//   `after` of one diff is the `before` of the next);
// * a file replaced by a symlink (or back) is MODIFIED even when the bytes
//   equal the link's target string;
// * directories are not listed, so a file replaced by a directory is the
//   file DELETED plus the directory's files CREATED.
// Sizes are st_size (a sparse file reports its apparent size); hashing
// streams fixed chunks, so memory is bounded for any size, though CPU time
// is proportional to the apparent size (red-team case B32).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "airlock/core/error.h"
#include "airlock/core/types.h"

namespace airlock::workspace {

struct SnapshotEntry {
  enum class Type { kFile, kSymlink } type = Type::kFile;
  std::uint64_t inode = 0;
  std::int64_t size_bytes = 0;
  std::int64_t allocated_bytes = 0;  // st_blocks * 512
  std::int64_t mtime_ns = 0;
  std::int64_t ctime_ns = 0;
  std::uint32_t mode = 0;
  std::optional<std::string> sha256;  // filled when computed
  bool operator==(const SnapshotEntry&) const = default;
};

// Relative path (raw bytes, '/'-separated) -> entry.
using Snapshot = std::map<std::string, SnapshotEntry>;

struct SnapshotLimits {
  std::int64_t max_entries = 2'000'000;  // a walk stops with an error past this
  int max_depth = 4096;                  // fd-relative, so depth is not bounded by PATH_MAX
};

// Walks the tree under root_dirfd with openat(O_NOFOLLOW|O_DIRECTORY),
// getdents64 and fstatat(AT_SYMLINK_NOFOLLOW). Hashes nothing. Names are raw
// bytes. Everything is fd-relative, so paths longer than PATH_MAX are fine;
// at most 64 directory fds are held whatever the depth (an ancestor's fd is
// closed and re-reached through ".." with a (dev, ino) check), and the
// process's RLIMIT_NOFILE is never changed. FIFOs, sockets and devices are
// skipped. ExecutionUnavailable past max_entries or max_depth, or when the
// tree changes under the walk (a listed directory vanishes or moves).
Result<Snapshot> takeSnapshot(int root_dirfd, const SnapshotLimits& limits = {});

struct Diff {
  std::vector<FileChange> changes;  // sorted by path
  bool truncated = false;           // more than max_listing changes
};

// Compares before and after (after is taken from root_dirfd), hashing created
// and changed files through root_dirfd. Hashes it computes are stored into
// `after` (with the metadata of the object actually hashed), and a known hash
// of an unchanged entry is carried from `before` into `after`, so the next
// diff can prove content unchanged. Each FileChange: CREATED / MODIFIED carry
// the new size and sha256; DELETED carries the old size and no sha256. At
// most max_listing changes (<= 0 means none) are listed, in byte order of the
// path; truncated says more existed, and once it is known nothing further is
// hashed. ExecutionUnavailable when a file to hash has gone, is no longer a
// regular file (a FIFO is never opened blocking), or changes while hashed.
//
// hash_budget_bytes bounds the bytes hashed by one diff (red-team case B32): a
// sparse file's apparent size can be exabytes while it holds no data, and
// SHA-256 cannot skip holes. A file that does not fit in what is left of
// the budget, or that is mostly holes (over 1 MiB with under half of it
// allocated), is listed with sha256 null (and hashed by no later diff unless
// it changes); callers pass a multiple of the workspace's byte limit, which
// real data cannot exceed.
Result<Diff> diffSnapshots(const Snapshot& before, Snapshot& after, int root_dirfd,
                           std::int64_t max_listing, std::int64_t hash_budget_bytes = INT64_MAX);

// SHA-256 (lowercase hex) of a regular file opened relative to dirfd with
// O_NOFOLLOW; of the target string for a symlink. No component of
// relative_path is followed if it is a symlink; "", ".", ".." components and
// absolute paths are WorkspaceEscape; paths beyond PATH_MAX are walked one
// component at a time.
Result<std::string> sha256At(int dirfd, const std::string& relative_path, SnapshotEntry::Type type);

}  // namespace airlock::workspace
