// The model-facing tool layer (spec 000, "sandbox.run_command", "WorkspaceHandle",
// "ArtifactWriter"), independent of any transport: the
// HTTP routes `/v1/tools/{name}` and `airlock mcp` both call it.
//
// A tool is a name, the description the model reads, a JSON Schema for its
// arguments and one for its result, and a call function. A call takes the
// model's JSON arguments (untrusted) and a ToolContext (trusted: built by
// the platform from the authenticated request) and returns either a JSON
// result or a ToolFailure. Nothing a model can send makes a call throw:
// ToolRegistry::call catches anything that escapes a tool as a bug.
//
// This is gateway code: it holds the ExecutionEnvironment port and never a
// mechanism (gate_no_runtime_in_worker walks these includes).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <tl/expected.hpp>

#include "airlock/core/error.h"
#include "airlock/core/types.h"
#include "airlock/gateway/tools/artifact_exporter.h"
#include "airlock/port/cancel_token.h"
#include "airlock/port/execution_environment.h"
#include "airlock/port/job_port.h"

namespace airlock::gateway {

// Why a call produced no result.
//
// code is kToolValidationError for anything wrong with the arguments
// (spec: ToolValidationError; a WorkspaceEscape from the containment rules
// arrives here as ToolValidationError too, as the spec's pipeline maps it),
// and then `argument` names the offending argument ("command",
// "command[2]", "working_directory", "path"), and the message starts with
// it. Any other code is a failure of the call itself, passed through from
// the port (NotFound, ExecutionRejected, ExecutionUnavailable,
// SandboxEscapeSuspected, ...) with `argument` empty unless one argument is
// the cause (a path that does not exist: NotFound, argument "path").
struct ToolFailure {
  ErrorCode code = ErrorCode::kToolValidationError;
  std::string argument;
  std::string message;

  bool isValidation() const noexcept { return code == ErrorCode::kToolValidationError; }
  bool operator==(const ToolFailure&) const = default;
};

using ToolResult = tl::expected<nlohmann::json, ToolFailure>;

// Everything a call needs besides the model's arguments. Built by the
// caller for each call from the authenticated request (HTTP) or the session
// (MCP); nothing in it comes from the model. The pointers are borrowed for
// the duration of the call.
struct ToolContext {
  std::string tenant_id;
  std::string run_id;
  // The run's sandbox. Its tenant and run must equal tenant_id and run_id
  // (a mismatch is ExecutionRejected before anything is touched).
  EnvironmentHandle environment;
  ExecutionEnvironment* execution = nullptr;  // required
  // Where artifact_export and the run_command truncation path put bytes;
  // nullptr: artifact_export fails with ExecutionUnavailable, and truncated
  // output is returned as an excerpt only (with a warning).
  ArtifactExporter* artifacts = nullptr;
  // The environment's jobs (port/job_port.h), for the job_* tools: the
  // same registry as code mode's job.* and the HTTP job routes. nullptr:
  // the job_* tools fail with ExecutionUnavailable.
  JobPort* jobs = nullptr;
  // Where a job_start job's whole output is spilled (a null sink: not kept).
  JobSpillSettings job_spill;
  // Cancels a running sandbox_run_command (killed_by CANCELLED).
  const CancelToken* cancel = nullptr;
  // Called each time a running sandbox_run_command produces output, on the
  // thread running it (ExecutionEnvironment::OutputSink's rules: it must not
  // block). Empty: the command runs without streaming.
  std::function<void()> on_output;
  // Inputs to the timeout rule (core/timeout_rule.h) the tool cannot know:
  // the environment's limits.wall_clock_seconds (nullopt: the hard cap
  // alone) and the run's remaining budget (nullopt: no run deadline).
  std::optional<std::chrono::seconds> spec_wall_clock;
  std::optional<std::chrono::seconds> remaining_run_budget;
};

// Operator settings of the tool layer. Defaults are the spec's declared
// values for sandbox_run_command (timeout_s 300, max_output_bytes 1 MiB).
struct ToolOptions {
  std::chrono::seconds service_hard_cap{1800};
  std::chrono::seconds declared_timeout{300};
  // What the model sees of stdout and stderr together; output above it is
  // cut to a head-and-tail excerpt and the whole of it exported as an
  // artifact. The execution service's own cap (maximum_output_bytes of
  // the command) is four times this: the spec's hard ceiling.
  std::int64_t max_output_bytes = 1048576;
  std::chrono::seconds minimum_floor{5};         // remaining budget under it: not started
  std::int64_t read_text_max_bytes = 1048576;    // workspace_read_text returns at most this
  std::int64_t write_text_max_bytes = 16 << 20;  // workspace_write_text accepts at most this
  std::int64_t list_max_entries = 1000;          // workspace_list returns at most this
  // An environment's lifetime and the hard cap extend cannot pass (the
  // environment_lifetime and environment_hard_cap settings): the tool
  // descriptions tell the model how long its sandbox lives.
  std::chrono::seconds environment_lifetime{1800};
  std::chrono::seconds environment_hard_cap{1800};
};

using ToolFunction =
    std::function<ToolResult(const nlohmann::json& arguments, ToolContext& context)>;

struct Tool {
  std::string name;              // "sandbox_run_command"
  std::string title;             // short human-readable name
  std::string description;       // what the model reads
  nlohmann::json input_schema;   // JSON Schema (draft 2020-12) of the arguments object
  nlohmann::json output_schema;  // JSON Schema of a successful result
  bool read_only = false;        // touches nothing (MCP annotation readOnlyHint)
  bool idempotent = false;       // MCP annotation idempotentHint
  ToolFunction call;
};

}  // namespace airlock::gateway
