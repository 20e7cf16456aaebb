#include "airlock/artifacts/artifact_types.h"

#include "airlock/core/encoding.h"
#include "airlock/core/enum_names.h"
#include "airlock/core/ids.h"

namespace airlock::artifacts {
namespace {

bool isTenantChar(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

// Visible ASCII; `space` also admits 0x20 (media type parameters).
bool isPrintableAscii(std::string_view text, bool space = false) noexcept {
  for (char c : text)
    if (c > 0x7e || c < (space ? 0x20 : 0x21)) return false;
  return true;
}

constexpr EnumNames<ArtifactOrigin, 6> kOrigins{{
    {ArtifactOrigin::kSandboxExport, "SANDBOX_EXPORT"},
    {ArtifactOrigin::kToolOutput, "TOOL_OUTPUT"},
    {ArtifactOrigin::kModelOutput, "MODEL_OUTPUT"},
    {ArtifactOrigin::kUpload, "UPLOAD"},
    {ArtifactOrigin::kTrajectoryExport, "TRAJECTORY_EXPORT"},
    {ArtifactOrigin::kKnowledgeSource, "KNOWLEDGE_SOURCE"},
}};

constexpr EnumNames<TrustLevel, 2> kTrust{{
    {TrustLevel::kInternalTool, "INTERNAL_TOOL"},
    {TrustLevel::kExternalUntrusted, "EXTERNAL_UNTRUSTED"},
}};

}  // namespace

Result<TenantId> TenantId::parse(std::string_view text) {
  if (text.empty() || text.size() > 64)
    return fail(ErrorCode::kToolValidationError, "tenant_id must be 1-64 bytes");
  if (text.front() == '-')
    return fail(ErrorCode::kToolValidationError, "tenant_id must not start with '-'");
  for (char c : text)
    if (!isTenantChar(c))
      return fail(ErrorCode::kToolValidationError,
                  "tenant_id may contain only letters, digits, '_' and '-'");
  return TenantId(std::string(text));
}

ArtifactId ArtifactId::generate(Timestamp now) {
  return ArtifactId(newUuidV7(now));
}

Result<ArtifactId> ArtifactId::parse(std::string_view text) {
  if (!isUuid(text))
    return fail(ErrorCode::kToolValidationError, "artifact id is not a canonical lowercase UUID");
  return ArtifactId(std::string(text));
}

std::string_view artifactOriginName(ArtifactOrigin origin) noexcept {
  return enumName(kOrigins, origin);
}

std::optional<ArtifactOrigin> parseArtifactOrigin(std::string_view name) noexcept {
  return parseEnum(kOrigins, name);
}

std::string_view trustLevelName(TrustLevel trust) noexcept {
  return enumName(kTrust, trust);
}

std::optional<TrustLevel> parseTrustLevel(std::string_view name) noexcept {
  return parseEnum(kTrust, name);
}

ArtifactRef refOf(const StoredArtifact& stored) {
  return ArtifactRef{stored.artifact_id, stored.metadata.sha256, stored.metadata.size_bytes,
                     stored.metadata.media_type};
}

bool isSha256Hex(std::string_view text) noexcept {
  return text.size() == 64 && isLowerHex(text);
}

Result<void> validateMetadata(const ArtifactMetadata& m) {
  if (!isSha256Hex(m.sha256))
    return fail(ErrorCode::kToolValidationError, "sha256 must be 64 lowercase hex digits");
  if (m.size_bytes < 0) return fail(ErrorCode::kToolValidationError, "size_bytes is negative");
  if (m.media_type.empty() || m.media_type.size() > kMaxMediaTypeBytes ||
      !isPrintableAscii(m.media_type, true))
    return fail(ErrorCode::kToolValidationError, "media_type must be 1-255 printable ASCII bytes");
  if (m.filename.size() > kMaxFilenameBytes)
    return fail(ErrorCode::kToolValidationError, "filename is longer than 4096 bytes");
  if (m.filename.find('\0') != std::string::npos)
    return fail(ErrorCode::kToolValidationError, "filename contains a NUL byte");
  if (m.run_id &&
      (m.run_id->empty() || m.run_id->size() > kMaxRunIdBytes || !isPrintableAscii(*m.run_id)))
    return fail(ErrorCode::kToolValidationError, "run_id must be 1-128 printable ASCII bytes");
  if (m.expires_at && *m.expires_at < m.created_at)
    return fail(ErrorCode::kToolValidationError, "expires_at is before created_at");
  return {};
}

}  // namespace airlock::artifacts
