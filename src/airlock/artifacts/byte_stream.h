// Pull streams of bytes, the shape both directions of the artifact store
// take (spec 000, "ArtifactStore": put streams in, open streams out; no
// object is ever held whole in memory).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "airlock/core/error.h"
#include "airlock/sys/byte_source.h"
#include "airlock/sys/unique_fd.h"

namespace airlock::artifacts {

// The size of the buffer put() and the readers below move bytes with.
inline constexpr std::size_t kStreamBufferBytes = 64 * 1024;

// The pull stream and the in-memory source live in sys/ (byte_source.h),
// shared with the workspace's exports.
using sys::ByteSource;
using sys::readAll;
using sys::StringSource;

// Reads an owned fd to its end (EINTR handled; sys/io.h).
class FdSource final : public ByteSource {
 public:
  explicit FdSource(sys::UniqueFd fd) : fd_(std::move(fd)) {}
  Result<std::size_t> read(char* buffer, std::size_t size) override;

 private:
  sys::UniqueFd fd_;
};

}  // namespace airlock::artifacts
