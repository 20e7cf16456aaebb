#include "airlock/artifacts/byte_stream.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "airlock/sys/io.h"

namespace airlock::artifacts {

Result<std::size_t> FdSource::read(char* buffer, std::size_t size) {
  const ssize_t n = sys::readSome(fd_.get(), buffer, size);
  if (n < 0) return failErrno(ErrorCode::kExecutionUnavailable, "read artifact stream", errno);
  return static_cast<std::size_t>(n);
}

}  // namespace airlock::artifacts
