#include "airlock/capability/broker/capabilities.h"

#include "airlock/artifacts/artifact_store.h"

namespace airlock::capability {

// The spill's default per-stream cap is the store's per-artifact cap.
static_assert(kDefaultSpillStreamBytes ==
              static_cast<std::uint64_t>(artifacts::kDefaultMaxArtifactBytes));

std::shared_ptr<CapabilityTable> makeSandboxCapabilities(const SandboxServices& services) {
  auto table = std::make_shared<CapabilityTable>();
  if (services.add_execution)
    services.add_execution(*table, ExecutionCapabilityServices{services.env, services.handle,
                                                               services.job_spill, services.jobs});
  gateway::addGatewayCapabilities(
      *table, gateway::GatewayCapabilityServices{services.handle.environment_id, services.net,
                                                 services.schedule});
  return table;
}

Policy defaultCodeModePolicy() {
  Policy p;
  p.allowed = {"proc.*",     "fs.*",     "notes.*", "job.*",      "net.*",
               "schedule.*", "strand.*", "peer.*",  "workflow.*", "mcp.*"};
  return p;
}

}  // namespace airlock::capability
