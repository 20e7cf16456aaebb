#include "airlock/artifacts/repository_rows.h"

namespace airlock::artifacts {
namespace {
tl::unexpected<Error> corrupt(const char* column) {
  return storage::corruptRow("artifact", column);
}
}  // namespace

std::int64_t toUnixMs(Timestamp t) noexcept {
  return t.time_since_epoch().count();
}
Timestamp fromUnixMs(std::int64_t ms) noexcept {
  return Timestamp(std::chrono::milliseconds(ms));
}

ArtifactRow encodeRow(const StoredArtifact& a) {
  const ArtifactMetadata& m = a.metadata;
  ArtifactRow row;
  row.artifact_id = a.artifact_id.str();
  row.tenant_id = m.tenant_id.str();
  row.run_id = m.run_id;
  row.origin = std::string(artifactOriginName(m.origin));
  row.filename = m.filename;
  row.media_type = m.media_type;
  row.size_bytes = m.size_bytes;
  row.sha256 = m.sha256;
  row.trust = std::string(trustLevelName(m.trust));
  row.created_at_ms = toUnixMs(m.created_at);
  if (m.expires_at) row.expires_at_ms = toUnixMs(*m.expires_at);
  return row;
}

Result<StoredArtifact> decodeRow(const ArtifactRow& row) {
  auto id = ArtifactId::parse(row.artifact_id);
  if (!id) return corrupt("artifact_id");
  auto tenant = TenantId::parse(row.tenant_id);
  if (!tenant) return corrupt("tenant_id");
  auto origin = parseArtifactOrigin(row.origin);
  if (!origin) return corrupt("origin");
  auto trust = parseTrustLevel(row.trust);
  if (!trust) return corrupt("trust");
  if (row.size_bytes < 0) return corrupt("size_bytes");
  if (!isSha256Hex(row.sha256)) return corrupt("sha256");
  ArtifactMetadata m{std::move(*tenant), row.run_id,     *origin,
                     row.filename,       row.media_type, row.size_bytes,
                     row.sha256,         *trust,         fromUnixMs(row.created_at_ms),
                     std::nullopt};
  if (row.expires_at_ms) m.expires_at = fromUnixMs(*row.expires_at_ms);
  return StoredArtifact{std::move(*id), std::move(m)};
}

std::vector<storage::Value> rowValues(ArtifactRow row) {
  return {storage::text(std::move(row.artifact_id)),
          storage::text(std::move(row.tenant_id)),
          storage::optionalText(row.run_id),
          storage::text(std::move(row.origin)),
          storage::bytes(std::move(row.filename)),
          storage::text(std::move(row.media_type)),
          storage::int64(row.size_bytes),
          storage::text(std::move(row.sha256)),
          storage::text(std::move(row.trust)),
          storage::int64(row.created_at_ms),
          storage::optionalInt64(row.expires_at_ms)};
}

Result<StoredArtifact> readArtifact(const storage::Row& r) {
  storage::ColumnReader c(r, "artifact");
  ArtifactRow row;
  row.artifact_id = c.text(0);
  row.tenant_id = c.text(1);
  row.run_id = c.optionalText(2);
  row.origin = c.text(3);
  row.filename = c.text(4);
  row.media_type = c.text(5);
  row.size_bytes = c.int64(6, "size_bytes");
  row.sha256 = c.text(7);
  row.trust = c.text(8);
  row.created_at_ms = c.int64(9, "created_at_ms");
  row.expires_at_ms = c.optionalInt64(10, "expires_at_ms");
  if (auto ok = c.status(); !ok) return tl::unexpected(ok.error());
  return decodeRow(row);
}

}  // namespace airlock::artifacts
