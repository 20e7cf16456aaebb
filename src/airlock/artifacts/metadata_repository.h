// Where artifact metadata lives (spec 000, "Artifacts": metadata in a real
// database). One interface, two adapters that pass one test suite:
// sqlite_repository.h (embedded; the default) and postgres_repository.h.
// memory_repository.h is the fake.
//
// Every adapter issues SQL only from string literals with bound values.
// Times are stored as integer Unix milliseconds, filenames as raw bytes
// (BLOB / BYTEA: a name need not be UTF-8 and is kept exactly).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "airlock/artifacts/artifact_types.h"
#include "airlock/core/error.h"

namespace airlock::artifacts {

class ArtifactRepository {
 public:
  virtual ~ArtifactRepository() = default;

  // Inserts one row. With tenant_byte_cap set, the insert happens only if
  // the tenant's stored size_bytes plus this artifact's stays at or below
  // the cap, checked atomically with the insert (concurrent inserts of one
  // tenant cannot both pass). Errors: ExecutionRejected for the cap or an
  // id that already exists; ExecutionUnavailable for a database failure.
  virtual Result<void> insert(const StoredArtifact& artifact,
                              std::optional<std::int64_t> tenant_byte_cap) = 0;

  // NotFound when there is no row.
  virtual Result<StoredArtifact> find(const ArtifactId& artifact_id) = 0;

  // false when there was no row.
  virtual Result<bool> remove(const ArtifactId& artifact_id) = 0;

  // Rows with expires_at <= now, earliest expiry first, at most `limit`.
  virtual Result<std::vector<StoredArtifact>> listExpired(Timestamp now, std::size_t limit) = 0;

  // A tenant's rows in id (that is, creation) order, at most `limit`.
  virtual Result<std::vector<StoredArtifact>> listForTenant(const TenantId& tenant_id,
                                                            std::size_t limit) = 0;

  // Sum of size_bytes over the tenant's rows (0 when none).
  virtual Result<std::int64_t> tenantBytes(const TenantId& tenant_id) = 0;
};

}  // namespace airlock::artifacts
