#include "airlock/gateway/capabilities/gateway_capabilities.h"

#include "airlock/gateway/capabilities/capability_modules.h"

namespace airlock::gateway {

void addGatewayCapabilities(capability::CapabilityTable& table,
                            const GatewayCapabilityServices& services) {
  addNotesCapabilities(table, services.notes);
  addNetCapabilities(table, services.net);
  addScheduleCapabilities(table, services);
}

}  // namespace airlock::gateway
