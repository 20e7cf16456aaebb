// WorkspaceHandle over a directory fd (the execution service's side of a
// sandbox's /workspace). Every path goes through checkRelativePath() and is
// then opened beneath the root fd (workspace/resolve.h), never by string.
// Files and directories it creates are chowned to owner_uid/owner_gid (the
// sandbox user's host ids) so the command can change them.
#pragma once

#include <sys/types.h>

#include <memory>

#include "airlock/port/execution_environment.h"
#include "airlock/sys/unique_fd.h"

namespace airlock::workspace {

// Method semantics (errors as in port/execution_environment.h):
// * every path: checkRelativePath (WorkspaceEscape naming the problem), then
//   openBeneath (relative symlinks that stay inside are followed; anything
//   leaving the root is WorkspaceEscape; missing is NotFound).
// * read: regular files only. A symlink as the final component is
//   WorkspaceEscape naming the path (never read through, red-team case B05); a
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
// * remove, rename, stat (workspace/path_ops.h): the parent is reached with
//   openBeneath and the last component is acted on with unlinkat, renameat2
//   or fstatat relative to the parent's fd, never followed. A recursive
//   remove opens each subdirectory O_NOFOLLOW relative to its parent's fd
//   (a symlink swapped in is unlinked as a link) and refuses a tree nested
//   deeper than 256 directories. rename without replace uses
//   RENAME_NOREPLACE (a filesystem without it gets a check then a rename).
//
// CreateAs::kOwner makes every creating call (write, mkdir, and rename,
// which the kernel refuses alike) run with the
// calling thread's fsuid/fsgid set to the owner: required when the
// workspace filesystem belongs to the sandbox's user namespace (the linux
// mechanism's tmpfs), where host root has no mapping and the kernel refuses
// to create its inodes (EOVERFLOW). It also means the service can create
// only what the sandbox user could.
//
// Provenance (spec 000, "Provenance, and why the handle answers it"): the
// record is a map (relative path -> provenance) held in this object, so it
// dies with it. write records TOOL_WRITTEN; placeFile (what copy-in and
// archive extraction use) writes the same way and leaves the path UNKNOWN;
// the adapter that runs commands
// against the directory reports what they changed through the methods
// below; every other path is UNKNOWN. provenance() makes no syscalls.
// Where the record cannot be sure the bytes at a path are the tool's, it
// says UNKNOWN rather than TOOL_WRITTEN (the safe direction):
// * a write through a symlinked component is not recorded (the record is
//   keyed by path, and the bytes live under another name);
// * a write made while a command runs (between beginSandboxCommand and
//   recordSandboxChanges) is not recorded: the command can move things
//   around it in ways a before/after diff does not show;
// * when the adapter's listing was incomplete, every TOOL_WRITTEN entry is
//   dropped;
// * remove drops the records of the path and below it (also when a
//   recursive remove failed part way); rename moves the records of `from`
//   and below to `to` only when `to` reaches the moved object without a
//   symlink and no command is running, and drops them otherwise.
enum class CreateAs { kService, kOwner };

// The internal side of a local workspace, for the adapter that owns it (the
// linux mechanism). Not part of the WorkspaceHandle port.
class LocalWorkspaceHandle : public WorkspaceHandle {
 public:
  // Called before a command can touch the workspace.
  virtual void beginSandboxCommand() = 0;
  // Called once the command's processes are gone, with its files_changed.
  // CREATED and MODIFIED paths become SANDBOX_WRITTEN; DELETED paths are
  // dropped; anything recorded below a changed path ("p/...") is dropped.
  // complete=false (listing truncated, or no diff could be taken) also
  // drops every TOOL_WRITTEN entry. Ends what beginSandboxCommand began.
  virtual void recordSandboxChanges(const std::vector<FileChange>& changes, bool complete) = 0;
};

std::shared_ptr<LocalWorkspaceHandle> makeLocalWorkspace(sys::UniqueFd root_dirfd, uid_t owner_uid,
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

// Extracts a tar (any compression libarchive reads) or zip archive, the
// caller's own file, into a workspace through the handle, with the decoder
// of archive/workspace_archive.h: regular files via placeFile, directories
// via mkdir. libarchive only parses; it never touches the
// filesystem (no archive_write_disk). Every member is checked in a first
// pass and the archive is read again to extract, so a refusal writes
// nothing. Refused, with ToolValidationError naming the member as the
// archive spells it (red-team case B07): symlinks, hard links, devices, FIFOs,
// sockets; names checkRelativePath refuses (absolute, "..", empty or "."
// components), after removing one leading "./" and one trailing "/", e.g.
// `copy-in: archive member "../x" leaves the workspace (...)`; a member
// below a member that is a file; a member over 64 MiB; more than 1,000,000
// members. A file that libarchive cannot read as tar or zip is
// ToolValidationError naming archive_path.
Result<void> copyInArchive(const std::string& archive_path, WorkspaceHandle& workspace);

// `--copy-in SOURCE` of every front end: a directory is copied
// (copyInDirectory); any other path is read as a tar or zip archive
// (copyInArchive: libarchive decides, and says so when it is neither).
// Errors as theirs, the context starting "--copy-in: " in place of their
// "copy-in: ".
Result<void> copyIn(const std::string& source, WorkspaceHandle& workspace);

}  // namespace airlock::workspace
