// Where artifact metadata lives (spec 000, "Artifacts": metadata in a real
// database), and beside it each run's notes (spec 001, "Durable code-mode
// notes": a JSON blackboard per tenant and run). One interface, two adapters that pass one test
// suite: sqlite_repository.h (embedded; the default) and postgres_repository.h. memory_repository.h
// is the fake.
//
// Every adapter issues SQL only from string literals with bound values.
// Times are stored as integer Unix milliseconds, filenames as raw bytes
// (BLOB / BYTEA: a name need not be UTF-8 and is kept exactly).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "airlock/artifacts/artifact_types.h"
#include "airlock/core/error.h"

namespace airlock::artifacts {

// One note of a run's blackboard, keyed by (tenant_id, run_id, key): the
// platform's identifiers as the API takes them, and the key as the program
// named it (1-256 bytes of UTF-8 without NUL: the notes capability checks).
struct RunNote {
  std::string key;
  std::string value_json;  // the value as JSON text (JSON-shaped: no bytes)
  std::string written_by;  // the environment whose program last put it
  Timestamp updated_at{};
  Timestamp expires_at{};  // removeExpiredNotes deletes it from then on
  bool operator==(const RunNote&) const = default;
};

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

  // The tenant's rows of one run, newest first (created_at, then id, both
  // descending), at most `limit`; another tenant's run of the same id is
  // not listed. Errors: ExecutionUnavailable for a database failure (the
  // default, for a test double, answers it too).
  virtual Result<std::vector<StoredArtifact>> listForRun(const TenantId& tenant_id,
                                                         const std::string& run_id,
                                                         std::size_t limit);

  // Sum of size_bytes over the tenant's rows (0 when none).
  virtual Result<std::int64_t> tenantBytes(const TenantId& tenant_id) = 0;

  // ---- notes (a run's blackboard). Errors: ExecutionUnavailable for a
  // database failure. The defaults (a repository that keeps no notes, test
  // doubles) answer ExecutionUnavailable; every adapter here keeps them.

  // Inserts the note, or replaces the one of the same key (every field).
  virtual Result<void> putNote(const std::string& tenant_id, const std::string& run_id,
                               const RunNote& note);
  // nullopt when the run has no note of that key.
  virtual Result<std::optional<RunNote>> findNote(const std::string& tenant_id,
                                                  const std::string& run_id,
                                                  const std::string& key);
  // The run's notes whose key starts with `prefix` ("" for all), in key
  // order (bytewise), at most `limit`.
  virtual Result<std::vector<RunNote>> listNotes(const std::string& tenant_id,
                                                 const std::string& run_id,
                                                 const std::string& prefix, std::size_t limit);
  // How many notes the run has.
  virtual Result<std::int64_t> countNotes(const std::string& tenant_id, const std::string& run_id);
  // Deletes every note with expires_at <= now; returns how many.
  virtual Result<std::int64_t> removeExpiredNotes(Timestamp now);
};

}  // namespace airlock::artifacts
