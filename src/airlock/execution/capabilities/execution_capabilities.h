// The execution side's capabilities (spec 000 "Where the boundary is", "The
// execution service holds nothing worth stealing"; spec 001 "cap/proc",
// "cap/job"; docs/capabilities.md has every capability's arguments, result
// and refusal codes): the ones that act on one sandbox through the port
// (port/execution_environment.h) and hold nothing else.
//
//   proc.run   one command to completion, as a side process in the sandbox
//   fs.read / fs.write / fs.list   through the workspace port (containment)
//   job.start / job.start_for_session / job.poll / job.wait / job.send /
//   job.send_last / job.kill / job.resize / job.list   the environment's
//              background jobs (job.start's pty: a PTY job, resized by
//              job.resize)
//              (port/job_port.h; the execution node keeps them): cursors
//              over a bounded tail, each stream's whole output spooled on
//              the host and handed, once the job is terminal, to a
//              JobOutputSink (JobSpillSettings)
//
// They register into a CapabilityTable (capability/broker/broker.h) beside
// the gateway's notes, net and schedule (gateway/capabilities); the one table
// code mode serves is composed in capability/broker/capabilities.h. This
// library (airlock_execution_capabilities) links the port, the wire, the
// broker's table types and sys: no credential, no database, no outbound
// network. A job's output leaves through the sink the gateway supplies
// (capability/broker/job_output_sink.h), never through a store linked here.
//
// Every argument parser here is total over any wire Value: a wrong shape is
// the refusal "bad_request" naming the field, never an exception. Errors of
// the port map to "workspace_escape", "not_found", "bad_request", "rejected"
// and "unavailable".
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "airlock/capability/broker/broker.h"
#include "airlock/capability/broker/execution_half.h"
#include "airlock/port/execution_environment.h"

namespace airlock::execution {

// Per-stream caps of a proc.run result (stdout and stderr each); the rest is
// dropped and the result says "stdout_truncated" / "stderr_truncated".
inline constexpr std::size_t kProcRunStreamCap = std::size_t{4} << 20;
// The largest file fs.read returns and fs.write accepts.
inline constexpr std::size_t kFsMaxBytes = std::size_t{8} << 20;

// proc.run's and job.start's arguments:
//   {argv: [str, ...] (non-empty), cwd: str (optional, relative to
//    /workspace), env: {str: str} (optional, added to the sandbox's),
//    stdin: str | bin (optional; proc.run only), timeout_ms: uint (optional;
//    0 or absent: the call's deadline alone)}
struct ProcRequest {
  SideCommand command;
  std::optional<std::string> stdin_data;
  std::chrono::milliseconds timeout{0};
};
// The parsed request, or the refusal ("bad_request") naming the field.
tl::expected<ProcRequest, capability::wire::Refusal> parseProcRequest(
    const capability::wire::Value& args, bool allow_stdin);

// JobSpillServices and ExecutionCapabilityServices, what the capabilities
// act on, are in capability/broker/execution_half.h: the gateway composes a
// table with this half without including this header.
using capability::ExecutionCapabilityServices;
using capability::JobSpillServices;
using capability::kDefaultSpillStreamBytes;

// Adds proc.run (ceiling spawn), fs.read / fs.write / fs.list, and job.*
// (job.start, job.start_for_session: spawn; job.send, job.send_last: send)
// to `table`. Jobs are services.jobs' (the environment's registry, which
// outlives the table); with none, the table keeps its own and destroying
// the table kills every job still running.
void addExecutionCapabilities(capability::CapabilityTable& table,
                              const ExecutionCapabilityServices& services);

}  // namespace airlock::execution
