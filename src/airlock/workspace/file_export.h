// A local workspace file opened for export (WorkspaceHandle::openExport on a
// directory; spec 000, "ArtifactStore": both sides compute the digest;
// red-team cases B05, B10, B32).
//
// openFileExport() resolves `path` through workspace containment
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
// returns a reader that reads it again from the start, re-hashing; if the
// bytes differ from the first pass (the file changed during the export),
// the reader fails with ArtifactIntegrityError at its end or as soon as it
// runs long. The reader owns its own fd: it keeps working for the export
// under way even if the sandbox is destroyed meanwhile.
#pragma once

#include <cstdint>
#include <string>

#include "airlock/port/workspace_file_stream.h"
#include "airlock/workspace/resolve.h"

namespace airlock::workspace {

Result<WorkspaceFileStream> openFileExport(int workspace_root_fd, const std::string& path,
                                           std::int64_t max_bytes,
                                           ResolverKind kind = detectResolver());

}  // namespace airlock::workspace
