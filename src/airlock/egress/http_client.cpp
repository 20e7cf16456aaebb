#include "airlock/egress/http_client.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <memory>
#include <mutex>

#include "airlock/egress/curl_parts.h"

namespace airlock::egress {
namespace {

using namespace curl_parts;

bool isRedirect(long status) {
  return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

// RFC 3986 scheme ":" at the start of a reference.
bool hasScheme(std::string_view ref) {
  const auto colon = ref.find(':');
  if (colon == std::string_view::npos || colon == 0) return false;
  if (std::isalpha(static_cast<unsigned char>(ref[0])) == 0) return false;
  return std::all_of(ref.begin(), ref.begin() + static_cast<std::ptrdiff_t>(colon), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) != 0 || ch == '+' || ch == '-' || ch == '.';
  });
}

std::string schemeOf(std::string_view url) {
  const auto colon = url.find(':');
  return colon == std::string_view::npos ? std::string() : lower(url.substr(0, colon));
}

// An address as IPv6 (IPv4 mapped), for comparing a socket with the pin.
std::optional<in6_addr> asV6(const std::string& text) {
  in6_addr a6{};
  if (::inet_pton(AF_INET6, text.c_str(), &a6) == 1) return a6;
  in_addr a4{};
  if (::inet_pton(AF_INET, text.c_str(), &a4) != 1) return std::nullopt;
  a6.s6_addr[10] = a6.s6_addr[11] = 0xff;
  std::memcpy(&a6.s6_addr[12], &a4, sizeof a4);
  return a6;
}

// Per-hop state the curl callbacks write.
struct HopIo {
  const HttpRequest* request = nullptr;
  long status = 0;  // of the response being read
  HttpHeaders headers;
  bool has_location = false;
  std::size_t header_bytes = 0;
  bool headers_too_large = false;
  std::string body;
  std::size_t discarded = 0;  // body bytes of a redirect that is followed
  bool body_too_large = false;
  bool sink_stopped = false;
  std::vector<in6_addr> pin;  // empty: not pinned
  std::uint16_t port = 0;
  bool pin_violation = false;
};

std::size_t headerLine(HopIo& io, std::string_view line) {
  io.header_bytes += line.size();
  if (io.header_bytes > io.request->limits.max_header_bytes) {
    io.headers_too_large = true;
    return 0;
  }
  const std::size_t len = line.size();
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  if (line.substr(0, 5) == "HTTP/") {
    // A new response (after a 1xx): "HTTP/1.1 200 OK", "HTTP/2 200".
    io.headers.clear();
    io.has_location = false;
    io.status = 0;
    const std::size_t sp = line.find(' ');
    if (sp != std::string_view::npos && line.size() >= sp + 4) {
      long code = 0;
      for (char c : line.substr(sp + 1, 3)) {
        if (c < '0' || c > '9') return len;
        code = code * 10 + (c - '0');
      }
      io.status = code;
    }
    return len;
  }
  const std::size_t colon = line.find(':');
  if (colon == std::string_view::npos || colon == 0) return len;
  std::string_view value = line.substr(colon + 1);
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  io.headers.emplace_back(std::string(line.substr(0, colon)), std::string(value));
  if (lower(io.headers.back().first) == "location") io.has_location = true;
  return len;
}

std::size_t bodyBytes(HopIo& io, std::string_view data) {
  const std::size_t cap = io.request->limits.max_body_bytes;
  if (isRedirect(io.status) && io.has_location) {  // followed: read and dropped
    io.discarded += data.size();
    if (io.discarded > cap) io.body_too_large = true;
    return io.body_too_large ? 0 : data.size();
  }
  if (io.request->sink) {
    if (!io.request->sink(io.status, data)) {
      io.sink_stopped = true;
      return 0;
    }
    return data.size();
  }
  if (io.body.size() + data.size() > cap) {
    io.body_too_large = true;
    return 0;
  }
  io.body.append(data);
  return data.size();
}

// Nothing may be thrown through curl's C frames: an exception (bad_alloc,
// or one from the sink) stops the transfer instead.
std::size_t onHeader(char* data, std::size_t size, std::size_t n, void* user) {
  try {
    return headerLine(*static_cast<HopIo*>(user), std::string_view(data, size * n));
  } catch (...) {
    return 0;
  }
}

std::size_t onBody(char* data, std::size_t size, std::size_t n, void* user) {
  try {
    return bodyBytes(*static_cast<HopIo*>(user), std::string_view(data, size * n));
  } catch (...) {
    return 0;
  }
}

curl_socket_t onOpenSocket(void* user, curlsocktype purpose, curl_sockaddr* address) {
  auto* io = static_cast<HopIo*>(user);
  std::optional<in6_addr> a;
  std::uint16_t port = 0;
  if (address->family == AF_INET && address->addrlen >= sizeof(sockaddr_in)) {
    const auto* sa = reinterpret_cast<const sockaddr_in*>(&address->addr);
    char text[INET_ADDRSTRLEN] = {};
    if (::inet_ntop(AF_INET, &sa->sin_addr, text, sizeof text) != nullptr) a = asV6(text);
    port = ntohs(sa->sin_port);
  } else if (address->family == AF_INET6 && address->addrlen >= sizeof(sockaddr_in6)) {
    const auto* sa = reinterpret_cast<const sockaddr_in6*>(&address->addr);
    a = sa->sin6_addr;
    port = ntohs(sa->sin6_port);
  }
  const bool pinned = purpose == CURLSOCKTYPE_IPCXN && a.has_value() && port == io->port &&
                      std::any_of(io->pin.begin(), io->pin.end(), [&a](const in6_addr& x) {
                        return std::memcmp(&x, &*a, sizeof x) == 0;
                      });
  if (!pinned) {
    io->pin_violation = true;
    return CURL_SOCKET_BAD;
  }
  return ::socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
}

bool headerTextIsSafe(std::string_view text) {
  return std::none_of(text.begin(), text.end(),
                      [](char c) { return c == '\r' || c == '\n' || c == '\0'; });
}

HttpError failure(HttpFailure kind, std::string detail, std::vector<HttpHop> hops,
                  std::string code = "") {
  return HttpError{kind, std::move(code), std::move(detail), std::move(hops)};
}

// The curl lists of one hop: request headers and the pin.
struct HopLists {
  CurlList headers;
  CurlList resolve;
};

// The headers and the pin of `plan` as curl lists, and the pin in `io`.
std::optional<std::string> buildLists(const HopPlan& plan, const std::string& url, HopIo& io,
                                      HopLists& lists) {
  lists.headers.reset(curl_slist_append(nullptr, "Expect:"));
  for (const auto& [name, value] : plan.headers) {
    if (name.empty() || name.find(':') != std::string::npos || !headerTextIsSafe(name) ||
        !headerTextIsSafe(value))
      return "a request header has an empty name, ':', CR, LF or NUL";
    const std::string line = name + ": " + value;
    if (lists.headers)
      lists.headers.reset(curl_slist_append(lists.headers.release(), line.c_str()));
  }
  if (!lists.headers) return "out of memory";
  if (plan.pinned_addresses.empty()) return std::nullopt;
  const auto origin = urlOrigin(url);
  if (!origin) return "the URL to pin does not parse";
  std::string entry = origin->host + ":" + std::to_string(origin->port) + ":";
  for (const std::string& text : plan.pinned_addresses) {
    const auto a = asV6(text);
    if (!a) return "a pinned address is not an IP literal";
    io.pin.push_back(*a);
    if (io.pin.size() > 1) entry += ',';
    entry += text.find(':') != std::string::npos ? "[" + text + "]" : text;
  }
  io.port = origin->port;
  lists.resolve.reset(curl_slist_append(nullptr, entry.c_str()));
  if (!lists.resolve) return "out of memory";
  return std::nullopt;
}

void setOptions(CURL* c, const HttpRequest& r, const std::string& url, const std::string& method,
                const std::string& body, HopIo& io, const HopLists& lists) {
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  // No proxy from the environment: "" disables http_proxy & co., and
  // NOPROXY "*" covers a proxy curl might still pick up.
  curl_easy_setopt(c, CURLOPT_PROXY, "");
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(c, CURLOPT_FORBID_REUSE, 1L);
  curl_easy_setopt(c, CURLOPT_FRESH_CONNECT, 1L);
  curl_easy_setopt(c, CURLOPT_NETRC, static_cast<long>(CURL_NETRC_IGNORED));
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_HTTP_CONTENT_DECODING, 0L);
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
  if (!r.ca_file.empty()) curl_easy_setopt(c, CURLOPT_CAINFO, r.ca_file.c_str());
  if (!r.sink)
    curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE,
                     static_cast<curl_off_t>(r.limits.max_body_bytes));
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, onBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &io);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, onHeader);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &io);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, lists.headers.get());
  if (lists.resolve) {
    curl_easy_setopt(c, CURLOPT_RESOLVE, lists.resolve.get());
    curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, onOpenSocket);
    curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, &io);
  }
  if (method == "HEAD") {
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  } else if (method != "GET" || !body.empty()) {
    if (method != "POST") curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method.c_str());
    if (!body.empty() || method == "POST") {
      curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
      curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.data());
    }
  }
}

bool isCancelled(int fd) {
  if (fd < 0) return false;
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & POLLIN) != 0;
}

// curl_easy_perform, but through a multi handle so that `cancel_fd` is
// polled with the transfer's own sockets.
CURLcode performCancellable(CURL* c, int cancel_fd, bool& cancelled) {
  CurlMulti m(curl_multi_init());
  if (!m || curl_multi_add_handle(m.get(), c) != CURLM_OK) return CURLE_OUT_OF_MEMORY;
  CURLcode rc = CURLE_OK;
  for (;;) {
    int running = 0;
    if (curl_multi_perform(m.get(), &running) != CURLM_OK) {
      rc = CURLE_FAILED_INIT;
      break;
    }
    if (running == 0) {
      int queued = 0;
      const CURLMsg* msg = curl_multi_info_read(m.get(), &queued);
      rc = msg != nullptr && msg->msg == CURLMSG_DONE ? msg->data.result : CURLE_FAILED_INIT;
      break;
    }
    curl_waitfd w{cancel_fd, CURL_WAIT_POLLIN, 0};
    const unsigned extra = cancel_fd >= 0 ? 1 : 0;
    if (curl_multi_poll(m.get(), extra != 0 ? &w : nullptr, extra, 1000, nullptr) != CURLM_OK) {
      rc = CURLE_FAILED_INIT;
      break;
    }
    if (extra != 0 && (w.revents & CURL_WAIT_POLLIN) != 0) {
      cancelled = true;
      rc = CURLE_ABORTED_BY_CALLBACK;
      break;
    }
  }
  curl_multi_remove_handle(m.get(), c);
  return rc;
}

// What one dialled hop left.
struct HopDone {
  HopIo io;
  bool redirect = false;  // a redirect to follow, Location in io.headers
};

std::chrono::milliseconds hopBudget(const HttpLimits& limits, std::chrono::milliseconds bound) {
  if (!limits.deadline) return bound;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      *limits.deadline - std::chrono::steady_clock::now());
  return std::min(bound, left);
}

// One request to `url` as `plan` says, no redirect followed. The hop is
// appended to `hops` once dialled.
tl::expected<HopDone, HttpError> runHop(const HttpRequest& r, const std::string& url,
                                        const HopPlan& plan, const std::string& method,
                                        const std::string& body, std::vector<HttpHop>& hops) {
  HopDone done;
  HopIo& io = done.io;
  io.request = &r;
  HopLists lists;
  if (auto bad = buildLists(plan, url, io, lists))
    return tl::unexpected(failure(HttpFailure::kInvalidPlan, *bad, std::move(hops)));
  const auto total = hopBudget(r.limits, r.limits.hop_timeout);
  const auto connect = hopBudget(r.limits, r.limits.connect_timeout);
  if (total.count() <= 0 || connect.count() <= 0)
    return tl::unexpected(
        failure(HttpFailure::kTimeout, "the request's deadline passed", std::move(hops)));
  if (isCancelled(r.cancel_fd))
    return tl::unexpected(failure(HttpFailure::kCancelled, "cancelled", std::move(hops)));
  CurlEasy easy(curl_easy_init());
  if (!easy)
    return tl::unexpected(
        failure(HttpFailure::kTransport, "curl_easy_init failed", std::move(hops)));
  CURL* c = easy.get();
  char errbuf[CURL_ERROR_SIZE] = {};
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(connect.count()));
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(total.count()));
  setOptions(c, r, url, method, body, io, lists);

  bool cancelled = false;
  const CURLcode rc = performCancellable(c, r.cancel_fd, cancelled);
  HttpHop hop{url, 0, ""};
  char* primary = nullptr;
  if (curl_easy_getinfo(c, CURLINFO_PRIMARY_IP, &primary) == CURLE_OK && primary != nullptr)
    hop.dialed = primary;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &hop.status);
  hops.push_back(hop);
  const auto failed = [&hops](HttpFailure kind, std::string why) {
    return tl::unexpected(failure(kind, std::move(why), std::move(hops)));
  };
  if (cancelled) return failed(HttpFailure::kCancelled, "cancelled");
  if (io.pin_violation)
    return failed(HttpFailure::kPinViolation,
                  "libcurl tried to connect to an address that was not checked");
  if (rc == CURLE_WRITE_ERROR && io.sink_stopped) return done;
  if (rc != CURLE_OK) {
    const std::string why = errbuf[0] != '\0' ? errbuf : curl_easy_strerror(rc);
    if (io.headers_too_large) return failed(HttpFailure::kHeadersTooLarge, why);
    if (io.body_too_large || rc == CURLE_FILESIZE_EXCEEDED)
      return failed(HttpFailure::kBodyTooLarge, why);
    if (rc == CURLE_OPERATION_TIMEDOUT) return failed(HttpFailure::kTimeout, why);
    if (rc == CURLE_COULDNT_CONNECT) return failed(HttpFailure::kConnectFailed, why);
    return failed(HttpFailure::kTransport, why);
  }
  io.status = hop.status;
  done.redirect = isRedirect(hop.status) && io.has_location;
  return done;
}

std::string locationOf(const HttpHeaders& headers) {
  for (const auto& [name, value] : headers)
    if (lower(name) == "location") return value;
  return "";
}

// `location` resolved against `base` by libcurl.
std::string resolveReference(const std::string& base, const std::string& location) {
  CurlUrl u(curl_url());
  if (!u || curl_url_set(u.get(), CURLUPART_URL, base.c_str(), 0) != CURLUE_OK ||
      curl_url_set(u.get(), CURLUPART_URL, location.c_str(), 0) != CURLUE_OK)
    return "";
  return urlPart(u.get(), CURLUPART_URL).value_or("");
}

// The context of the hop a redirect from `prev` (with `status`) leads to.
HopContext nextHop(const HopContext& prev, const std::string& dialled, long status,
                   std::string location) {
  HopContext next;
  next.index = prev.index + 1;
  next.previous_url = dialled;
  next.redirect_status = status;
  if (hasScheme(location)) {
    next.url = location;
  } else if (location.rfind("//", 0) == 0) {
    next.url = schemeOf(dialled) + ":" + location;
  } else {
    next.relative = true;
    next.url = resolveReference(dialled, location);
  }
  next.location = std::move(location);
  next.method = prev.method;
  if (status == 303 && next.method != "HEAD") next.method = "GET";
  if ((status == 301 || status == 302) && next.method == "POST") next.method = "GET";
  next.with_body = prev.with_body && next.method != "GET" && next.method != "HEAD";
  return next;
}

// The request's own origin and whether a hop has left it: the cross-origin
// rule of http_client.h, kept here so that no policy can forget it.
struct OriginTrack {
  std::optional<std::string> first;  // hop 0's, as libcurl reads its URL
  bool crossed = false;              // sticky: once left, even a way back is "crossed"

  // Notes the URL of a hop; whether the request has left its own origin by
  // it. A URL libcurl cannot read counts as another origin.
  bool note(const std::string& url) {
    const auto o = urlOrigin(url);
    if (!first && o) first = o->origin;
    if (!o || o->origin != *first) crossed = true;
    return crossed;
  }
};

}  // namespace

bool isCrossOriginSafeHeader(std::string_view name, bool with_body) {
  const std::string n = lower(name);
  const auto on = [&n](const auto& list) {
    return std::find(std::begin(list), std::end(list), n) != std::end(list);
  };
  return on(kCrossOriginSafeHeaders) || (with_body && on(kCrossOriginBodyHeaders));
}

HttpResult httpFetch(const HttpRequest& request, const HopPolicy& policy) {
  std::vector<HttpHop> hops;
  try {
    curlGlobalInitOnce();
    HopContext ctx;
    ctx.url = request.url;
    ctx.method = request.method;
    ctx.with_body = !request.body.empty();
    OriginTrack origins;
    for (;;) {
      ctx.cross_origin = ctx.index > 0 && origins.note(ctx.url);
      HopDecision decision = policy(ctx);
      if (!decision)
        return tl::unexpected(failure(HttpFailure::kRefused, std::move(decision.error().message),
                                      std::move(hops), std::move(decision.error().code)));
      const std::string url = decision->url.empty() ? ctx.url : decision->url;
      if (origins.note(url))
        std::erase_if(decision->headers, [&ctx](const auto& h) {
          return !isCrossOriginSafeHeader(h.first, ctx.with_body);
        });
      const std::string& body = ctx.with_body ? request.body : std::string();
      auto done = runHop(request, url, *decision, ctx.method, body, hops);
      if (!done) return tl::unexpected(std::move(done.error()));
      if (!done->redirect) {
        HttpResponse response;
        response.status = done->io.status;
        response.url = url;
        response.headers = std::move(done->io.headers);
        response.body = std::move(done->io.body);
        response.stopped = done->io.sink_stopped;
        response.hops = std::move(hops);
        return response;
      }
      if (ctx.index >= request.limits.max_redirects)
        return tl::unexpected(
            failure(HttpFailure::kTooManyRedirects,
                    "more than " + std::to_string(request.limits.max_redirects) + " redirects",
                    std::move(hops)));
      ctx = nextHop(ctx, url, done->io.status, locationOf(done->io.headers));
    }
  } catch (...) {
    return tl::unexpected(
        failure(HttpFailure::kTransport, "internal error in the HTTP client", std::move(hops)));
  }
}

tl::expected<UrlOrigin, std::string> parseUrl(const std::string& url) {
  try {
    curlGlobalInitOnce();
    CurlUrl u(curl_url());
    if (!u) return tl::unexpected(std::string("out of memory"));
    if (const CURLUcode rc = curl_url_set(u.get(), CURLUPART_URL, url.c_str(), 0); rc != CURLUE_OK)
      return tl::unexpected(std::string(curl_url_strerror(rc)));
    auto scheme = urlPart(u.get(), CURLUPART_SCHEME);
    auto host = urlPart(u.get(), CURLUPART_HOST);
    auto port = urlPart(u.get(), CURLUPART_PORT, CURLU_DEFAULT_PORT);
    auto whole = urlPart(u.get(), CURLUPART_URL);
    if (!scheme || !host || !port || !whole || port->empty() || port->size() > 5 ||
        !std::all_of(port->begin(), port->end(), [](char c) { return c >= '0' && c <= '9'; }) ||
        std::stoul(*port) > 65535)
      return tl::unexpected(std::string("no scheme, host or port"));
    const auto written_port = urlPart(u.get(), CURLUPART_PORT);
    UrlOrigin o;
    o.scheme = lower(*scheme);
    o.host = lower(*host);
    o.port = static_cast<std::uint16_t>(std::stoul(*port));
    o.authority = o.host + (written_port ? ":" + *written_port : "");
    o.origin = o.scheme + "://" + o.host + ":" + *port;
    o.url = std::move(*whole);
    o.has_userinfo = urlPart(u.get(), CURLUPART_USER) || urlPart(u.get(), CURLUPART_PASSWORD) ||
                     urlPart(u.get(), CURLUPART_OPTIONS);
    return o;
  } catch (...) {
    return tl::unexpected(std::string("internal error parsing the URL"));
  }
}

std::optional<UrlOrigin> urlOrigin(const std::string& url) {
  auto parsed = parseUrl(url);
  if (!parsed) return std::nullopt;
  return std::move(*parsed);
}

std::string urlEscape(std::string_view text) {
  curlGlobalInitOnce();
  CurlEasy c(curl_easy_init());
  if (!c) return {};
  return takeCurlString(curl_easy_escape(c.get(), text.data(), static_cast<int>(text.size())));
}

void curlGlobalInitOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

bool isSchemeDowngrade(const std::string& from_url, const std::string& to_url) {
  return schemeOf(from_url) == "https" && schemeOf(to_url) != "https";
}

}  // namespace airlock::egress
