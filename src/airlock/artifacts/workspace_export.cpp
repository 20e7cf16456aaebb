#include "airlock/artifacts/workspace_export.h"

#include "airlock/workspace/file_export.h"

namespace airlock::artifacts {
namespace {

Result<WorkspaceExport> asExport(Result<WorkspaceFileStream> opened) {
  if (!opened) return tl::unexpected(opened.error());
  WorkspaceExport out;
  out.filename = std::move(opened->filename);
  out.stream.size_bytes = opened->size_bytes;
  out.stream.sha256 = std::move(opened->sha256);
  out.stream.source = std::move(opened->reader);
  return out;
}

}  // namespace

Result<WorkspaceExport> openWorkspaceExport(int workspace_root_fd, const std::string& path,
                                            std::int64_t max_bytes, workspace::ResolverKind kind) {
  return asExport(workspace::openFileExport(workspace_root_fd, path, max_bytes, kind));
}

Result<WorkspaceExport> openWorkspaceExport(WorkspaceHandle& workspace, const std::string& path,
                                            std::int64_t max_bytes) {
  return asExport(workspace.openExport(path, max_bytes));
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
