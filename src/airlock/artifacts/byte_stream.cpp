#include "airlock/artifacts/byte_stream.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "airlock/sys/io.h"

namespace airlock::artifacts {

Result<std::size_t> StringSource::read(char* buffer, std::size_t size) {
  const std::size_t n = std::min(size, bytes_.size() - offset_);
  std::memcpy(buffer, bytes_.data() + offset_, n);
  offset_ += n;
  return n;
}

Result<std::size_t> FdSource::read(char* buffer, std::size_t size) {
  const ssize_t n = sys::readSome(fd_.get(), buffer, size);
  if (n < 0) return failErrno(ErrorCode::kExecutionUnavailable, "read artifact stream", errno);
  return static_cast<std::size_t>(n);
}

Result<std::string> readAll(ByteSource& source, std::size_t max_bytes) {
  std::string out;
  char buffer[kStreamBufferBytes];
  for (;;) {
    auto n = source.read(buffer, sizeof buffer);
    if (!n) return tl::unexpected(n.error());
    if (*n == 0) return out;
    if (out.size() + *n > max_bytes)
      return fail(ErrorCode::kExecutionRejected, "stream is larger than the read limit");
    out.append(buffer, *n);
  }
}

}  // namespace airlock::artifacts
