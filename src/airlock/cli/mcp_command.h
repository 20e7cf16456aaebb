// `airlock mcp`: the model-facing tools (gateway/tools) served over the
// Model Context Protocol on stdin/stdout (gateway/mcp) for one MCP client
// session (docs/cli.md, "airlock mcp").
//
// One sandbox is provisioned when the process starts, with the same limit
// flags and defaults as `airlock run`, and destroyed when the session ends:
// EOF on stdin (the client closed it), SIGTERM or SIGINT (a command in
// progress is cancelled first and its result still sent). A sandbox that
// reaches its lifetime limit is replaced by a fresh one at the next tool
// call, and that call's result says so. stdout carries only MCP messages;
// diagnostics go to stderr.
#pragma once

#include <optional>
#include <string>

#include "airlock/cli/run_plan.h"

namespace airlock::cli {

struct McpFlags {
  // Limits, --env, --copy-in (seeds every sandbox of the session),
  // --max-output (what the model sees of stdout+stderr; the sandbox's own
  // cap is four times it), --mechanism, -v. `argv`, --json and --stdin are
  // not used.
  RunFlags run;
  // Where artifact_export writes: DIR/<artifact_id>/<filename>. Without it
  // artifact_export reports that exporting is not configured.
  std::optional<std::string> export_dir;
};

// Runs the session; returns the process exit status: 0 after a session
// that ended by EOF or a signal, 125 (one line on stderr) when the flags
// are invalid, the sandbox cannot be provisioned or destroyed, or reading
// stdin fails.
int runMcp(const McpFlags& flags, const HostLookup& host_env, const std::string& version);

}  // namespace airlock::cli
