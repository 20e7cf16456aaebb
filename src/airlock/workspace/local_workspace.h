// WorkspaceHandle over a directory fd (the execution service's side of a
// sandbox's /workspace). Every path goes through checkRelativePath() and is
// then opened beneath the root fd (workspace/resolve.h), never by string.
// Files and directories it creates are chowned to owner_uid/owner_gid (the
// sandbox user's host ids) so the command can change them.
#pragma once

#include <sys/types.h>

#include <memory>

#include "airlock/sandbox/execution_environment.h"
#include "airlock/sys/unique_fd.h"

namespace airlock::workspace {

std::shared_ptr<WorkspaceHandle> makeLocalWorkspace(sys::UniqueFd root_dirfd, uid_t owner_uid,
                                                    gid_t owner_gid);

// Copies a host directory tree (the caller's own files) into a workspace:
// regular files and directories only. A symlink, device, FIFO or socket in
// the source is refused with ToolValidationError naming the member; a
// missing or non-directory source is ToolValidationError naming it.
Result<void> copyInDirectory(const std::string& source_dir, WorkspaceHandle& workspace);

}  // namespace airlock::workspace
