// Helpers shared by the artifact tests: metadata builders, counting and
// failing sources, and a listing of every path under a directory.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <ostream>
#include <string>

#include "airlock/artifacts/artifact_types.h"
#include "airlock/artifacts/byte_stream.h"
#include "airlock/artifacts/filesystem_store.h"
#include "airlock/workspace/resolve.h"

namespace airlock::artifacts::testing {

TenantId tenant(const std::string& name = "local");
Timestamp at(std::int64_t unix_ms);

// Metadata for `bytes` (size and digest computed), SANDBOX_EXPORT,
// EXTERNAL_UNTRUSTED, created at `created`, expiring 30 days later.
ArtifactMetadata metadataFor(const std::string& bytes, const TenantId& tenant_id,
                             Timestamp created = at(1'700'000'000'000));

// Deterministic pseudo-random bytes.
std::string randomBytes(std::size_t size, std::uint32_t seed);

// Hands out `bytes` in chunks of at most `chunk`, counting what it handed
// out; after `fail_after` bytes (when set) every read fails.
class CountingSource final : public ByteSource {
 public:
  CountingSource(std::string bytes, std::size_t chunk,
                 std::optional<std::size_t> fail_after = std::nullopt)
      : bytes_(std::move(bytes)), chunk_(chunk), fail_after_(fail_after) {}
  Result<std::size_t> read(char* buffer, std::size_t size) override;
  std::size_t handed_out() const { return offset_; }
  int reads() const { return reads_; }

 private:
  std::string bytes_;
  std::size_t chunk_;
  std::optional<std::size_t> fail_after_;
  std::size_t offset_ = 0;
  int reads_ = 0;
};

// Every path beneath dirfd (relative, "/"-joined, not following symlinks)
// mapped to "d", "l:<target>" or "f:<sha256>".
std::map<std::string, std::string> treeOf(int dirfd);

}  // namespace airlock::artifacts::testing

// Readable names for parameterized tests (CTest shows them).
namespace airlock::artifacts {
inline void PrintTo(TempFileMode mode, std::ostream* os) {
  *os << (mode == TempFileMode::kAuto ? "Auto" : "Named");
}
}  // namespace airlock::artifacts
namespace airlock::workspace {
inline void PrintTo(ResolverKind kind, std::ostream* os) {
  *os << (kind == ResolverKind::kOpenat2 ? "Openat2" : "NofollowWalk");
}
}  // namespace airlock::workspace
