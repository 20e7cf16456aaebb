// Reason codes of egress decisions (the reason column of the egress vectors in
// tests/egress/data, docs/egress.md "Decision sequence"; spec 000,
// "What the proxy does on CONNECT": "Refusals carry a reason").
//
// A reason is logged with every decision and used as a metric label. Clients
// of the proxy see only the reason code, never a resolved address.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace airlock::egress {

enum class Reason : std::uint8_t {
  kAllowed,
  // Request shape (the proxy's request head and the authority parser).
  kMalformedRequest,
  kMalformedAuthority,
  kNonAsciiHost,
  kIpLiteral,
  kOriginFormNotSupported,
  kHttpsAbsoluteForm,
  // An http:// absolute-form request whose destination the policy would
  // allow: the proxy still refuses it, because it tunnels CONNECT only. Not in the vectors' list;
  // an Airlock addition.
  kAbsoluteFormNotSupported,
  kHostHeaderMismatch,
  kSchemeNotAllowed,
  // Policy.
  kModeDeny,
  kHostNotAllowed,
  kPortNotAllowed,
  // DNS. dns_error is an operational failure (SERVFAIL, timeout), not a
  // policy refusal; both fail closed.
  kDnsError,
  kDnsNoAnswer,
  // A resolved address is in the denylist; the AddressClass says which block.
  kResolvedDenied,
  // Platform client (outbound guard).
  kRedirectDenied,
  // Any unexpected internal failure; always a refusal.
  kInternalError,
};

// Stable lower_snake_case name ("host_not_allowed"). kResolvedDenied is
// "resolved_denied"; Decision::reasonCode() appends ":<class>".
std::string_view reasonName(Reason reason) noexcept;

}  // namespace airlock::egress
