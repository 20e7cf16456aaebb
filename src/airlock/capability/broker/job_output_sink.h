// Where a job's whole output goes once the job is terminal (spec 001
// "cap/job", `Job.spill`; docs/capabilities.md "job.*"): the port between
// the execution side's jobs (execution/capabilities, which spool each stream
// and hold no store) and whatever keeps the bytes on the gateway side (the
// artifact store: gateway/capabilities/job_output_artifacts.h). Both sides
// include this header; neither includes the other.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "airlock/core/error.h"
#include "airlock/sys/byte_source.h"

namespace airlock::capability {

// One terminal, non-empty stream of one job. The bytes are the sandbox's:
// a sink stores them as untrusted (EXTERNAL_UNTRUSTED).
struct JobOutput {
  // The stream's bytes from the first, exactly size_bytes of them. Its
  // read() fails (ExecutionUnavailable) once the execution ends, which is
  // how a store in progress is abandoned; a sink passes the error on.
  std::unique_ptr<sys::ByteSource> source;
  std::uint64_t size_bytes = 0;
  std::string sha256;      // lowercase hex, of the bytes source yields
  std::string filename;    // "<job_id>.stdout" or "<job_id>.stderr"
  std::string media_type;  // "text/plain; charset=utf-8" or "application/octet-stream"
};

// What a sink made of it.
struct StoredJobOutput {
  std::string artifact_id;
  std::string media_type;  // as stored (a sink may normalize it)
};

class JobOutputSink {
 public:
  virtual ~JobOutputSink() = default;
  // Reads `output.source` to its end and keeps the bytes. Called from jobs'
  // pump threads, possibly several at once: an implementation is safe so.
  // Errors: the store's (the job reports them per stream and is otherwise
  // untouched).
  virtual Result<StoredJobOutput> store(JobOutput output) = 0;
};

}  // namespace airlock::capability
