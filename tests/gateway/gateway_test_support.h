// Shared by the gateway tests: a recording ArtifactExporter and a fixture
// holding a fake sandbox and a ToolContext bound to it.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "airlock/gateway/tools/artifact_exporter.h"
#include "airlock/gateway/tools/tool.h"
#include "airlock/gateway/tools/tool_registry.h"
#include "airlock/sandbox/fake/fake_environment.h"

namespace airlock::gateway::testing {

// Keeps every export in memory; fails every call when `fail_with` is set.
class FakeArtifactExporter : public ArtifactExporter {
 public:
  struct Stored {
    ToolScope scope;
    std::string bytes;
    std::string filename;
    std::string media_type;
    ExportOrigin origin;
    ExportTrust trust;
    ExportedArtifact ref;
  };
  Result<ExportedArtifact> create(const ToolScope& scope, const ExportRequest& request) override;
  std::vector<Stored> stored() const;
  std::optional<Error> fail_with;

 private:
  mutable std::mutex mu_;
  std::vector<Stored> stored_;
};

// A provisioned fake sandbox (basic commands available) and a context.
struct FakeSandbox {
  FakeSandbox();
  ~FakeSandbox();
  fake::FakeEnvironment env;
  FakeArtifactExporter exporter;
  EnvironmentHandle handle;
  ToolContext context;
};

}  // namespace airlock::gateway::testing
