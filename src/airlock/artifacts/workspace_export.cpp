#include "airlock/artifacts/workspace_export.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "airlock/core/command_validation.h"
#include "airlock/sys/io.h"
#include "airlock/sys/sha256.h"

namespace airlock::artifacts {
namespace {

// Reads the whole file with pread from offset 0 (the fd's offset is never
// shared with anyone else's view of it).
class RehashingFileSource final : public ByteSource {
 public:
  RehashingFileSource(sys::UniqueFd fd, std::int64_t size, std::string sha256)
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

Result<WorkspaceExport> openWorkspaceExport(int workspace_root_fd, const std::string& path,
                                            std::int64_t max_bytes, workspace::ResolverKind kind) {
  auto rel = checkRelativePath(path);
  if (!rel) return tl::unexpected(rel.error());
  if (rel->empty())
    return fail(ErrorCode::kToolValidationError, "export: the workspace root is not a file");
  const std::string quoted = "\"" + *rel + "\"";
  auto probe = workspace::openBeneath(workspace_root_fd, *rel, O_PATH | O_NOFOLLOW, 0, kind);
  if (!probe) return tl::unexpected(probe.error());
  struct stat st {};
  if (::fstat(probe->get(), &st) != 0)
    return failErrno(ErrorCode::kExecutionUnavailable, "export: fstat " + quoted, errno);
  if (S_ISLNK(st.st_mode))
    return failErrno(ErrorCode::kWorkspaceEscape,
                     "export: " + quoted + " is a symlink; symlinks are not followed", ELOOP);
  if (!S_ISREG(st.st_mode))
    return fail(ErrorCode::kToolValidationError, "export: " + quoted + " is not a regular file");
  if (st.st_size > max_bytes)
    return fail(ErrorCode::kExecutionRejected, "export: " + quoted +
                                                   " is larger than the artifact size cap of " +
                                                   std::to_string(max_bytes) + " bytes");

  auto fd = workspace::openBeneath(workspace_root_fd, *rel,
                                   O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0, kind);
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
  std::vector<char> buffer(kStreamBufferBytes);
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
  WorkspaceExport out;
  out.filename = lastComponent(*rel);
  out.stream.size_bytes = total;
  out.stream.sha256 = hash.finishHex();
  out.stream.source =
      std::make_unique<RehashingFileSource>(std::move(*fd), total, out.stream.sha256);
  return out;
}

Result<ArtifactRef> exportWorkspaceFile(ArtifactWriter& writer, int workspace_root_fd,
                                        const std::string& path, std::string media_type,
                                        std::int64_t max_bytes) {
  auto exported = openWorkspaceExport(workspace_root_fd, path, max_bytes);
  if (!exported) return tl::unexpected(exported.error());
  return writer.create(std::move(exported->stream), std::move(exported->filename),
                       std::move(media_type), TrustLevel::kExternalUntrusted);
}

}  // namespace airlock::artifacts
