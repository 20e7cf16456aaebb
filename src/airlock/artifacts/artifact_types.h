// Value types of the artifact store (spec 000, "Artifacts":
// `ArtifactMetadata` and `ArtifactRef`, ArtifactOrigin; TrustLevel as used
// by `ArtifactWriter`). Field names follow the spec exactly.
//
// TenantId and ArtifactId are validated wrappers: the only two values a
// storage key is made of (artifacts/storage_key.h). Each can be built only
// through a factory that refuses anything that could be a path component
// other than itself ('/', '.', '..', NUL, ...), so a key stays one opaque
// name per level even if a caller managed to choose a tenant string.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "airlock/core/error.h"
#include "airlock/core/types.h"

namespace airlock::artifacts {

// A tenant as the platform names it: 1-64 bytes of [A-Za-z0-9_-], not
// starting with '-' ("local" for the CLI, UUIDs for the service).
class TenantId {
 public:
  // ToolValidationError naming the rule that failed.
  static Result<TenantId> parse(std::string_view text);
  const std::string& str() const noexcept { return value_; }
  bool operator==(const TenantId&) const = default;

 private:
  explicit TenantId(std::string value) : value_(std::move(value)) {}
  std::string value_;
};

// An artifact's identifier: a UUIDv7 in canonical lowercase form
// (core/ids.h). generate() is the only way the store makes one; parse()
// accepts any canonical UUID (ids come back from the API and the database).
class ArtifactId {
 public:
  static ArtifactId generate(Timestamp now);
  static Result<ArtifactId> parse(std::string_view text);  // ToolValidationError
  const std::string& str() const noexcept { return value_; }
  bool operator==(const ArtifactId&) const = default;
  bool operator<(const ArtifactId& other) const noexcept { return value_ < other.value_; }

 private:
  explicit ArtifactId(std::string value) : value_(std::move(value)) {}
  std::string value_;
};

enum class ArtifactOrigin {
  kSandboxExport,
  kToolOutput,
  kModelOutput,
  kUpload,
  kTrajectoryExport,
  kKnowledgeSource,
};
std::string_view artifactOriginName(ArtifactOrigin origin) noexcept;  // "SANDBOX_EXPORT", ...
std::optional<ArtifactOrigin> parseArtifactOrigin(std::string_view name) noexcept;

// The trust label bytes carry (spec 000 names INTERNAL_TOOL and
// EXTERNAL_UNTRUSTED; anything a sandbox produced is EXTERNAL_UNTRUSTED).
enum class TrustLevel { kInternalTool, kExternalUntrusted };
std::string_view trustLevelName(TrustLevel trust) noexcept;  // "INTERNAL_TOOL", ...
std::optional<TrustLevel> parseTrustLevel(std::string_view name) noexcept;

// What the store holds about an artifact. size_bytes and sha256 are what
// the producer claims; put() refuses bytes that do not match them.
struct ArtifactMetadata {
  TenantId tenant_id;
  std::optional<std::string> run_id;  // nullopt only for an unclaimed upload
  ArtifactOrigin origin = ArtifactOrigin::kSandboxExport;
  // Metadata only, never a path: raw bytes as the producer named the file
  // (need not be UTF-8), kept unsanitized; sanitized only when a download
  // is written to a user's disk.
  std::string filename;
  std::string media_type;
  std::int64_t size_bytes = 0;
  std::string sha256;  // 64 lowercase hex digits
  TrustLevel trust = TrustLevel::kExternalUntrusted;
  Timestamp created_at;
  std::optional<Timestamp> expires_at;  // nullopt: kept until deleted (KNOWLEDGE_SOURCE)
  bool operator==(const ArtifactMetadata&) const = default;
};

// What travels (tool results, events, API responses): no filename, no
// tenant, no path.
struct ArtifactRef {
  ArtifactId artifact_id;
  std::string sha256;
  std::int64_t size_bytes = 0;
  std::string media_type;
  bool operator==(const ArtifactRef&) const = default;
};

// An artifact as the metadata repository returns it.
struct StoredArtifact {
  ArtifactId artifact_id;
  ArtifactMetadata metadata;
  bool operator==(const StoredArtifact&) const = default;
};

ArtifactRef refOf(const StoredArtifact& stored);

// Limits on caller-supplied metadata text (bytes).
inline constexpr std::size_t kMaxFilenameBytes = 4096;
inline constexpr std::size_t kMaxMediaTypeBytes = 255;
inline constexpr std::size_t kMaxRunIdBytes = 128;

bool isSha256Hex(std::string_view text) noexcept;  // 64 lowercase hex digits

// Checks everything put() needs before it reads a byte: sha256 shape,
// size_bytes >= 0, media_type 1-255 printable ASCII bytes, filename at most
// 4096 bytes with no NUL, run_id 1-128 visible ASCII bytes when present,
// expires_at not before created_at. ToolValidationError naming the field.
Result<void> validateMetadata(const ArtifactMetadata& metadata);

}  // namespace airlock::artifacts
