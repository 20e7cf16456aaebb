#include "airlock/artifacts/sqlite_repository.h"

#include <array>

#include "airlock/storage/migration.h"
#include "airlock/storage/sqlite.h"

namespace airlock::artifacts {
namespace {

namespace sqlite = storage::sqlite;
using storage::Migration;

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
    {2,
     "CREATE TABLE run_notes ("
     "  tenant_id TEXT NOT NULL,"
     "  run_id TEXT NOT NULL,"
     "  note_key TEXT NOT NULL,"
     "  value_json TEXT NOT NULL,"
     "  written_by TEXT NOT NULL,"
     "  updated_at_ms INTEGER NOT NULL,"
     "  expires_at_ms INTEGER NOT NULL,"
     "  PRIMARY KEY (tenant_id, run_id, note_key)"
     ") WITHOUT ROWID;"
     "CREATE INDEX run_notes_by_expiry ON run_notes (expires_at_ms);"},
}};

constexpr storage::MigrationLedger kLedger{
    "CREATE TABLE IF NOT EXISTS schema_migrations ("
    "  version INTEGER PRIMARY KEY NOT NULL,"
    "  applied_at_ms INTEGER NOT NULL)",
    {},  // BEGIN IMMEDIATE holds the file's write lock
    "SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
    "INSERT INTO schema_migrations (version, applied_at_ms)"
    " VALUES (?1, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER))",
    "artifact"};

constexpr ArtifactStatements kStatements{
    {},  // BEGIN IMMEDIATE holds the file's write lock
    "INSERT INTO artifacts (artifact_id, tenant_id, run_id, origin, filename, media_type,"
    "  size_bytes, sha256, trust, created_at_ms, expires_at_ms)"
    " SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11"
    " WHERE ?12 IS NULL OR"
    "  (SELECT COALESCE(SUM(size_bytes), 0) FROM artifacts WHERE tenant_id = ?2) + ?7 <= ?12",
    "SELECT artifact_id, tenant_id, run_id, origin, filename, media_type, size_bytes, sha256,"
    "  trust, created_at_ms, expires_at_ms FROM artifacts WHERE artifact_id = ?1",
    "DELETE FROM artifacts WHERE artifact_id = ?1",
    "SELECT artifact_id, tenant_id, run_id, origin, filename, media_type, size_bytes, sha256,"
    "  trust, created_at_ms, expires_at_ms FROM artifacts"
    " WHERE expires_at_ms IS NOT NULL AND expires_at_ms <= ?1"
    " ORDER BY expires_at_ms, artifact_id LIMIT ?2",
    "SELECT artifact_id, tenant_id, run_id, origin, filename, media_type, size_bytes, sha256,"
    "  trust, created_at_ms, expires_at_ms FROM artifacts"
    " WHERE tenant_id = ?1 ORDER BY artifact_id LIMIT ?2",
    "SELECT artifact_id, tenant_id, run_id, origin, filename, media_type, size_bytes, sha256,"
    "  trust, created_at_ms, expires_at_ms FROM artifacts"
    " WHERE tenant_id = ?1 AND run_id = ?2"
    " ORDER BY created_at_ms DESC, artifact_id DESC LIMIT ?3",
    "SELECT COALESCE(SUM(size_bytes), 0) FROM artifacts WHERE tenant_id = ?1",
    kLedger.max_version,
    "INSERT INTO run_notes (tenant_id, run_id, note_key, value_json, written_by, updated_at_ms,"
    "  expires_at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
    " ON CONFLICT (tenant_id, run_id, note_key) DO UPDATE SET value_json = excluded.value_json,"
    "  written_by = excluded.written_by, updated_at_ms = excluded.updated_at_ms,"
    "  expires_at_ms = excluded.expires_at_ms",
    "SELECT note_key, value_json, written_by, updated_at_ms, expires_at_ms FROM run_notes"
    " WHERE tenant_id = ?1 AND run_id = ?2 AND note_key = ?3",
    // Keys compare bytewise (BINARY); the prefix's own bytes bound the range.
    "SELECT note_key, value_json, written_by, updated_at_ms, expires_at_ms FROM run_notes"
    " WHERE tenant_id = ?1 AND run_id = ?2 AND note_key >= ?3"
    "  AND substr(CAST(note_key AS BLOB), 1, length(CAST(?3 AS BLOB))) = CAST(?3 AS BLOB)"
    " ORDER BY note_key LIMIT ?4",
    "DELETE FROM run_notes WHERE expires_at_ms <= ?1",
    "SELECT COUNT(*) FROM run_notes WHERE tenant_id = ?1 AND run_id = ?2"};

}  // namespace

Result<std::unique_ptr<SqlArtifactRepository>> SqliteArtifactRepository::open(
    const std::string& path) {
  auto conn =
      storage::migrated(sqlite::openConnection(path), kLedger, kMigrations, kArtifactSchemaVersion);
  if (!conn) return tl::unexpected(conn.error());
  return std::make_unique<SqlArtifactRepository>(std::move(*conn), kStatements);
}

}  // namespace airlock::artifacts
