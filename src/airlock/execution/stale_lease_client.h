// The execution node's one call back toward the gateways (spec 000,
// "Nothing outlives its lease"): its reaper's StaleLeaseQuery
// (port/execution_node.h) over the gateways' internal route
// POST /internal/v1/leases/stale, authenticated with the service
// credential. The leases of the node's live environments go out (opaque
// ids and epochs), the ids of the stale ones come back.
//
// The gateways are asked in turn until one answers. When none answers
// (down, unreachable, a refusal), the answer is "none stale": the node keeps
// what it has, and expires_at still ends each environment on time.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "airlock/port/execution_node.h"

namespace airlock::execution {

struct GatewayEndpoints {
  std::vector<std::string> urls;            // "http://host:port", each a gateway
  std::string credential;                   // the service credential (bearer)
  std::chrono::milliseconds timeout{5000};  // per gateway asked
};

StaleLeaseQuery staleLeaseQueryOverHttp(GatewayEndpoints endpoints);

}  // namespace airlock::execution
