#include "airlock/port/workspace_file_stream.h"

#include "airlock/core/command_validation.h"
#include "airlock/port/execution_environment.h"
#include "airlock/sys/sha256.h"

namespace airlock {
namespace {

std::string quoted(const std::string& relative) {
  return "\"" + relative + "\"";
}

}  // namespace

Error exportOfTheRootError() {
  return Error{ErrorCode::kToolValidationError, 0, "export: the workspace root is not a file"};
}

Error exportTooLargeError(const std::string& relative, std::int64_t max_bytes) {
  return Error{ErrorCode::kExecutionRejected, 0,
               "export: " + quoted(relative) + " is larger than the artifact size cap of " +
                   std::to_string(max_bytes) + " bytes"};
}

WorkspaceFileStream streamOfBytes(std::string bytes, const std::string& relative) {
  WorkspaceFileStream out;
  out.size_bytes = static_cast<std::int64_t>(bytes.size());
  sys::Sha256 hash;
  hash.update(bytes.data(), bytes.size());
  out.sha256 = hash.finishHex();
  const auto slash = relative.find_last_of('/');
  out.filename = slash == std::string::npos ? relative : relative.substr(slash + 1);
  out.reader = std::make_unique<sys::StringSource>(std::move(bytes));
  return out;
}

Result<WorkspaceFileStream> WorkspaceHandle::openExport(const std::string& path,
                                                        std::int64_t max_bytes) {
  auto rel = checkRelativePath(path);
  if (!rel) return tl::unexpected(rel.error());
  if (rel->empty()) return tl::unexpected(exportOfTheRootError());
  auto data = read(*rel);
  if (!data) return tl::unexpected(data.error());
  if (static_cast<std::int64_t>(data->size()) > max_bytes)
    return tl::unexpected(exportTooLargeError(*rel, max_bytes));
  return streamOfBytes(std::move(*data), *rel);
}

}  // namespace airlock
