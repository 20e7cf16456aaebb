#include "airlock/artifacts/postgres_repository.h"

#include <libpq-fe.h>

#include <array>
#include <limits>

#include "airlock/artifacts/postgres.h"
#include "airlock/artifacts/repository_rows.h"
#include "airlock/artifacts/sql_text.h"
#include "airlock/artifacts/sqlite_repository.h"  // kArtifactSchemaVersion

namespace airlock::artifacts {
namespace {

using namespace postgres;  // the libpq layer (postgres.h)

// Append only, like the SQLite list; the two share version numbers.
constexpr std::array<Migration, kArtifactSchemaVersion> kMigrations{{
    {1,
     "CREATE TABLE artifacts ("
     "  artifact_id TEXT COLLATE \"C\" PRIMARY KEY,"
     "  tenant_id TEXT COLLATE \"C\" NOT NULL,"
     "  run_id TEXT,"
     "  origin TEXT NOT NULL,"
     "  filename BYTEA NOT NULL,"
     "  media_type TEXT NOT NULL,"
     "  size_bytes BIGINT NOT NULL CHECK (size_bytes >= 0),"
     "  sha256 TEXT NOT NULL,"
     "  trust TEXT NOT NULL,"
     "  created_at_ms BIGINT NOT NULL,"
     "  expires_at_ms BIGINT);"
     "CREATE INDEX artifacts_by_expiry ON artifacts (expires_at_ms)"
     "  WHERE expires_at_ms IS NOT NULL;"
     "CREATE INDEX artifacts_by_tenant ON artifacts (tenant_id, artifact_id) INCLUDE "
     "(size_bytes);"},
}};

Result<std::vector<StoredArtifact>> collect(const PGresult* r) {
  if (columnCount(r) != 11)
    return fail(ErrorCode::kExecutionUnavailable, "corrupt artifact row: column count");
  std::vector<StoredArtifact> out;
  for (int i = 0; i < rowCount(r); ++i) {
    ArtifactRow row;
    row.artifact_id = field(r, i, 0);
    row.tenant_id = field(r, i, 1);
    if (!isNull(r, i, 2)) row.run_id = field(r, i, 2);
    row.origin = field(r, i, 3);
    row.filename = field(r, i, 4);
    row.media_type = field(r, i, 5);
    auto size = int8Field(r, i, 6);
    auto created = int8Field(r, i, 9);
    if (!size || !created)
      return fail(ErrorCode::kExecutionUnavailable, "corrupt artifact row: integer column");
    row.size_bytes = *size;
    row.sha256 = field(r, i, 7);
    row.trust = field(r, i, 8);
    row.created_at_ms = *created;
    if (!isNull(r, i, 10)) {
      auto expires = int8Field(r, i, 10);
      if (!expires)
        return fail(ErrorCode::kExecutionUnavailable, "corrupt artifact row: expires_at_ms");
      row.expires_at_ms = *expires;
    }
    auto decoded = decodeRow(row);
    if (!decoded) return tl::unexpected(decoded.error());
    out.push_back(std::move(*decoded));
  }
  return out;
}

std::int64_t clampLimit(std::size_t limit) {
  return limit > static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max())
             ? std::numeric_limits<std::int64_t>::max()
             : static_cast<std::int64_t>(limit);
}

constexpr MigrationLedger kLedger{
    "CREATE TABLE IF NOT EXISTS schema_migrations ("
    "  version INTEGER PRIMARY KEY,"
    "  applied_at_ms BIGINT NOT NULL)",
    "SELECT COALESCE(MAX(version), 0)::bigint FROM schema_migrations",
    "INSERT INTO schema_migrations (version, applied_at_ms)"
    " VALUES ($1::integer, (extract(epoch FROM clock_timestamp()) * 1000)::bigint)",
    7046311541,  // one lock key for "artifact schema migration" (an arbitrary constant)
    "artifact"};

}  // namespace

Result<std::unique_ptr<PostgresArtifactRepository>> PostgresArtifactRepository::connect(
    const std::string& conninfo) {
  auto conn = postgres::connect(conninfo);
  if (!conn) return tl::unexpected(conn.error());
  std::unique_ptr<PostgresArtifactRepository> repo(new PostgresArtifactRepository(conn->release()));
  if (auto r = migrate(repo->conn_, kLedger, kMigrations, kArtifactSchemaVersion); !r)
    return tl::unexpected(r.error());
  return repo;
}

PostgresArtifactRepository::~PostgresArtifactRepository() {
  PQfinish(conn_);
}

Result<int> PostgresArtifactRepository::schemaVersion() {
  std::lock_guard lock(mutex_);
  if (!ensureConnected(conn_)) return pgError(conn_, nullptr, "connect");
  return appliedVersion(conn_, kLedger);
}

Result<void> PostgresArtifactRepository::insert(const StoredArtifact& artifact,
                                                std::optional<std::int64_t> tenant_byte_cap) {
  ArtifactRow row = encodeRow(artifact);
  std::lock_guard lock(mutex_);
  if (!ensureConnected(conn_)) return pgError(conn_, nullptr, "connect");
  Transaction tx(conn_);
  if (auto r = tx.begin(); !r) return r;
  // Serializes inserts of one tenant until commit, so the sum below counts
  // every row committed before this one.
  if (auto r = run(conn_, "SELECT pg_advisory_xact_lock(hashtextextended($1::text, 7046))",
                   {text(row.tenant_id)});
      !r)
    return tl::unexpected(r.error());
  auto inserted =
      run(conn_,
          "INSERT INTO artifacts (artifact_id, tenant_id, run_id, origin, filename, media_type,"
          "  size_bytes, sha256, trust, created_at_ms, expires_at_ms)"
          " SELECT $1::text, $2::text, $3::text, $4::text, $5::bytea, $6::text, $7::bigint,"
          "  $8::text, $9::text, $10::bigint, $11::bigint"
          " WHERE $12::bigint IS NULL OR"
          "  (SELECT COALESCE(SUM(size_bytes), 0) FROM artifacts WHERE tenant_id = $2::text)"
          "   + $7::bigint <= $12::bigint",
          {text(row.artifact_id), text(row.tenant_id), optionalText(row.run_id), text(row.origin),
           bytes(row.filename), text(row.media_type), int64(row.size_bytes), text(row.sha256),
           text(row.trust), int64(row.created_at_ms), optionalInt64(row.expires_at_ms),
           optionalInt64(tenant_byte_cap)});
  if (!inserted) {
    if (inserted.error().code == ErrorCode::kExecutionRejected)
      return fail(ErrorCode::kExecutionRejected, "artifact id already exists");
    return tl::unexpected(inserted.error());
  }
  if (affectedRows(inserted->get()) == 0)
    return fail(ErrorCode::kExecutionRejected, "tenant artifact byte cap reached");
  return tx.commit();
}

Result<StoredArtifact> PostgresArtifactRepository::find(const ArtifactId& artifact_id) {
  std::lock_guard lock(mutex_);
  if (!ensureConnected(conn_)) return pgError(conn_, nullptr, "connect");
  auto r = run(conn_,
               "SELECT artifact_id, tenant_id, run_id, origin, filename, media_type, size_bytes,"
               "  sha256, trust, created_at_ms, expires_at_ms FROM artifacts"
               " WHERE artifact_id = $1::text",
               {text(artifact_id.str())});
  if (!r) return tl::unexpected(r.error());
  auto rows = collect(r->get());
  if (!rows) return tl::unexpected(rows.error());
  if (rows->empty()) return fail(ErrorCode::kNotFound, "artifact " + artifact_id.str());
  return std::move(rows->front());
}

Result<bool> PostgresArtifactRepository::remove(const ArtifactId& artifact_id) {
  std::lock_guard lock(mutex_);
  if (!ensureConnected(conn_)) return pgError(conn_, nullptr, "connect");
  auto r =
      run(conn_, "DELETE FROM artifacts WHERE artifact_id = $1::text", {text(artifact_id.str())});
  if (!r) return tl::unexpected(r.error());
  return affectedRows(r->get()) != 0;
}

Result<std::vector<StoredArtifact>> PostgresArtifactRepository::listExpired(Timestamp now,
                                                                            std::size_t limit) {
  std::lock_guard lock(mutex_);
  if (!ensureConnected(conn_)) return pgError(conn_, nullptr, "connect");
  auto r = run(conn_,
               "SELECT artifact_id, tenant_id, run_id, origin, filename, media_type, size_bytes,"
               "  sha256, trust, created_at_ms, expires_at_ms FROM artifacts"
               " WHERE expires_at_ms IS NOT NULL AND expires_at_ms <= $1::bigint"
               " ORDER BY expires_at_ms, artifact_id LIMIT $2::bigint",
               {int64(toUnixMs(now)), int64(clampLimit(limit))});
  if (!r) return tl::unexpected(r.error());
  return collect(r->get());
}

Result<std::vector<StoredArtifact>> PostgresArtifactRepository::listForTenant(
    const TenantId& tenant_id, std::size_t limit) {
  std::lock_guard lock(mutex_);
  if (!ensureConnected(conn_)) return pgError(conn_, nullptr, "connect");
  auto r = run(conn_,
               "SELECT artifact_id, tenant_id, run_id, origin, filename, media_type, size_bytes,"
               "  sha256, trust, created_at_ms, expires_at_ms FROM artifacts"
               " WHERE tenant_id = $1::text ORDER BY artifact_id LIMIT $2::bigint",
               {text(tenant_id.str()), int64(clampLimit(limit))});
  if (!r) return tl::unexpected(r.error());
  return collect(r->get());
}

Result<std::int64_t> PostgresArtifactRepository::tenantBytes(const TenantId& tenant_id) {
  std::lock_guard lock(mutex_);
  if (!ensureConnected(conn_)) return pgError(conn_, nullptr, "connect");
  auto r = run(conn_,
               "SELECT COALESCE(SUM(size_bytes), 0)::bigint FROM artifacts"
               " WHERE tenant_id = $1::text",
               {text(tenant_id.str())});
  if (!r) return tl::unexpected(r.error());
  auto v = int8Field(r->get(), 0, 0);
  if (!v) return fail(ErrorCode::kExecutionUnavailable, "postgres: bad sum");
  return *v;
}

}  // namespace airlock::artifacts
