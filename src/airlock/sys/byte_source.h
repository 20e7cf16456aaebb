// Pull streams of bytes: the one shape in which bytes move between the
// workspace, the port and the artifact store (spec 000, "ArtifactStore":
// put streams in, open streams out; "WorkspaceHandle": an export is a
// stream), so that nothing is held whole in memory and nothing needs a
// host fd on the consumer's side.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "airlock/core/error.h"
#include "airlock/sys/sha256.h"
#include "airlock/sys/unique_fd.h"

namespace airlock::sys {

// A producer of bytes, read from the start in chunks. One thread at a time.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Reads up to `size` bytes into `buffer`; 0 means the end of the stream.
  // An error ends the stream: a consumer abandons what it has, which is how
  // a producer cancels.
  virtual Result<std::size_t> read(char* buffer, std::size_t size) = 0;
};

// Bytes already in memory (tests, small tool outputs, a file read whole).
class StringSource final : public ByteSource {
 public:
  explicit StringSource(std::string bytes) : bytes_(std::move(bytes)) {}
  Result<std::size_t> read(char* buffer, std::size_t size) override;

 private:
  std::string bytes_;
  std::size_t offset_ = 0;
};

// Drains a source into a string, refusing more than max_bytes
// (ExecutionRejected). For tests and small reads only.
Result<std::string> readAll(ByteSource& source, std::size_t max_bytes);

// What a DigestCheckedFileSource says when it fails, in the words of its
// user: `reading` names the read (an ExecutionUnavailable with errno),
// `longer` and `changed` are the ArtifactIntegrityError texts for more bytes
// than expected and for a different length or digest at the end.
struct DigestCheckWords {
  std::string_view reading;
  std::string_view longer;
  std::string_view changed;
};

// Reads a regular file from offset 0 with pread (the fd's own offset is
// never used, so no one else's view of it matters), checking the bytes
// against a size and SHA-256 measured earlier: more bytes than expected end
// the stream at once, and at the end the length and digest must match, or
// the last read fails. Either way a consumer keeps nothing of the stream.
// Owns the fd.
class DigestCheckedFileSource final : public ByteSource {
 public:
  DigestCheckedFileSource(UniqueFd fd, std::int64_t size_bytes, std::string sha256_hex,
                          DigestCheckWords words)
      : fd_(std::move(fd)),
        expected_size_(size_bytes),
        expected_sha256_(std::move(sha256_hex)),
        words_(words) {}
  Result<std::size_t> read(char* buffer, std::size_t size) override;

 private:
  UniqueFd fd_;
  std::int64_t expected_size_;
  std::string expected_sha256_;
  DigestCheckWords words_;
  std::int64_t offset_ = 0;
  Sha256 hash_;
  bool finished_ = false;
};

}  // namespace airlock::sys
