// Snapshots of a workspace tree and the files_changed diff (spec 000,
// "FileChange"; DESIGN.md 5.2). Computed on the service side from a
// directory fd; never follows a symlink and never uses a host path.
//
// What is listed: regular files and symlinks (a symlink's "content" is its
// target string). Directories appear only through the files in them.
// A change is detected when any of (type, inode, size, mtime, ctime, mode)
// differs; the new content is then hashed, and reported MODIFIED unless the
// previous hash is known and equal. Identical size+mtime cannot hide a
// rewrite because ctime and inode are compared too (bug-log B45).
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

// Walks the tree under root_dirfd with openat(O_NOFOLLOW|O_DIRECTORY) and
// fstatat(AT_SYMLINK_NOFOLLOW). Hashes nothing.
Result<Snapshot> takeSnapshot(int root_dirfd, const SnapshotLimits& limits = {});

struct Diff {
  std::vector<FileChange> changes;  // sorted by path
  bool truncated = false;           // more than max_listing changes
};

// Compares before and after (after is taken from root_dirfd), hashing created
// and changed files through root_dirfd. Hashes it computes are stored into
// `after` so the next diff can prove content unchanged.
Result<Diff> diffSnapshots(const Snapshot& before, Snapshot& after, int root_dirfd,
                           std::int64_t max_listing);

// SHA-256 (lowercase hex) of a regular file opened relative to dirfd with
// O_NOFOLLOW; of the target string for a symlink.
Result<std::string> sha256At(int dirfd, const std::string& relative_path,
                             SnapshotEntry::Type type);

}  // namespace airlock::workspace
