#include "airlock/artifacts/postgres_repository.h"

#include <array>

#include "airlock/artifacts/sqlite_repository.h"  // kArtifactSchemaVersion
#include "airlock/storage/migration.h"
#include "airlock/storage/postgres.h"

namespace airlock::artifacts {
namespace {

namespace postgres = storage::postgres;
using storage::Migration;
using storage::MigrationLedger;

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
    {2,
     "CREATE TABLE run_notes ("
     "  tenant_id TEXT COLLATE \"C\" NOT NULL,"
     "  run_id TEXT COLLATE \"C\" NOT NULL,"
     "  note_key TEXT COLLATE \"C\" NOT NULL,"
     "  value_json TEXT NOT NULL,"
     "  written_by TEXT NOT NULL,"
     "  updated_at_ms BIGINT NOT NULL,"
     "  expires_at_ms BIGINT NOT NULL,"
     "  PRIMARY KEY (tenant_id, run_id, note_key));"
     "CREATE INDEX run_notes_by_expiry ON run_notes (expires_at_ms);"},
}};

constexpr MigrationLedger kLedger{
    "CREATE TABLE IF NOT EXISTS schema_migrations ("
    "  version INTEGER PRIMARY KEY,"
    "  applied_at_ms BIGINT NOT NULL)",
    // Concurrent starts apply each step once. The key is one constant for
    // "artifact schema migration" (arbitrary, beside the schedule schema's).
    "SELECT pg_advisory_xact_lock(7046311541)",
    "SELECT COALESCE(MAX(version), 0)::bigint FROM schema_migrations",
    "INSERT INTO schema_migrations (version, applied_at_ms)"
    " VALUES ($1::integer, (extract(epoch FROM clock_timestamp()) * 1000)::bigint)",
    "artifact"};

constexpr ArtifactStatements kStatements{
    // Serializes inserts of one tenant until commit, so the sum the insert
    // reads counts every row committed before it.
    "SELECT pg_advisory_xact_lock(hashtextextended($1::text, 7046))",
    "INSERT INTO artifacts (artifact_id, tenant_id, run_id, origin, filename, media_type,"
    "  size_bytes, sha256, trust, created_at_ms, expires_at_ms)"
    " SELECT $1::text, $2::text, $3::text, $4::text, $5::bytea, $6::text, $7::bigint,"
    "  $8::text, $9::text, $10::bigint, $11::bigint"
    " WHERE $12::bigint IS NULL OR"
    "  (SELECT COALESCE(SUM(size_bytes), 0) FROM artifacts WHERE tenant_id = $2::text)"
    "   + $7::bigint <= $12::bigint",
    "SELECT artifact_id, tenant_id, run_id, origin, filename, media_type, size_bytes,"
    "  sha256, trust, created_at_ms, expires_at_ms FROM artifacts"
    " WHERE artifact_id = $1::text",
    "DELETE FROM artifacts WHERE artifact_id = $1::text",
    "SELECT artifact_id, tenant_id, run_id, origin, filename, media_type, size_bytes,"
    "  sha256, trust, created_at_ms, expires_at_ms FROM artifacts"
    " WHERE expires_at_ms IS NOT NULL AND expires_at_ms <= $1::bigint"
    " ORDER BY expires_at_ms, artifact_id LIMIT $2::bigint",
    "SELECT artifact_id, tenant_id, run_id, origin, filename, media_type, size_bytes,"
    "  sha256, trust, created_at_ms, expires_at_ms FROM artifacts"
    " WHERE tenant_id = $1::text ORDER BY artifact_id LIMIT $2::bigint",
    // COLLATE "C": ids compare bytewise, as SQLite's and the memory fake's.
    "SELECT artifact_id, tenant_id, run_id, origin, filename, media_type, size_bytes,"
    "  sha256, trust, created_at_ms, expires_at_ms FROM artifacts"
    " WHERE tenant_id = $1::text AND run_id = $2::text"
    " ORDER BY created_at_ms DESC, artifact_id COLLATE \"C\" DESC LIMIT $3::bigint",
    "SELECT COALESCE(SUM(size_bytes), 0)::bigint FROM artifacts"
    " WHERE tenant_id = $1::text",
    kLedger.max_version,
    "INSERT INTO run_notes (tenant_id, run_id, note_key, value_json, written_by, updated_at_ms,"
    "  expires_at_ms) VALUES ($1::text, $2::text, $3::text, $4::text, $5::text, $6::bigint,"
    "  $7::bigint)"
    " ON CONFLICT (tenant_id, run_id, note_key) DO UPDATE SET value_json = excluded.value_json,"
    "  written_by = excluded.written_by, updated_at_ms = excluded.updated_at_ms,"
    "  expires_at_ms = excluded.expires_at_ms",
    "SELECT note_key, value_json, written_by, updated_at_ms, expires_at_ms FROM run_notes"
    " WHERE tenant_id = $1::text AND run_id = $2::text AND note_key = $3::text",
    // COLLATE "C": keys compare bytewise, as SQLite's and the memory fake's.
    "SELECT note_key, value_json, written_by, updated_at_ms, expires_at_ms FROM run_notes"
    " WHERE tenant_id = $1::text AND run_id = $2::text AND note_key >= $3::text"
    "  AND left(note_key, char_length($3::text)) = $3::text"
    " ORDER BY note_key LIMIT $4::bigint",
    "DELETE FROM run_notes WHERE expires_at_ms <= $1::bigint",
    "SELECT COUNT(*)::bigint FROM run_notes WHERE tenant_id = $1::text AND run_id = $2::text"};

}  // namespace

Result<std::unique_ptr<SqlArtifactRepository>> PostgresArtifactRepository::connect(
    const std::string& conninfo) {
  auto db = storage::migrated(postgres::connectConnection(conninfo), kLedger, kMigrations,
                              kArtifactSchemaVersion);
  if (!db) return tl::unexpected(db.error());
  return std::make_unique<SqlArtifactRepository>(std::move(*db), kStatements);
}

}  // namespace airlock::artifacts
