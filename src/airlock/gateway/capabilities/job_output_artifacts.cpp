#include "airlock/gateway/capabilities/job_output_artifacts.h"

namespace airlock::gateway {

namespace {

class ArtifactJobOutputSink final : public capability::JobOutputSink {
 public:
  explicit ArtifactJobOutputSink(std::shared_ptr<artifacts::ArtifactWriter> writer)
      : writer_(std::move(writer)) {}

  Result<capability::StoredJobOutput> store(capability::JobOutput output) override {
    artifacts::MeasuredStream stream;
    stream.size_bytes = static_cast<std::int64_t>(output.size_bytes);
    stream.sha256 = std::move(output.sha256);
    stream.source = std::move(output.source);
    auto ref =
        writer_->create(std::move(stream), std::move(output.filename), std::move(output.media_type),
                        artifacts::TrustLevel::kExternalUntrusted);
    if (!ref) return tl::unexpected(ref.error());
    return capability::StoredJobOutput{ref->artifact_id.str(), ref->media_type};
  }

 private:
  const std::shared_ptr<artifacts::ArtifactWriter> writer_;
};

}  // namespace

std::shared_ptr<capability::JobOutputSink> artifactJobOutputSink(
    std::shared_ptr<artifacts::ArtifactWriter> writer) {
  if (!writer) return nullptr;
  return std::make_shared<ArtifactJobOutputSink>(std::move(writer));
}

}  // namespace airlock::gateway
