// Retention (spec 000, "Retention"). expires_at is written
// when an artifact is created (expiresAtFor) and the sweeper deletes
// expired objects and their rows. Deletion is by expires_at and nothing
// else: not by a run finishing, not by references to the artifact. The
// per-tenant byte cap refuses new puts (FilesystemStoreOptions::
// tenant_byte_cap); it never deletes.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>

#include "airlock/artifacts/artifact_store.h"
#include "airlock/artifacts/metadata_repository.h"

namespace airlock::artifacts {

// Operator configuration.
struct RetentionSettings {
  std::chrono::milliseconds retention = std::chrono::hours(24 * 30);  // default 30 days
  std::chrono::milliseconds unclaimed_upload = std::chrono::hours(24);
  // The per-tenant byte cap is FilesystemStoreOptions::tenant_byte_cap: it
  // is enforced where bytes are committed.
};

// expires_at for an artifact created at `created_at`: KNOWLEDGE_SOURCE
// never expires (it gets an expiry only when its document is deleted); an
// UPLOAD expires after unclaimed_upload (until a message claims it); every
// other origin after `retention`.
std::optional<Timestamp> expiresAtFor(ArtifactOrigin origin, Timestamp created_at,
                                      const RetentionSettings& settings);

struct SweepReport {
  std::int64_t artifacts_deleted = 0;
  std::int64_t bytes_deleted = 0;  // sum of their size_bytes
  std::int64_t failures = 0;       // removals that failed; retried next sweep
};

// Deletes every artifact whose expires_at <= now, through the store (row
// first, then object; ArtifactStore::remove), in batches of `batch`.
// A removal that fails is counted and left for the next sweep; a listing
// that fails ends the sweep with its error. Single pass: it stops when a
// batch comes back short or made no progress, so one bad row cannot spin it.
class RetentionSweeper {
 public:
  RetentionSweeper(ArtifactStore& store, ArtifactRepository& repository,
                   std::function<Timestamp()> clock, std::size_t batch = 256);
  Result<SweepReport> sweepOnce();

 private:
  ArtifactStore& store_;
  ArtifactRepository& repository_;
  std::function<Timestamp()> clock_;
  std::size_t batch_;
};

}  // namespace airlock::artifacts
