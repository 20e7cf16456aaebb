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

// Method semantics (errors as in sandbox/execution_environment.h):
// * every path: checkRelativePath (WorkspaceEscape naming the problem), then
//   openBeneath (relative symlinks that stay inside are followed; anything
//   leaving the root is WorkspaceEscape; missing is NotFound).
// * read: regular files only. A symlink as the final component is
//   WorkspaceEscape naming the path (never read through, bug-log B05); a
//   directory, FIFO, socket or device is ToolValidationError "not a regular
//   file" (the type is checked on an O_PATH handle first, so a FIFO or device
//   is never opened); over 64 MiB is ToolValidationError.
// * write: creates missing parent directories (0755, chowned), writes a
//   temporary file in the target directory, fchowns it, mode 0644, then
//   renameat()s it over the name: readers see old or new bytes, and a
//   symlink at the name is replaced, not followed (B01). Writing onto a
//   directory, or below a non-directory, is ToolValidationError.
// * mkdir: like `mkdir -p`: creates missing components, succeeds when the
//   directory exists; an existing non-directory is ToolValidationError.
// * listdir: the directory's entries sorted by raw name bytes, each with its
//   type (not following symlinks) and size (st_size for files and symlinks,
//   0 otherwise). A final symlink to an in-root directory is followed.
//
// CreateAs::kOwner makes every creating call (write, mkdir) run with the
// calling thread's fsuid/fsgid set to the owner: required when the
// workspace filesystem belongs to the sandbox's user namespace (the linux
// mechanism's tmpfs), where host root has no mapping and the kernel refuses
// to create its inodes (EOVERFLOW). It also means the service can create
// only what the sandbox user could.
enum class CreateAs { kService, kOwner };
std::shared_ptr<WorkspaceHandle> makeLocalWorkspace(sys::UniqueFd root_dirfd, uid_t owner_uid,
                                                    gid_t owner_gid,
                                                    CreateAs create_as = CreateAs::kService);

// Copies a host directory tree (the caller's own files) into a workspace:
// regular files and directories only, empty directories included. A
// symlink, device, FIFO or socket in the source is refused with
// ToolValidationError naming the member, e.g. `copy-in: "a/link" is a
// symlink; only regular files and directories are copied`; a missing or
// non-directory source is ToolValidationError naming it. The whole tree is
// checked before anything is written, so a refusal leaves the workspace
// unchanged. source_dir itself may be a symlink to a directory (it is the
// caller's own argument); nothing below it is followed.
Result<void> copyInDirectory(const std::string& source_dir, WorkspaceHandle& workspace);

}  // namespace airlock::workspace
