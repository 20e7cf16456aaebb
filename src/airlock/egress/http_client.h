// The one bounded HTTP(S) client (libcurl) under every request the platform
// itself makes: the outbound guard's fetch (outbound_guard.h: spec 000, "The
// egress boundary", the worker's outbound guard) and the OCI registry client
// (images/registry_client.h). It knows no egress policy (its one rule of its
// own is which headers cross origins, below): the caller hands it a per-hop
// policy, asked before every hop (the request's own URL and each
// redirect), which allows the hop (with the headers to send on it and,
// optionally, the addresses to dial) or refuses it with a reason.
//
// Namespace airlock::egress, library airlock_http_client (airlock_core and
// libcurl only: no policy, no resolver; the images library links it without
// the egress policy).
//
// What every request gets, whatever the policy:
//   * redirects (301, 302, 303, 307, 308 with a Location) are followed here,
//     one hop at a time, never by libcurl: at most limits.max_redirects
//     (one more fails with kTooManyRedirects before the policy is asked);
//     301/302 turn POST into GET, 303 turns anything but HEAD into GET, and
//     GET and HEAD carry no body; 307/308 keep method and body;
//   * bounds: limits.max_header_bytes of response headers per hop,
//     limits.max_body_bytes of any body the client holds (a body it collects
//     and the body of a redirect it follows; a body handed to a sink is the
//     sink's to bound), limits.connect_timeout and limits.hop_timeout per
//     hop, and limits.deadline over the whole request;
//   * only the headers the policy returns for the hop (plus an empty
//     "Expect:", so no 100-continue wait), and from the first hop at
//     another origin (scheme, host or port, as libcurl reads the URL) than
//     the request's own on, for that hop and every later one (even back at
//     the first origin), only those of them on the cross-origin safe list
//     (isCrossOriginSafeHeader below): whatever a policy returns, no
//     credential a caller set (Authorization, Cookie, X-Api-Key, any
//     custom header) follows a redirect to another origin;
//   * proxy environment variables ignored (CURLOPT_PROXY "" and
//     CURLOPT_NOPROXY "*"); no .netrc, no cookie engine, no decompression
//     (bytes as sent), protocols http and https only; TLS verified against
//     the system store or ca_file; a new connection per hop;
//   * a pin (HopPlan::pinned_addresses): libcurl is handed exactly those
//     addresses for the hop's host and port (CURLOPT_RESOLVE, so it never
//     resolves the name itself) and any socket to another address or port is
//     refused (kPinViolation);
//   * cancellation: once request.cancel_fd is readable (an eventfd or pipe,
//     e.g. CancelToken::pollFd()), the transfer stops within one poll wake-up
//     and the request fails with kCancelled.
//
// Thread-safe: each call uses its own curl handles. Blocks for the network;
// the policy and the sink run on the calling thread. Never throws.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "airlock/core/error.h"

namespace airlock::egress {

// Header fields in order; names as written (compare case-insensitively).
using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpLimits {
  int max_redirects = 5;                              // redirects followed; 0 follows none
  std::size_t max_body_bytes = 8 * 1024 * 1024;       // any body the client holds
  std::size_t max_header_bytes = 64 * 1024;           // all response headers of one hop
  std::chrono::milliseconds connect_timeout{10'000};  // per hop
  std::chrono::milliseconds hop_timeout{30'000};      // per hop, whole transfer
  // The whole request, every hop; none: only the per-hop bounds.
  std::optional<std::chrono::steady_clock::time_point> deadline;
};

// What the policy is asked about one hop.
struct HopContext {
  int index = 0;  // 0: the request's own URL; n: the n-th redirect
  // The URL as the client would dial it: the request's URL, or the Location
  // resolved against the previous hop's URL (absolute: as written;
  // "//authority...": the previous scheme prepended; otherwise resolved by
  // libcurl). "" when a relative Location does not resolve.
  std::string url;
  std::string location;      // the Location as sent ("" on hop 0)
  bool relative = false;     // the Location had neither scheme nor "//"
  std::string previous_url;  // the URL the previous hop dialled ("" on hop 0)
  long redirect_status = 0;  // the status that led here (0 on hop 0)
  std::string method;        // this hop's method
  bool with_body = false;    // whether this hop carries the body
  // Whether this hop's URL, or an earlier hop's, is at another origin than
  // hop 0's: the client sends only cross-origin safe headers on it.
  bool cross_origin = false;
};

// The policy's answer for an allowed hop.
struct HopPlan {
  std::string url;  // what to dial; "" dials HopContext::url
  // Sent on this hop (no CR, LF or NUL): all of them while the request is at
  // its own origin, only the cross-origin safe ones after (see above).
  HttpHeaders headers;
  // IP literals ("192.0.2.1", "2001:db8::1"); non-empty pins the hop to them.
  std::vector<std::string> pinned_addresses;
};

struct HopRefusal {
  std::string code;     // the caller's reason code, returned as is
  std::string message;  // the caller's words, returned as is
};

using HopDecision = tl::expected<HopPlan, HopRefusal>;

// The request headers a hop at another origin than the request's own
// carries (lower case; names compare case-insensitively): content
// negotiation and caching, none of which a program uses for credentials.
// The client does not decompress, so Accept-Encoding only asks for what the
// caller gets either way.
inline constexpr std::string_view kCrossOriginSafeHeaders[] = {
    "accept", "accept-encoding", "accept-language", "cache-control", "user-agent"};
// ... and these while the body goes too (307/308 keep it).
inline constexpr std::string_view kCrossOriginBodyHeaders[] = {"content-type", "content-language"};

// Whether the header `name` (any case) goes with a hop at another origin
// than the request's own: it is on kCrossOriginSafeHeaders, or on
// kCrossOriginBodyHeaders and the hop carries the body.
bool isCrossOriginSafeHeader(std::string_view name, bool with_body);

// Called once per hop before anything is sent; may keep its own record.
using HopPolicy = std::function<HopDecision(const HopContext&)>;

// Receives the final response's body in pieces (status: the final
// response's); false stops the transfer and the request ends with what
// arrived (HttpResponse::stopped).
using BodySink = std::function<bool(long status, std::string_view bytes)>;

struct HttpRequest {
  std::string url;
  std::string method = "GET";  // sent as given
  std::string body;            // sent when non-empty, or always for POST
  HttpLimits limits;
  std::string ca_file;  // PEM bundle for TLS; "" is the system store
  BodySink sink;        // empty: the body is collected in HttpResponse::body
  int cancel_fd = -1;   // borrowed; readable once the request is cancelled
};

// One hop the client dialled.
struct HttpHop {
  std::string url;     // as dialled
  long status = 0;     // HTTP status, 0 if no response
  std::string dialed;  // the address connected to, "" if none
};

struct HttpResponse {
  long status = 0;
  std::string url;       // the final hop's URL
  HttpHeaders headers;   // the final response's, names as sent, in order
  std::string body;      // collected when the request had no sink
  bool stopped = false;  // the sink stopped the transfer
  std::vector<HttpHop> hops;
};

enum class HttpFailure {
  kRefused,           // the policy refused a hop: code and message are its own
  kTooManyRedirects,  // a redirect past limits.max_redirects
  kInvalidPlan,       // the policy's plan cannot be sent (bad header or address)
  kConnectFailed,     // no connection
  kTimeout,           // a hop's timeout or the deadline
  kBodyTooLarge,      // over limits.max_body_bytes
  kHeadersTooLarge,   // over limits.max_header_bytes
  kPinViolation,      // libcurl tried to open a socket outside the pin
  kCancelled,         // cancel_fd became readable
  kTransport,         // any other transfer failure (TLS, a cut body, ...)
};

struct HttpError {
  HttpFailure kind = HttpFailure::kTransport;
  std::string code;           // kRefused: the policy's code
  std::string detail;         // the policy's message, or what failed (libcurl's words)
  std::vector<HttpHop> hops;  // every hop dialled, the failing one included
};

using HttpResult = tl::expected<HttpResponse, HttpError>;

// Performs `request`, asking `policy` before every hop. Never throws.
HttpResult httpFetch(const HttpRequest& request, const HopPolicy& policy);

// An absolute URL as libcurl reads it (the reading every hop is dialled
// with): scheme and host lower case, the port explicit.
struct UrlOrigin {
  std::string scheme;
  std::string host;
  std::uint16_t port = 0;
  std::string authority;      // host, and ":port" when written
  std::string origin;         // scheme://host:port
  std::string url;            // libcurl's normalized form of the whole URL
  bool has_userinfo = false;  // user, password or login options in the authority
};
// Fails with libcurl's words when it refuses the URL.
tl::expected<UrlOrigin, std::string> parseUrl(const std::string& url);
// parseUrl without the reason.
std::optional<UrlOrigin> urlOrigin(const std::string& url);
// Percent-encodes every byte but A-Z a-z 0-9 - . _ ~ (a query value).
std::string urlEscape(std::string_view text);

// curl_global_init, once per process (libcurl 7.88's is not thread-safe):
// the one piece of global state. httpFetch and the URL helpers above call it
// themselves; any other libcurl user in the tree calls it before its first
// handle instead of a curl_global_init of its own.
void curlGlobalInitOnce();

// Whether a hop from `from_url` to `to_url` goes from https down to http.
bool isSchemeDowngrade(const std::string& from_url, const std::string& to_url);

}  // namespace airlock::egress
