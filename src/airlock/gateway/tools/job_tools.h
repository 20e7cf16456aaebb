// The job_* tools (job_start, job_poll, job_send, job_kill, job_resize, job_list) and
// the JSON a job is shown as, shared with the HTTP job routes
// (gateway/api/jobs.cpp; docs/serve.md "Jobs"): one implementation, the
// environment's JobPort (port/job_port.h), behind every door.
#pragma once

#include <nlohmann/json.hpp>

#include "airlock/gateway/tools/tool_registry.h"
#include "airlock/port/job_port.h"

namespace airlock::gateway {

// {job_id, argv, state, exit_code, signal, kill_reason, pending, wall_ms,
// deadline, spill, pty ({rows, columns} of a PTY job, null otherwise)} and, with_output, stdout and
// stderr as {data, cursor, dropped}; without, stdout_cursor and stderr_cursor (the streams'
// totals). Bytes that are not UTF-8 are {"base64": ...}.
nlohmann::json jobJson(const JobSnapshot& job, bool with_output);
// {job_id, stdout_cursor: 0, stderr_cursor: 0, wall_ms, deadline}.
nlohmann::json jobStartedJson(const JobStarted& started);

// A terminal size as the job routes and tools take it: an object
// {"rows": R, "columns": C}, both required, each a whole number from 1 to
// kMaxTerminalCells, no other key. `where` names the object in messages
// ("pty" for job_start's and the start route's member; "" for the resize
// route's whole body and job_resize's arguments): ToolValidationError
// naming the offending key, e.g. "pty.rows must be a whole number from 1
// to 1000", "pty.columns is required: ..." or "pty: unknown key \"cols\"
// (known keys: rows, columns)".
Result<TerminalSize> terminalSizeFromJson(const nlohmann::json& value, std::string_view where);

// Registers the six job tools (tool_registry.h lists them).
void addJobTools(ToolRegistry& registry);

}  // namespace airlock::gateway
