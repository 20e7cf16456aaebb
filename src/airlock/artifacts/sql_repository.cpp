#include "airlock/artifacts/sql_repository.h"

#include "airlock/artifacts/repository_rows.h"

namespace airlock::artifacts {

using storage::clampToInt64;
using storage::int64;
using storage::text;

Result<std::vector<StoredArtifact>> ArtifactRepository::listForRun(const TenantId&,
                                                                   const std::string&,
                                                                   std::size_t) {
  return fail(ErrorCode::kExecutionUnavailable,
              "this metadata repository cannot list a run's artifacts");
}
Result<void> ArtifactRepository::putNote(const std::string&, const std::string&, const RunNote&) {
  return fail(ErrorCode::kExecutionUnavailable, "this metadata repository keeps no notes");
}
Result<std::optional<RunNote>> ArtifactRepository::findNote(const std::string&, const std::string&,
                                                            const std::string&) {
  return fail(ErrorCode::kExecutionUnavailable, "this metadata repository keeps no notes");
}
Result<std::vector<RunNote>> ArtifactRepository::listNotes(const std::string&, const std::string&,
                                                           const std::string&, std::size_t) {
  return fail(ErrorCode::kExecutionUnavailable, "this metadata repository keeps no notes");
}
Result<std::int64_t> ArtifactRepository::countNotes(const std::string&, const std::string&) {
  return fail(ErrorCode::kExecutionUnavailable, "this metadata repository keeps no notes");
}
Result<std::int64_t> ArtifactRepository::removeExpiredNotes(Timestamp) {
  return fail(ErrorCode::kExecutionUnavailable, "this metadata repository keeps no notes");
}

namespace {

// A row whose SELECT list is the note columns of ArtifactStatements.
Result<RunNote> readNote(const storage::Row& row) {
  storage::ColumnReader r(row, "note");
  RunNote note;
  note.key = r.text(0);
  note.value_json = r.text(1);
  note.written_by = r.text(2);
  note.updated_at = fromUnixMs(r.int64(3, "updated_at_ms"));
  note.expires_at = fromUnixMs(r.int64(4, "expires_at_ms"));
  if (auto ok = r.status(); !ok) return tl::unexpected(ok.error());
  return note;
}

}  // namespace

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

Result<std::vector<StoredArtifact>> SqlArtifactRepository::listForRun(const TenantId& tenant_id,
                                                                      const std::string& run_id,
                                                                      std::size_t limit) {
  std::lock_guard lock(mutex_);
  return rows(sql_.list_for_run, {text(tenant_id.str()), text(run_id), int64(clampToInt64(limit))});
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

Result<void> SqlArtifactRepository::putNote(const std::string& tenant_id, const std::string& run_id,
                                            const RunNote& note) {
  std::lock_guard lock(mutex_);
  auto put = db_->execute(
      sql_.put_note,
      {text(tenant_id), text(run_id), text(note.key), text(note.value_json), text(note.written_by),
       int64(toUnixMs(note.updated_at)), int64(toUnixMs(note.expires_at))});
  if (!put) return tl::unexpected(put.error());
  return {};
}

Result<std::optional<RunNote>> SqlArtifactRepository::findNote(const std::string& tenant_id,
                                                               const std::string& run_id,
                                                               const std::string& key) {
  std::lock_guard lock(mutex_);
  auto found = storage::queryAll(*db_, sql_.find_note, {text(tenant_id), text(run_id), text(key)},
                                 5, "note", &readNote);
  if (!found) return tl::unexpected(found.error());
  if (found->empty()) return std::nullopt;
  return std::move(found->front());
}

Result<std::vector<RunNote>> SqlArtifactRepository::listNotes(const std::string& tenant_id,
                                                              const std::string& run_id,
                                                              const std::string& prefix,
                                                              std::size_t limit) {
  std::lock_guard lock(mutex_);
  return storage::queryAll(
      *db_, sql_.list_notes,
      {text(tenant_id), text(run_id), text(prefix), int64(clampToInt64(limit))}, 5, "note",
      &readNote);
}

Result<std::int64_t> SqlArtifactRepository::countNotes(const std::string& tenant_id,
                                                       const std::string& run_id) {
  std::lock_guard lock(mutex_);
  auto count = storage::queryInt(*db_, sql_.count_notes, {text(tenant_id), text(run_id)}, "note",
                                 "note count");
  if (!count) return tl::unexpected(count.error());
  return count->value_or(0);
}

Result<std::int64_t> SqlArtifactRepository::removeExpiredNotes(Timestamp now) {
  std::lock_guard lock(mutex_);
  auto removed = db_->execute(sql_.remove_expired_notes, {int64(toUnixMs(now))});
  if (!removed) return tl::unexpected(removed.error());
  return *removed;
}

}  // namespace airlock::artifacts
