#include "airlock/artifacts/workspace_export.h"

#include "airlock/workspace/file_export.h"

namespace airlock::artifacts {
namespace {

// The port's export reader as the store's ByteSource.
class ExportReaderSource final : public ByteSource {
 public:
  explicit ExportReaderSource(std::unique_ptr<WorkspaceFileReader> reader)
      : reader_(std::move(reader)) {}
  Result<std::size_t> read(char* buffer, std::size_t size) override {
    return reader_->read(buffer, size);
  }

 private:
  std::unique_ptr<WorkspaceFileReader> reader_;
};

Result<WorkspaceExport> asExport(Result<WorkspaceFileStream> opened) {
  if (!opened) return tl::unexpected(opened.error());
  WorkspaceExport out;
  out.filename = std::move(opened->filename);
  out.stream.size_bytes = opened->size_bytes;
  out.stream.sha256 = std::move(opened->sha256);
  out.stream.source = std::make_unique<ExportReaderSource>(std::move(opened->reader));
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
