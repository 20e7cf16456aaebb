#include "airlock/workspace/path_ops.h"

#include <fcntl.h>
#include <stdio.h>  // renameat2, RENAME_NOREPLACE
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string_view>
#include <utility>

#include "airlock/core/encoding.h"
#include "airlock/sys/io.h"
#include "airlock/sys/unique_fd.h"
#include "airlock/workspace/dir_entries.h"
#include "airlock/workspace/resolve.h"

namespace airlock::workspace::detail {
namespace {

constexpr std::int64_t kMaxEntriesPerDirectory = 1'000'000;
// A recursive remove lists a directory again when something was created in
// it meanwhile (the sandbox may be writing); after this many tries it gives up.
constexpr int kMaxRemoveRounds = 4;

std::string quoted(std::string_view path) {
  return quoteForMessage(path, 512);
}

// "a/b/c" -> {"a/b", "c"}; "c" -> {"", "c"}.
std::pair<std::string, std::string> splitParent(const std::string& rel) {
  const std::size_t slash = rel.rfind('/');
  if (slash == std::string::npos) return {"", rel};
  return {rel.substr(0, slash), rel.substr(slash + 1)};
}

// The error of a lookup (openBeneath) made for `op` on `rel`: the code is
// kept, the context says which operation and path it was for.
tl::unexpected<Error> lookupFailed(std::string_view op, const std::string& rel, Error e) {
  if (e.code == ErrorCode::kNotFound) {
    return fail(ErrorCode::kNotFound, std::string(op) + ": " + quoted(rel) + " does not exist");
  }
  e.context = std::string(op) + " " + quoted(rel) + ": " + e.context;
  return tl::unexpected(std::move(e));
}

// The directory that holds `rel`'s last component, reached beneath the root.
Result<sys::UniqueFd> openParent(std::string_view op, int root, const std::string& rel,
                                 const std::string& parent) {
  auto dir = openBeneath(root, parent, O_PATH | O_DIRECTORY);
  if (!dir) return lookupFailed(op, rel, dir.error());
  return dir;
}

WorkspaceEntry::Type typeOf(mode_t mode) {
  if (S_ISREG(mode)) return WorkspaceEntry::Type::kFile;
  if (S_ISDIR(mode)) return WorkspaceEntry::Type::kDirectory;
  if (S_ISLNK(mode)) return WorkspaceEntry::Type::kSymlink;
  return WorkspaceEntry::Type::kOther;
}

// Empties and removes the directory `name` in `parent` (its workspace path
// `rel`). Each subdirectory is opened O_NOFOLLOW relative to its parent's
// fd, so a symlink swapped in for one is unlinked as a link, never entered.
Result<void> removeTree(int parent, const std::string& name, const std::string& rel, int depth) {
  if (depth > kMaxRemoveDepth) {
    return fail(ErrorCode::kToolValidationError,
                "remove: " + quoted(rel) + " is nested deeper than " +
                    std::to_string(kMaxRemoveDepth) + " directories");
  }
  const int raw = sys::openAtRaw(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
  if (raw < 0) {
    if (errno == ENOENT) return {};  // already gone
    if (errno == ENOTDIR || errno == ELOOP) {
      // Replaced by a file or a symlink meanwhile: remove that name itself.
      if (::unlinkat(parent, name.c_str(), 0) == 0 || errno == ENOENT) return {};
    }
    return failErrno(ErrorCode::kExecutionUnavailable, "remove: open " + quoted(rel), errno);
  }
  sys::UniqueFd dir(raw);
  for (int round = 0; round < kMaxRemoveRounds; ++round) {
    if (::lseek(dir.get(), 0, SEEK_SET) != 0) {
      return failErrno(ErrorCode::kExecutionUnavailable, "remove: rewind " + quoted(rel), errno);
    }
    auto names = readDirEntries(dir.get(), kMaxEntriesPerDirectory);
    if (!names) return tl::unexpected(names.error());
    for (const auto& ent : *names) {
      const std::string below = rel + "/" + ent.name;
      if (::unlinkat(dir.get(), ent.name.c_str(), 0) == 0 || errno == ENOENT) continue;
      if (errno != EISDIR && errno != EPERM) {
        return failErrno(ErrorCode::kExecutionUnavailable, "remove " + quoted(below), errno);
      }
      // unlinkat refuses a directory (EISDIR; EPERM on some filesystems).
      if (auto r = removeTree(dir.get(), ent.name, below, depth + 1); !r) return r;
    }
    if (::unlinkat(parent, name.c_str(), AT_REMOVEDIR) == 0 || errno == ENOENT) return {};
    if (errno != ENOTEMPTY && errno != EEXIST) {
      return failErrno(ErrorCode::kExecutionUnavailable, "remove " + quoted(rel), errno);
    }
  }
  return fail(ErrorCode::kExecutionRejected,
              "remove: " + quoted(rel) + " kept gaining entries while it was being removed");
}

// For rename with replace: a directory replaces only a directory and a
// non-directory only a non-directory (the kernel would say EISDIR/ENOTDIR).
Result<void> checkReplaceable(int to_dir, const std::string& to_name, const std::string& to,
                              bool from_is_dir) {
  struct stat st {};
  if (::fstatat(to_dir, to_name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return {};
  const bool to_is_dir = S_ISDIR(st.st_mode);
  if (from_is_dir == to_is_dir) return {};
  return fail(ErrorCode::kToolValidationError,
              "rename: " + quoted(to) +
                  (to_is_dir ? " is a directory and cannot be replaced by a "
                               "file"
                             : " is not a directory and cannot be replaced "
                               "by a directory"));
}

tl::unexpected<Error> renameError(const std::string& from, const std::string& to, int err) {
  switch (err) {
    case EEXIST:
    case ENOTEMPTY:
      return fail(ErrorCode::kExecutionRejected,
                  "rename: " + quoted(to) +
                      " is a directory that is not empty; only an empty one is replaced");
    case EINVAL:
      return fail(ErrorCode::kToolValidationError,
                  "rename: " + quoted(from) + " cannot be moved below itself (" + quoted(to) + ")");
    case EISDIR:
    case ENOTDIR:
      return fail(ErrorCode::kToolValidationError,
                  "rename: " + quoted(from) + " and " + quoted(to) +
                      " are not both directories or both non-directories");
    case ENOENT:
      return fail(ErrorCode::kNotFound, "rename: " + quoted(from) + " does not exist");
    default:
      return failErrno(ErrorCode::kExecutionUnavailable,
                       "rename " + quoted(from) + " to " + quoted(to), err);
  }
}

// renameat2(RENAME_NOREPLACE): refuses an existing `to` atomically. A
// filesystem without the flag (EINVAL for a `to` that is not below `from`)
// gets a check then a plain renameat: a `to` created in between is replaced.
int renameNoReplace(int from_dir, const char* from_name, int to_dir, const char* to_name) {
  if (::renameat2(from_dir, from_name, to_dir, to_name, RENAME_NOREPLACE) == 0) return 0;
  if (errno != EINVAL) return -1;
  struct stat st {};
  if (::fstatat(to_dir, to_name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
    errno = EEXIST;
    return -1;
  }
  return ::renameat(from_dir, from_name, to_dir, to_name);
}

}  // namespace

Result<void> removeBeneath(int root, const std::string& rel, bool recursive) {
  if (rel.empty()) {
    return fail(ErrorCode::kToolValidationError, "remove: the workspace root is never removed");
  }
  auto [parent, name] = splitParent(rel);
  auto dir = openParent("remove", root, rel, parent);
  if (!dir) return tl::unexpected(dir.error());
  struct stat st {};
  if (::fstatat(dir->get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) {
      return fail(ErrorCode::kNotFound, "remove: " + quoted(rel) + " does not exist");
    }
    return failErrno(ErrorCode::kExecutionUnavailable, "remove: stat " + quoted(rel), errno);
  }
  const int flags = S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0;
  if (::unlinkat(dir->get(), name.c_str(), flags) == 0) return {};
  const int err = errno;
  if (err == ENOENT)
    return fail(ErrorCode::kNotFound, "remove: " + quoted(rel) + " does not exist");
  if (flags == AT_REMOVEDIR && (err == ENOTEMPTY || err == EEXIST)) {
    if (!recursive) {
      return fail(ErrorCode::kExecutionRejected,
                  "remove: " + quoted(rel) +
                      " is a directory that is not empty; set recursive to remove it with "
                      "everything below it");
    }
    return removeTree(dir->get(), name, rel, 0);
  }
  return failErrno(ErrorCode::kExecutionUnavailable, "remove " + quoted(rel), err);
}

Result<MovedObject> renameBeneath(int root, const std::string& from, const std::string& to,
                                  bool replace) {
  if (from.empty() || to.empty()) {
    return fail(ErrorCode::kToolValidationError,
                "rename: the workspace root cannot be moved or replaced");
  }
  if (to.size() > from.size() && to.compare(0, from.size(), from) == 0 && to[from.size()] == '/') {
    return fail(ErrorCode::kToolValidationError,
                "rename: " + quoted(from) + " cannot be moved below itself (" + quoted(to) + ")");
  }
  auto [from_parent, from_name] = splitParent(from);
  auto [to_parent, to_name] = splitParent(to);
  auto from_dir = openParent("rename", root, from, from_parent);
  if (!from_dir) return tl::unexpected(from_dir.error());
  auto to_dir = openBeneath(root, to_parent, O_PATH | O_DIRECTORY);
  if (!to_dir) {
    if (to_dir.error().code == ErrorCode::kNotFound) {
      return fail(ErrorCode::kNotFound, "rename: the directory " + quoted(to_parent) + " that " +
                                            quoted(to) + " would go in does not exist");
    }
    return lookupFailed("rename", to, to_dir.error());
  }
  struct stat st {};
  if (::fstatat(from_dir->get(), from_name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return renameError(from, to, errno);
  }
  MovedObject moved{st.st_dev, st.st_ino, from != to};
  if (!moved.moved) return moved;
  int rc = 0;
  if (replace) {
    if (auto ok = checkReplaceable(to_dir->get(), to_name, to, S_ISDIR(st.st_mode)); !ok) {
      return tl::unexpected(ok.error());
    }
    rc = ::renameat(from_dir->get(), from_name.c_str(), to_dir->get(), to_name.c_str());
  } else {
    rc = renameNoReplace(from_dir->get(), from_name.c_str(), to_dir->get(), to_name.c_str());
    if (rc != 0 && errno == EEXIST) {
      return fail(ErrorCode::kExecutionRejected,
                  "rename: " + quoted(to) + " already exists; set replace to overwrite it");
    }
  }
  if (rc != 0) return renameError(from, to, errno);
  return moved;
}

Result<WorkspaceStat> statBeneath(int root, const std::string& rel) {
  auto fd = openBeneath(root, rel, O_PATH | O_NOFOLLOW);
  if (!fd) return lookupFailed("stat", rel, fd.error());
  struct stat st {};
  if (::fstat(fd->get(), &st) != 0) {
    return failErrno(ErrorCode::kExecutionUnavailable, "stat " + quoted(rel), errno);
  }
  WorkspaceStat out;
  out.type = typeOf(st.st_mode);
  const bool sized =
      out.type == WorkspaceEntry::Type::kFile || out.type == WorkspaceEntry::Type::kSymlink;
  out.size_bytes = sized ? static_cast<std::int64_t>(st.st_size) : 0;
  out.mode = static_cast<std::uint32_t>(st.st_mode & 07777);
  out.mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 +
                 static_cast<std::int64_t>(st.st_mtim.tv_nsec);
  return out;
}

bool reachesWithoutSymlink(int root, const std::string& rel, dev_t dev, ino_t ino) {
  auto cur = openBeneath(root, "", O_PATH | O_DIRECTORY);
  if (!cur) return false;
  sys::UniqueFd dir = std::move(*cur);
  std::size_t pos = 0;
  for (;;) {
    const std::size_t slash = rel.find('/', pos);
    if (slash == std::string::npos) break;
    const std::string comp = rel.substr(pos, slash - pos);
    pos = slash + 1;
    const int raw = sys::openAtRaw(dir.get(), comp.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW);
    if (raw < 0) return false;
    dir = sys::UniqueFd(raw);
  }
  struct stat st {};
  if (::fstatat(dir.get(), rel.c_str() + pos, &st, AT_SYMLINK_NOFOLLOW) != 0) return false;
  return st.st_dev == dev && st.st_ino == ino;
}

}  // namespace airlock::workspace::detail
