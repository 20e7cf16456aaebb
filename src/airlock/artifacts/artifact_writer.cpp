#include "airlock/artifacts/artifact_writer.h"

#include <chrono>

#include "airlock/sys/sha256.h"

namespace airlock::artifacts {
namespace {

class ScopedArtifactWriter final : public ArtifactWriter {
 public:
  ScopedArtifactWriter(ArtifactStore& store, ArtifactWriterScope scope, RetentionSettings retention,
                       std::function<Timestamp()> clock)
      : store_(store), scope_(std::move(scope)), retention_(retention), clock_(std::move(clock)) {}

  Result<ArtifactRef> create(MeasuredStream stream, std::string filename, std::string media_type,
                             TrustLevel trust) override {
    if (!stream.source) return fail(ErrorCode::kToolValidationError, "artifact stream is missing");
    const Timestamp created = clock_();
    const TrustLevel stored_trust = trust == TrustLevel::kExternalUntrusted ||
                                            scope_.trust_floor == TrustLevel::kExternalUntrusted
                                        ? TrustLevel::kExternalUntrusted
                                        : TrustLevel::kInternalTool;
    ArtifactMetadata metadata{scope_.tenant_id,
                              scope_.run_id,
                              scope_.origin,
                              std::move(filename),
                              std::move(media_type),
                              stream.size_bytes,
                              std::move(stream.sha256),
                              stored_trust,
                              created,
                              expiresAtFor(scope_.origin, created, retention_)};
    return store_.put(*stream.source, metadata);
  }

 private:
  ArtifactStore& store_;
  const ArtifactWriterScope scope_;
  const RetentionSettings retention_;
  const std::function<Timestamp()> clock_;
};

}  // namespace

MeasuredStream measuredBytes(std::string bytes) {
  MeasuredStream out;
  out.size_bytes = static_cast<std::int64_t>(bytes.size());
  out.sha256 = sys::sha256Hex(bytes);
  out.source = std::make_unique<StringSource>(std::move(bytes));
  return out;
}

std::unique_ptr<ArtifactWriter> makeArtifactWriter(ArtifactStore& store, ArtifactWriterScope scope,
                                                   RetentionSettings retention,
                                                   std::function<Timestamp()> clock) {
  if (!clock)
    clock = [] {
      return std::chrono::time_point_cast<std::chrono::milliseconds>(
          std::chrono::system_clock::now());
    };
  return std::make_unique<ScopedArtifactWriter>(store, std::move(scope), retention,
                                                std::move(clock));
}

}  // namespace airlock::artifacts
