// The execution side of artifact.export of a workspace path (spec 000,
// "ArtifactStore": both sides compute the digest; red-team cases B05, B10, B32).
// Separate target (airlock_artifacts_export): it reads workspaces, which
// the store and its repositories never do.
//
// openWorkspaceExport() opens a workspace file for export through the
// port (WorkspaceHandle::openExport) or, given a workspace root fd,
// directly (workspace/file_export.h, which lists the containment rules and
// the red-team cases they answer). The file is hashed once (the execution
// side's digest and size) and streamed again from the start, re-hashed; if
// the bytes differ from the first pass, the stream fails with
// ArtifactIntegrityError and put() stores nothing. put() hashes a third
// time on its own side of the hop and compares with the declared digest.
#pragma once

#include <cstdint>
#include <string>

#include "airlock/artifacts/artifact_writer.h"
#include "airlock/port/execution_environment.h"
#include "airlock/workspace/resolve.h"

namespace airlock::artifacts {

struct WorkspaceExport {
  MeasuredStream stream;
  std::string filename;  // last path component, as metadata
};

Result<WorkspaceExport> openWorkspaceExport(
    int workspace_root_fd, const std::string& path,
    std::int64_t max_bytes = kDefaultMaxArtifactBytes,
    workspace::ResolverKind kind = workspace::detectResolver());
// Through the port: what every front end (run, serve) exports with.
Result<WorkspaceExport> openWorkspaceExport(WorkspaceHandle& workspace, const std::string& path,
                                            std::int64_t max_bytes = kDefaultMaxArtifactBytes);

// artifact.export of a workspace path: openWorkspaceExport + writer.create
// with trust EXTERNAL_UNTRUSTED (bytes a sandbox could have written).
Result<ArtifactRef> exportWorkspaceFile(ArtifactWriter& writer, int workspace_root_fd,
                                        const std::string& path, std::string media_type,
                                        std::int64_t max_bytes = kDefaultMaxArtifactBytes);

}  // namespace airlock::artifacts
