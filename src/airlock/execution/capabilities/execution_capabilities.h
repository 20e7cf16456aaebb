// The execution side's capabilities (spec 000 "Where the boundary is", "The
// execution service holds nothing worth stealing"; spec 001 "cap/proc",
// "cap/job"; docs/capabilities.md has every capability's arguments, result
// and refusal codes): the ones that act on one sandbox through the port
// (port/execution_environment.h) and hold nothing else.
//
//   proc.run   one command to completion, as a side process in the sandbox
//   fs.read / fs.write / fs.list   through the workspace port (containment)
//   job.start / job.poll / job.wait / job.send / job.send_last / job.kill /
//   job.list   background side processes with cursors over a bounded tail,
//              each stream's whole output spooled on the host and handed,
//              once the job is terminal, to a JobOutputSink (JobSpillServices)
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
#include "airlock/capability/broker/job_output_sink.h"
#include "airlock/port/execution_environment.h"

namespace airlock::execution {

// Per-stream caps of a proc.run result (stdout and stderr each); the rest is
// dropped and the result says "stdout_truncated" / "stderr_truncated".
inline constexpr std::size_t kProcRunStreamCap = std::size_t{4} << 20;
// The rolling tail a job keeps per stream.
inline constexpr std::size_t kJobTailBytes = std::size_t{64} << 10;
// The largest file fs.read returns and fs.write accepts.
inline constexpr std::size_t kFsMaxBytes = std::size_t{8} << 20;
// The default per-stream spill cap: the artifact store's own per-artifact
// cap (artifacts::kDefaultMaxArtifactBytes, 512 MiB; the composition checks
// they agree).
inline constexpr std::uint64_t kDefaultSpillStreamBytes = std::uint64_t{512} << 20;

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

// Where each job's whole stdout and stderr go once the job is terminal
// (spec 001 "cap/job", `Job.spill`; docs/capabilities.md "job.*").
//
// While a job runs, its pump thread copies every byte of each stream, beside
// the rolling tail, into an unnamed host file in `spool_dir` (O_TMPFILE; on a
// filesystem without it, mkstemp and an immediate unlink), hashing as it
// writes (SHA-256). The file is opened at the stream's first byte. A stream
// spools at most `max_stream_bytes`; later bytes are counted
// (`dropped_bytes`) and the spill says `truncated`. When the job has exited
// or was killed and both streams reached end of file, each non-empty stream
// is handed to `sink` as "<job_id>.stdout" / "<job_id>.stderr", media type
// "text/plain; charset=utf-8" when every spooled byte is UTF-8 and
// "application/octet-stream" otherwise. An empty stream is not handed on:
// its spill reports size 0 and the digest of no bytes. The job stays
// `pending` until both streams are stored or have failed, so a program that
// polls until `pending` is false always sees the spill.
//
// Failures never touch the job's state, exit code or tail: a spool that
// cannot be opened or written, or a store() the sink refuses, makes that
// stream's spill an error string and nothing else.
//
// Host resources: at most 2 * max_stream_bytes of spool per job while it
// runs (the spawn ceiling bounds the jobs). A spool file is closed (and so
// gone) when its stream is stored, or when the table is destroyed: that
// kills every job, abandons any spill in progress (the source's read fails,
// nothing is stored) and joins the pumps, so no spool outlives the table.
//
// A null sink spools nothing; each stream of a terminal job's spill is then
// the error string "no artifact store is configured for job output".
struct JobSpillServices {
  // Called from each job's pump thread, possibly several at once. The sink,
  // and what it stores into, must outlive the table.
  std::shared_ptr<capability::JobOutputSink> sink;
  std::string spool_dir = "/var/tmp";
  std::uint64_t max_stream_bytes = kDefaultSpillStreamBytes;  // per stream
  // Per execution: every stream of every job together (the host disk the
  // spool may take, 32 jobs x 2 streams notwithstanding). Bytes past it are
  // dropped and counted like bytes past max_stream_bytes.
  std::uint64_t max_total_bytes = std::uint64_t{1} << 30;
};

// What the capabilities act on. The table keeps the environment pointer:
// the environment must outlive the table (and the session holding it), and
// be set before any call is served (a table built without one serves only
// to list names).
struct ExecutionCapabilityServices {
  ExecutionEnvironment* env = nullptr;
  EnvironmentHandle handle;
  JobSpillServices job_spill;  // default: a null sink, no spill
};

// Adds proc.run (ceiling spawn), fs.read / fs.write / fs.list, and job.*
// (job.start: spawn; job.send, job.send_last: send) to `table`. Jobs live as
// long as the table's handlers: destroying the table kills every job still
// running.
void addExecutionCapabilities(capability::CapabilityTable& table,
                              const ExecutionCapabilityServices& services);

}  // namespace airlock::execution
