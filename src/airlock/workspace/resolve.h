// The containment function's fd half (spec 000, "WorkspaceHandle": rules 3
// and 4; DESIGN.md 5.4). checkRelativePath() (core/command_validation.h)
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
// root_dirfd with `flags` (O_CLOEXEC added). WorkspaceEscape when the path
// leaves the root; NotFound when a component is missing; other errors carry
// errno. `kind` selects the implementation (tests exercise both).
Result<sys::UniqueFd> openBeneath(int root_dirfd, const std::string& relative, int flags,
                                  mode_t mode = 0, ResolverKind kind = detectResolver());

}  // namespace airlock::workspace
