// Background jobs of one environment (spec 001 "cap/job" and "Explicit
// session-lifetime background jobs"; docs/capabilities.md "job.*",
// docs/serve.md "Jobs"): side processes (SideProcess) that the execution
// side keeps running after the request or program that started them has
// returned, each with a rolling tail per stream, byte-offset cursors and,
// once terminal, its whole output handed to a JobOutputSink (the spill).
//
// One implementation behind three doors: code mode's job.*, the HTTP routes
// /v1/environments/{id}/jobs and the job_* tools all call this port, so a
// job one door started is listed, polled, fed and killed through any other.
// The registry is per environment and owned by the execution node
// (execution/node.h LocalNode; execution/job_engine.h is the engine): jobs
// die with their environment (destroy, the reaper, destroyAll).
//
// Shaped to cross a wire: ids, byte strings and plain values in and out,
// never a host fd or a thread. Two members are in-process forms that a
// remote node would replace: the spill sink (a stream back to the gateway)
// and the poll's CancelToken (a cancel message).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "airlock/capability/broker/job_output_sink.h"
#include "airlock/core/error.h"
#include "airlock/core/types.h"
#include "airlock/port/cancel_token.h"
#include "airlock/port/execution_environment.h"

namespace airlock {

// The default per-stream spill cap: the artifact store's own per-artifact
// cap (artifacts::kDefaultMaxArtifactBytes, 512 MiB; the composition checks
// they agree).
inline constexpr std::uint64_t kDefaultSpillStreamBytes = std::uint64_t{512} << 20;
// The rolling tail a job keeps per stream.
inline constexpr std::size_t kJobTailBytes = std::size_t{64} << 10;
// The longest a poll may wait (JobPollRequest::wait_ms is clamped to it).
inline constexpr std::uint64_t kMaxJobWaitMs = 60'000;

// Where each job's whole stdout and stderr go once the job is terminal
// (spec 001 "cap/job", `Job.spill`; docs/capabilities.md "job.*"). The
// gateway supplies it with each start: the execution side holds no store.
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
// `pending` until both streams are stored or have failed, so a caller that
// polls until `pending` is false always sees the spill.
//
// Failures never touch the job's state, exit code or tail: a spool that
// cannot be opened or written, or a store() the sink refuses, makes that
// stream's spill an error string and nothing else.
//
// Host resources: at most 2 * max_stream_bytes of spool per job while it
// runs. A spool file is closed (and so gone) when its stream is stored, or
// when the environment's jobs are closed: that kills every job, abandons any
// spill in progress (the source's read fails, nothing is stored) and joins
// the pumps, so no spool outlives the environment.
//
// A null sink spools nothing; each stream of a terminal job's spill is then
// the error string "no artifact store is configured for job output".
struct JobSpillSettings {
  // Called from each job's pump thread, possibly several at once. The sink,
  // and what it stores into, must outlive the job.
  std::shared_ptr<capability::JobOutputSink> sink;
  std::string spool_dir = "/var/tmp";
  std::uint64_t max_stream_bytes = kDefaultSpillStreamBytes;  // per stream
  // Per environment: every stream of every job together (the host disk the
  // spool may take). Bytes past it are dropped and counted like bytes past
  // max_stream_bytes.
  std::uint64_t max_total_bytes = std::uint64_t{1} << 30;
};

struct JobStartRequest {
  // with_stdin is forced on: a job's input is fed with sendJobInput.
  // command.terminal set: a PTY job (SideCommand::terminal): its one output
  // is stdout (stderr stays empty), with the terminal's echo of what is
  // typed and "\r\n" line ends; its size changes with resizeJob.
  SideCommand command;
  // The job's wall-clock budget, fixed at start and never renewed; at its
  // end the job's process group is killed (kill reason "deadline"). It
  // never outlives its environment: at the environment's expires_at (which
  // an extension moves) the job dies with it (kill reason
  // "environment_destroyed"). nullopt: the node's default
  // (JobSettings::default_wall_ms). 0: for the environment's whole life
  // ("session lifetime"), refused (ExecutionRejected) where the node does
  // not allow it (JobSettings::allow_session_lifetime).
  std::optional<std::uint64_t> wall_ms;
  JobSpillSettings spill;
};

struct JobStarted {
  std::string job_id;  // "job-N", unique within the environment
  // What was granted: the wall asked for, cut to what was left before the
  // environment's expires_at at start; 0 for a session-lifetime job.
  std::uint64_t wall_ms = 0;
  // Wall clock, milliseconds: the earlier of the job's own deadline and the
  // environment's expires_at (a poll or a listing reports it again as of
  // then, after any extension).
  Timestamp deadline;
};

enum class JobState { kRunning, kExited, kKilled };
// Why a killed job was killed.
enum class JobKillReason {
  kNone,         // not killed
  kRequested,    // killJob
  kDeadline,     // its wall deadline passed
  kEnvironment,  // its environment was destroyed (the record is gone with it)
};

constexpr const char* jobStateName(JobState s) {
  switch (s) {
    case JobState::kRunning:
      return "running";
    case JobState::kExited:
      return "exited";
    case JobState::kKilled:
      break;
  }
  return "killed";
}

// nullptr for kNone.
constexpr const char* jobKillReasonName(JobKillReason r) {
  switch (r) {
    case JobKillReason::kRequested:
      return "requested";
    case JobKillReason::kDeadline:
      return "deadline";
    case JobKillReason::kEnvironment:
      return "environment_destroyed";
    case JobKillReason::kNone:
      break;
  }
  return nullptr;
}

// The part of one stream after the caller's cursor. Cursors are byte
// offsets into the stream; output older than the tail is counted in
// `dropped` (it left the window unread; the spill still has it).
struct JobStreamSlice {
  std::string data;
  std::uint64_t cursor = 0;  // the stream's total so far: the next poll's cursor
  std::uint64_t dropped = 0;
};

// What one stream's spill came to.
struct JobStreamSpill {
  std::optional<std::string> error;        // set: nothing was stored, and why
  std::optional<std::string> artifact_id;  // nullopt for an empty stream
  std::string media_type;                  // of the artifact, when there is one
  std::string sha256;                      // of the bytes spooled
  std::uint64_t size_bytes = 0;
  std::uint64_t dropped_bytes = 0;  // past max_stream_bytes or max_total_bytes
};

struct JobSnapshot {
  std::string job_id;
  std::vector<std::string> argv;
  JobState state = JobState::kRunning;
  JobKillReason kill_reason = JobKillReason::kNone;
  std::optional<int> exit_code;  // exited: the main process's exit code
  std::optional<int> signal;     // the signal that ended the main process
  // True until the job is terminal and its spill settled.
  bool pending = true;
  JobStreamSlice out;  // listJobs: data empty, cursor the stream's total
  JobStreamSlice err;
  std::optional<std::pair<JobStreamSpill, JobStreamSpill>> spill;  // set once not pending
  std::uint64_t wall_ms = 0;                                       // as JobStarted
  Timestamp deadline;
  // A PTY job: its terminal's size (as started, or as last resized).
  std::optional<TerminalSize> terminal;
};

struct JobPollRequest {
  std::string job_id;
  std::uint64_t stdout_cursor = 0;
  std::uint64_t stderr_cursor = 0;
  // 0: answer at once; otherwise wait (at most kMaxJobWaitMs) until a
  // cursor moves past the caller's, the job settles or this passes.
  std::uint64_t wait_ms = 0;
  const CancelToken* cancel = nullptr;  // a cancelled token ends the wait
};

// Errors of every method: ExecutionRejected for an environment that is not
// live (never provisioned by this node, or destroyed); NotFound, "no job is
// named '<id>'", for an unknown job id.
class JobPort {
 public:
  virtual ~JobPort() = default;
  // Starts a job. Errors besides the above: those of startSideProcess;
  // ExecutionRejected for a session-lifetime job where not allowed, or when
  // the environment already runs its maximum number of jobs.
  virtual Result<JobStarted> startJob(const EnvironmentHandle& handle,
                                      const JobStartRequest& request) = 0;
  virtual Result<JobSnapshot> pollJob(const EnvironmentHandle& handle,
                                      const JobPollRequest& request) = 0;
  // Writes `bytes` to the job's stdin, waiting for room at most timeout_ms
  // (or until `cancel`); `last` then closes it. For a PTY job, `last` types
  // the terminal's end-of-file character (^D) once instead: the program
  // reads end-of-file at the start of a line, and the terminal stays open
  // for more input. Errors besides the above: ExecutionRejected "the job's
  // input is closed" (a PTY job's, once its terminal is gone); EnvironmentBusy
  // "the job did not take its input in time".
  virtual Result<void> sendJobInput(const EnvironmentHandle& handle, const std::string& job_id,
                                    std::string_view bytes, bool last, std::uint64_t timeout_ms,
                                    const CancelToken* cancel) = 0;
  // Sets a PTY job's terminal size (its foreground process gets SIGWINCH);
  // later snapshots report it. Errors besides the above: ToolValidationError
  // for a job started without a terminal, or a size checkTerminalSize
  // refuses (naming rows or columns); ExecutionRejected "the job has ended"
  // once the job's process has exited or was killed.
  virtual Result<void> resizeJob(const EnvironmentHandle& handle, const std::string& job_id,
                                 const TerminalSize& size) = 0;
  // SIGKILL to the job's process group (kill reason "requested"); a job
  // already over stays as it ended. Does not wait for the pump.
  virtual Result<void> killJob(const EnvironmentHandle& handle, const std::string& job_id) = 0;
  // Every job of the environment, oldest first.
  virtual Result<std::vector<JobSnapshot>> listJobs(const EnvironmentHandle& handle) = 0;
};

// What a node allows its jobs (an operator's choice; docs/serve.md "Jobs").
struct JobSettings {
  // A job started without wall_ms runs at most this long (30 minutes), and
  // never past its environment's life, like every job.
  std::uint64_t default_wall_ms = 30 * 60 * 1000;
  // Whether wall_ms 0 (the environment's whole life) is granted. Allowed by
  // default: such a job still ends at the environment's expires_at.
  bool allow_session_lifetime = true;
  // Jobs running at once per environment; finished records past
  // max_kept_jobs are forgotten, oldest first.
  std::size_t max_running_jobs = 64;
  std::size_t max_kept_jobs = 256;
};

}  // namespace airlock
