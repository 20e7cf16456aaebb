#include "airlock/artifacts/retention.h"

#include <algorithm>

namespace airlock::artifacts {

std::optional<Timestamp> expiresAtFor(ArtifactOrigin origin, Timestamp created_at,
                                      const RetentionSettings& settings) {
  switch (origin) {
    case ArtifactOrigin::kKnowledgeSource:
      return std::nullopt;
    case ArtifactOrigin::kUpload:
      return created_at + settings.unclaimed_upload;
    case ArtifactOrigin::kSandboxExport:
    case ArtifactOrigin::kToolOutput:
    case ArtifactOrigin::kModelOutput:
    case ArtifactOrigin::kTrajectoryExport:
      break;
  }
  return created_at + settings.retention;
}

RetentionSweeper::RetentionSweeper(ArtifactStore& store, ArtifactRepository& repository,
                                   std::function<Timestamp()> clock, std::size_t batch)
    : store_(store),
      repository_(repository),
      clock_(std::move(clock)),
      batch_(std::max<std::size_t>(batch, 1)) {}

Result<SweepReport> RetentionSweeper::sweepOnce() {
  SweepReport report;
  const Timestamp now = clock_();
  // Rows that failed this sweep are skipped when they come back in a later
  // batch (the listing is ordered, so they come first).
  std::size_t skip = 0;
  for (;;) {
    const std::size_t wanted = skip + batch_;
    auto expired = repository_.listExpired(now, wanted);
    if (!expired) return tl::unexpected(expired.error());
    std::int64_t progress = 0;
    for (std::size_t i = skip; i < expired->size(); ++i) {
      const StoredArtifact& artifact = (*expired)[i];
      auto removed = store_.remove(artifact.artifact_id);
      if (!removed) {
        ++report.failures;
        ++skip;
        continue;
      }
      if (*removed) {
        ++report.artifacts_deleted;
        report.bytes_deleted += artifact.metadata.size_bytes;
      }
      ++progress;
    }
    if (expired->size() < wanted || progress == 0) break;
  }
  return report;
}

}  // namespace airlock::artifacts
