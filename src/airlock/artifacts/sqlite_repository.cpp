#include "airlock/artifacts/sqlite_repository.h"

#include <array>
#include <limits>

#include "airlock/artifacts/repository_rows.h"

namespace airlock::artifacts {
namespace {

using sqlite::Step;

using sqlite::Migration;
using sqlite::Transaction;

// Append only: a released migration is never edited.
constexpr std::array<Migration, kArtifactSchemaVersion> kMigrations{{
    {1,
     "CREATE TABLE artifacts ("
     "  artifact_id TEXT PRIMARY KEY NOT NULL,"
     "  tenant_id TEXT NOT NULL,"
     "  run_id TEXT,"
     "  origin TEXT NOT NULL,"
     "  filename BLOB NOT NULL,"
     "  media_type TEXT NOT NULL,"
     "  size_bytes INTEGER NOT NULL CHECK (size_bytes >= 0),"
     "  sha256 TEXT NOT NULL,"
     "  trust TEXT NOT NULL,"
     "  created_at_ms INTEGER NOT NULL,"
     "  expires_at_ms INTEGER"
     ") WITHOUT ROWID;"
     "CREATE INDEX artifacts_by_expiry ON artifacts (expires_at_ms)"
     "  WHERE expires_at_ms IS NOT NULL;"
     "CREATE INDEX artifacts_by_tenant ON artifacts (tenant_id, artifact_id, size_bytes);"},
}};

ArtifactRow rowFrom(const sqlite::Statement& s) {
  ArtifactRow row;
  row.artifact_id = s.text(0);
  row.tenant_id = s.text(1);
  if (!s.isNull(2)) row.run_id = s.text(2);
  row.origin = s.text(3);
  row.filename = s.text(4);
  row.media_type = s.text(5);
  row.size_bytes = s.int64(6);
  row.sha256 = s.text(7);
  row.trust = s.text(8);
  row.created_at_ms = s.int64(9);
  if (!s.isNull(10)) row.expires_at_ms = s.int64(10);
  return row;
}

Result<std::vector<StoredArtifact>> collect(sqlite::Statement& stmt) {
  std::vector<StoredArtifact> out;
  for (;;) {
    auto step = stmt.step();
    if (!step) return tl::unexpected(step.error());
    if (*step == Step::kDone) return out;
    auto decoded = decodeRow(rowFrom(stmt));
    if (!decoded) return tl::unexpected(decoded.error());
    out.push_back(std::move(*decoded));
  }
}

std::int64_t clampLimit(std::size_t limit) {
  return limit > static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max())
             ? std::numeric_limits<std::int64_t>::max()
             : static_cast<std::int64_t>(limit);
}

constexpr sqlite::MigrationTable kMigrationTable{
    "CREATE TABLE IF NOT EXISTS schema_migrations ("
    "  version INTEGER PRIMARY KEY NOT NULL,"
    "  applied_at_ms INTEGER NOT NULL)",
    "SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
    "INSERT INTO schema_migrations (version, applied_at_ms)"
    " VALUES (?1, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER))",
    "artifact"};

Result<int> currentVersion(sqlite::Database& db) {
  return sqlite::appliedVersion(db, kMigrationTable);
}

Result<void> migrate(sqlite::Database& db) {
  return sqlite::migrate(db, kMigrationTable, kMigrations, kArtifactSchemaVersion);
}

}  // namespace

Result<std::unique_ptr<SqliteArtifactRepository>> SqliteArtifactRepository::open(
    const std::string& path) {
  auto db = sqlite::Database::open(path);
  if (!db) return tl::unexpected(db.error());
  if (auto r = migrate(*db); !r) return tl::unexpected(r.error());
  return std::unique_ptr<SqliteArtifactRepository>(new SqliteArtifactRepository(std::move(*db)));
}

Result<int> SqliteArtifactRepository::schemaVersion() {
  std::lock_guard lock(mutex_);
  return currentVersion(db_);
}

Result<void> SqliteArtifactRepository::insert(const StoredArtifact& artifact,
                                              std::optional<std::int64_t> tenant_byte_cap) {
  const ArtifactRow row = encodeRow(artifact);
  std::lock_guard lock(mutex_);
  // The write lock is taken before the sum is read, so the cap check and
  // the insert see the same total.
  Transaction tx(db_);
  if (auto r = tx.beginImmediate(); !r) return r;
  auto stmt = db_.prepare(
      "INSERT INTO artifacts (artifact_id, tenant_id, run_id, origin, filename, media_type,"
      "  size_bytes, sha256, trust, created_at_ms, expires_at_ms)"
      " SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11"
      " WHERE ?12 IS NULL OR"
      "  (SELECT COALESCE(SUM(size_bytes), 0) FROM artifacts WHERE tenant_id = ?2) + ?7 <= ?12");
  if (!stmt) return tl::unexpected(stmt.error());
  stmt->bind(1, std::string_view(row.artifact_id))
      .bind(2, std::string_view(row.tenant_id))
      .bind(3, row.run_id)
      .bind(4, std::string_view(row.origin))
      .bindBlob(5, row.filename)
      .bind(6, std::string_view(row.media_type))
      .bind(7, row.size_bytes)
      .bind(8, std::string_view(row.sha256))
      .bind(9, std::string_view(row.trust))
      .bind(10, row.created_at_ms)
      .bind(11, row.expires_at_ms)
      .bind(12, tenant_byte_cap);
  auto step = stmt->step();
  if (!step) {
    if (step.error().code == ErrorCode::kExecutionRejected)
      return fail(ErrorCode::kExecutionRejected, "artifact id already exists");
    return tl::unexpected(step.error());
  }
  if (db_.changes() == 0)
    return fail(ErrorCode::kExecutionRejected, "tenant artifact byte cap reached");
  return tx.commit();
}

Result<StoredArtifact> SqliteArtifactRepository::find(const ArtifactId& artifact_id) {
  std::lock_guard lock(mutex_);
  auto stmt = db_.prepare(
      "SELECT artifact_id, tenant_id, run_id, origin, filename, media_type, size_bytes, sha256,"
      "  trust, created_at_ms, expires_at_ms FROM artifacts WHERE artifact_id = ?1");
  if (!stmt) return tl::unexpected(stmt.error());
  stmt->bind(1, std::string_view(artifact_id.str()));
  auto rows = collect(*stmt);
  if (!rows) return tl::unexpected(rows.error());
  if (rows->empty()) return fail(ErrorCode::kNotFound, "artifact " + artifact_id.str());
  return std::move(rows->front());
}

Result<bool> SqliteArtifactRepository::remove(const ArtifactId& artifact_id) {
  std::lock_guard lock(mutex_);
  auto stmt = db_.prepare("DELETE FROM artifacts WHERE artifact_id = ?1");
  if (!stmt) return tl::unexpected(stmt.error());
  stmt->bind(1, std::string_view(artifact_id.str()));
  if (auto r = stmt->step(); !r) return tl::unexpected(r.error());
  return db_.changes() > 0;
}

Result<std::vector<StoredArtifact>> SqliteArtifactRepository::listExpired(Timestamp now,
                                                                          std::size_t limit) {
  std::lock_guard lock(mutex_);
  auto stmt = db_.prepare(
      "SELECT artifact_id, tenant_id, run_id, origin, filename, media_type, size_bytes, sha256,"
      "  trust, created_at_ms, expires_at_ms FROM artifacts"
      " WHERE expires_at_ms IS NOT NULL AND expires_at_ms <= ?1"
      " ORDER BY expires_at_ms, artifact_id LIMIT ?2");
  if (!stmt) return tl::unexpected(stmt.error());
  stmt->bind(1, toUnixMs(now)).bind(2, clampLimit(limit));
  return collect(*stmt);
}

Result<std::vector<StoredArtifact>> SqliteArtifactRepository::listForTenant(
    const TenantId& tenant_id, std::size_t limit) {
  std::lock_guard lock(mutex_);
  auto stmt = db_.prepare(
      "SELECT artifact_id, tenant_id, run_id, origin, filename, media_type, size_bytes, sha256,"
      "  trust, created_at_ms, expires_at_ms FROM artifacts"
      " WHERE tenant_id = ?1 ORDER BY artifact_id LIMIT ?2");
  if (!stmt) return tl::unexpected(stmt.error());
  stmt->bind(1, std::string_view(tenant_id.str())).bind(2, clampLimit(limit));
  return collect(*stmt);
}

Result<std::int64_t> SqliteArtifactRepository::tenantBytes(const TenantId& tenant_id) {
  std::lock_guard lock(mutex_);
  auto stmt =
      db_.prepare("SELECT COALESCE(SUM(size_bytes), 0) FROM artifacts WHERE tenant_id = ?1");
  if (!stmt) return tl::unexpected(stmt.error());
  stmt->bind(1, std::string_view(tenant_id.str()));
  auto step = stmt->step();
  if (!step) return tl::unexpected(step.error());
  return stmt->int64(0);
}

}  // namespace airlock::artifacts
