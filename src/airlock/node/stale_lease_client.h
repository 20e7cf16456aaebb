// The execution node's one call back toward the gateways (spec 000,
// "Nothing outlives its lease"): its reaper's StaleLeaseQuery
// (port/execution_node.h) over the gateways' internal route
// POST /internal/v1/leases/stale, authenticated with the service
// credential. The leases of the node's live environments go out (opaque
// ids and epochs, port/stale_lease_wire.h), the ids of the stale ones come
// back; more than kMaxStaleLeaseQuestion leases go as several questions.
//
// The gateways are asked in turn until one answers 200 with a well-formed
// answer. Anything else (down, unreachable, slower than `timeout`, a
// refusal such as 401 or 503, a redirect, a malformed body) counts as not
// answering, and the next is asked. When none answers, the answer is "none
// stale": the node keeps what it has, and expires_at still ends each
// environment on time. An id in an answer that was not asked about is
// ignored. Requests go through the platform's one HTTP client
// (egress/http_client.h); the query blocks for at most `timeout` per
// gateway asked.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/port/execution_node.h"

namespace airlock::node {

struct GatewayEndpoints {
  std::vector<std::string> urls;            // "http://host:port", each a gateway
  std::string credential;                   // the service credential (bearer)
  std::chrono::milliseconds timeout{5000};  // per gateway asked
  // Told of each gateway that did not answer (its URL as configured, and
  // why, in words without the credential), for the node's log. Optional.
  std::function<void(std::string_view url, std::string_view why)> on_unanswered;
};

StaleLeaseQuery staleLeaseQueryOverHttp(GatewayEndpoints endpoints);

}  // namespace airlock::node
