// The capabilities a sandbox's broker serves itself (spec 001 "cap/proc",
// "cap/job", "Durable code-mode notes"; docs/capabilities.md
// has every capability's arguments, result and refusal codes).
//
//   proc.run    one command to completion, as a side process in the sandbox
//   fs.read / fs.write / fs.list   through the workspace port (containment)
//   notes.put / notes.get / notes.list   a JSON blackboard per execution
//   job.start / job.poll / job.wait / job.send / job.send_last / job.kill /
//   job.list    background side processes with cursors over a bounded tail,
//               each stream's whole output spilled to the artifact store
//               once the job is terminal (JobSpillServices)
//   net.fetch   one HTTP(S) request through the outbound guard
//               (egress/outbound_guard.h), decided by the same decide() as
//               the sandbox proxy against the execution's egress policy
//   schedule.every / schedule.at / schedule.cron / schedule.after /
//   schedule.list / schedule.cancel   durable schedules (schedule.h)
// strand/peer/workflow/mcp go to a platform route when one is added
// to the table (CapabilityTable::addModuleRoute), else are refused by name.
//
// Every argument parser here is total over any wire Value: a wrong shape is
// the refusal "bad_request" naming the field, never an exception.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "airlock/artifacts/artifact_store.h"
#include "airlock/artifacts/artifact_writer.h"
#include "airlock/capability/broker/broker.h"
#include "airlock/capability/schedule/schedule.h"
#include "airlock/core/types.h"
#include "airlock/egress/outbound_guard.h"
#include "airlock/port/execution_environment.h"

namespace airlock::capability {

// Per-stream caps of a proc.run result (stdout and stderr each); the rest is
// dropped and the result says "stdout_truncated" / "stderr_truncated".
inline constexpr std::size_t kProcRunStreamCap = std::size_t{4} << 20;
// The rolling tail a job keeps per stream.
inline constexpr std::size_t kJobTailBytes = std::size_t{64} << 10;
// The largest file fs.read returns and fs.write accepts.
inline constexpr std::size_t kFsMaxBytes = std::size_t{8} << 20;
// Notes: key length, encoded value size, and keys per execution.
inline constexpr std::size_t kNoteKeyMaxBytes = 256;
inline constexpr std::size_t kNoteValueMaxBytes = std::size_t{64} << 10;

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
tl::expected<ProcRequest, wire::Refusal> parseProcRequest(const wire::Value& args,
                                                          bool allow_stdin);

// What net.fetch decides and dials with: the execution's egress policy
// (EnvironmentSpec.egress compiled with egress::compilePolicy), the resolver
// and the address classifier, exactly as the sandbox proxy has them. A null
// policy (or resolver, or classifier) refuses every URL with "mode_deny"
// without a lookup. `limits` are the guard's caps; each call's transfer is
// further cut to its timeout_ms and to the call's deadline.
struct NetServices {
  std::shared_ptr<const egress::Policy> policy;
  std::shared_ptr<egress::Resolver> resolver;
  std::shared_ptr<const egress::AddressClassifier> classifier;
  egress::OutboundLimits limits;
};

// The production composition for an execution: `egress` compiled by
// egress::compilePolicy (a deny policy refuses everything), the platform
// resolver (GetaddrinfoResolver) and the production classifier (fixed
// denylist plus this host's interface addresses), as the proxy has them
// (execution/egress_runtime.cpp). Errors: ConfigurationError from compilePolicy.
Result<NetServices> productionNetServices(const airlock::EgressPolicy& egress);

// net.fetch's arguments:
//   {url: str, method: str (optional, GET|HEAD|POST|PUT|PATCH|DELETE),
//    headers: {str: str} (optional), body: str | bin (optional),
//    timeout_ms: uint (optional; 0 or absent: the call's deadline alone)}
struct NetFetchRequest {
  egress::OutboundRequest request;
  std::chrono::milliseconds timeout{0};
};
tl::expected<NetFetchRequest, wire::Refusal> parseNetFetchRequest(const wire::Value& args);

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
// is stored through `writer` as "<job_id>.stdout" / "<job_id>.stderr", media
// type "text/plain; charset=utf-8" when every spooled byte is UTF-8 and
// "application/octet-stream" otherwise, trust EXTERNAL_UNTRUSTED (tenant,
// run and origin are the writer's scope). An empty stream gets no artifact:
// its spill reports size 0 and the digest of no bytes. The job stays
// `pending` until both streams are stored or have failed, so a program that
// polls until `pending` is false always sees the spill.
//
// Failures never touch the job's state, exit code or tail: a spool that
// cannot be opened or written, or a put() the writer refuses, makes that
// stream's spill an error string and nothing else.
//
// Host resources: at most 2 * max_stream_bytes of spool per job while it
// runs (the spawn ceiling bounds the jobs). A spool file is closed (and so
// gone) when its stream is stored, or when the table is destroyed: that
// kills every job, abandons any spill in progress (the put fails, no
// artifact) and joins the pumps, so no spool outlives the table.
//
// A null writer spools nothing; each stream of a terminal job's spill is
// then the error string "no artifact store is configured for job output".
struct JobSpillServices {
  // Called from each job's pump thread, possibly several at once (the
  // writer of makeArtifactWriter is safe so when its store is: every store
  // here is). The writer, and the store it writes to, must outlive the table.
  std::shared_ptr<artifacts::ArtifactWriter> writer;
  std::string spool_dir = "/var/tmp";
  // Per stream; the default is the store's own per-artifact cap.
  std::uint64_t max_stream_bytes = static_cast<std::uint64_t>(artifacts::kDefaultMaxArtifactBytes);
  // Per execution: every stream of every job together (the host disk the
  // spool may take, 32 jobs x 2 streams notwithstanding). Bytes past it are
  // dropped and counted like bytes past max_stream_bytes.
  std::uint64_t max_total_bytes = std::uint64_t{1} << 30;
};

// What the capabilities act on. The table keeps the environment pointer:
// the environment must outlive the table (and the session holding it).
struct SandboxServices {
  ExecutionEnvironment* env = nullptr;
  EnvironmentHandle handle;
  NetServices net;  // default: every URL refused (mode_deny)
  // Where schedule.* keeps its schedules (creator: handle.environment_id);
  // a null store: schedule.* is refused "unavailable" (no metadata database).
  schedule::ScheduleServices schedule;
  // Where jobs' whole output is spilled; default: a null writer, no spill.
  JobSpillServices job_spill;
};

// A table with every capability above. Jobs and notes live as long as the
// table: destroying it kills every job still running.
std::shared_ptr<CapabilityTable> makeSandboxCapabilities(const SandboxServices& services);

// The policy that allows everything makeSandboxCapabilities serves.
Policy defaultCodeModePolicy();

}  // namespace airlock::capability
