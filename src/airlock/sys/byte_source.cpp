#include "airlock/sys/byte_source.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "airlock/sys/io.h"

namespace airlock::sys {

Result<std::size_t> StringSource::read(char* buffer, std::size_t size) {
  const std::size_t n = std::min(size, bytes_.size() - offset_);
  std::memcpy(buffer, bytes_.data() + offset_, n);
  offset_ += n;
  return n;
}

Result<std::string> readAll(ByteSource& source, std::size_t max_bytes) {
  std::string out;
  char buffer[64 * 1024];
  for (;;) {
    auto n = source.read(buffer, sizeof buffer);
    if (!n) return tl::unexpected(n.error());
    if (*n == 0) return out;
    if (out.size() + *n > max_bytes)
      return fail(ErrorCode::kExecutionRejected, "stream is larger than the read limit");
    out.append(buffer, *n);
  }
}

Result<std::size_t> DigestCheckedFileSource::read(char* buffer, std::size_t size) {
  if (finished_) return std::size_t{0};
  const ssize_t n = preadSome(fd_.get(), buffer, size, static_cast<off_t>(offset_));
  if (n < 0) return failErrno(ErrorCode::kExecutionUnavailable, std::string(words_.reading), errno);
  offset_ += n;
  if (offset_ > expected_size_)
    return fail(ErrorCode::kArtifactIntegrityError, std::string(words_.longer));
  if (n > 0) {
    hash_.update(buffer, static_cast<std::size_t>(n));
    return static_cast<std::size_t>(n);
  }
  finished_ = true;
  if (offset_ != expected_size_ || hash_.finishHex() != expected_sha256_)
    return fail(ErrorCode::kArtifactIntegrityError, std::string(words_.changed));
  return std::size_t{0};
}

}  // namespace airlock::sys
