// Validation of an ExecutionCommand before it reaches the execution service
// (spec 000, "sandbox.run_command": validation, in order), and the lexical
// half of WorkspaceHandle.resolve() (spec 000, "WorkspaceHandle", rules 1, 2
// and 4; red-team case B09).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/core/error.h"
#include "airlock/core/types.h"

namespace airlock {

inline constexpr std::size_t kMaxPathComponentBytes = 255;  // NAME_MAX
inline constexpr std::size_t kMaxPathBytes = 4096;          // PATH_MAX

// Why a workspace-relative path was refused (red-team case B09 codes).
enum class PathProblem {
  kEmptyComponent,  // "" , "a//b", "a/" (the empty input counts as one)
  kDotComponent,    // "." or ".." anywhere except "." alone
  kAbsolutePath,    // starts with '/'
  kNulByte,         // contains '\0'
  kNameTooLong,     // a component over 255 bytes
  kPathTooLong,     // the whole path over 4096 bytes
};
// "EMPTY_COMPONENT", "DOT_COMPONENT", "ABSOLUTE_PATH", "NUL_BYTE",
// "NAME_TOO_LONG", "PATH_TOO_LONG".
std::string_view pathProblemName(PathProblem problem) noexcept;

// The first problem found, checked in this order: empty input, NUL byte,
// absolute, total length, then each component left to right (empty, dot,
// too long). nullopt when the path is acceptable.
std::optional<PathProblem> findPathProblem(std::string_view path) noexcept;

// Lexical containment rules of resolve() for a workspace-relative path:
// rejects empty input, absolute input, NUL bytes, empty / "." / ".."
// components, components over 255 bytes and totals over 4096 bytes.
// "." alone means the workspace root and is allowed. Returns the normalized
// relative path ("" for the root; any other accepted path is returned
// unchanged, since nothing is normalized away). Symlink checks happen where
// the path is opened (workspace/), never here. Error code: WorkspaceEscape,
// with a context that names the problem in words and its B09 code, e.g.
// `path "a//b" has an empty component (EMPTY_COMPONENT) ...`.
Result<std::string> checkRelativePath(std::string_view path);

// argv non-empty, every element NUL-free, total under kMaxArgvBytes,
// argv[0] absolute or a bare name (no relative path with a separator),
// working_directory passing checkRelativePath, timeout and output cap
// positive, every env_additions entry passing checkAddedVariable
// (core/environment_tiers.h). ToolValidationError naming the problem.
Result<void> validateCommand(const ExecutionCommand& command);

// ToolValidationError unless `execution_id` is "" or at most 128 bytes of
// letters, digits and ".", "_", ":", "-" (ExecutionCommand::execution_id).
Result<void> checkExecutionId(std::string_view execution_id);
// checkExecutionId for ExecutionEnvironment::cancel, where "" is refused too.
Result<void> checkExecutionIdToCancel(std::string_view execution_id);

// How a suggested command is written back to the one who typed it.
enum class ArgvSpelling {
  kCommandLine,  // airlock run -- sh -c 'ls -la'
  kJson,         // ["sh","-c","ls -la"] (the HTTP API's argv)
};

// The one message, for the CLI and the HTTP API alike, when argv looks like
// a shell string where an argument vector belongs: its first element
// contains whitespace (["ls -la"]). It names the command and shows it run
// by sh -c in the caller's spelling:
//   the command "ls -la" is a shell string, but Airlock runs an argument
//   vector and picks no shell for you; to run it with a shell, say so:
//   airlock run -- sh -c 'ls -la'      (or ["sh","-c","ls -la"])
// nullopt when argv is empty or its first element has no whitespace.
std::optional<std::string> shellStringProblem(const std::vector<std::string>& argv,
                                              ArgvSpelling spelling);

// Quotes text for a POSIX shell with single quotes ('it'\''s').
std::string shellQuote(std::string_view text);

}  // namespace airlock
