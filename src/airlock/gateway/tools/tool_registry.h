// The set of model-facing tools, looked up by name, and the one entry point
// transports call (HTTP `/v1/tools/{name}`, MCP `tools/call`).
//
// builtinTools() registers, in this order:
//   sandbox_run_command  run an argument vector in the sandbox (spec 000,
//                        "sandbox.run_command": validation order, result shape)
//   workspace_read_text  read a UTF-8 file of the workspace
//   workspace_write_text create or replace a UTF-8 file of the workspace
//   workspace_list       list a workspace directory
//   artifact_export      make a workspace file, or text, an artifact the user
//                        receives (spec 000, "ArtifactWriter")
//   job_start, job_poll, job_send, job_kill, job_resize, job_list
//                        the environment's background jobs (job_tools.h;
//                        ToolContext::jobs)
// Each tool's header comment, description and schemas are in builtin_tools.cpp;
// docs/cli.md shows them as a model sees them.
#pragma once

#include <string_view>
#include <vector>

#include "airlock/gateway/tools/tool.h"

namespace airlock::gateway {

class ToolRegistry {
 public:
  // A tool with the name of one already registered replaces it.
  void add(Tool tool);
  const std::vector<Tool>& tools() const noexcept { return tools_; }
  const Tool* find(std::string_view name) const noexcept;

  // Calls the named tool. Never throws: an unknown name is a ToolFailure
  // (ToolValidationError, argument "name"); a context without an execution
  // port or whose environment belongs to another tenant or run is
  // ExecutionRejected; arguments that are not a JSON object are
  // ToolValidationError (argument "arguments"); an exception escaping a tool
  // (a bug) becomes ExecutionUnavailable "internal error in <tool>".
  ToolResult call(std::string_view name, const nlohmann::json& arguments,
                  ToolContext& context) const noexcept;

 private:
  std::vector<Tool> tools_;
};

ToolRegistry builtinTools(const ToolOptions& options = {});

// Validates, then runs sandbox_run_command's arguments; exposed for tests
// and for callers that only want the validation. The ExecutionCommand the
// tool would send, or the first failure in the spec's order:
//   1. command is an array (a string gets a message teaching the vector
//      form), non-empty, every element a string;
//   2. no element contains NUL; the vector is at most 64 KiB (kMaxArgvBytes);
//   3. command[0] is absolute or a bare name;
//   4. working_directory (default ".") passes the containment rules;
//   5. timeout_seconds, when given, is a positive integer, clamped to the
//      declared timeout (300); then the minimum rule over it, the service
//      hard cap, the context's spec wall clock and remaining budget gives
//      the command's timeout (without it: the smallest of the other three);
//   6. no argument other than these three.
// maximum_output_bytes is four times options.max_output_bytes.
tl::expected<ExecutionCommand, ToolFailure> planRunCommand(const nlohmann::json& arguments,
                                                           const ToolContext& context,
                                                           const ToolOptions& options);

}  // namespace airlock::gateway
