// The execution side of artifact_export of a workspace path (spec 000,
// "ArtifactStore": both sides compute the digest; red-team cases B05, B10, B32).
// Separate target (airlock_artifacts_export): it reads workspaces, which
// the store and its repositories never do.
//
// A file to export arrives as a WorkspaceFileStream opened by the side that
// holds the workspace: through the port (WorkspaceHandle::openExport, what
// every front end uses) or, on the execution side, from a workspace root fd
// (workspace/file_export.h, which lists the containment rules and the
// red-team cases they answer). This library sees only the port, so the
// gateway that links it reaches no workspace code. The file was hashed once
// on open (the execution side's digest and size) and is streamed again from
// the start, re-hashed; if the bytes differ from the first pass, the stream
// fails with ArtifactIntegrityError and put() stores nothing. put() hashes a
// third time on its own side of the hop and compares with the declared
// digest.
#pragma once

#include <cstdint>
#include <string>

#include "airlock/artifacts/artifact_writer.h"
#include "airlock/port/execution_environment.h"

namespace airlock::artifacts {

struct WorkspaceExport {
  MeasuredStream stream;
  std::string filename;  // last path component, as metadata
};

// The opened stream as an export: its digest, size and bytes, and the last
// path component as the filename. An error passes through unchanged.
Result<WorkspaceExport> asWorkspaceExport(Result<WorkspaceFileStream> opened);

// Through the port: what every front end (run, serve) exports with.
Result<WorkspaceExport> openWorkspaceExport(WorkspaceHandle& workspace, const std::string& path,
                                            std::int64_t max_bytes = kDefaultMaxArtifactBytes);

// artifact_export of an opened workspace file: asWorkspaceExport +
// writer.create with trust EXTERNAL_UNTRUSTED (bytes a sandbox could have
// written).
Result<ArtifactRef> exportWorkspaceFile(ArtifactWriter& writer, Result<WorkspaceFileStream> opened,
                                        std::string media_type);

}  // namespace airlock::artifacts
