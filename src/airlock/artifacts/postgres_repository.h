// ArtifactRepository in PostgreSQL through libpq (the scaled deployment;
// spec 000 "Artifacts": metadata in PostgreSQL). Same
// semantics and the same test suite as the SQLite adapter.
//
// SQL comes only from SqlText literals; every value is a bound parameter
// (PQexecParams). Results are read in binary format. Migrations are
// numbered, recorded in schema_migrations and applied at connect inside one
// transaction holding an advisory lock, so concurrent starts apply each
// once. The tenant byte cap is checked and the row inserted in one
// transaction that holds a per-tenant advisory lock, so two concurrent puts
// of a tenant cannot both pass the cap.
//
// Thread-safe: one connection behind a mutex, reset once when it is found
// broken. The connection string is a credential: it is never logged and
// never part of an error.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "airlock/artifacts/metadata_repository.h"

struct pg_conn;

namespace airlock::artifacts {

class PostgresArtifactRepository final : public ArtifactRepository {
 public:
  // `conninfo`: a libpq connection string or URI. Connects and migrates.
  // ExecutionUnavailable when the server cannot be reached or a statement
  // fails; ConfigurationError when the database's schema is newer than
  // this build.
  static Result<std::unique_ptr<PostgresArtifactRepository>> connect(const std::string& conninfo);
  ~PostgresArtifactRepository() override;

  Result<void> insert(const StoredArtifact& artifact,
                      std::optional<std::int64_t> tenant_byte_cap) override;
  Result<StoredArtifact> find(const ArtifactId& artifact_id) override;
  Result<bool> remove(const ArtifactId& artifact_id) override;
  Result<std::vector<StoredArtifact>> listExpired(Timestamp now, std::size_t limit) override;
  Result<std::vector<StoredArtifact>> listForTenant(const TenantId& tenant_id,
                                                    std::size_t limit) override;
  Result<std::int64_t> tenantBytes(const TenantId& tenant_id) override;

  Result<int> schemaVersion();

 private:
  explicit PostgresArtifactRepository(pg_conn* conn) : conn_(conn) {}
  std::mutex mutex_;
  pg_conn* conn_;
};

}  // namespace airlock::artifacts
