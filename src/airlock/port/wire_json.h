// The JSON of the execution node's internal API (spec 000, "Where the
// boundary is": what crosses the line is the port's own values): the
// values of port/execution_node.h, port/execution_environment.h and
// port/job_port.h that core/json.h does not already encode. Both sides of
// the wire link this one codec (library airlock_port_wire: no runtime, no
// database, no HTTP): the node's InternalApi encodes what RemoteNode
// decodes and the reverse.
//
// The rules are core/json.h's (byte strings as a string or
// {"base64": ...}, timestamps RFC 3339 UTC with milliseconds, optional
// fields null or absent, unknown members ignored). Field names:
//   Error             code (core/error.h's lower_snake_case name), message
//   NodeStatus        name, live, capacity
//   LiveEnvironment   handle, provisioned_ms_ago (the node's steady clock
//                     does not cross machines: the age of the environment
//                     when encoded, in milliseconds, made a local
//                     time_point again when decoded), busy_ns,
//                     wall_clock_seconds, destroy_failures, egress,
//                     image_digest
//   WorkspaceEntry    name (bytes), type ("file" | "directory" | "symlink" |
//                     "other"), size_bytes
//   WorkspaceStat     type, size_bytes, mode, mtime_ns
//   WorkspaceProvenance  "unknown" | "tool_written" | "sandbox_written"
//   TerminalSize      rows, columns (each 1..kMaxTerminalCells)
//   SideCommand       argv (bytes each), working_directory, env (object),
//                     with_stdin, terminal (null or TerminalSize)
//   JobStartRequest   command (SideCommand), wall_ms (null or a count); the
//                     spill sink does not cross
//   JobStarted        job_id, wall_ms, deadline
//   JobStreamSlice    data (bytes), cursor, dropped
//   JobStreamSpill    error, artifact_id (null or string), media_type,
//                     sha256, size_bytes, dropped_bytes
//   JobSnapshot       job_id, argv, state ("running" | "exited" |
//                     "killed"), kill_reason (null or "requested" |
//                     "deadline" | "environment_destroyed"), exit_code,
//                     signal, pending, stdout, stderr (JobStreamSlice),
//                     spill (null or {stdout, stderr} of JobStreamSpill),
//                     wall_ms, deadline, terminal
//   JobPollRequest    job_id, stdout_cursor, stderr_cursor, wait_ms (at
//                     most kMaxJobWaitMs); the cancel token does not cross
//
// Decoding is total: from_json throws only JsonFieldError (naming the
// field), and wireFromJson/wireMember turn every failure into a
// ToolValidationError, so a malformed message never escapes as an
// exception.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "airlock/core/error.h"
#include "airlock/core/json.h"
#include "airlock/port/execution_environment.h"
#include "airlock/port/execution_node.h"
#include "airlock/port/job_port.h"

namespace airlock {

void to_json(nlohmann::json& j, const Error& v);
void from_json(const nlohmann::json& j, Error& v);
void to_json(nlohmann::json& j, const NodeStatus& v);
void from_json(const nlohmann::json& j, NodeStatus& v);
void to_json(nlohmann::json& j, const LiveEnvironment& v);
void from_json(const nlohmann::json& j, LiveEnvironment& v);
void to_json(nlohmann::json& j, const WorkspaceEntry& v);
void from_json(const nlohmann::json& j, WorkspaceEntry& v);
void to_json(nlohmann::json& j, const WorkspaceStat& v);
void from_json(const nlohmann::json& j, WorkspaceStat& v);
void to_json(nlohmann::json& j, WorkspaceProvenance v);
void from_json(const nlohmann::json& j, WorkspaceProvenance& v);
void to_json(nlohmann::json& j, const TerminalSize& v);
void from_json(const nlohmann::json& j, TerminalSize& v);
void to_json(nlohmann::json& j, const SideCommand& v);
void from_json(const nlohmann::json& j, SideCommand& v);
void to_json(nlohmann::json& j, const JobStartRequest& v);
void from_json(const nlohmann::json& j, JobStartRequest& v);
void to_json(nlohmann::json& j, const JobStarted& v);
void from_json(const nlohmann::json& j, JobStarted& v);
void to_json(nlohmann::json& j, const JobStreamSlice& v);
void from_json(const nlohmann::json& j, JobStreamSlice& v);
void to_json(nlohmann::json& j, const JobStreamSpill& v);
void from_json(const nlohmann::json& j, JobStreamSpill& v);
void to_json(nlohmann::json& j, const JobSnapshot& v);
void from_json(const nlohmann::json& j, JobSnapshot& v);
void to_json(nlohmann::json& j, const JobPollRequest& v);
void from_json(const nlohmann::json& j, JobPollRequest& v);

// The error code whose errorCodeName is `name`; nullopt for any other text.
std::optional<ErrorCode> parseErrorCode(std::string_view name) noexcept;

// A decoded value, or ToolValidationError "invalid JSON: field ... " naming
// what is wrong. Never throws.
template <class T>
Result<T> wireFromJson(const nlohmann::json& j) {
  try {
    return j.get<T>();
  } catch (const JsonFieldError& e) {
    return fail(ErrorCode::kToolValidationError, "invalid JSON: " + e.describe());
  } catch (const nlohmann::json::exception& e) {
    return fail(ErrorCode::kToolValidationError,
                "invalid JSON: " + json_detail::withoutExceptionTag(e.what()));
  }
}

// The member `name` of object `j`, decoded; its absence, or a value that is
// not an object at all, is a ToolValidationError naming the field.
template <class T>
Result<T> wireMember(const nlohmann::json& j, const char* name) {
  if (!j.is_object())
    return fail(ErrorCode::kToolValidationError, "invalid JSON: must be an object");
  const auto it = j.find(name);
  if (it == j.end())
    return fail(ErrorCode::kToolValidationError,
                std::string("invalid JSON: field \"") + name + "\" is missing");
  auto decoded = wireFromJson<T>(*it);
  if (!decoded) {
    std::string context = decoded.error().context;
    constexpr std::string_view kPrefix = "invalid JSON: ";
    if (context.starts_with(kPrefix)) context.erase(0, kPrefix.size());
    return fail(ErrorCode::kToolValidationError,
                std::string("invalid JSON: in \"") + name + "\": " + context);
  }
  return decoded;
}

}  // namespace airlock
