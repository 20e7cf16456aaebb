// Internal to workspace/: remove, rename and stat beneath a workspace root
// fd, for the local WorkspaceHandle (local_workspace.h), which adds the
// provenance record. Paths are already lexically checked
// (checkRelativePath; "" is the root). Every parent is reached with
// openBeneath (in-root symlinks among the parents followed, anything leaving
// the root refused), and the last component is acted on relative to that
// parent's fd with the *at syscalls that never follow it (unlinkat,
// renameat2, fstatat AT_SYMLINK_NOFOLLOW), so nothing outside the root is
// touched whatever the tree holds or how it changes meanwhile. Semantics
// and errors are WorkspaceHandle's (port/execution_environment.h); contexts
// name the workspace paths, never a host path.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "airlock/core/error.h"
#include "airlock/port/execution_environment.h"

namespace airlock::workspace::detail {

// Deepest directory nesting a recursive remove walks (one fd is held per
// level); a deeper tree is refused with ToolValidationError naming the path.
inline constexpr int kMaxRemoveDepth = 256;

Result<void> removeBeneath(int root_dirfd, const std::string& rel, bool recursive);

// The object renameBeneath moved, so the caller can tell whether `to` now
// reaches it without a symlink (reachesWithoutSymlink).
struct MovedObject {
  dev_t dev = 0;
  ino_t ino = 0;
  bool moved = false;  // false: from and to were the same path; nothing changed
};

Result<MovedObject> renameBeneath(int root_dirfd, const std::string& from, const std::string& to,
                                  bool replace);

Result<WorkspaceStat> statBeneath(int root_dirfd, const std::string& rel);

// True when walking `rel` from the root without following any symlink (not
// even an in-root one) reaches the object (dev, ino), of any type.
bool reachesWithoutSymlink(int root_dirfd, const std::string& rel, dev_t dev, ino_t ino);

}  // namespace airlock::workspace::detail
