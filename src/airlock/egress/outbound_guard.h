// The outbound guard: the platform's own HTTP(S) requests to tenant-supplied
// URLs (an HTTP MCP server a tenant configured, a webhook), decided by the
// same function as the sandbox proxy (spec 000, "The egress boundary": "The
// worker's outbound guard ... checked against the same policy before the
// connection is made": one policy, two enforcement points, with the same parser,
// resolver and classifier; no second resolution, no second path around the policy).
//
// A URL is decided in this order, the first failure deciding the reason
// (reason.h codes):
//   1. bytes: any control byte, space, backslash or '%' inside the authority
//      (the part between "://" and the first '/', '?' or '#') is
//      malformed_authority, a byte >= 0x80 there is non_ascii_host; a
//      control byte, space, backslash or non-ASCII byte elsewhere is
//      malformed_request (a URL must arrive percent-encoded);
//   2. scheme: "http" or "https" only (case-insensitive), else
//      scheme_not_allowed;
//   3. the authority as written (between "://" and the first '/', '?' or
//      '#') goes through the strict parseAuthority() of authority.h with the
//      scheme's default port (80 or 443): malformed_authority |
//      non_ascii_host | ip_literal. Userinfo ("https://user:pw@host/") is
//      REFUSED (malformed_authority), never dropped: credentials go in
//      headers, and '@' in a URL is the classic parser differential (Orange
//      Tsai, 2017);
//   4. libcurl's URL API (CURLU) parses the whole URL; a URL it refuses is
//      malformed_request, and its host and port must equal step 3's (two
//      parsers, one answer), else malformed_authority;
//   5. decide() of decision.h, the very function the proxy calls (not a
//      copy): policy (mode_deny, host_not_allowed,
//      port_not_allowed), one lookup through the Resolver, every address
//      classified (resolved_denied:<class>).
//
// fetch() then sends the request through the bounded HTTP client
// (http_client.h), whose per-hop policy is the guard: each hop is parsed,
// decided (the one lookup) and pinned to the decision's checked addresses:
// CURLOPT_RESOLVE hands curl exactly dialAddresses() for host:port (curl
// never calls a resolver of its own for that name), and a
// CURLOPT_OPENSOCKETFUNCTION refuses any socket whose destination is not one
// of those addresses on the decided port (defence in depth: a pin
// violation fails the hop with internal_error). Proxy environment variables
// (http_proxy, HTTPS_PROXY, ALL_PROXY, NO_PROXY) are ignored
// (CURLOPT_PROXY "" and CURLOPT_NOPROXY "*"). No cookie engine, no .netrc,
// no decompression, protocols limited to http and https. curl follows no
// redirect itself: the client hands each 301/302/303/307/308 Location,
// resolved against the current URL, back to the guard, which decides it
// from step 1 again (a refusal is reported as
// redirect_denied with the hop's own code in the message); at most
// max_redirects hops (one more is redirect_denied). From the first hop to
// another origin (scheme, host, port) on, for that hop and all later ones
// (even back at the first origin), only the request headers on the HTTP
// client's cross-origin safe list go along (kCrossOriginSafeHeaders, plus
// kCrossOriginBodyHeaders while the body does: http_client.h, which applies
// the rule to every caller); every other header the caller set
// (Authorization, Proxy-Authorization, Cookie, X-Api-Key, any custom one) is
// dropped, and so is a safe name listed in credential_headers. Same-origin
// hops carry every header. 301/302 turn POST into GET, 303 turns anything but HEAD into GET
// (the body is dropped); 307/308 keep method and body.
//
// Thread-safe: every fetch uses its own curl handles. fetch() blocks (the
// lookup, the connection and the transfer), bounded by the OutboundLimits.
// Error messages name scheme://host:port only, never the path or query,
// which for webhooks often carries a token.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "airlock/core/error.h"
#include "airlock/egress/classifier.h"
#include "airlock/egress/decision.h"
#include "airlock/egress/http_client.h"
#include "airlock/egress/policy.h"
#include "airlock/egress/resolver.h"

namespace airlock::egress {

// A URL that passed steps 1-4.
struct EgressUrl {
  std::string scheme;   // "http" or "https"
  Authority authority;  // canonical host, explicit or default port
  std::string url;      // curl's normalized form, as dialled
  // scheme://host:port, for messages and origin comparison; no path/query.
  std::string origin() const;
};

struct UrlError {
  Reason reason;       // kMalformedRequest, kMalformedAuthority, kNonAsciiHost,
                       // kIpLiteral or kSchemeNotAllowed
  std::string detail;  // what is wrong; never the query string
};

// Steps 1-4 of a URL (no DNS). Never throws.
tl::expected<EgressUrl, UrlError> parseEgressUrl(std::string_view url);

// What check() found: the decision of steps 1-5. When the URL did not parse,
// decision.reason is the UrlError's reason and decision.detail its detail.
struct UrlDecision {
  std::optional<EgressUrl> url;
  Decision decision;
};

// The guard's bounds are the HTTP client's it drives (http_client.h):
// redirects followed, the body of the final response (max_body_bytes), the
// response headers of one hop, per hop the connect and whole-transfer
// timeouts (hop_timeout), and, when set, a deadline for the whole fetch.
using OutboundLimits = HttpLimits;

struct OutboundRequest {
  std::string url;
  std::string method = "GET";  // GET, HEAD, POST, PUT, PATCH or DELETE
  // Sent on every hop while the origin is the first one; after a redirect to
  // another origin only the cross-origin safe ones (see the header comment).
  std::vector<std::pair<std::string, std::string>> headers;
  // Names (case-insensitive) dropped across origins even when on the safe
  // list.
  std::vector<std::string> credential_headers;
  std::string body;  // sent when non-empty (POST/PUT/PATCH)
};

// One request the guard made (or refused), in order.
struct OutboundHop {
  std::string origin;               // scheme://host:port, empty if the URL did not parse
  Decision decision;                // the decide() result for this hop
  std::optional<IpAddress> dialed;  // the address curl connected to
  long status = 0;                  // HTTP status, 0 if no response
  bool credentials_sent = false;    // whether every request header went with it
                                    // (false: only the cross-origin safe ones)
};

struct OutboundResponse {
  long status = 0;
  std::string final_url;
  // The final response's headers, names as sent, in order.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;  // at most max_body_bytes
  std::vector<OutboundHop> hops;
};

struct OutboundError {
  // A reason.h code for refusals ("host_not_allowed",
  // "resolved_denied:metadata", "redirect_denied", "scheme_not_allowed"), or
  // a transport code: "connect_failed", "timeout", "response_too_large",
  // "transport_error".
  std::string code;
  // kExecutionRejected for a refusal (not retriable: the URL or the policy
  // must change), kExecutionUnavailable for a transport failure (retriable).
  // context: "egress refused (<code>): <origin>: <why>" or
  // "egress request failed (<code>): <origin>: <why>".
  Error error;
  std::vector<OutboundHop> hops;  // every hop up to and including the failing one
};

using OutboundResult = tl::expected<OutboundResponse, OutboundError>;

// Metrics hook for the platform point (spec 000, "Tracked metrics";
// egress_decisions_total{point=platform, verdict, reason}), the guard's
// counterpart of ProxyObserver (proxy.h), so the service can count without
// this library depending on a metrics library. Called once per hop fetch()
// decides (check() alone reports nothing), on the calling thread, before the
// hop is dialled or refused. `hop` is 0 for the request's own URL, n for the
// n-th redirect. Must be thread-safe; an exception is swallowed.
class OutboundObserver {
 public:
  virtual ~OutboundObserver() = default;
  virtual void onDecision(const Decision& decision, int hop) = 0;
};

class OutboundGuard {
 public:
  // policy, resolver and classifier must be non-null (std::invalid_argument
  // otherwise: a caller bug); observer is optional. The policy is fixed for
  // the guard's life; build a new guard to change it.
  OutboundGuard(std::shared_ptr<const Policy> policy, std::shared_ptr<Resolver> resolver,
                std::shared_ptr<const AddressClassifier> classifier, OutboundLimits limits = {},
                std::shared_ptr<OutboundObserver> observer = nullptr);

  // Steps 1-5 without connecting (airlock egress check). Never throws.
  UrlDecision check(std::string_view url) const;

  // Decides and performs the request with manual redirects as described
  // above. Never throws.
  OutboundResult fetch(const OutboundRequest& request) const;

  const Policy& policy() const noexcept { return *policy_; }

 private:
  std::shared_ptr<const Policy> policy_;
  std::shared_ptr<Resolver> resolver_;
  std::shared_ptr<const AddressClassifier> classifier_;
  OutboundLimits limits_;
  std::shared_ptr<OutboundObserver> observer_;
};

}  // namespace airlock::egress
