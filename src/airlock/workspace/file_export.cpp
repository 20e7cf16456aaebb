#include "airlock/workspace/file_export.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "airlock/core/command_validation.h"
#include "airlock/sys/byte_source.h"
#include "airlock/sys/io.h"
#include "airlock/sys/sha256.h"

namespace airlock::workspace {
namespace {

constexpr std::size_t kHashBufferBytes = 64 * 1024;

constexpr sys::DigestCheckWords kExportChecks{"read exported file",
                                              "exported file grew during the export",
                                              "exported file changed during the export"};

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
  out.reader = std::make_unique<sys::DigestCheckedFileSource>(std::move(*fd), total, out.sha256,
                                                              kExportChecks);
  return out;
}

}  // namespace airlock::workspace
