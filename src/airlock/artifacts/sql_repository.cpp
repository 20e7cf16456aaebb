#include "airlock/artifacts/sql_repository.h"

#include "airlock/artifacts/repository_rows.h"

namespace airlock::artifacts {

using storage::clampToInt64;
using storage::int64;
using storage::text;

Result<std::vector<StoredArtifact>> SqlArtifactRepository::rows(
    storage::SqlText sql, const std::vector<storage::Value>& values) {
  return storage::queryAll(*db_, sql, values, 11, "artifact", &readArtifact);
}

Result<void> SqlArtifactRepository::insert(const StoredArtifact& artifact,
                                           std::optional<std::int64_t> tenant_byte_cap) {
  std::vector<storage::Value> values = rowValues(encodeRow(artifact));
  values.push_back(storage::optionalInt64(tenant_byte_cap));
  std::lock_guard lock(mutex_);
  storage::Transaction tx(*db_);
  if (auto r = tx.begin(); !r) return r;
  // The tenant's writers are serialized before the sum is read, so the cap
  // check and the insert see the same total.
  if (!sql_.lock_tenant.empty()) {
    auto locked = db_->query(sql_.lock_tenant, {text(artifact.metadata.tenant_id.str())}, 1,
                             "artifact", [](const storage::Row&) { return Result<void>{}; });
    if (!locked) return locked;
  }
  auto inserted = db_->execute(sql_.insert, values);
  if (!inserted) {
    if (inserted.error().code == ErrorCode::kExecutionRejected)
      return fail(ErrorCode::kExecutionRejected, "artifact id already exists");
    return tl::unexpected(inserted.error());
  }
  if (*inserted == 0)
    return fail(ErrorCode::kExecutionRejected, "tenant artifact byte cap reached");
  return tx.commit();
}

Result<StoredArtifact> SqlArtifactRepository::find(const ArtifactId& artifact_id) {
  std::lock_guard lock(mutex_);
  auto found = rows(sql_.find, {text(artifact_id.str())});
  if (!found) return tl::unexpected(found.error());
  if (found->empty()) return fail(ErrorCode::kNotFound, "artifact " + artifact_id.str());
  return std::move(found->front());
}

Result<bool> SqlArtifactRepository::remove(const ArtifactId& artifact_id) {
  std::lock_guard lock(mutex_);
  auto removed = db_->execute(sql_.remove, {text(artifact_id.str())});
  if (!removed) return tl::unexpected(removed.error());
  return *removed > 0;
}

Result<std::vector<StoredArtifact>> SqlArtifactRepository::listExpired(Timestamp now,
                                                                       std::size_t limit) {
  std::lock_guard lock(mutex_);
  return rows(sql_.list_expired, {int64(toUnixMs(now)), int64(clampToInt64(limit))});
}

Result<std::vector<StoredArtifact>> SqlArtifactRepository::listForTenant(const TenantId& tenant_id,
                                                                         std::size_t limit) {
  std::lock_guard lock(mutex_);
  return rows(sql_.list_for_tenant, {text(tenant_id.str()), int64(clampToInt64(limit))});
}

Result<std::int64_t> SqlArtifactRepository::tenantBytes(const TenantId& tenant_id) {
  std::lock_guard lock(mutex_);
  auto sum = storage::queryInt(*db_, sql_.tenant_bytes, {text(tenant_id.str())}, "artifact",
                               "tenant byte sum");
  if (!sum) return tl::unexpected(sum.error());
  return sum->value_or(0);
}

Result<int> SqlArtifactRepository::schemaVersion() {
  std::lock_guard lock(mutex_);
  auto version = storage::queryInt(*db_, sql_.schema_version, {}, "artifact migration", "version");
  if (!version) return tl::unexpected(version.error());
  return static_cast<int>(version->value_or(0));
}

}  // namespace airlock::artifacts
