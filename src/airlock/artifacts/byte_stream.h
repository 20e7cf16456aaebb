// Pull streams of bytes, the shape both directions of the artifact store
// take (spec 000, "ArtifactStore": put streams in, open streams out; no
// object is ever held whole in memory).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "airlock/core/error.h"
#include "airlock/sys/unique_fd.h"

namespace airlock::artifacts {

// The size of the buffer put() and the readers below move bytes with.
inline constexpr std::size_t kStreamBufferBytes = 64 * 1024;

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Reads up to `size` bytes into `buffer`; 0 means the end of the stream.
  // An error ends the stream: a consumer (put) abandons what it has, which
  // is how a producer cancels.
  virtual Result<std::size_t> read(char* buffer, std::size_t size) = 0;
};

// Bytes already in memory (tests, small tool outputs). Copies `bytes`.
class StringSource final : public ByteSource {
 public:
  explicit StringSource(std::string bytes) : bytes_(std::move(bytes)) {}
  Result<std::size_t> read(char* buffer, std::size_t size) override;

 private:
  std::string bytes_;
  std::size_t offset_ = 0;
};

// Reads an owned fd to its end (EINTR handled; sys/io.h).
class FdSource final : public ByteSource {
 public:
  explicit FdSource(sys::UniqueFd fd) : fd_(std::move(fd)) {}
  Result<std::size_t> read(char* buffer, std::size_t size) override;

 private:
  sys::UniqueFd fd_;
};

// Drains a source into a string, refusing more than max_bytes
// (ExecutionRejected). For tests and small reads only.
Result<std::string> readAll(ByteSource& source, std::size_t max_bytes);

}  // namespace airlock::artifacts
