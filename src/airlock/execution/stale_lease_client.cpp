#include "airlock/execution/stale_lease_client.h"

namespace airlock::execution {

// A first shape: no gateway is asked yet, so no lease is ever stale here.
StaleLeaseQuery staleLeaseQueryOverHttp(GatewayEndpoints /*endpoints*/) {
  return [](const std::vector<LiveLease>& /*leases*/) { return std::vector<std::string>{}; };
}

}  // namespace airlock::execution
