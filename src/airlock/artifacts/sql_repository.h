// ArtifactRepository over one storage::Connection: the one implementation
// behind both database adapters (spec 000 "Artifacts": metadata in a real
// database). SQLite (sqlite_repository.h) and PostgreSQL
// (postgres_repository.h) differ only in how they connect and migrate and in
// the SQL text of each statement (ArtifactStatements, literals with bound
// values); the semantics of metadata_repository.h are written here once.
//
// Thread-safe: the connection is used behind one mutex. The tenant byte cap
// is checked and the row inserted in one write transaction, after the
// backend's tenant lock where it has one, so two concurrent inserts of a
// tenant cannot both pass the cap.
#pragma once

#include <memory>
#include <mutex>

#include "airlock/artifacts/metadata_repository.h"
#include "airlock/storage/connection.h"

namespace airlock::artifacts {

// One backend's SQL. Row columns are those of repository_rows.h, in order.
struct ArtifactStatements {
  // ?1 tenant_id: held until commit; empty where begin() already excludes
  // every other writer (SQLite's BEGIN IMMEDIATE).
  storage::SqlText lock_tenant;
  // ?1..?11 the row, ?12 the byte cap (NULL: none); inserts nothing when the
  // tenant's stored bytes plus this row's would exceed the cap.
  storage::SqlText insert;
  storage::SqlText find;             // ?1 artifact_id -> rows
  storage::SqlText remove;           // ?1 artifact_id
  storage::SqlText list_expired;     // ?1 now (Unix ms), ?2 limit -> rows
  storage::SqlText list_for_tenant;  // ?1 tenant_id, ?2 limit -> rows
  storage::SqlText list_for_run;     // ?1 tenant_id, ?2 run_id, ?3 limit -> rows, newest first
  storage::SqlText tenant_bytes;     // ?1 tenant_id -> one integer
  storage::SqlText schema_version;   // -> one integer (the migration ledger's)
  // Notes. Columns of a note row: note_key, value_json, written_by,
  // updated_at_ms, expires_at_ms.
  // ?1 tenant_id, ?2 run_id, ?3..?7 the row: inserts, or replaces the key's.
  storage::SqlText put_note;
  storage::SqlText find_note;             // ?1 tenant_id, ?2 run_id, ?3 key -> rows
  storage::SqlText list_notes;            // ?1 tenant_id, ?2 run_id, ?3 prefix, ?4 limit -> rows
  storage::SqlText remove_expired_notes;  // ?1 now (Unix ms)
  storage::SqlText count_notes;           // ?1 tenant_id, ?2 run_id -> one integer
};

class SqlArtifactRepository final : public ArtifactRepository {
 public:
  // `sql` is a static table of the backend's statements.
  SqlArtifactRepository(std::unique_ptr<storage::Connection> db, const ArtifactStatements& sql)
      : db_(std::move(db)), sql_(sql) {}

  Result<void> insert(const StoredArtifact& artifact,
                      std::optional<std::int64_t> tenant_byte_cap) override;
  Result<StoredArtifact> find(const ArtifactId& artifact_id) override;
  Result<bool> remove(const ArtifactId& artifact_id) override;
  Result<std::vector<StoredArtifact>> listExpired(Timestamp now, std::size_t limit) override;
  Result<std::vector<StoredArtifact>> listForTenant(const TenantId& tenant_id,
                                                    std::size_t limit) override;
  Result<std::vector<StoredArtifact>> listForRun(const TenantId& tenant_id,
                                                 const std::string& run_id,
                                                 std::size_t limit) override;
  Result<std::int64_t> tenantBytes(const TenantId& tenant_id) override;
  Result<void> putNote(const std::string& tenant_id, const std::string& run_id,
                       const RunNote& note) override;
  Result<std::optional<RunNote>> findNote(const std::string& tenant_id, const std::string& run_id,
                                          const std::string& key) override;
  Result<std::vector<RunNote>> listNotes(const std::string& tenant_id, const std::string& run_id,
                                         const std::string& prefix, std::size_t limit) override;
  Result<std::int64_t> countNotes(const std::string& tenant_id, const std::string& run_id) override;
  Result<std::int64_t> removeExpiredNotes(Timestamp now) override;

  // The schema version recorded in the database.
  Result<int> schemaVersion();

 private:
  Result<std::vector<StoredArtifact>> rows(storage::SqlText sql,
                                           const std::vector<storage::Value>& values);
  std::mutex mutex_;
  std::unique_ptr<storage::Connection> db_;
  const ArtifactStatements& sql_;
};

}  // namespace airlock::artifacts
