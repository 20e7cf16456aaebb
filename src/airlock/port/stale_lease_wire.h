// The reaper's question on the wire (spec 000, "Nothing outlives its
// lease"): the one body an execution node sends back toward the gateways
// (POST /internal/v1/leases/stale, node/stale_lease_client.h) and the
// answer a gateway gives (gateway/api: the route's handler). Both sides
// read and write it here, so the two cannot drift.
//
//   question  {"leases": [{"tenant_id", "run_id", "lease_epoch",
//                          "environment_id"}, ...]}
//   answer    {"stale": ["<environment_id>", ...]}
//
// Opaque ids and epochs only: no tenant data travels either way.
#pragma once

#include <cstddef>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "airlock/core/error.h"
#include "airlock/port/execution_node.h"

namespace airlock {

// The most leases one question carries. A node with more live environments
// asks in several questions (the client splits them).
inline constexpr std::size_t kMaxStaleLeaseQuestion = 10000;

// The question's body for `leases` (at most kMaxStaleLeaseQuestion; the
// caller splits).
std::string staleLeaseQuestionBody(const std::vector<LiveLease>& leases);

// The leases of a question's parsed body. Errors are ToolValidationError
// naming the problem: a body that is not an object, a key other than
// "leases", more than kMaxStaleLeaseQuestion leases, and per lease
// ("leases[3].run_id ...") a missing or extra key, a tenant or run that is
// not a platform identifier (core/ids.h isPlatformIdentifier), an
// environment id of neither form (environmentIdNode), an epoch that is not
// a whole number from 0 to 2^63-1.
Result<std::vector<LiveLease>> staleLeaseQuestionFrom(const nlohmann::json& body);

// The answer's body: the stale environment ids.
std::string staleLeaseAnswerBody(const std::vector<std::string>& stale);

// The stale ids of an answer's raw body, keeping only ids among `asked`
// (an id the node did not ask about is ignored). A body that is not
// {"stale": [strings...]} is ToolValidationError (the client treats the
// gateway as not answering).
Result<std::vector<std::string>> staleLeaseAnswerFrom(const std::string& body,
                                                      const std::vector<LiveLease>& asked);

}  // namespace airlock
