// Inside airlock_execution_node: one job stream's host spool and its
// hand-off to the JobOutputSink (the spill; JobSpillSettings in
// port/job_port.h says what is kept, where, and how much).
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "airlock/core/error.h"
#include "airlock/port/job_port.h"
#include "airlock/sys/sha256.h"
#include "airlock/sys/unique_fd.h"

namespace airlock::execution {

// Whether bytes read in chunks are UTF-8 so far. A sequence split between
// chunks is carried (at most 3 bytes) and completed from the next chunk.
class Utf8Tracker {
 public:
  void feed(std::string_view data);
  // At the end of the stream: nothing left half-finished.
  bool valid() const { return valid_ && carry_.empty(); }

 private:
  bool valid_ = true;
  std::string carry_;
};

// An unnamed file in `dir` for one stream's spool: O_TMPFILE, or where the
// filesystem has none, mkstemp and an immediate unlink. Errors:
// ExecutionUnavailable naming the step and the directory.
Result<sys::UniqueFd> openSpoolFile(const std::string& dir);

// One stream's host copy while its job runs. Touched by the pump thread only.
struct StreamSpool {
  sys::UniqueFd fd;  // opened at the first byte kept
  sys::Sha256 hash;
  std::uint64_t written = 0;
  std::uint64_t dropped = 0;
  std::optional<std::string> error;  // the spool failed; the stream spills nothing
  Utf8Tracker utf8;

  // `spooled_total` counts what every stream of the execution has spooled,
  // against cfg.max_total_bytes: a byte is kept only when both the stream's
  // cap and the execution's budget have room.
  void append(const JobSpillSettings& cfg, std::atomic<std::uint64_t>& spooled_total,
              const char* data, std::size_t size);
};

using StreamSpill = JobStreamSpill;

// Hands a terminal stream's spool to cfg.sink as `filename` (a null spool:
// the spill reports that no store is configured). Once `stopping` is set,
// the source's reads fail, which abandons a store in progress.
StreamSpill storeSpill(const JobSpillSettings& cfg, std::string filename,
                       std::optional<StreamSpool>& spool, const std::atomic<bool>& stopping);

}  // namespace airlock::execution
