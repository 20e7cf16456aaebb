#include "airlock/egress/outbound_guard.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <stdexcept>

#include "airlock/egress/curl_parts.h"
#include "airlock/egress/http_client.h"

namespace airlock::egress {
namespace {

using namespace curl_parts;

constexpr const char* kUserinfoRefused =
    "userinfo in the URL is refused (send credentials in a header)";

bool isBadByte(unsigned char c) {
  return c <= 0x20 || c == 0x7f || c == '\\';
}

// Step 1 on the bytes of an absolute URL whose "scheme://" ends at
// `authority_begin`.
std::optional<UrlError> scanBytes(std::string_view url, std::size_t authority_begin) {
  std::size_t authority_end = url.find_first_of("/?#", authority_begin);
  if (authority_end == std::string_view::npos) authority_end = url.size();
  for (std::size_t i = 0; i < url.size(); ++i) {
    const auto c = static_cast<unsigned char>(url[i]);
    const bool in_authority = i >= authority_begin && i < authority_end;
    if (in_authority && c >= 0x80)
      return UrlError{Reason::kNonAsciiHost, "non-ASCII byte in the URL's host"};
    if (in_authority && (isBadByte(c) || c == '%'))
      return UrlError{Reason::kMalformedAuthority,
                      "control byte, space, backslash or '%' in the URL's authority"};
    if (isBadByte(c) || c >= 0x80)
      return UrlError{Reason::kMalformedRequest,
                      "control byte, space, backslash or non-ASCII byte in the URL "
                      "(it must be percent-encoded)"};
  }
  return std::nullopt;
}

std::string originOf(std::string_view scheme, const Authority& a) {
  return std::string(scheme) + "://" + a.host + ":" + std::to_string(a.port);
}

// Whether `name` is one the caller listed in credential_headers (any case).
bool isListed(std::string_view name, const std::vector<std::string>& listed) {
  const std::string n = lower(name);
  return std::any_of(listed.begin(), listed.end(),
                     [&n](const std::string& e) { return lower(e) == n; });
}

OutboundError refusal(std::string code, const std::string& origin, const std::string& why,
                      std::vector<OutboundHop> hops) {
  std::string context = "egress refused (" + code + "): ";
  if (!origin.empty()) context += origin + ": ";
  context += why;
  return OutboundError{std::move(code), Error{ErrorCode::kExecutionRejected, 0, std::move(context)},
                       std::move(hops)};
}

OutboundError transportFailure(std::string code, const std::string& origin, const std::string& why,
                               std::vector<OutboundHop> hops) {
  std::string context = "egress request failed (" + code + "): " + origin + ": " + why;
  return OutboundError{std::move(code),
                       Error{ErrorCode::kExecutionUnavailable, 0, std::move(context)},
                       std::move(hops)};
}

bool headerIsSafe(std::string_view text) {
  return std::none_of(text.begin(), text.end(),
                      [](char c) { return c == '\r' || c == '\n' || c == '\0'; });
}

}  // namespace

std::string EgressUrl::origin() const {
  return originOf(scheme, authority);
}

tl::expected<EgressUrl, UrlError> parseEgressUrl(std::string_view url) {
  try {
    // 2 before 1: the scheme decides where the authority starts.
    const auto colon = url.find(':');
    if (colon == std::string_view::npos || colon == 0)
      return tl::unexpected(UrlError{Reason::kMalformedRequest, "not an absolute URL"});
    const std::string scheme = lower(url.substr(0, colon));
    const bool scheme_chars = std::all_of(scheme.begin(), scheme.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '-' || c == '.';
    });
    if (!scheme_chars)
      return tl::unexpected(UrlError{Reason::kMalformedRequest, "not an absolute URL"});
    if (scheme != "http" && scheme != "https")
      return tl::unexpected(
          UrlError{Reason::kSchemeNotAllowed,
                   "scheme \"" + sanitizeForLog(scheme, 20) + "\" (only http and https)"});
    if (url.substr(colon + 1, 2) != "//")
      return tl::unexpected(UrlError{Reason::kMalformedRequest, "no \"//\" after the scheme"});
    const std::size_t authority_begin = colon + 3;
    if (auto bad = scanBytes(url, authority_begin)) return tl::unexpected(std::move(*bad));

    // 3. The authority as written, through the strict parser.
    std::size_t authority_end = url.find_first_of("/?#", authority_begin);
    if (authority_end == std::string_view::npos) authority_end = url.size();
    const std::string_view raw_authority =
        url.substr(authority_begin, authority_end - authority_begin);
    const std::uint16_t default_port = scheme == "https" ? 443 : 80;
    if (raw_authority.find('@') != std::string_view::npos)
      return tl::unexpected(UrlError{Reason::kMalformedAuthority, kUserinfoRefused});
    auto authority = parseAuthority(raw_authority, default_port);
    if (!authority)
      return tl::unexpected(
          UrlError{authority.error().reason, std::move(authority.error().detail)});

    // 4. libcurl's parser.
    curlGlobalInitOnce();
    CurlUrl u(curl_url());
    if (!u) return tl::unexpected(UrlError{Reason::kInternalError, "curl_url failed"});
    const std::string text(url);
    if (const CURLUcode rc = curl_url_set(u.get(), CURLUPART_URL, text.c_str(), 0); rc != CURLUE_OK)
      return tl::unexpected(UrlError{Reason::kMalformedRequest,
                                     std::string("URL refused: ") + curl_url_strerror(rc)});
    if (urlPart(u.get(), CURLUPART_USER) || urlPart(u.get(), CURLUPART_PASSWORD) ||
        urlPart(u.get(), CURLUPART_OPTIONS))
      return tl::unexpected(UrlError{Reason::kMalformedAuthority, kUserinfoRefused});

    // Two parsers, one answer.
    const auto curl_host = urlPart(u.get(), CURLUPART_HOST);
    const auto curl_port = urlPart(u.get(), CURLUPART_PORT, CURLU_DEFAULT_PORT);
    const auto curl_canonical =
        curl_host ? parseHostName(*curl_host) : tl::expected<std::string, AuthorityError>();
    if (!curl_host || !curl_port || !curl_canonical || *curl_canonical != authority->host ||
        parsePort(*curl_port) != authority->port)
      return tl::unexpected(UrlError{Reason::kMalformedAuthority,
                                     "the URL's authority parses differently in libcurl"});

    // The URL as dialled: the canonical host (the CURLOPT_RESOLVE pin is for
    // exactly that name).
    if (curl_url_set(u.get(), CURLUPART_HOST, authority->host.c_str(), 0) != CURLUE_OK)
      return tl::unexpected(UrlError{Reason::kInternalError, "curl_url_set host failed"});
    auto normalized = urlPart(u.get(), CURLUPART_URL);
    if (!normalized) return tl::unexpected(UrlError{Reason::kInternalError, "curl_url_get failed"});
    return EgressUrl{scheme, std::move(*authority), std::move(*normalized)};
  } catch (...) {
    return tl::unexpected(UrlError{Reason::kInternalError, "internal error parsing the URL"});
  }
}

OutboundGuard::OutboundGuard(std::shared_ptr<const Policy> policy,
                             std::shared_ptr<Resolver> resolver,
                             std::shared_ptr<const AddressClassifier> classifier,
                             OutboundLimits limits, std::shared_ptr<OutboundObserver> observer)
    : policy_(std::move(policy)),
      resolver_(std::move(resolver)),
      classifier_(std::move(classifier)),
      limits_(limits),
      observer_(std::move(observer)) {
  if (!policy_ || !resolver_ || !classifier_)
    throw std::invalid_argument("OutboundGuard needs a policy, a resolver and a classifier");
  curlGlobalInitOnce();
}

UrlDecision OutboundGuard::check(std::string_view url) const {
  UrlDecision out;
  auto parsed = parseEgressUrl(url);
  if (!parsed) {
    out.decision = deniedBeforePolicy(parsed.error().reason, std::move(parsed.error().detail));
    return out;
  }
  out.decision = decide(*policy_, parsed->authority, *resolver_, *classifier_);
  out.url = std::move(*parsed);
  return out;
}

namespace {

// One fetch across its hops: the guard's record of every hop it decided (or
// refused), in order, and what decided the headers.
struct FetchState {
  const OutboundRequest* request = nullptr;
  std::vector<OutboundHop> hops;
  // The refusal a hop got (its hops are filled in once the client returns).
  std::optional<OutboundError> refused;
};

// What is wrong with the request itself, before any URL is looked at.
std::optional<std::string> malformedRequest(const OutboundRequest& request) {
  for (const auto& [name, value] : request.headers)
    if (name.empty() || !headerIsSafe(name) || !headerIsSafe(value) ||
        name.find(':') != std::string::npos)
      return "a request header has an empty name, ':', CR, LF or NUL";
  static constexpr std::string_view kMethods[] = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"};
  if (std::find(std::begin(kMethods), std::end(kMethods), request.method) == std::end(kMethods))
    return "method must be GET, HEAD, POST, PUT, PATCH or DELETE";
  return std::nullopt;
}

// Step "parse URL" of a hop: the URL to decide. A relative Location keeps
// the checked authority; its bytes are checked the same way as a URL's path.
tl::expected<std::string, OutboundError> hopUrl(const HopContext& ctx, FetchState& s) {
  if (ctx.index == 0 || !ctx.relative) return ctx.url;
  const std::string from = s.hops.back().origin;
  OutboundHop refused;
  std::string why;
  if (auto bad = scanBytes(ctx.location, ctx.location.size())) {
    refused.decision.reason = bad->reason;
    why = "redirect Location refused: " + std::string(reasonName(bad->reason));
  } else if (ctx.url.empty()) {
    refused.decision.reason = Reason::kMalformedRequest;
    why = "redirect Location does not resolve to a URL";
  } else {
    return ctx.url;
  }
  s.hops.push_back(std::move(refused));
  return tl::unexpected(refusal("redirect_denied", from, why, {}));
}

// Step "decide" (and with it the one lookup): check() of the hop's URL,
// reported to the observer; a refusal names the hop's own reason code.
tl::expected<UrlDecision, OutboundError> decideHop(const OutboundGuard& guard,
                                                   OutboundObserver* observer, int index,
                                                   const std::string& url, FetchState& s) {
  UrlDecision ud = guard.check(url);
  if (observer != nullptr) {
    try {
      observer->onDecision(ud.decision, index);
    } catch (...) {
      // Metrics are best effort; the decision stands.
    }
  }
  OutboundHop hop;
  hop.decision = ud.decision;
  if (ud.url) hop.origin = ud.url->origin();
  if (ud.decision.allowed() && !ud.decision.dialAddresses().empty()) {
    s.hops.push_back(std::move(hop));
    return ud;
  }
  const std::string code = ud.decision.allowed() ? "internal_error" : ud.decision.reasonCode();
  const std::string target = hop.origin.empty() ? std::string("a URL") : hop.origin;
  const std::string from = index > 0 ? s.hops.back().origin : hop.origin;
  const std::string why = ud.decision.allowed()        ? "no checked address to dial"
                          : ud.decision.detail.empty() ? "refused by the egress policy"
                                                       : ud.decision.detail;
  s.hops.push_back(std::move(hop));
  if (index > 0)
    return tl::unexpected(
        refusal("redirect_denied", from, "redirect to " + target + " refused: " + code, {}));
  return tl::unexpected(refusal(code, from, why, {}));
}

// Step "pin address": the plan for an allowed hop, dialled at the checked
// addresses only, with the caller's headers. From the first hop to another
// origin on, the HTTP client sends only the cross-origin safe ones of them
// (http_client.h), and the caller's credential_headers are left out here.
HopPlan pinHop(const UrlDecision& ud, const HopContext& ctx, FetchState& s) {
  s.hops.back().credentials_sent = !ctx.cross_origin;
  HopPlan plan;
  plan.url = ud.url->url;
  for (const auto& [name, value] : s.request->headers)
    if (!ctx.cross_origin || !isListed(name, s.request->credential_headers))
      plan.headers.emplace_back(name, value);
  for (const IpAddress& a : ud.decision.dialAddresses())
    plan.pinned_addresses.push_back(a.unmapped().value_or(a).toString());
  return plan;
}

// The guard's hops with what the client saw of the dialled ones (the client
// dials the decided hops in order, so the two lists line up).
std::vector<OutboundHop> hopsOf(FetchState& s, const std::vector<HttpHop>& dialled) {
  std::vector<OutboundHop> hops = std::move(s.hops);
  for (std::size_t i = 0; i < dialled.size() && i < hops.size(); ++i) {
    hops[i].status = dialled[i].status;
    if (!dialled[i].dialed.empty()) hops[i].dialed = IpAddress::parse(dialled[i].dialed);
  }
  return hops;
}

// The client's failure as the guard's error.
OutboundError failureOf(const HttpError& e, FetchState& s, const OutboundLimits& limits) {
  std::vector<OutboundHop> hops = hopsOf(s, e.hops);
  if (e.kind == HttpFailure::kRefused && s.refused) {
    OutboundError out = std::move(*s.refused);
    out.hops = std::move(hops);
    return out;
  }
  const std::string origin = hops.empty() ? std::string() : hops.back().origin;
  switch (e.kind) {
    case HttpFailure::kTooManyRedirects:
      return refusal("redirect_denied", origin,
                     "more than " + std::to_string(limits.max_redirects) + " redirects",
                     std::move(hops));
    case HttpFailure::kPinViolation:
      return refusal("internal_error", origin,
                     "libcurl tried to connect to an address that was not checked",
                     std::move(hops));
    case HttpFailure::kBodyTooLarge:
    case HttpFailure::kHeadersTooLarge:
      return transportFailure("response_too_large", origin,
                              "response larger than " + std::to_string(limits.max_body_bytes) +
                                  " bytes of body or " + std::to_string(limits.max_header_bytes) +
                                  " bytes of headers",
                              std::move(hops));
    case HttpFailure::kTimeout:
      return transportFailure("timeout", origin, e.detail, std::move(hops));
    case HttpFailure::kConnectFailed:
      return transportFailure("connect_failed", origin, e.detail, std::move(hops));
    default:
      return transportFailure("transport_error", origin, e.detail, std::move(hops));
  }
}

}  // namespace

OutboundResult OutboundGuard::fetch(const OutboundRequest& request) const {
  FetchState s;
  s.request = &request;
  try {
    if (auto bad = malformedRequest(request))
      return tl::unexpected(refusal("malformed_request", "", *bad, {}));
    const HopPolicy policy = [this, &s](const HopContext& ctx) -> HopDecision {
      auto url = hopUrl(ctx, s);
      auto ud = url ? decideHop(*this, observer_.get(), ctx.index, *url, s)
                    : tl::expected<UrlDecision, OutboundError>(tl::unexpect, url.error());
      if (!ud) {
        s.refused = std::move(ud.error());
        return tl::unexpected(HopRefusal{s.refused->code, s.refused->error.message()});
      }
      return pinHop(*ud, ctx, s);
    };
    HttpRequest http;
    http.url = request.url;
    http.method = request.method;
    http.body = request.body;
    http.limits = limits_;
    auto r = httpFetch(http, policy);
    if (!r) return tl::unexpected(failureOf(r.error(), s, limits_));
    OutboundResponse response;
    response.status = r->status;
    response.final_url = std::move(r->url);
    response.headers = std::move(r->headers);
    response.body = std::move(r->body);
    response.hops = hopsOf(s, r->hops);
    return response;
  } catch (...) {
    return tl::unexpected(
        refusal("internal_error", "", "internal error in the outbound guard", hopsOf(s, {})));
  }
}

}  // namespace airlock::egress
