// ArtifactRepository in an embedded SQLite database (the default; spec 000
// "Artifacts"). One file under the state directory, WAL
// journal, numbered migrations recorded in schema_migrations and applied
// at open inside BEGIN IMMEDIATE (two processes opening one file at once
// apply each migration once). Thread-safe: one connection behind a mutex.
// Several processes may share the file (SQLite's locking; busy timeout 5 s).
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "airlock/artifacts/metadata_repository.h"
#include "airlock/artifacts/sqlite.h"

namespace airlock::artifacts {

// The schema version this build migrates to.
inline constexpr int kArtifactSchemaVersion = 1;

class SqliteArtifactRepository final : public ArtifactRepository {
 public:
  // `path` names the database file (operator configuration, e.g.
  // <state>/artifacts.db; the directory must exist). Opens or creates it
  // and migrates. ExecutionUnavailable on failure; ConfigurationError when
  // the file's schema is newer than this build.
  static Result<std::unique_ptr<SqliteArtifactRepository>> open(const std::string& path);

  Result<void> insert(const StoredArtifact& artifact,
                      std::optional<std::int64_t> tenant_byte_cap) override;
  Result<StoredArtifact> find(const ArtifactId& artifact_id) override;
  Result<bool> remove(const ArtifactId& artifact_id) override;
  Result<std::vector<StoredArtifact>> listExpired(Timestamp now, std::size_t limit) override;
  Result<std::vector<StoredArtifact>> listForTenant(const TenantId& tenant_id,
                                                    std::size_t limit) override;
  Result<std::int64_t> tenantBytes(const TenantId& tenant_id) override;

  // The schema version recorded in the file.
  Result<int> schemaVersion();

 private:
  explicit SqliteArtifactRepository(sqlite::Database db) : db_(std::move(db)) {}
  std::mutex mutex_;
  sqlite::Database db_;
};

}  // namespace airlock::artifacts
