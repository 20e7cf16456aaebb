#include "airlock/workspace/local_workspace.h"

#include <fcntl.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "airlock/archive/workspace_archive.h"
#include "airlock/core/command_validation.h"
#include "airlock/core/encoding.h"
#include "airlock/sys/io.h"
#include "airlock/sys/random.h"
#include "airlock/workspace/dir_entries.h"
#include "airlock/workspace/file_export.h"
#include "airlock/workspace/path_ops.h"
#include "airlock/workspace/resolve.h"

namespace airlock::workspace {
namespace {

constexpr std::size_t kMaxReadBytes = std::size_t{64} << 20;
constexpr std::int64_t kMaxListEntries = 1'000'000;

// Untrusted names are escaped (newlines, invalid UTF-8) inside messages.
std::string quoted(std::string_view path) {
  return quoteForMessage(path, 512);
}

// "a/b/c" -> {"a/b", "c"}; "c" -> {"", "c"}.
std::pair<std::string, std::string> splitParent(const std::string& rel) {
  std::size_t slash = rel.rfind('/');
  if (slash == std::string::npos) return {"", rel};
  return {rel.substr(0, slash), rel.substr(slash + 1)};
}

Result<std::string> tempName() {
  auto random = sys::randomHexToken(8);
  if (!random) return tl::unexpected(random.error());
  return ".airlock-write-" + *random;
}

// Sets the calling thread's filesystem ids for one scope (setfsuid is
// per-thread), restoring the previous ones after.
class FsIdScope {
 public:
  FsIdScope(bool active, uid_t uid, gid_t gid) : active_(active) {
    if (!active_) return;
    old_gid_ = static_cast<gid_t>(::setfsgid(gid));
    old_uid_ = static_cast<uid_t>(::setfsuid(uid));
  }
  ~FsIdScope() {
    if (!active_) return;
    ::setfsuid(old_uid_);
    ::setfsgid(old_gid_);
  }
  FsIdScope(const FsIdScope&) = delete;
  FsIdScope& operator=(const FsIdScope&) = delete;

 private:
  bool active_;
  uid_t old_uid_ = 0;
  gid_t old_gid_ = 0;
};

class LocalWorkspace final : public LocalWorkspaceHandle {
 public:
  LocalWorkspace(sys::UniqueFd root, uid_t owner_uid, gid_t owner_gid, CreateAs create_as)
      : root_(std::move(root)),
        uid_(owner_uid),
        gid_(owner_gid),
        as_owner_(create_as == CreateAs::kOwner) {}

  Result<WorkspaceFileStream> openExport(const std::string& path, std::int64_t max_bytes) override {
    return openFileExport(root_.get(), path, max_bytes);
  }

  Result<std::string> read(const std::string& path) override {
    auto rel = checkRelativePath(path);
    if (!rel) return tl::unexpected(rel.error());
    // Classify through an O_PATH handle first, so a FIFO or device is never
    // opened for reading; then open for real and check it is the same inode.
    auto probe = openBeneath(root_.get(), *rel, O_PATH | O_NOFOLLOW);
    if (!probe) return tl::unexpected(probe.error());
    struct stat st {};
    if (::fstat(probe->get(), &st) != 0) {
      return failErrno(ErrorCode::kExecutionUnavailable, "fstat " + quoted(*rel), errno);
    }
    if (S_ISLNK(st.st_mode)) {
      return failErrno(ErrorCode::kWorkspaceEscape,
                       "read: " + quoted(*rel) + " is a symlink; symlinks are not followed", ELOOP);
    }
    if (!S_ISREG(st.st_mode)) {
      return fail(ErrorCode::kToolValidationError,
                  "read: " + quoted(*rel) + " is not a regular file");
    }
    if (static_cast<std::uint64_t>(st.st_size) > kMaxReadBytes) {
      return fail(ErrorCode::kToolValidationError, tooLarge(*rel));
    }
    auto fd = openBeneath(root_.get(), *rel, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    if (!fd) return tl::unexpected(fd.error());
    struct stat st2 {};
    if (::fstat(fd->get(), &st2) != 0) {
      return failErrno(ErrorCode::kExecutionUnavailable, "fstat " + quoted(*rel), errno);
    }
    if (st2.st_dev != st.st_dev || st2.st_ino != st.st_ino || !S_ISREG(st2.st_mode)) {
      return fail(ErrorCode::kToolValidationError,
                  "read: " + quoted(*rel) + " changed while it was opened");
    }
    std::string out;
    out.resize(static_cast<std::size_t>(st2.st_size) + 1);
    std::size_t used = 0;
    for (;;) {
      if (used == out.size()) {
        if (out.size() > kMaxReadBytes)
          return fail(ErrorCode::kToolValidationError, tooLarge(*rel));
        out.resize(std::min(out.size() * 2, kMaxReadBytes + 1));
      }
      ssize_t n = sys::readSome(fd->get(), out.data() + used, out.size() - used);
      if (n < 0) return failErrno(ErrorCode::kExecutionUnavailable, "read " + quoted(*rel), errno);
      if (n == 0) break;
      used += static_cast<std::size_t>(n);
    }
    if (used > kMaxReadBytes) return fail(ErrorCode::kToolValidationError, tooLarge(*rel));
    out.resize(used);
    return out;
  }

  Result<void> write(const std::string& path, std::string_view data) override {
    return writeFile(path, data, /*tool_written=*/true);
  }

  Result<void> placeFile(const std::string& path, std::string_view data) override {
    return writeFile(path, data, /*tool_written=*/false);
  }

  Result<void> writeFile(const std::string& path, std::string_view data, bool tool_written) {
    FsIdScope ids(as_owner_, uid_, gid_);
    auto rel = checkRelativePath(path);
    if (!rel) return tl::unexpected(rel.error());
    // Held for the whole write, so a command's begin/end cannot fall between
    // the bytes landing and the record being updated.
    std::lock_guard record_lock(record_mu_);
    if (rel->empty()) {
      return fail(ErrorCode::kToolValidationError, "write: the workspace root is a directory");
    }
    auto [parent, name] = splitParent(*rel);
    auto dir = ensureDirectory(parent);
    if (!dir) return tl::unexpected(dir.error());
    const int dfd = dir->get();

    struct stat existing {};
    if (::fstatat(dfd, name.c_str(), &existing, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISDIR(existing.st_mode)) {
      return fail(ErrorCode::kToolValidationError, "write: " + quoted(*rel) + " is a directory");
    }

    // Write beside the target and rename over it: readers see the old or the
    // new bytes, never a torn file, and renameat over a symlink replaces the
    // link itself, so a link planted at the name is never followed.
    auto tmp = tempName();
    if (!tmp) return tl::unexpected(tmp.error());
    int raw = sys::openAtRaw(dfd, tmp->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
    if (raw < 0) {
      return failErrno(ErrorCode::kExecutionUnavailable,
                       "write: create temporary file for " + quoted(*rel), errno);
    }
    sys::UniqueFd fd(raw);
    auto discard = [&](const std::string& what, int err) {
      ::unlinkat(dfd, tmp->c_str(), 0);
      return failErrno(ErrorCode::kExecutionUnavailable, "write " + quoted(*rel) + ": " + what,
                       err);
    };
    if (::fchown(fd.get(), uid_, gid_) != 0) return discard("fchown", errno);
    if (::fchmod(fd.get(), 0644) != 0) return discard("fchmod", errno);
    if (!sys::writeAll(fd.get(), data.data(), data.size())) return discard("write", errno);
    struct stat written {};
    if (::fstat(fd.get(), &written) != 0) return discard("fstat", errno);
    if (::close(fd.release()) != 0) return discard("close", errno);
    if (::renameat(dfd, tmp->c_str(), dfd, name.c_str()) != 0) {
      int err = errno;
      ::unlinkat(dfd, tmp->c_str(), 0);
      if (err == EISDIR || err == ENOTEMPTY || err == EEXIST) {
        return fail(ErrorCode::kToolValidationError, "write: " + quoted(*rel) + " is a directory");
      }
      return failErrno(ErrorCode::kExecutionUnavailable, "write " + quoted(*rel) + ": renameat",
                       err);
    }
    // TOOL_WRITTEN only when no command is running and `rel` names the
    // inode just written without passing through a symlink; otherwise the
    // record cannot vouch for what a later read of `rel` returns.
    if (tool_written && !command_running_ && namesInode(*rel, written.st_dev, written.st_ino)) {
      record_[*rel] = WorkspaceProvenance::kToolWritten;
    } else {
      record_.erase(*rel);
    }
    return {};
  }

  Result<WorkspaceProvenance> provenance(const std::string& path) override {
    auto rel = checkRelativePath(path);
    if (!rel) return tl::unexpected(rel.error());
    std::lock_guard record_lock(record_mu_);
    auto it = record_.find(*rel);
    return it == record_.end() ? WorkspaceProvenance::kUnknown : it->second;
  }

  Result<void> remove(const std::string& path, bool recursive) override {
    auto rel = checkRelativePath(path);
    if (!rel) return tl::unexpected(rel.error());
    auto removed = detail::removeBeneath(root_.get(), *rel, recursive);
    // Even a failed recursive remove may have taken part of the tree, so the
    // record goes either way (dropping is the safe direction).
    std::lock_guard record_lock(record_mu_);
    dropRecordsAt(*rel);
    return removed;
  }

  Result<void> rename(const std::string& from, const std::string& to, bool replace) override {
    // renameat2 with RENAME_NOREPLACE needs fsids the workspace's filesystem maps.
    FsIdScope ids(as_owner_, uid_, gid_);
    auto from_rel = checkRelativePath(from);
    if (!from_rel) return tl::unexpected(from_rel.error());
    auto to_rel = checkRelativePath(to);
    if (!to_rel) return tl::unexpected(to_rel.error());
    // Held across the rename, like write: the record moves with the bytes.
    std::lock_guard record_lock(record_mu_);
    auto moved = detail::renameBeneath(root_.get(), *from_rel, *to_rel, replace);
    if (!moved) return tl::unexpected(moved.error());
    if (!moved->moved) return {};
    std::vector<std::pair<std::string, WorkspaceProvenance>> carried;
    const std::string below = *from_rel + "/";
    for (auto it = record_.begin(); it != record_.end(); ++it) {
      if (it->first == *from_rel) carried.emplace_back(*to_rel, it->second);
      if (it->first.compare(0, below.size(), below) == 0) {
        carried.emplace_back(*to_rel + it->first.substr(from_rel->size()), it->second);
      }
    }
    dropRecordsAt(*from_rel);
    dropRecordsAt(*to_rel);
    // The records vouch for `to` only when it names the moved object directly.
    if (!command_running_ &&
        detail::reachesWithoutSymlink(root_.get(), *to_rel, moved->dev, moved->ino)) {
      for (auto& [key, value] : carried) record_[key] = value;
    }
    return {};
  }

  Result<WorkspaceStat> stat(const std::string& path) override {
    auto rel = checkRelativePath(path);
    if (!rel) return tl::unexpected(rel.error());
    return detail::statBeneath(root_.get(), *rel);
  }

  void beginSandboxCommand() override {
    std::lock_guard record_lock(record_mu_);
    command_running_ = true;
  }

  void recordSandboxChanges(const std::vector<FileChange>& changes, bool complete) override {
    std::lock_guard record_lock(record_mu_);
    command_running_ = false;
    for (const auto& change : changes) {
      // Whatever was recorded below a path that is now (or was) a file or a
      // symlink no longer names the bytes it was recorded for.
      const std::string below = change.path + "/";
      for (auto it = record_.lower_bound(below);
           it != record_.end() && it->first.compare(0, below.size(), below) == 0;) {
        it = record_.erase(it);
      }
      if (change.change == ChangeKind::kDeleted) {
        record_.erase(change.path);
      } else {
        record_[change.path] = WorkspaceProvenance::kSandboxWritten;
      }
    }
    if (!complete) {
      std::erase_if(record_, [](const auto& entry) {
        return entry.second == WorkspaceProvenance::kToolWritten;
      });
    }
  }

  Result<void> mkdir(const std::string& path) override {
    FsIdScope ids(as_owner_, uid_, gid_);
    auto rel = checkRelativePath(path);
    if (!rel) return tl::unexpected(rel.error());
    auto dir = ensureDirectory(*rel);
    if (!dir) return tl::unexpected(dir.error());
    return {};
  }

  Result<std::vector<WorkspaceEntry>> listdir(const std::string& path) override {
    auto rel = checkRelativePath(path);
    if (!rel) return tl::unexpected(rel.error());
    auto handle = openBeneath(root_.get(), *rel, O_PATH);
    if (!handle) return tl::unexpected(handle.error());
    struct stat st {};
    if (::fstat(handle->get(), &st) != 0) {
      return failErrno(ErrorCode::kExecutionUnavailable, "fstat " + quoted(*rel), errno);
    }
    if (!S_ISDIR(st.st_mode)) {
      return fail(ErrorCode::kToolValidationError,
                  "listdir: " + quoted(*rel) + " is not a directory");
    }
    // Reopening "." through the O_PATH handle reads the very directory the
    // lookup reached; nothing is resolved by name a second time.
    int raw = sys::openAtRaw(handle->get(), ".", O_RDONLY | O_DIRECTORY);
    if (raw < 0) return failErrno(ErrorCode::kExecutionUnavailable, "open " + quoted(*rel), errno);
    sys::UniqueFd dir(raw);
    auto names = detail::readDirEntries(dir.get(), kMaxListEntries);
    if (!names) return tl::unexpected(names.error());
    std::vector<WorkspaceEntry> out;
    out.reserve(names->size());
    for (auto& ent : *names) {
      struct stat est {};
      if (::fstatat(dir.get(), ent.name.c_str(), &est, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) continue;
        return failErrno(ErrorCode::kExecutionUnavailable, "fstatat in " + quoted(*rel), errno);
      }
      WorkspaceEntry entry;
      entry.name = std::move(ent.name);
      if (S_ISREG(est.st_mode)) {
        entry.type = WorkspaceEntry::Type::kFile;
        entry.size_bytes = est.st_size;
      } else if (S_ISDIR(est.st_mode)) {
        entry.type = WorkspaceEntry::Type::kDirectory;
      } else if (S_ISLNK(est.st_mode)) {
        entry.type = WorkspaceEntry::Type::kSymlink;
        entry.size_bytes = est.st_size;
      } else {
        entry.type = WorkspaceEntry::Type::kOther;
      }
      out.push_back(std::move(entry));
    }
    std::sort(out.begin(), out.end(),
              [](const WorkspaceEntry& x, const WorkspaceEntry& y) { return x.name < y.name; });
    return out;
  }

 private:
  // Drops the record of `rel` and of everything below it.
  void dropRecordsAt(const std::string& rel) {
    record_.erase(rel);
    const std::string below = rel + "/";
    for (auto it = record_.lower_bound(below);
         it != record_.end() && it->first.compare(0, below.size(), below) == 0;) {
      it = record_.erase(it);
    }
  }

  static std::string tooLarge(const std::string& rel) {
    return "read: " + quoted(rel) + " is larger than the 64 MiB read limit";
  }

  // Opens directory `rel` beneath the root, creating each missing component
  // (mode 0755, owned by the sandbox user). Every mkdirat is relative to the
  // fd of a directory already reached beneath the root, so a directory is
  // never created outside it whatever the tree holds.
  Result<sys::UniqueFd> ensureDirectory(const std::string& rel) {
    auto whole = openBeneath(root_.get(), rel, O_PATH | O_DIRECTORY);
    if (whole) return whole;
    if (!isMissing(whole.error())) return dirError(rel, whole.error());

    auto cur = openBeneath(root_.get(), "", O_PATH | O_DIRECTORY);
    if (!cur) return tl::unexpected(cur.error());
    std::string prefix;
    std::size_t pos = 0;
    while (pos < rel.size()) {
      std::size_t slash = rel.find('/', pos);
      if (slash == std::string::npos) slash = rel.size();
      const std::string comp = rel.substr(pos, slash - pos);
      pos = slash + 1;
      if (!prefix.empty()) prefix.push_back('/');
      prefix += comp;

      auto next = openBeneath(root_.get(), prefix, O_PATH | O_DIRECTORY);
      if (!next) {
        if (!isMissing(next.error())) return dirError(prefix, next.error());
        auto made = makeOwnedDirectory(cur->get(), comp, prefix);
        if (!made) return tl::unexpected(made.error());
        next = std::move(made);
      }
      cur = std::move(next);
    }
    return cur;
  }

  // True when walking `rel` from the root without following any symlink
  // reaches a regular file that is (dev, ino).
  bool namesInode(const std::string& rel, dev_t dev, ino_t ino) {
    auto cur = openBeneath(root_.get(), "", O_PATH | O_DIRECTORY);
    if (!cur) return false;
    sys::UniqueFd dir = std::move(*cur);
    std::size_t pos = 0;
    for (;;) {
      std::size_t slash = rel.find('/', pos);
      if (slash == std::string::npos) break;
      const std::string comp = rel.substr(pos, slash - pos);
      pos = slash + 1;
      int raw = sys::openAtRaw(dir.get(), comp.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW);
      if (raw < 0) return false;
      dir = sys::UniqueFd(raw);
    }
    struct stat st {};
    if (::fstatat(dir.get(), rel.c_str() + pos, &st, AT_SYMLINK_NOFOLLOW) != 0) return false;
    return S_ISREG(st.st_mode) && st.st_dev == dev && st.st_ino == ino;
  }

  static bool isMissing(const Error& e) {
    return e.code == ErrorCode::kNotFound && e.sys_errno == ENOENT;
  }

  static tl::unexpected<Error> dirError(const std::string& rel, const Error& e) {
    if (e.code == ErrorCode::kNotFound && e.sys_errno == ENOTDIR) {
      return fail(ErrorCode::kToolValidationError,
                  "a part of " + quoted(rel) + " before its end exists and is not a directory");
    }
    return tl::unexpected(e);
  }

  Result<sys::UniqueFd> makeOwnedDirectory(int parent, const std::string& comp,
                                           const std::string& prefix) {
    if (::mkdirat(parent, comp.c_str(), 0755) != 0) {
      int err = errno;
      if (err != EEXIST) {
        return failErrno(ErrorCode::kExecutionUnavailable, "mkdir " + quoted(prefix), err);
      }
      // Something appeared under that name since the lookup: use it only if
      // it now resolves beneath the root as a directory.
      auto again = openBeneath(root_.get(), prefix, O_PATH | O_DIRECTORY);
      if (!again) {
        return fail(ErrorCode::kToolValidationError,
                    quoted(prefix) + " exists and is not a directory");
      }
      return again;
    }
    int raw = sys::openAtRaw(parent, comp.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
    if (raw < 0)
      return failErrno(ErrorCode::kExecutionUnavailable, "open new directory " + quoted(prefix),
                       errno);
    sys::UniqueFd fd(raw);
    if (::fchown(fd.get(), uid_, gid_) != 0 || ::fchmod(fd.get(), 0755) != 0) {
      return failErrno(ErrorCode::kExecutionUnavailable, "chown new directory " + quoted(prefix),
                       errno);
    }
    return fd;
  }

  sys::UniqueFd root_;
  uid_t uid_;
  gid_t gid_;
  bool as_owner_;
  std::mutex record_mu_;
  std::map<std::string, WorkspaceProvenance> record_;  // guarded by record_mu_
  bool command_running_ = false;                       // guarded by record_mu_
};

// --- copy-in -------------------------------------------------------------

enum class CopyPass { kCheck, kCopy };

const char* refusedKind(mode_t mode) {
  if (S_ISLNK(mode)) return "a symlink";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "not a regular file or directory";
}

Result<std::string> readWhole(int fd, const std::string& rel) {
  // A member is read into memory in full (not streamed).
  std::string out;
  char buf[64 * 1024];
  for (;;) {
    ssize_t n = sys::readSome(fd, buf, sizeof buf);
    if (n < 0)
      return failErrno(ErrorCode::kToolValidationError, "copy-in: read " + quoted(rel), errno);
    if (n == 0) return out;
    out.append(buf, static_cast<std::size_t>(n));
  }
}

// Walks the source directory open on `dirfd` (relative name `rel`, "" for
// the top). The check pass refuses bad members before anything is written;
// the copy pass checks again, since the source can change in between.
Result<void> copyTree(int dirfd, const std::string& rel, WorkspaceHandle& workspace,
                      CopyPass pass) {
  auto names = detail::readDirEntries(dirfd, kMaxListEntries);
  if (!names) {
    return fail(
        ErrorCode::kToolValidationError,
        "copy-in: cannot list " + quoted(rel.empty() ? "." : rel) + ": " + names.error().message());
  }
  std::sort(
      names->begin(), names->end(),
      [](const detail::DirEntryName& x, const detail::DirEntryName& y) { return x.name < y.name; });
  for (const auto& ent : *names) {
    const std::string member = rel.empty() ? ent.name : rel + "/" + ent.name;
    struct stat st {};
    if (::fstatat(dirfd, ent.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      return failErrno(ErrorCode::kToolValidationError, "copy-in: stat " + quoted(member), errno);
    }
    if (S_ISDIR(st.st_mode)) {
      int raw = sys::openAtRaw(dirfd, ent.name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
      if (raw < 0)
        return failErrno(ErrorCode::kToolValidationError, "copy-in: open " + quoted(member), errno);
      sys::UniqueFd sub(raw);
      if (pass == CopyPass::kCopy) {
        if (auto r = workspace.mkdir(member); !r) return r;
      }
      if (auto r = copyTree(sub.get(), member, workspace, pass); !r) return r;
      continue;
    }
    if (!S_ISREG(st.st_mode)) {
      return fail(ErrorCode::kToolValidationError,
                  "copy-in: " + quoted(member) + " is " + refusedKind(st.st_mode) +
                      "; only regular files and directories are copied");
    }
    if (pass == CopyPass::kCheck) continue;
    int raw =
        sys::openAtRaw(dirfd, ent.name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    if (raw < 0)
      return failErrno(ErrorCode::kToolValidationError, "copy-in: open " + quoted(member), errno);
    sys::UniqueFd file(raw);
    struct stat fst {};
    if (::fstat(file.get(), &fst) != 0 || !S_ISREG(fst.st_mode)) {
      return fail(ErrorCode::kToolValidationError,
                  "copy-in: " + quoted(member) + " changed while it was copied");
    }
    auto bytes = readWhole(file.get(), member);
    if (!bytes) return tl::unexpected(bytes.error());
    if (auto r = workspace.placeFile(member, *bytes); !r) return r;
  }
  return {};
}

}  // namespace

std::shared_ptr<LocalWorkspaceHandle> makeLocalWorkspace(sys::UniqueFd root_dirfd, uid_t owner_uid,
                                                         gid_t owner_gid, CreateAs create_as) {
  return std::make_shared<LocalWorkspace>(std::move(root_dirfd), owner_uid, owner_gid, create_as);
}

Result<void> copyInDirectory(const std::string& source_dir, WorkspaceHandle& workspace) {
  const int raw = sys::openAtRaw(AT_FDCWD, source_dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (raw < 0) {
    const int err = errno;
    if (err == ENOENT) {
      return fail(ErrorCode::kToolValidationError,
                  "copy-in: directory " + quoted(source_dir) + " does not exist");
    }
    if (err == ENOTDIR) {
      return fail(ErrorCode::kToolValidationError,
                  "copy-in: " + quoted(source_dir) + " is not a directory");
    }
    return failErrno(ErrorCode::kToolValidationError, "copy-in: cannot open " + quoted(source_dir),
                     err);
  }
  sys::UniqueFd top(raw);
  if (auto r = copyTree(top.get(), "", workspace, CopyPass::kCheck); !r) return r;
  // The check pass read the directory to its end; list it again from the start.
  if (::lseek(top.get(), 0, SEEK_SET) != 0) {
    return failErrno(ErrorCode::kToolValidationError, "copy-in: rewind " + quoted(source_dir),
                     errno);
  }
  return copyTree(top.get(), "", workspace, CopyPass::kCopy);
}

// --- archive copy-in ------------------------------------------------------

Result<void> copyInArchive(const std::string& archive_path, WorkspaceHandle& workspace) {
  const int raw = sys::openAtRaw(AT_FDCWD, archive_path.c_str(), O_RDONLY | O_NOCTTY | O_NONBLOCK);
  if (raw < 0) {
    const int err = errno;
    if (err == ENOENT) {
      return fail(ErrorCode::kToolValidationError,
                  "copy-in: archive " + quoted(archive_path) + " does not exist");
    }
    return failErrno(ErrorCode::kToolValidationError,
                     "copy-in: cannot open " + quoted(archive_path), err);
  }
  sys::UniqueFd fd(raw);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return failErrno(ErrorCode::kToolValidationError, "copy-in: stat " + quoted(archive_path),
                     errno);
  }
  if (!S_ISREG(st.st_mode)) {
    return fail(ErrorCode::kToolValidationError,
                "copy-in: " + quoted(archive_path) + " is not a regular file");
  }
  // Both passes read the same open file (same inode), from its start.
  return archive::extractArchive(archive::ArchiveInput{fd.get(), {}, quoted(archive_path)},
                                 workspace);
}

Result<void> copyIn(const std::string& source, WorkspaceHandle& workspace) {
  struct stat st {};
  const bool is_dir = ::stat(source.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  auto copied = is_dir ? copyInDirectory(source, workspace) : copyInArchive(source, workspace);
  if (copied) return copied;
  Error error = copied.error();
  if (error.context.rfind("copy-in: ", 0) == 0) error.context.erase(0, 9);
  error.context = "--copy-in: " + error.context;
  return tl::unexpected(std::move(error));
}

}  // namespace airlock::workspace
