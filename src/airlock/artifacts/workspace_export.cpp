#include "airlock/artifacts/workspace_export.h"

namespace airlock::artifacts {

Result<WorkspaceExport> asWorkspaceExport(Result<WorkspaceFileStream> opened) {
  if (!opened) return tl::unexpected(opened.error());
  WorkspaceExport out;
  out.filename = std::move(opened->filename);
  out.stream.size_bytes = opened->size_bytes;
  out.stream.sha256 = std::move(opened->sha256);
  out.stream.source = std::move(opened->reader);
  return out;
}

Result<WorkspaceExport> openWorkspaceExport(WorkspaceHandle& workspace, const std::string& path,
                                            std::int64_t max_bytes) {
  return asWorkspaceExport(workspace.openExport(path, max_bytes));
}

Result<ArtifactRef> exportWorkspaceFile(ArtifactWriter& writer, Result<WorkspaceFileStream> opened,
                                        std::string media_type) {
  auto exported = asWorkspaceExport(std::move(opened));
  if (!exported) return tl::unexpected(exported.error());
  return writer.create(std::move(exported->stream), std::move(exported->filename),
                       std::move(media_type), TrustLevel::kExternalUntrusted);
}

}  // namespace airlock::artifacts
