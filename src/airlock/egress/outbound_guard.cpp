#include "airlock/egress/outbound_guard.h"

#include <curl/curl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <mutex>
#include <stdexcept>

namespace airlock::egress {
namespace {

struct CurlUrlDeleter {
  void operator()(CURLU* u) const noexcept { curl_url_cleanup(u); }
};
using CurlUrl = std::unique_ptr<CURLU, CurlUrlDeleter>;

struct CurlEasyDeleter {
  void operator()(CURL* c) const noexcept { curl_easy_cleanup(c); }
};
using CurlEasy = std::unique_ptr<CURL, CurlEasyDeleter>;

struct CurlListDeleter {
  void operator()(curl_slist* l) const noexcept { curl_slist_free_all(l); }
};
using CurlList = std::unique_ptr<curl_slist, CurlListDeleter>;

// A string curl allocated.
std::string takeCurlString(char* s) {
  std::string out = s != nullptr ? s : "";
  curl_free(s);
  return out;
}

std::optional<std::string> urlPart(CURLU* u, CURLUPart part, unsigned flags = 0) {
  char* out = nullptr;
  if (curl_url_get(u, part, &out, flags) != CURLUE_OK) {
    curl_free(out);
    return std::nullopt;
  }
  return takeCurlString(out);
}

// curl_global_init is not thread-safe in 7.88; run it once before any handle.
void curlGlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

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

// Whether a request header goes with a hop to another origin than the
// first: only the names of kCrossOriginSafeHeaders (outbound_guard.h), the
// body's own headers only while the body goes too, and never a name the
// caller listed in credential_headers.
bool crossesOrigins(std::string_view name, bool with_body, const std::vector<std::string>& extra) {
  const std::string n = lower(name);
  if (std::any_of(extra.begin(), extra.end(), [&n](const std::string& e) { return lower(e) == n; }))
    return false;
  if (std::find(std::begin(kCrossOriginSafeHeaders), std::end(kCrossOriginSafeHeaders), n) !=
      std::end(kCrossOriginSafeHeaders))
    return true;
  return with_body &&
         std::find(std::begin(kCrossOriginBodyHeaders), std::end(kCrossOriginBodyHeaders), n) !=
             std::end(kCrossOriginBodyHeaders);
}

bool isRedirect(long status) {
  return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

// Per-hop state the curl callbacks write.
struct HopIo {
  std::size_t max_body = 0;
  std::size_t max_headers = 0;
  std::string body;
  bool body_too_large = false;
  std::vector<std::pair<std::string, std::string>> headers;
  std::size_t header_bytes = 0;
  bool headers_too_large = false;
  // The pin: the only (address, port) pairs a socket may be opened to.
  std::vector<IpAddress> allowed;
  std::uint16_t port = 0;
  bool pin_violation = false;
};

std::size_t onBody(char* data, std::size_t size, std::size_t n, void* user) {
  auto* io = static_cast<HopIo*>(user);
  const std::size_t len = size * n;
  if (io->body.size() + len > io->max_body) {
    io->body_too_large = true;
    return 0;  // CURLE_WRITE_ERROR
  }
  io->body.append(data, len);
  return len;
}

std::size_t onHeader(char* data, std::size_t size, std::size_t n, void* user) {
  auto* io = static_cast<HopIo*>(user);
  const std::size_t len = size * n;
  io->header_bytes += len;
  if (io->header_bytes > io->max_headers) {
    io->headers_too_large = true;
    return 0;
  }
  std::string_view line(data, len);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  if (line.rfind("HTTP/", 0) == 0) {
    io->headers.clear();  // a new response (after 1xx)
    return len;
  }
  const auto colon = line.find(':');
  if (colon == std::string_view::npos || colon == 0) return len;
  std::string_view value = line.substr(colon + 1);
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  io->headers.emplace_back(std::string(line.substr(0, colon)), std::string(value));
  return len;
}

curl_socket_t onOpenSocket(void* user, curlsocktype purpose, curl_sockaddr* address) {
  auto* io = static_cast<HopIo*>(user);
  if (purpose != CURLSOCKTYPE_IPCXN) {
    io->pin_violation = true;
    return CURL_SOCKET_BAD;
  }
  const auto a = IpAddress::fromSockaddr(&address->addr, address->addrlen);
  std::uint16_t port = 0;
  if (address->family == AF_INET && address->addrlen >= sizeof(sockaddr_in))
    port = ntohs(reinterpret_cast<const sockaddr_in*>(&address->addr)->sin_port);
  else if (address->family == AF_INET6 && address->addrlen >= sizeof(sockaddr_in6))
    port = ntohs(reinterpret_cast<const sockaddr_in6*>(&address->addr)->sin6_port);
  const bool pinned = a.has_value() && port == io->port &&
                      std::any_of(io->allowed.begin(), io->allowed.end(), [&a](const IpAddress& x) {
                        return x.unmapped().value_or(x) == a->unmapped().value_or(*a);
                      });
  if (!pinned) {
    io->pin_violation = true;
    return CURL_SOCKET_BAD;
  }
  return ::socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
}

// "host:port:a1,[v6],..." for CURLOPT_RESOLVE.
std::string resolveEntry(const Authority& a, const std::vector<IpAddress>& addresses) {
  std::string entry = a.host + ":" + std::to_string(a.port) + ":";
  bool first = true;
  for (const IpAddress& x : addresses) {
    const IpAddress plain = x.unmapped().value_or(x);
    if (!first) entry += ',';
    first = false;
    entry += plain.isV4() ? plain.toString() : "[" + plain.toString() + "]";
  }
  return entry;
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
    curlGlobalInit();
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
  curlGlobalInit();
}

UrlDecision OutboundGuard::check(std::string_view url) const {
  UrlDecision out;
  auto parsed = parseEgressUrl(url);
  if (!parsed) {
    out.decision.reason = parsed.error().reason;
    out.decision.detail = std::move(parsed.error().detail);
    return out;
  }
  out.decision = decide(*policy_, parsed->authority, *resolver_, *classifier_);
  out.url = std::move(*parsed);
  return out;
}

OutboundResult OutboundGuard::fetch(const OutboundRequest& request) const {
  std::vector<OutboundHop> hops;
  try {
    for (const auto& [name, value] : request.headers)
      if (name.empty() || !headerIsSafe(name) || !headerIsSafe(value) ||
          name.find(':') != std::string::npos)
        return tl::unexpected(refusal("malformed_request", "",
                                      "a request header has an empty name, ':', CR, LF or NUL",
                                      std::move(hops)));
    static constexpr std::string_view kMethods[] = {"GET", "HEAD",  "POST",
                                                    "PUT", "PATCH", "DELETE"};
    if (std::find(std::begin(kMethods), std::end(kMethods), request.method) == std::end(kMethods))
      return tl::unexpected(refusal("malformed_request", "",
                                    "method must be GET, HEAD, POST, PUT, PATCH or DELETE",
                                    std::move(hops)));

    std::string method = request.method;
    std::string body = request.body;
    std::string url_text = request.url;
    std::optional<std::string> original_origin;
    bool credentials = true;

    for (int hop_index = 0;; ++hop_index) {
      const bool is_redirect = hop_index > 0;
      OutboundHop hop;
      UrlDecision ud = check(url_text);
      hop.decision = ud.decision;
      if (observer_) {
        try {
          observer_->onDecision(ud.decision, hop_index);
        } catch (...) {
          // Metrics are best effort; the decision stands.
        }
      }
      if (ud.url) hop.origin = ud.url->origin();
      if (!ud.decision.allowed()) {
        // Strings first: the refusal takes `hops` by value.
        const std::string code = ud.decision.reasonCode();
        const std::string target = hop.origin.empty() ? std::string("a URL") : hop.origin;
        const std::string from = is_redirect ? hops.back().origin : hop.origin;
        const std::string why =
            ud.decision.detail.empty() ? "refused by the egress policy" : ud.decision.detail;
        hops.push_back(std::move(hop));
        if (is_redirect)
          return tl::unexpected(refusal("redirect_denied", from,
                                        "redirect to " + target + " refused: " + code,
                                        std::move(hops)));
        return tl::unexpected(refusal(code, from, why, std::move(hops)));
      }
      const EgressUrl& url = *ud.url;
      if (!original_origin) original_origin = url.origin();
      if (url.origin() != *original_origin) credentials = false;
      hop.credentials_sent = credentials;

      // The request, pinned.
      HopIo io;
      io.max_body = limits_.max_response_bytes;
      io.max_headers = limits_.max_header_bytes;
      io.allowed = ud.decision.dialAddresses();
      io.port = url.authority.port;
      CurlEasy easy(curl_easy_init());
      if (!easy)
        return tl::unexpected(
            transportFailure("transport_error", url.origin(), "curl_easy_init failed", {}));
      CURL* c = easy.get();
      CurlList resolve(curl_slist_append(nullptr, resolveEntry(url.authority, io.allowed).c_str()));
      CurlList headers(curl_slist_append(nullptr, "Expect:"));
      for (const auto& [name, value] : request.headers) {
        if (!credentials && !crossesOrigins(name, !body.empty(), request.credential_headers))
          continue;
        const std::string line = name + ": " + value;
        headers.reset(curl_slist_append(headers.release(), line.c_str()));
      }
      if (!resolve || !headers)
        return tl::unexpected(
            transportFailure("transport_error", url.origin(), "curl_slist_append failed", {}));
      char errbuf[CURL_ERROR_SIZE] = {};
      curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
      curl_easy_setopt(c, CURLOPT_URL, url.url.c_str());
      curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
      curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
      curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
      curl_easy_setopt(c, CURLOPT_PROXY, "");
      curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
      curl_easy_setopt(c, CURLOPT_RESOLVE, resolve.get());
      curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, onOpenSocket);
      curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, &io);
      curl_easy_setopt(c, CURLOPT_FORBID_REUSE, 1L);
      curl_easy_setopt(c, CURLOPT_FRESH_CONNECT, 1L);
      curl_easy_setopt(c, CURLOPT_NETRC, static_cast<long>(CURL_NETRC_IGNORED));
      curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
      curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
                       static_cast<long>(limits_.connect_timeout.count()));
      curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(limits_.total_timeout.count()));
      curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE,
                       static_cast<curl_off_t>(limits_.max_response_bytes));
      curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, onBody);
      curl_easy_setopt(c, CURLOPT_WRITEDATA, &io);
      curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, onHeader);
      curl_easy_setopt(c, CURLOPT_HEADERDATA, &io);
      curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
      if (method == "HEAD") {
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
      } else if (method != "GET" || !body.empty()) {
        if (method != "POST") curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method.c_str());
        if (!body.empty() || method == "POST") {
          curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
          curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.data());
        }
      }

      const CURLcode rc = curl_easy_perform(c);
      char* primary = nullptr;
      if (curl_easy_getinfo(c, CURLINFO_PRIMARY_IP, &primary) == CURLE_OK && primary != nullptr &&
          *primary != '\0')
        hop.dialed = IpAddress::parse(primary);
      curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &hop.status);
      hops.push_back(hop);
      const std::string origin = url.origin();
      if (io.pin_violation)
        return tl::unexpected(refusal("internal_error", origin,
                                      "libcurl tried to connect to an address that was not checked",
                                      std::move(hops)));
      if (rc != CURLE_OK) {
        const std::string why = errbuf[0] != '\0' ? errbuf : curl_easy_strerror(rc);
        if (io.body_too_large || io.headers_too_large || rc == CURLE_FILESIZE_EXCEEDED)
          return tl::unexpected(transportFailure(
              "response_too_large", origin,
              "response larger than " + std::to_string(limits_.max_response_bytes) +
                  " bytes of body or " + std::to_string(limits_.max_header_bytes) +
                  " bytes of headers",
              std::move(hops)));
        if (rc == CURLE_OPERATION_TIMEDOUT)
          return tl::unexpected(transportFailure("timeout", origin, why, std::move(hops)));
        if (rc == CURLE_COULDNT_CONNECT)
          return tl::unexpected(transportFailure("connect_failed", origin, why, std::move(hops)));
        return tl::unexpected(transportFailure("transport_error", origin, why, std::move(hops)));
      }

      const long status = hop.status;
      const auto location = std::find_if(io.headers.begin(), io.headers.end(), [](const auto& h) {
        return lower(h.first) == "location";
      });
      if (!isRedirect(status) || location == io.headers.end()) {
        OutboundResponse response;
        response.status = status;
        response.final_url = url.url;
        response.headers = std::move(io.headers);
        response.body = std::move(io.body);
        response.hops = std::move(hops);
        return response;
      }

      // A redirect: the next hop is decided from scratch.
      if (hop_index >= limits_.max_redirects)
        return tl::unexpected(refusal(
            "redirect_denied", origin,
            "more than " + std::to_string(limits_.max_redirects) + " redirects", std::move(hops)));
      const std::string& loc = location->second;
      const bool has_scheme = [&loc] {
        const auto colon = loc.find(':');
        if (colon == std::string::npos || colon == 0) return false;
        return std::all_of(loc.begin(), loc.begin() + static_cast<std::ptrdiff_t>(colon),
                           [](char ch) {
                             return std::isalnum(static_cast<unsigned char>(ch)) || ch == '+' ||
                                    ch == '-' || ch == '.';
                           }) &&
               std::isalpha(static_cast<unsigned char>(loc[0]));
      }();
      if (has_scheme) {
        url_text = loc;
      } else if (loc.rfind("//", 0) == 0) {
        url_text = url.scheme + ":" + loc;
      } else {
        // A relative reference keeps the checked authority; its bytes are
        // checked the same way as a URL's path.
        if (auto bad = scanBytes(loc, loc.size())) {
          hops.push_back(OutboundHop{});
          hops.back().decision.reason = bad->reason;
          return tl::unexpected(
              refusal("redirect_denied", origin,
                      "redirect Location refused: " + std::string(reasonName(bad->reason)),
                      std::move(hops)));
        }
        CurlUrl base(curl_url());
        std::optional<std::string> resolved;
        if (base && curl_url_set(base.get(), CURLUPART_URL, url.url.c_str(), 0) == CURLUE_OK &&
            curl_url_set(base.get(), CURLUPART_URL, loc.c_str(), 0) == CURLUE_OK)
          resolved = urlPart(base.get(), CURLUPART_URL);
        if (!resolved) {
          hops.push_back(OutboundHop{});
          hops.back().decision.reason = Reason::kMalformedRequest;
          return tl::unexpected(refusal("redirect_denied", origin,
                                        "redirect Location does not resolve to a URL",
                                        std::move(hops)));
        }
        url_text = std::move(*resolved);
      }
      if (status == 303 && method != "HEAD") method = "GET";
      if ((status == 301 || status == 302) && method == "POST") method = "GET";
      if (method == "GET" || method == "HEAD") body.clear();
    }
  } catch (...) {
    return tl::unexpected(
        refusal("internal_error", "", "internal error in the outbound guard", std::move(hops)));
  }
}

}  // namespace airlock::egress
