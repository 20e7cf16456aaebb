// Inside airlock_gateway_capabilities: each module's registration. Public
// contract: gateway_capabilities.h.
#pragma once

#include "airlock/capability/broker/broker.h"
#include "airlock/gateway/capabilities/gateway_capabilities.h"

namespace airlock::gateway {

void addNotesCapabilities(capability::CapabilityTable& table,
                          const NoteServices& notes);                                 // notes.*
void addNetCapabilities(capability::CapabilityTable& table, const NetServices& net);  // net.fetch
void addScheduleCapabilities(capability::CapabilityTable& table,
                             const GatewayCapabilityServices& services);  // schedule.*

}  // namespace airlock::gateway
