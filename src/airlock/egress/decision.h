// The egress decision function: the one evaluation both enforcement points
// call (spec 000, "What the proxy does on CONNECT" steps 1-4 and "One policy
// object, evaluated by one function, called from two places").
//
// Sequence, each step refusing with its reason code (reason.h):
//   1. (decideAuthority only) parse the request-target with parseAuthority:
//      malformed_authority | non_ascii_host | ip_literal;
//   2. policy, names and ports only: mode_deny | host_not_allowed |
//      port_not_allowed. A refused name is never resolved;
//   3. resolve once through the Resolver: dns_error | dns_no_answer;
//   4. classify every resolved address; if any is denied the whole
//      connection is refused (resolved_denied:<class of the first one>), and
//      every denied address is listed with its class for the log;
//   5. allowed: dialAddresses() are exactly the checked addresses. The
//      caller connects to those (in order, no second lookup) and nothing else.
// The function never sees raw request bytes: callers parse the request head
// first (request_head.h) and pass only the request-target.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/egress/address.h"
#include "airlock/egress/authority.h"
#include "airlock/egress/classifier.h"
#include "airlock/egress/policy.h"
#include "airlock/egress/reason.h"
#include "airlock/egress/resolver.h"

namespace airlock::egress {

enum class Verdict : bool { kDeny = false, kAllow = true };

struct DeniedAddress {
  IpAddress address;
  AddressClass address_class;
};

struct Decision {
  Verdict verdict = Verdict::kDeny;
  Reason reason = Reason::kInternalError;
  // For kResolvedDenied: the class of the first denied address.
  AddressClass address_class = AddressClass::kPublic;
  std::string host;                   // canonical; empty when the authority did not parse
  std::uint16_t port = 0;             // 0 when the authority did not parse
  std::vector<IpAddress> resolved;    // the whole answer (log only)
  std::vector<DeniedAddress> denied;  // every denied address with its class
  std::string detail;                 // human-readable; for logs, not clients
  int lookups = 0;                    // resolver calls made: 0 or 1

  bool allowed() const noexcept { return verdict == Verdict::kAllow; }
  // "host_not_allowed", "resolved_denied:link_local", "allowed".
  std::string reasonCode() const;
  // The addresses to connect to, in order; empty unless allowed().
  const std::vector<IpAddress>& dialAddresses() const noexcept;
};

// The denial for input refused before any policy step (an authority or a
// request head that did not parse): `reason` and `detail`, nothing else.
Decision deniedBeforePolicy(Reason reason, std::string detail);

// Steps 2-5 for an already parsed authority. Never throws (an internal
// failure is a refusal with internal_error).
Decision decide(const Policy& policy, const Authority& target, Resolver& resolver,
                const AddressClassifier& classifier) noexcept;

// Steps 1-5 for a CONNECT request-target ("host:port").
Decision decideAuthority(const Policy& policy, std::string_view target, Resolver& resolver,
                         const AddressClassifier& classifier) noexcept;

// Step 2 only, no DNS: for requests that will never be dialled (absolute-
// form HTTP) so the log still says what the policy thinks.
Decision decideNameOnly(const Policy& policy, const Authority& target) noexcept;

}  // namespace airlock::egress
