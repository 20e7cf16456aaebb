// The execution side of artifact.export of a workspace path (spec 000,
// "ArtifactStore": both sides compute the digest; red-team cases B05, B10, B32).
// Separate target (airlock_artifacts_export): it reads workspaces, which
// the store and its repositories never do.
//
// openWorkspaceExport() resolves `path` through workspace containment
// (checkRelativePath, then openBeneath under the workspace root fd):
// * a symlink as the final component is WorkspaceEscape (never read
//   through, B05); a symlinked directory on the way is followed only while
//   it stays inside the root, anything leaving it is WorkspaceEscape;
// * a directory, FIFO, socket or device is ToolValidationError "not a
//   regular file" (classified on an O_PATH handle, so a FIFO or device is
//   never opened);
// * a file whose apparent size exceeds max_bytes is ExecutionRejected
//   before a byte is read, so a sparse terabyte is not read as zeros (B32);
// * a hard link to something else is exported as the bytes the workspace
//   can read, nothing more (B10).
// It then hashes the file once (the execution side's digest and size) and
// returns a stream that reads it again from the start, re-hashing; if the
// bytes differ from the first pass (the file changed during the export),
// the stream fails with ArtifactIntegrityError at its end or as soon as it
// runs long, and put() stores nothing. put() hashes a third time on its own
// side of the hop and compares with the declared digest.
#pragma once

#include <cstdint>
#include <string>

#include "airlock/artifacts/artifact_writer.h"
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

// artifact.export of a workspace path: openWorkspaceExport + writer.create
// with trust EXTERNAL_UNTRUSTED (bytes a sandbox could have written).
Result<ArtifactRef> exportWorkspaceFile(ArtifactWriter& writer, int workspace_root_fd,
                                        const std::string& path, std::string media_type,
                                        std::int64_t max_bytes = kDefaultMaxArtifactBytes);

}  // namespace airlock::artifacts
