#include "airlock/workspace/file_export.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "airlock/core/command_validation.h"
#include "airlock/sys/io.h"
#include "airlock/sys/sha256.h"

namespace airlock::workspace {
namespace {

constexpr std::size_t kHashBufferBytes = 64 * 1024;

// Reads the whole file with pread from offset 0 (the fd's offset is never
// shared with anyone else's view of it), checking it against the first pass.
class RehashingFileReader final : public WorkspaceFileReader {
 public:
  RehashingFileReader(sys::UniqueFd fd, std::int64_t size, std::string sha256)
      : fd_(std::move(fd)), expected_size_(size), expected_sha256_(std::move(sha256)) {}

  Result<std::size_t> read(char* buffer, std::size_t size) override {
    if (finished_) return std::size_t{0};
    const ssize_t n = sys::preadSome(fd_.get(), buffer, size, offset_);
    if (n < 0) return failErrno(ErrorCode::kExecutionUnavailable, "read exported file", errno);
    offset_ += n;
    if (offset_ > expected_size_)
      return fail(ErrorCode::kArtifactIntegrityError, "exported file grew during the export");
    if (n > 0) {
      hash_.update(buffer, static_cast<std::size_t>(n));
      return static_cast<std::size_t>(n);
    }
    finished_ = true;
    if (offset_ != expected_size_ || hash_.finishHex() != expected_sha256_)
      return fail(ErrorCode::kArtifactIntegrityError, "exported file changed during the export");
    return std::size_t{0};
  }

 private:
  sys::UniqueFd fd_;
  std::int64_t expected_size_;
  std::string expected_sha256_;
  off_t offset_ = 0;
  sys::Sha256 hash_;
  bool finished_ = false;
};

std::string lastComponent(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

Result<WorkspaceFileStream> openFileExport(int workspace_root_fd, const std::string& path,
                                           std::int64_t max_bytes, ResolverKind kind) {
  auto rel = checkRelativePath(path);
  if (!rel) return tl::unexpected(rel.error());
  if (rel->empty()) return tl::unexpected(exportOfTheRootError());
  const std::string quoted = "\"" + *rel + "\"";
  auto probe = openBeneath(workspace_root_fd, *rel, O_PATH | O_NOFOLLOW, 0, kind);
  if (!probe) return tl::unexpected(probe.error());
  struct stat st {};
  if (::fstat(probe->get(), &st) != 0)
    return failErrno(ErrorCode::kExecutionUnavailable, "export: fstat " + quoted, errno);
  if (S_ISLNK(st.st_mode))
    return failErrno(ErrorCode::kWorkspaceEscape,
                     "export: " + quoted + " is a symlink; symlinks are not followed", ELOOP);
  if (!S_ISREG(st.st_mode))
    return fail(ErrorCode::kToolValidationError, "export: " + quoted + " is not a regular file");
  if (st.st_size > max_bytes) return tl::unexpected(exportTooLargeError(*rel, max_bytes));

  auto fd =
      openBeneath(workspace_root_fd, *rel, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0, kind);
  if (!fd) return tl::unexpected(fd.error());
  struct stat st2 {};
  if (::fstat(fd->get(), &st2) != 0)
    return failErrno(ErrorCode::kExecutionUnavailable, "export: fstat " + quoted, errno);
  if (st2.st_dev != st.st_dev || st2.st_ino != st.st_ino || !S_ISREG(st2.st_mode))
    return fail(ErrorCode::kToolValidationError,
                "export: " + quoted + " changed while it was opened");

  // The execution side's digest: one pass, bounded by max_bytes whatever
  // st_size said.
  sys::Sha256 hash;
  std::vector<char> buffer(kHashBufferBytes);
  std::int64_t total = 0;
  for (;;) {
    const ssize_t n = sys::preadSome(fd->get(), buffer.data(), buffer.size(), total);
    if (n < 0) return failErrno(ErrorCode::kExecutionUnavailable, "export: read " + quoted, errno);
    if (n == 0) break;
    total += n;
    if (total > max_bytes)
      return fail(ErrorCode::kExecutionRejected,
                  "export: " + quoted + " grew past the artifact size cap");
    hash.update(buffer.data(), static_cast<std::size_t>(n));
  }
  WorkspaceFileStream out;
  out.filename = lastComponent(*rel);
  out.size_bytes = total;
  out.sha256 = hash.finishHex();
  out.reader = std::make_unique<RehashingFileReader>(std::move(*fd), total, out.sha256);
  return out;
}

}  // namespace airlock::workspace
