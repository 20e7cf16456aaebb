// The in-memory fake of ArtifactRepository (for tests of code above the
// repository). Same semantics as the database adapters; thread-safe.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "airlock/artifacts/metadata_repository.h"

namespace airlock::artifacts {

class MemoryArtifactRepository final : public ArtifactRepository {
 public:
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

 private:
  std::int64_t tenantBytesLocked(const TenantId& tenant_id) const;
  std::mutex mutex_;
  std::map<ArtifactId, StoredArtifact> rows_;
  // (tenant, run, key) -> note.
  std::map<std::tuple<std::string, std::string, std::string>, RunNote> notes_;
};

}  // namespace airlock::artifacts
