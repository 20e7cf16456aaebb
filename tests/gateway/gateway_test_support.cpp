#include "gateway_test_support.h"

#include <gtest/gtest.h>

#include "airlock/core/ids.h"
#include "airlock/core/limits_defaults.h"
#include "airlock/sys/sha256.h"

namespace airlock::gateway::testing {

Result<ExportedArtifact> FakeArtifactExporter::create(const ToolScope& scope,
                                                      const ExportRequest& request) {
  if (fail_with) return tl::unexpected(*fail_with);
  ExportedArtifact ref;
  ref.artifact_id = newUuidV7(
      std::chrono::time_point_cast<std::chrono::milliseconds>(std::chrono::system_clock::now()));
  ref.sha256 = sys::sha256Hex(request.bytes);
  ref.size_bytes = static_cast<std::int64_t>(request.bytes.size());
  ref.media_type = request.media_type;
  std::lock_guard lock(mu_);
  stored_.push_back(Stored{scope, std::string(request.bytes), request.filename, request.media_type,
                           request.origin, request.trust, ref});
  return ref;
}

std::vector<FakeArtifactExporter::Stored> FakeArtifactExporter::stored() const {
  std::lock_guard lock(mu_);
  return stored_;
}

FakeSandbox::FakeSandbox() {
  env.setFallback(fake::basicCommands);
  EnvironmentSpec spec;
  spec.tenant_id = "tenant-a";
  spec.run_id = "run-1";
  spec.lease_epoch = 1;
  spec.image_digest = fake::kFakeImageDigest;
  spec.limits = defaultLimits();
  auto provisioned = env.provision(spec);
  EXPECT_TRUE(provisioned.has_value()) << provisioned.error().message();
  handle = provisioned.value_or(EnvironmentHandle{});
  context.tenant_id = spec.tenant_id;
  context.run_id = spec.run_id;
  context.environment = handle;
  context.execution = &env;
  context.artifacts = &exporter;
}

FakeSandbox::~FakeSandbox() {
  (void)env.destroy(handle);
}

}  // namespace airlock::gateway::testing
