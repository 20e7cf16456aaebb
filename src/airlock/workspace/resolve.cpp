#include "airlock/workspace/resolve.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <deque>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "airlock/core/encoding.h"
#include "airlock/sys/io.h"

namespace airlock::workspace {
namespace {

// Linux follows at most 40 symlinks in one lookup (MAXSYMLINKS); the walk
// uses the same bound so both implementations give up on the same loops.
constexpr int kMaxSymlinks = 40;
// openat2 returns EAGAIN with RESOLVE_BENEATH when a rename raced a ".."
// step; a few retries are enough in practice, then the race is reported.
constexpr int kMaxAgainRetries = 16;

// Untrusted names are escaped (newlines, invalid UTF-8) inside messages.
std::string quoted(std::string_view path) {
  return quoteForMessage(path, 512);
}

// One place that turns a lookup errno into the taxonomy, for both kinds.
tl::unexpected<Error> lookupError(const std::string& relative, int err) {
  switch (err) {
    case EXDEV:
      // No errno text: "Invalid cross-device link" would mislead.
      return fail(ErrorCode::kWorkspaceEscape,
                  "path " + quoted(relative) +
                      " escapes the workspace (it is absolute, or a symlink or .. in it leads "
                      "outside)");
    case ELOOP:
      // O_NOFOLLOW on a final symlink, a magic link, or a symlink loop.
      return failErrno(
          ErrorCode::kWorkspaceEscape,
          "path " + quoted(relative) + " ends in or loops through a symlink that is not followed",
          err);
    case EAGAIN:
      // A rename raced a ".." step (openat2 after retries, or the walk's
      // (dev, ino) check): refuse rather than guess where the path leads.
      return failErrno(ErrorCode::kWorkspaceEscape,
                       "path " + quoted(relative) + " changed during lookup", err);
    case ENOENT:
    case ENOTDIR:
      return failErrno(ErrorCode::kNotFound, "path " + quoted(relative) + " does not exist", err);
    default:
      return failErrno(ErrorCode::kExecutionUnavailable,
                       "open " + quoted(relative) + " in workspace", err);
  }
}

Result<sys::UniqueFd> openWithOpenat2(int root_dirfd, const std::string& relative, int flags,
                                      mode_t mode) {
  open_how how{};
  how.flags = static_cast<__u64>(flags | O_CLOEXEC);
  // The kernel refuses a mode without O_CREAT / O_TMPFILE.
  how.mode = ((flags & O_CREAT) != 0 || (flags & O_TMPFILE) == O_TMPFILE) ? mode : 0;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
  const char* path = relative.empty() ? "." : relative.c_str();
  int again = 0;
  for (;;) {
    const int fd = sys::openat2Raw(root_dirfd, path, how);
    if (fd >= 0) return sys::UniqueFd(fd);
    if (errno == EAGAIN && ++again < kMaxAgainRetries) continue;
    return lookupError(relative, errno);
  }
}

// --- The O_NOFOLLOW walk -------------------------------------------------
//
// Semantics chosen to match openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS):
// a relative symlink is followed by splicing its target into the remaining
// components, ".." pops one level and escapes at the root, an absolute
// target escapes, and any symlink living on procfs is refused (the only
// place magic links exist; a workspace is never on procfs). Each step opens
// exactly one name relative to an fd with O_NOFOLLOW, so what is opened is
// the object that name denotes at that moment; nothing is re-resolved by
// string. Only the current directory fd is held; ancestors are remembered
// by (dev, ino) and re-reached through "..", which is then checked against
// the record, so a directory moved during the walk is detected rather than
// followed outward.

struct DirId {
  dev_t dev;
  ino_t ino;
};

Result<DirId> idOf(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return failErrno(ErrorCode::kExecutionUnavailable, "fstat", errno);
  return DirId{st.st_dev, st.st_ino};
}

// Splits on '/', dropping empty and "." parts. A path whose last part is
// empty or "." ("d/", "d/.") must name a directory, as in the kernel; that is
// kept as a trailing "." marker, which makes the name before it an
// intermediate component (opened with O_DIRECTORY).
void splitInto(std::string_view path, std::deque<std::string>& out, bool at_front) {
  std::vector<std::string> parts;
  std::size_t pos = 0;
  bool dir_marker = false;
  while (pos <= path.size()) {
    std::size_t slash = path.find('/', pos);
    if (slash == std::string_view::npos) slash = path.size();
    std::string_view part = path.substr(pos, slash - pos);
    if (!part.empty() && part != ".") parts.emplace_back(part);
    dir_marker = part.empty() || part == ".";
    pos = slash + 1;
  }
  if (dir_marker && !parts.empty()) parts.emplace_back(".");
  if (at_front) {
    out.insert(out.begin(), parts.begin(), parts.end());
  } else {
    out.insert(out.end(), parts.begin(), parts.end());
  }
}

// readlinkat of `name` in `dirfd`: the target, or nullopt when it is not a
// symlink (EINVAL) or vanished. Errors other than those are returned.
Result<std::optional<std::string>> readSymlink(int dirfd, const std::string& name) {
  std::string buf(4096, '\0');
  for (;;) {
    ssize_t n = ::readlinkat(dirfd, name.c_str(), buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINVAL || errno == ENOENT) return std::optional<std::string>();
      return failErrno(ErrorCode::kExecutionUnavailable, "readlinkat", errno);
    }
    if (static_cast<std::size_t>(n) < buf.size()) {
      buf.resize(static_cast<std::size_t>(n));
      return std::optional<std::string>(std::move(buf));
    }
    if (buf.size() >= (1u << 16))
      return failErrno(ErrorCode::kExecutionUnavailable, "readlinkat", ENAMETOOLONG);
    buf.resize(buf.size() * 2);
  }
}

bool onProcfs(int fd) {
  struct statfs sfs {};
  if (::fstatfs(fd, &sfs) != 0) return true;  // unknown: treat as unsafe
  return sfs.f_type == PROC_SUPER_MAGIC;
}

class Walker {
 public:
  Walker(int root_dirfd, const std::string& relative) : root_(root_dirfd), relative_(relative) {}

  Result<sys::UniqueFd> open(int flags, mode_t mode) {
    if (!relative_.empty() && relative_.front() == '/') return lookupError(relative_, EXDEV);
    cur_ = sys::UniqueFd(sys::openAtRaw(root_, ".", O_PATH | O_DIRECTORY, 0));
    if (!cur_.valid()) return lookupError(relative_, errno);
    splitInto(relative_, pending_, false);

    while (!pending_.empty()) {
      std::string comp = std::move(pending_.front());
      pending_.pop_front();
      if (comp == "..") {
        if (auto up = ascend(); !up) return tl::unexpected(up.error());
        continue;
      }
      if (comp == ".") {
        if (pending_.empty()) break;  // trailing marker: open the directory reached
        continue;
      }
      const bool last = pending_.empty();
      if (!last) {
        int fd = sys::openAtRaw(cur_.get(), comp.c_str(), O_PATH | O_NOFOLLOW | O_DIRECTORY, 0);
        if (fd >= 0) {
          if (auto d = descend(sys::UniqueFd(fd)); !d) return tl::unexpected(d.error());
          continue;
        }
        int err = errno;
        auto spliced = trySplice(comp, err);
        if (!spliced) return tl::unexpected(spliced.error());
        continue;
      }
      // Final component: never follow implicitly; splice a symlink only
      // when the caller did not ask for O_NOFOLLOW (as openat2 would).
      int fd = sys::openAtRaw(cur_.get(), comp.c_str(), flags | O_NOFOLLOW, mode);
      if (fd >= 0) {
        sys::UniqueFd owned(fd);
        if ((flags & O_PATH) != 0 && (flags & O_NOFOLLOW) == 0) {
          struct stat st {};
          if (::fstat(owned.get(), &st) == 0 && S_ISLNK(st.st_mode)) {
            auto spliced = trySplice(comp, ELOOP);
            if (!spliced) return tl::unexpected(spliced.error());
            continue;
          }
        }
        return owned;
      }
      int err = errno;
      if ((flags & O_NOFOLLOW) != 0 || (err != ELOOP && err != ENOTDIR)) {
        return lookupError(relative_, err);
      }
      auto spliced = trySplice(comp, err);
      if (!spliced) return tl::unexpected(spliced.error());
    }
    // The path ended at a directory already reached ("" or a trailing "..").
    int fd = sys::openAtRaw(cur_.get(), ".", flags, mode);
    if (fd < 0) return lookupError(relative_, errno);
    return sys::UniqueFd(fd);
  }

 private:
  Result<void> descend(sys::UniqueFd next) {
    auto id = idOf(cur_.get());
    if (!id) return tl::unexpected(id.error());
    ancestors_.push_back(*id);
    cur_ = std::move(next);
    return {};
  }

  Result<void> ascend() {
    if (ancestors_.empty()) return lookupError(relative_, EXDEV);
    const DirId want = ancestors_.back();
    ancestors_.pop_back();
    int fd = ancestors_.empty() ? sys::openAtRaw(root_, ".", O_PATH | O_DIRECTORY, 0)
                                : sys::openAtRaw(cur_.get(), "..", O_PATH | O_DIRECTORY, 0);
    if (fd < 0) return lookupError(relative_, errno);
    sys::UniqueFd parent(fd);
    auto got = idOf(parent.get());
    if (!got) return tl::unexpected(got.error());
    if (got->dev != want.dev || got->ino != want.ino) {
      return lookupError(relative_, EAGAIN);  // moved while we walked
    }
    cur_ = std::move(parent);
    return {};
  }

  // `comp` in the current directory failed to open as asked with `err`. If it
  // is a symlink, splice its target in front of the remaining components.
  Result<void> trySplice(const std::string& comp, int err) {
    auto target = readSymlink(cur_.get(), comp);
    if (!target) return tl::unexpected(target.error());
    if (!target->has_value()) return lookupError(relative_, err);
    if (onProcfs(cur_.get())) return lookupError(relative_, ELOOP);
    if (++symlinks_ > kMaxSymlinks) return lookupError(relative_, ELOOP);
    const std::string& text = **target;
    if (text.empty()) return lookupError(relative_, ENOENT);
    if (text.front() == '/') return lookupError(relative_, EXDEV);
    splitInto(text, pending_, true);
    return {};
  }

  int root_;
  const std::string& relative_;
  sys::UniqueFd cur_;
  std::vector<DirId> ancestors_;
  std::deque<std::string> pending_;
  int symlinks_ = 0;
};

ResolverKind probeResolver() noexcept {
  open_how how{};
  how.flags = O_PATH | O_CLOEXEC;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
  const int fd = sys::openat2Raw(AT_FDCWD, ".", how);
  if (fd < 0) return ResolverKind::kNofollowWalk;  // ENOSYS, or blocked by a filter
  ::close(fd);
  return ResolverKind::kOpenat2;
}

}  // namespace

ResolverKind detectResolver() noexcept {
  static const ResolverKind kind = probeResolver();
  return kind;
}

Result<sys::UniqueFd> openBeneath(int root_dirfd, const std::string& relative, int flags,
                                  mode_t mode, ResolverKind kind) {
  if (relative.find('\0') != std::string::npos) {
    return fail(ErrorCode::kWorkspaceEscape, "path contains a NUL byte");
  }
  if (kind == ResolverKind::kOpenat2) return openWithOpenat2(root_dirfd, relative, flags, mode);
  Walker walker(root_dirfd, relative);
  return walker.open(flags, mode);
}

}  // namespace airlock::workspace
