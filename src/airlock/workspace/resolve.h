// The containment function's fd half (spec 000, "WorkspaceHandle": rules 3
// and 4). checkRelativePath() (core/command_validation.h)
// applies the lexical rules; openBeneath() opens the result under a root
// directory fd so that the real object stays under the root even through
// symlinks. Two implementations behind one interface, chosen at start:
// openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS) where the kernel has it,
// and a component-by-component openat(O_NOFOLLOW) walk otherwise.
#pragma once

#include <string>

#include "airlock/core/error.h"
#include "airlock/sys/unique_fd.h"

namespace airlock::workspace {

enum class ResolverKind { kOpenat2, kNofollowWalk };

// Which implementation this kernel supports (probed once).
ResolverKind detectResolver() noexcept;

// Opens `relative` (already lexically checked; "" means the root) beneath
// root_dirfd with `flags` (O_CLOEXEC added). `kind` selects the
// implementation (tests exercise both with one list of cases).
//
// Both implementations have the same semantics, those of RESOLVE_BENEATH:
// a relative symlink is followed when its resolution stays beneath the root
// (a chain of such links included); an absolute symlink, a ".." above the
// root, or a magic link (/proc/<pid>/root, /cwd, /fd/N) is WorkspaceEscape.
// The final component follows the usual open rules: with O_NOFOLLOW a
// symlink there is refused (O_PATH | O_NOFOLLOW returns the link itself);
// O_CREAT through a dangling in-root symlink creates its target.
//
// The walk opens one name at a time relative to the current directory fd
// with O_NOFOLLOW and splices a symlink's target into the remaining path
// (at most 40 links); it holds one directory fd at a time and re-reaches an
// ancestor through "..", checked by (dev, ino), so it needs O(1) fds at any
// depth. It refuses every symlink that lives on procfs, a superset of the
// magic links openat2 refuses.
//
// Errors: WorkspaceEscape (EXDEV: leaves the root; ELOOP: a final symlink
// under O_NOFOLLOW, a magic link, or a loop; EAGAIN: a directory moved under
// the lookup; NUL in `relative`), NotFound (ENOENT, or ENOTDIR for a
// component that is not a directory), ExecutionUnavailable with errno for
// anything else (EISDIR, EEXIST, ENXIO, ...). sys_errno is always set for a
// syscall failure so callers can refine the message. Contexts name the
// relative path only, never the host path of the root.
Result<sys::UniqueFd> openBeneath(int root_dirfd, const std::string& relative, int flags,
                                  mode_t mode = 0, ResolverKind kind = detectResolver());

}  // namespace airlock::workspace
