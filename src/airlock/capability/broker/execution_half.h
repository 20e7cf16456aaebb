// The execution half of the capability table as the gateway sees it (spec
// 000 "Where the boundary is"; spec 001 "cap/proc", "cap/job"): what the
// half acts on, and the one function that registers it. The half itself
// (proc, fs, job) is execution/capabilities/execution_capabilities.h,
// library airlock_execution_capabilities; the gateway never includes or
// links it. The composition root (the cli's run and serve) hands
// execution::addExecutionCapabilities to the gateway as an
// AddExecutionCapabilities value, and the gateway composes a sandbox's table
// with it (capabilities.h, code_run.h). Plain data and a function type:
// library airlock_capability_broker_core.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "airlock/capability/broker/broker.h"
#include "airlock/capability/broker/job_output_sink.h"
#include "airlock/port/execution_environment.h"

namespace airlock::capability {

// The default per-stream spill cap: the artifact store's own per-artifact
// cap (artifacts::kDefaultMaxArtifactBytes, 512 MiB; the composition checks
// they agree).
inline constexpr std::uint64_t kDefaultSpillStreamBytes = std::uint64_t{512} << 20;

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
  std::shared_ptr<JobOutputSink> sink;
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

// Registers the execution half (proc, fs, job) into a table, acting on
// `services`. Empty: the table has no proc, fs or job (their calls are
// refused by name).
using AddExecutionCapabilities =
    std::function<void(CapabilityTable& table, const ExecutionCapabilityServices& services)>;

}  // namespace airlock::capability
