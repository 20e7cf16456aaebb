// Validation of an ExecutionCommand before it reaches the execution service
// (spec 000, "sandbox.run_command": validation, in order).
#pragma once

#include <string>
#include <string_view>

#include "airlock/core/error.h"
#include "airlock/core/types.h"

namespace airlock {

// Lexical containment rules of resolve() for a workspace-relative path:
// rejects empty input, absolute input, NUL bytes, empty / "." / ".."
// components, components over 255 bytes and totals over 4096 bytes.
// "." alone means the workspace root and is allowed. Returns the normalized
// relative path ("" for the root). Symlink checks happen where the path is
// opened (workspace/), never here. Error code: WorkspaceEscape.
Result<std::string> checkRelativePath(std::string_view path);

// argv non-empty, every element NUL-free, total under kMaxArgvBytes,
// argv[0] absolute or a bare name (no relative path with a separator),
// working_directory passing checkRelativePath, timeout and output cap
// positive. ToolValidationError naming the problem.
Result<void> validateCommand(const ExecutionCommand& command);

}  // namespace airlock
