#include "airlock/execution/job_spool.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "airlock/core/encoding.h"
#include "airlock/sys/byte_source.h"
#include "airlock/sys/io.h"

namespace airlock::execution {

namespace {

// The length a lead byte announces; 0 for a continuation or invalid byte.
std::size_t sequenceLength(unsigned char b) {
  if (b < 0x80) return 1;
  if ((b & 0xE0) == 0xC0) return 2;
  if ((b & 0xF0) == 0xE0) return 3;
  if ((b & 0xF8) == 0xF0) return 4;
  return 0;
}

// How many bytes at the end start a sequence the data does not finish.
std::size_t incompleteTail(std::string_view data) {
  for (std::size_t i = 1; i <= std::min<std::size_t>(3, data.size()); ++i) {
    const auto b = static_cast<unsigned char>(data[data.size() - i]);
    if ((b & 0xC0) == 0x80) continue;
    const std::size_t len = sequenceLength(b);
    return len > i ? i : 0;
  }
  return 0;
}

// A spool file from its start, for the sink. Fails once the table is being
// destroyed, which is how a spill in progress is abandoned.
class SpoolSource final : public sys::ByteSource {
 public:
  SpoolSource(sys::UniqueFd fd, const std::atomic<bool>& stopping)
      : fd_(std::move(fd)), stopping_(stopping) {}
  Result<std::size_t> read(char* buffer, std::size_t size) override {
    if (stopping_.load())
      return fail(ErrorCode::kExecutionUnavailable,
                  "the execution ended before the spill was stored");
    const ssize_t n = sys::preadSome(fd_.get(), buffer, size, offset_);
    if (n < 0) return failErrno(ErrorCode::kExecutionUnavailable, "read the spool file", errno);
    offset_ += n;
    return static_cast<std::size_t>(n);
  }

 private:
  sys::UniqueFd fd_;
  const std::atomic<bool>& stopping_;
  off_t offset_ = 0;
};

}  // namespace

void Utf8Tracker::feed(std::string_view data) {
  if (!valid_) return;
  if (!carry_.empty()) {
    const std::size_t need = sequenceLength(static_cast<unsigned char>(carry_[0])) - carry_.size();
    if (data.size() < need) {
      carry_.append(data);
      return;
    }
    carry_.append(data.substr(0, need));
    data.remove_prefix(need);
    valid_ = isValidUtf8(carry_);
    carry_.clear();
    if (!valid_) return;
  }
  const std::size_t cut = incompleteTail(data);
  valid_ = isValidUtf8(data.substr(0, data.size() - cut));
  if (valid_) carry_.assign(data.substr(data.size() - cut));
}

Result<sys::UniqueFd> openSpoolFile(const std::string& dir) {
  sys::UniqueFd fd(::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  if (fd.valid()) return fd;
  // EOPNOTSUPP: the filesystem has no O_TMPFILE; EISDIR: the kernel has none.
  if (errno != EOPNOTSUPP && errno != EISDIR)
    return failErrno(ErrorCode::kExecutionUnavailable,
                     "open(O_TMPFILE) in the spool directory " + dir, errno);
  std::string path = dir + "/airlock-job-spool-XXXXXX";
  fd.reset(::mkostemp(path.data(), O_CLOEXEC));
  if (!fd.valid())
    return failErrno(ErrorCode::kExecutionUnavailable, "mkstemp in the spool directory " + dir,
                     errno);
  if (::unlink(path.c_str()) != 0)
    return failErrno(ErrorCode::kExecutionUnavailable, "unlink a spool file in " + dir, errno);
  return fd;
}

void StreamSpool::append(const JobSpillSettings& cfg, std::atomic<std::uint64_t>& spooled_total,
                         const char* data, std::size_t size) {
  if (error) return;
  const std::uint64_t room = cfg.max_stream_bytes - std::min(cfg.max_stream_bytes, written);
  const std::uint64_t want = std::min<std::uint64_t>(room, size);
  std::uint64_t used = spooled_total.load();
  std::uint64_t grant = 0;
  do grant = std::min(want, cfg.max_total_bytes - std::min(cfg.max_total_bytes, used));
  while (grant > 0 && !spooled_total.compare_exchange_weak(used, used + grant));
  const auto take = static_cast<std::size_t>(grant);
  dropped += size - take;
  if (take == 0) return;
  if (!fd.valid()) {
    auto opened = openSpoolFile(cfg.spool_dir);
    if (!opened) {
      error = "spooling failed: " + opened.error().message();
      return;
    }
    fd = std::move(*opened);
  }
  if (!sys::writeAll(fd.get(), data, take)) {
    error = "spooling failed after " + std::to_string(written) + " bytes: " + std::strerror(errno);
    fd.reset();
    return;
  }
  hash.update(data, take);
  utf8.feed(std::string_view(data, take));
  written += take;
}

StreamSpill storeSpill(const JobSpillSettings& cfg, std::string filename,
                       std::optional<StreamSpool>& spool, const std::atomic<bool>& stopping) {
  StreamSpill r;
  if (!spool) {
    r.error = "no artifact store is configured for job output";
    return r;
  }
  r.size_bytes = spool->written;
  r.dropped_bytes = spool->dropped;
  if (spool->error) {
    r.error = *spool->error;
    return r;
  }
  r.sha256 = spool->hash.finishHex();
  if (spool->written == 0) return r;
  r.media_type = spool->utf8.valid() ? "text/plain; charset=utf-8" : "application/octet-stream";
  capability::JobOutput output;
  output.size_bytes = spool->written;
  output.sha256 = r.sha256;
  output.filename = std::move(filename);
  output.media_type = r.media_type;
  output.source = std::make_unique<SpoolSource>(std::move(spool->fd), stopping);
  auto stored = cfg.sink->store(std::move(output));
  if (!stored) {
    r.error = "storing the spill failed: " + stored.error().message();
    r.media_type.clear();
    return r;
  }
  r.artifact_id = std::move(stored->artifact_id);
  r.media_type = std::move(stored->media_type);
  return r;
}

}  // namespace airlock::execution
