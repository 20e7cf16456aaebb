#include "airlock/artifacts/memory_repository.h"

#include <algorithm>

namespace airlock::artifacts {

std::int64_t MemoryArtifactRepository::tenantBytesLocked(const TenantId& tenant_id) const {
  std::int64_t total = 0;
  for (const auto& [id, row] : rows_)
    if (row.metadata.tenant_id == tenant_id) total += row.metadata.size_bytes;
  return total;
}

Result<void> MemoryArtifactRepository::insert(const StoredArtifact& artifact,
                                              std::optional<std::int64_t> tenant_byte_cap) {
  std::lock_guard lock(mutex_);
  if (rows_.count(artifact.artifact_id))
    return fail(ErrorCode::kExecutionRejected, "artifact id already exists");
  if (tenant_byte_cap &&
      tenantBytesLocked(artifact.metadata.tenant_id) + artifact.metadata.size_bytes >
          *tenant_byte_cap)
    return fail(ErrorCode::kExecutionRejected, "tenant artifact byte cap reached");
  rows_.emplace(artifact.artifact_id, artifact);
  return {};
}

Result<StoredArtifact> MemoryArtifactRepository::find(const ArtifactId& artifact_id) {
  std::lock_guard lock(mutex_);
  auto it = rows_.find(artifact_id);
  if (it == rows_.end()) return fail(ErrorCode::kNotFound, "artifact " + artifact_id.str());
  return it->second;
}

Result<bool> MemoryArtifactRepository::remove(const ArtifactId& artifact_id) {
  std::lock_guard lock(mutex_);
  return rows_.erase(artifact_id) > 0;
}

Result<std::vector<StoredArtifact>> MemoryArtifactRepository::listExpired(Timestamp now,
                                                                          std::size_t limit) {
  std::lock_guard lock(mutex_);
  std::vector<StoredArtifact> out;
  for (const auto& [id, row] : rows_)
    if (row.metadata.expires_at && *row.metadata.expires_at <= now) out.push_back(row);
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return *a.metadata.expires_at < *b.metadata.expires_at;
  });
  if (out.size() > limit) out.erase(out.begin() + static_cast<std::ptrdiff_t>(limit), out.end());
  return out;
}

Result<std::vector<StoredArtifact>> MemoryArtifactRepository::listForRun(const TenantId& tenant_id,
                                                                         const std::string& run_id,
                                                                         std::size_t limit) {
  std::lock_guard lock(mutex_);
  std::vector<StoredArtifact> out;
  for (const auto& [id, row] : rows_)
    if (row.metadata.tenant_id == tenant_id && row.metadata.run_id == run_id) out.push_back(row);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    if (a.metadata.created_at != b.metadata.created_at)
      return a.metadata.created_at > b.metadata.created_at;
    return b.artifact_id < a.artifact_id;
  });
  if (out.size() > limit) out.erase(out.begin() + static_cast<std::ptrdiff_t>(limit), out.end());
  return out;
}

Result<std::vector<StoredArtifact>> MemoryArtifactRepository::listForTenant(
    const TenantId& tenant_id, std::size_t limit) {
  std::lock_guard lock(mutex_);
  std::vector<StoredArtifact> out;
  for (const auto& [id, row] : rows_) {
    if (out.size() >= limit) break;
    if (row.metadata.tenant_id == tenant_id) out.push_back(row);
  }
  return out;
}

Result<std::int64_t> MemoryArtifactRepository::tenantBytes(const TenantId& tenant_id) {
  std::lock_guard lock(mutex_);
  return tenantBytesLocked(tenant_id);
}

Result<void> MemoryArtifactRepository::putNote(const std::string& tenant_id,
                                               const std::string& run_id, const RunNote& note) {
  std::lock_guard lock(mutex_);
  notes_[{tenant_id, run_id, note.key}] = note;
  return {};
}

Result<std::optional<RunNote>> MemoryArtifactRepository::findNote(const std::string& tenant_id,
                                                                  const std::string& run_id,
                                                                  const std::string& key) {
  std::lock_guard lock(mutex_);
  auto it = notes_.find({tenant_id, run_id, key});
  if (it == notes_.end()) return std::nullopt;
  return it->second;
}

Result<std::vector<RunNote>> MemoryArtifactRepository::listNotes(const std::string& tenant_id,
                                                                 const std::string& run_id,
                                                                 const std::string& prefix,
                                                                 std::size_t limit) {
  std::lock_guard lock(mutex_);
  std::vector<RunNote> out;
  for (auto it = notes_.lower_bound({tenant_id, run_id, prefix});
       it != notes_.end() && out.size() < limit; ++it) {
    const auto& [tenant, run, key] = it->first;
    if (tenant != tenant_id || run != run_id || key.rfind(prefix, 0) != 0) break;
    out.push_back(it->second);
  }
  return out;
}

Result<std::int64_t> MemoryArtifactRepository::countNotes(const std::string& tenant_id,
                                                          const std::string& run_id) {
  std::lock_guard lock(mutex_);
  std::int64_t count = 0;
  for (const auto& [id, note] : notes_)
    if (std::get<0>(id) == tenant_id && std::get<1>(id) == run_id) ++count;
  return count;
}

Result<std::int64_t> MemoryArtifactRepository::removeExpiredNotes(Timestamp now) {
  std::lock_guard lock(mutex_);
  std::int64_t removed = 0;
  for (auto it = notes_.begin(); it != notes_.end();) {
    if (it->second.expires_at <= now) {
      it = notes_.erase(it);
      ++removed;
    } else {
      ++it;
    }
  }
  return removed;
}

}  // namespace airlock::artifacts
