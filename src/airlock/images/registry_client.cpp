#include "airlock/images/registry_client.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <new>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "airlock/core/encoding.h"
#include "airlock/core/json.h"
#include "airlock/egress/http_client.h"
#include "airlock/images/oci_documents.h"
#include "airlock/sys/io.h"
#include "airlock/sys/sha256.h"

namespace airlock::images {
namespace {

constexpr int kMaxRedirects = 5;
constexpr std::size_t kMaxHeaderBytes = 64 * 1024;
constexpr std::size_t kMaxErrorBodyBytes = 64 * 1024;
constexpr std::size_t kMaxTokenResponseBytes = 1024 * 1024;
constexpr std::size_t kMaxTokenBytes = 16 * 1024;
constexpr const char* kUserAgent = "airlock-images/0.1";

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

std::string inQuotes(std::string_view text) {
  std::string q = quoteForMessage(text, 100);
  if (q.size() >= 2) q = q.substr(1, q.size() - 2);
  return "'" + q + "'";
}

bool isLoopbackHost(std::string_view host) {
  std::string h = lower(host);
  if (h == "localhost") return true;
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') {
    in6_addr a6{};
    const std::string inner = h.substr(1, h.size() - 2);
    return ::inet_pton(AF_INET6, inner.c_str(), &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
  }
  in_addr a4{};
  return ::inet_pton(AF_INET, h.c_str(), &a4) == 1 &&
         (ntohl(a4.s_addr) >> 24) == 127;  // 127.0.0.0/8
}

// "host" of "host[:port]" ("[v6]" keeps its brackets).
std::string_view hostOf(std::string_view registry) {
  if (!registry.empty() && registry.front() == '[') {
    const std::size_t close = registry.find(']');
    return close == std::string_view::npos ? registry : registry.substr(0, close + 1);
  }
  return registry.substr(0, registry.find(':'));
}

using egress::UrlOrigin;

struct Hop {
  long status = 0;
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::string body;
  std::size_t max_ok_body = 0;
  bool body_too_large = false;
  bool error_body_capped = false;
  // Where a 200's body goes instead of `body`; false stops the transfer.
  const std::function<bool(const char*, std::size_t)>* sink = nullptr;
  bool sink_stopped = false;

  const std::string* header(std::string_view name) const {
    for (const auto& [n, v] : headers)
      if (n == name) return &v;
    return nullptr;
  }
};

std::size_t onBodyBytes(Hop* hop, const char* data, std::size_t len) {
  if (hop->status == 200 && hop->sink != nullptr) {
    if (!(*hop->sink)(data, len)) {
      hop->sink_stopped = true;
      return 0;
    }
    return len;
  }
  const std::size_t cap = hop->status == 200 ? hop->max_ok_body : kMaxErrorBodyBytes;
  if (hop->body.size() + len > cap) {
    if (hop->status == 200) {
      hop->body_too_large = true;
    } else {
      hop->error_body_capped = true;  // enough of an error body for a message
    }
    return 0;
  }
  hop->body.append(data, len);
  return len;
}

struct Transport {
  const RegistryClientOptions* options;
  // For messages: "registry 127.0.0.1:5000"
  std::string who;
};

bool plainHttpAllowed(const UrlOrigin& p, const RegistryClientOptions& options) {
  return isPlainHttpRegistry(p.authority, options.insecure_registries);
}

// How a registry GET treats each hop the HTTP client asks about: plain
// HTTP only when `allow_plain` (the registry itself is reached over it: no
// downgrade from HTTPS) and to a host that may be (loopback or
// insecure_registries); `authorization` ("Bearer ...") only to
// `auth_origin`.
struct GetRules {
  const Transport* t = nullptr;
  bool allow_plain = false;
  const std::string* auth_origin = nullptr;
  const std::string* authorization = nullptr;
  const egress::HttpHeaders* headers = nullptr;
  std::string origin;            // the last allowed hop's, for messages
  std::optional<Error> refused;  // why a hop was refused
};

tl::expected<egress::HopPlan, Error> planGetHop(const GetRules& rules,
                                                const egress::HopContext& ctx) {
  const Transport& t = *rules.t;
  const auto parts = egress::urlOrigin(ctx.url);
  if (!parts && ctx.index > 0)
    return fail(ErrorCode::kExecutionRejected,
                t.who + ": " + rules.origin + " redirected to a Location that is not a URL");
  if (!parts) return fail(ErrorCode::kExecutionRejected, t.who + ": a URL that does not parse");
  if (parts->scheme != "https" &&
      !(parts->scheme == "http" && rules.allow_plain && plainHttpAllowed(*parts, *t.options)))
    return fail(ErrorCode::kExecutionRejected,
                t.who + ": refusing " + parts->origin +
                    " (plain HTTP is for loopback and insecure registries, and never after "
                    "HTTPS)");
  egress::HopPlan plan;
  plan.url = parts->url;
  plan.headers = *rules.headers;
  plan.headers.emplace_back("User-Agent", kUserAgent);
  if (!rules.authorization->empty() && parts->origin == *rules.auth_origin)
    plan.headers.emplace_back("Authorization", *rules.authorization);
  return plan;
}

// The HTTP client's failure as the registry client's error.
Error getFailure(const GetRules& rules, const egress::HttpError& e) {
  if (e.kind == egress::HttpFailure::kRefused && rules.refused) return *rules.refused;
  const std::string& who = rules.t->who;
  switch (e.kind) {
    case egress::HttpFailure::kTooManyRedirects:
      return Error{ErrorCode::kExecutionRejected, 0,
                   who + ": more than " + std::to_string(kMaxRedirects) + " redirects"};
    case egress::HttpFailure::kHeadersTooLarge:
      return Error{ErrorCode::kExecutionRejected, 0,
                   who + ": " + rules.origin + " sent more than " +
                       std::to_string(kMaxHeaderBytes) + " bytes of response headers"};
    default:
      return Error{ErrorCode::kExecutionUnavailable, 0,
                   who + ": GET " + rules.origin + " failed: " + e.detail};
  }
}

// A GET through the bounded HTTP client, redirects followed as GetRules
// says. Transport failures are ExecutionUnavailable; the final response,
// whatever its status, is in `hop` (its body as onBodyBytes keeps it).
Result<void> getFollowing(const Transport& t, const std::string& url, bool allow_plain,
                          const std::string& auth_origin, const std::string& authorization,
                          const egress::HttpHeaders& headers, Hop& hop) {
  GetRules rules{&t, allow_plain, &auth_origin, &authorization, &headers, {}, {}};
  const egress::HopPolicy policy = [&rules](const egress::HopContext& ctx) -> egress::HopDecision {
    auto plan = planGetHop(rules, ctx);
    if (!plan) {
      rules.refused = plan.error();
      return tl::unexpected(egress::HopRefusal{"refused", plan.error().context});
    }
    rules.origin = egress::urlOrigin(plan->url).value_or(egress::UrlOrigin{}).origin;
    return std::move(*plan);
  };
  egress::HttpRequest request;
  request.url = url;
  request.limits.max_redirects = kMaxRedirects;
  request.limits.max_header_bytes = kMaxHeaderBytes;
  // A redirect's body is read and dropped; the final one goes to onBodyBytes.
  request.limits.max_body_bytes = kMaxDocumentBytes;
  request.limits.connect_timeout = t.options->timeout;
  request.limits.hop_timeout = t.options->timeout;
  request.ca_file = t.options->ca_file;
  request.sink = [&hop](long status, std::string_view bytes) {
    hop.status = status;
    return onBodyBytes(&hop, bytes.data(), bytes.size()) == bytes.size();
  };
  auto r = egress::httpFetch(request, policy);
  if (!r) return tl::unexpected(getFailure(rules, r.error()));
  hop.status = r->status;
  hop.headers.clear();
  for (auto& [name, value] : r->headers) hop.headers.emplace_back(lower(name), std::move(value));
  return {};
}

struct Challenge {
  std::string scheme;  // lower case: "bearer", "basic"
  std::map<std::string, std::string> params;
};

// `Bearer realm="...",service="...",scope="..."` (RFC 7235 auth-params).
Challenge parseChallenge(std::string_view v) {
  Challenge ch;
  std::size_t i = 0;
  while (i < v.size() && v[i] != ' ') ++i;
  ch.scheme = lower(v.substr(0, i));
  while (i < v.size()) {
    while (i < v.size() && (v[i] == ' ' || v[i] == ',' || v[i] == '\t')) ++i;
    const std::size_t key_start = i;
    while (i < v.size() && v[i] != '=' && v[i] != ',' && v[i] != ' ') ++i;
    std::string key = lower(v.substr(key_start, i - key_start));
    if (i >= v.size() || v[i] != '=') continue;
    ++i;
    std::string value;
    if (i < v.size() && v[i] == '"') {
      ++i;
      while (i < v.size() && v[i] != '"') {
        if (v[i] == '\\' && i + 1 < v.size()) ++i;
        value += v[i++];
      }
      ++i;  // the closing quote
    } else {
      while (i < v.size() && v[i] != ',' && v[i] != ' ') value += v[i++];
    }
    if (!key.empty()) ch.params.emplace(std::move(key), std::move(value));
  }
  return ch;
}

bool isTokenText(std::string_view token) {
  if (token.empty() || token.size() > kMaxTokenBytes) return false;
  return std::all_of(token.begin(), token.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

// The short registry error code of a body like {"errors":[{"code":"..."}]}.
std::string registryErrorCode(const std::string& body) {
  auto j = parseUntrustedJson(body);
  if (!j || !j->is_object()) return "";
  const auto e = j->find("errors");
  if (e == j->end() || !e->is_array() || e->empty() || !(*e)[0].is_object()) return "";
  const auto code = (*e)[0].find("code");
  if (code == (*e)[0].end() || !code->is_string()) return "";
  const auto& s = code->get_ref<const std::string&>();
  if (s.size() > 64 || !std::all_of(s.begin(), s.end(), [](char c) {
        return (c >= 'A' && c <= 'Z') || c == '_' || (c >= '0' && c <= '9');
      }))
    return "";
  return s;
}

// The error for a response that is not a 200. `object` is what was asked
// for, as a phrase: "tag 3.13", "manifest sha256:...", "blob sha256:...".
tl::unexpected<Error> statusError(const std::string& who, const ImageReference& ref,
                                  const std::string& object, const Hop& hop) {
  const std::string code = registryErrorCode(hop.body);
  const std::string status = std::to_string(hop.status);
  const std::string repo = "repository " + ref.repository;
  if (hop.status == 404) {
    if (code == "NAME_UNKNOWN")
      return fail(ErrorCode::kExecutionRejected, who + ": there is no " + repo + " (404)");
    return fail(ErrorCode::kExecutionRejected, who + ": " + repo + " has no " + object + " (404)");
  }
  const std::string suffix = " (" + status + (code.empty() ? "" : " " + code) + ")";
  if (hop.status == 401 || hop.status == 403)
    return fail(ErrorCode::kExecutionRejected,
                who + ": access to " + object + " of " + repo + " was denied" + suffix);
  if (hop.status == 429 || hop.status >= 500)
    return fail(ErrorCode::kExecutionUnavailable,
                who + ": " + object + " of " + repo + " is unavailable for now" + suffix);
  return fail(ErrorCode::kExecutionRejected,
              who + ": " + object + " of " + repo + " could not be fetched" + suffix);
}

}  // namespace

bool isPlainHttpRegistry(std::string_view registry, const std::vector<std::string>& insecure) {
  if (isLoopbackHost(hostOf(registry))) return true;
  const std::string r = lower(registry);
  return std::any_of(insecure.begin(), insecure.end(),
                     [&r](const std::string& i) { return lower(i) == r; });
}

struct RegistryClient::Exchange {
  egress::HttpHeaders headers;
  std::size_t max_ok_body = kMaxDocumentBytes;
  const std::function<bool(const char*, std::size_t)>* sink = nullptr;
  Hop hop;  // the final response
};

RegistryClient::RegistryClient(RegistryClientOptions options) : options_(std::move(options)) {}

std::string RegistryClient::cachedToken(const std::string& key) {
  MutexLock lock(mu_);
  const auto it = tokens_.find(key);
  return it == tokens_.end() ? std::string() : it->second;
}

void RegistryClient::storeToken(const std::string& key, std::string token) {
  MutexLock lock(mu_);
  tokens_[key] = std::move(token);
}

Result<void> RegistryClient::get(const ImageReference& ref, const std::string& path, Exchange& ex) {
  const Transport t{&options_, "registry " + ref.registry};
  const bool plain = isPlainHttpRegistry(ref.registry, options_.insecure_registries);
  const std::string scheme = plain ? "http" : "https";
  const std::string url = scheme + "://" + ref.registry + path;
  const auto parts = egress::urlOrigin(url);
  if (!parts) return fail(ErrorCode::kExecutionRejected, t.who + ": not a URL: " + inQuotes(url));
  const std::string key = ref.registry + "/" + ref.repository;
  std::string token = cachedToken(key);
  for (int attempt = 0;; ++attempt) {
    ex.hop = Hop{};
    ex.hop.max_ok_body = ex.max_ok_body;
    ex.hop.sink = ex.sink;
    const std::string authorization = token.empty() ? "" : "Bearer " + token;
    if (auto r = getFollowing(t, url, plain, parts->origin, authorization, ex.headers, ex.hop); !r)
      return r;
    if (ex.hop.status != 401 || attempt > 0) return {};

    // Token authentication: one new token, one more try.
    std::optional<Challenge> bearer;
    bool basic = false;
    for (const auto& [name, value] : ex.hop.headers) {
      if (name != "www-authenticate") continue;
      Challenge ch = parseChallenge(value);
      if (ch.scheme == "basic") {
        basic = true;
      } else if (ch.scheme == "bearer" && !bearer) {
        bearer = std::move(ch);
      }
    }
    if (!bearer) {
      if (basic)
        return fail(ErrorCode::kExecutionRejected,
                    t.who + ": repository " + ref.repository +
                        " needs basic credentials (user and password), which this client does not "
                        "support yet");
      return fail(ErrorCode::kExecutionRejected, t.who + ": repository " + ref.repository +
                                                     " answered 401 without a Bearer challenge");
    }
    const auto realm = bearer->params.find("realm");
    if (realm == bearer->params.end() || realm->second.empty())
      return fail(ErrorCode::kExecutionRejected, t.who + ": the Bearer challenge has no realm");
    std::string token_url = realm->second;
    const auto realm_parts = egress::urlOrigin(token_url);
    if (!realm_parts || (realm_parts->scheme != "https" && realm_parts->scheme != "http"))
      return fail(
          ErrorCode::kExecutionRejected,
          t.who + ": the token realm " + inQuotes(realm->second) + " is not an http(s) URL");
    std::string query;
    const auto service = bearer->params.find("service");
    if (service != bearer->params.end()) query += "service=" + egress::urlEscape(service->second);
    const auto scope = bearer->params.find("scope");
    const std::string scope_value =
        scope != bearer->params.end() ? scope->second : "repository:" + ref.repository + ":pull";
    query += std::string(query.empty() ? "" : "&") + "scope=" + egress::urlEscape(scope_value);
    token_url += (token_url.find('?') == std::string::npos ? "?" : "&") + query;

    const Transport token_t{&options_, t.who + ": token service " + realm_parts->origin};
    Hop th;
    th.max_ok_body = kMaxTokenResponseBytes;
    if (auto r =
            getFollowing(token_t, token_url, plain, "", "", {{"Accept", "application/json"}}, th);
        !r)
      return r;
    if (th.status != 200 || th.body_too_large)
      return fail(th.status == 429 || th.status >= 500 ? ErrorCode::kExecutionUnavailable
                                                       : ErrorCode::kExecutionRejected,
                  token_t.who + " refused a token for " + inQuotes(scope_value) + " (" +
                      std::to_string(th.status) + ")");
    auto answer = parseUntrustedJson(th.body);
    std::string fresh;
    if (answer && answer->is_object()) {
      for (const char* name : {"token", "access_token"}) {
        const auto it = answer->find(name);
        if (it != answer->end() && it->is_string() && !it->get_ref<const std::string&>().empty()) {
          fresh = it->get<std::string>();
          break;
        }
      }
    }
    if (!isTokenText(fresh))
      return fail(ErrorCode::kExecutionRejected,
                  token_t.who +
                      " answered without a usable token (JSON \"token\" or "
                      "\"access_token\" of printable ASCII)");
    token = fresh;
    storeToken(key, std::move(fresh));
  }
}

namespace {

// The reference's registry and repository, checked again: an ImageReference
// may be built by hand, and its parts go into URLs.
Result<void> checkNames(const ImageReference& ref) {
  ImageReference probe{ref.registry, ref.repository, "latest", ""};
  auto again = parseImageReference(toString(probe));
  if (!again || again->registry != ref.registry || again->repository != ref.repository)
    return fail(ErrorCode::kExecutionRejected, "registry " + inQuotes(ref.registry) +
                                                   ": repository " + inQuotes(ref.repository) +
                                                   " is not a valid registry and repository name");
  return {};
}

}  // namespace

Result<FetchedManifest> RegistryClient::fetchManifest(const ImageReference& ref,
                                                      std::string_view tag_or_digest) {
  try {
    if (auto ok = checkNames(ref); !ok) return tl::unexpected(ok.error());
    const std::string who = "registry " + ref.registry;
    const bool by_digest = isDigest(tag_or_digest);
    if (!by_digest && !isTag(tag_or_digest))
      return fail(ErrorCode::kExecutionRejected, who + ": repository " + ref.repository + ": " +
                                                     inQuotes(tag_or_digest) +
                                                     " is neither a tag nor a sha256 digest");
    const std::string object =
        std::string(by_digest ? "manifest " : "tag ") + std::string(tag_or_digest);
    Exchange ex;
    ex.headers.emplace_back(
        "Accept", std::string(kOciIndexType) + ", " + std::string(kDockerManifestListType) + ", " +
                      std::string(kOciManifestType) + ", " + std::string(kDockerManifestType));
    ex.max_ok_body = kMaxDocumentBytes;
    const std::string path = "/v2/" + ref.repository + "/manifests/" + std::string(tag_or_digest);
    if (auto r = get(ref, path, ex); !r) return tl::unexpected(r.error());
    const Hop& hop = ex.hop;
    if (hop.status != 200) return statusError(who, ref, object, hop);
    if (hop.body_too_large)
      return fail(ErrorCode::kExecutionRejected, who + ": repository " + ref.repository + ": " +
                                                     object + " is larger than " +
                                                     std::to_string(kMaxDocumentBytes) + " bytes");
    FetchedManifest out;
    out.bytes = hop.body;
    out.digest = "sha256:" + sys::sha256Hex(out.bytes);
    if (by_digest && out.digest != tag_or_digest)
      return fail(ErrorCode::kExecutionRejected, who + ": repository " + ref.repository + ": " +
                                                     object + ": the bytes sent hash to " +
                                                     out.digest + ", not the digest asked for");
    if (const std::string* header = hop.header("docker-content-digest");
        header != nullptr && *header != out.digest)
      return fail(ErrorCode::kExecutionRejected, who + ": repository " + ref.repository + ": " +
                                                     object + ": Docker-Content-Digest says " +
                                                     inQuotes(*header) +
                                                     " but the bytes sent hash to " + out.digest);
    if (const std::string* type = hop.header("content-type")) out.media_type = mediaTypeOf(*type);
    return out;
  } catch (const std::bad_alloc&) {
    return fail(ErrorCode::kExecutionUnavailable,
                "registry " + ref.registry + ": out of memory fetching a manifest");
  }
}

Result<FetchedManifest> RegistryClient::resolve(const ImageReference& ref) {
  try {
    return resolveChecked(ref);
  } catch (const std::bad_alloc&) {
    return fail(ErrorCode::kExecutionUnavailable,
                "registry " + ref.registry + ": out of memory resolving an image");
  }
}

Result<FetchedManifest> RegistryClient::resolveChecked(const ImageReference& ref) {
  const std::string who = "registry " + ref.registry + ": repository " + ref.repository;
  const std::string first_ref = ref.digest.empty() ? ref.tag : ref.digest;
  auto top = fetchManifest(ref, first_ref);
  if (!top) return top;
  auto kind = classifyDocument(top->media_type, top->bytes);
  if (!kind)
    return fail(ErrorCode::kExecutionRejected,
                who + ": " + first_ref + ": " + kind.error().context);
  if (*kind == DocumentKind::kManifest) {
    if (auto m = parseImageManifest(top->bytes); !m)
      return fail(ErrorCode::kExecutionRejected, who + ": " + first_ref + ": " + m.error().context);
    return top;
  }
  auto index = parseImageIndex(top->bytes);
  if (!index)
    return fail(ErrorCode::kExecutionRejected,
                who + ": " + first_ref + ": " + index.error().context);
  auto entry = selectPlatform(*index, "linux", "amd64");
  if (!entry)
    return fail(ErrorCode::kExecutionRejected,
                who + ": " + first_ref + ": " + entry.error().context);
  if (entry->size > static_cast<std::int64_t>(kMaxDocumentBytes))
    return fail(ErrorCode::kExecutionRejected,
                who + ": " + first_ref + ": the linux/amd64 entry is " +
                    std::to_string(entry->size) + " bytes, more than " +
                    std::to_string(kMaxDocumentBytes));
  auto manifest = fetchManifest(ref, entry->digest);
  if (!manifest) return manifest;
  if (static_cast<std::int64_t>(manifest->bytes.size()) != entry->size)
    return fail(ErrorCode::kExecutionRejected, who + ": manifest " + entry->digest + " is " +
                                                   std::to_string(manifest->bytes.size()) +
                                                   " bytes, the index says " +
                                                   std::to_string(entry->size));
  auto inner = classifyDocument(manifest->media_type, manifest->bytes);
  if (!inner)
    return fail(ErrorCode::kExecutionRejected,
                who + ": manifest " + entry->digest + ": " + inner.error().context);
  if (*inner != DocumentKind::kManifest)
    return fail(ErrorCode::kExecutionRejected, who + ": manifest " + entry->digest +
                                                   " is an index inside an index (not followed)");
  if (auto m = parseImageManifest(manifest->bytes); !m)
    return fail(ErrorCode::kExecutionRejected,
                who + ": manifest " + entry->digest + ": " + m.error().context);
  return manifest;
}

Result<void> RegistryClient::fetchBlob(const ImageReference& ref, const std::string& digest,
                                       std::int64_t expected_size, int out_fd) {
  try {
    if (auto ok = checkNames(ref); !ok) return ok;
    const std::string who = "registry " + ref.registry;
    const std::string repo = "repository " + ref.repository;
    if (!isDigest(digest))
      return fail(ErrorCode::kExecutionRejected, who + ": " + repo + ": blob digest " +
                                                     inQuotes(digest) +
                                                     " is not sha256: and 64 lowercase hex digits");
    if (expected_size < 0)
      return fail(ErrorCode::kExecutionRejected,
                  who + ": " + repo + ": blob " + digest + ": negative expected size");
    sys::Sha256 hasher;
    std::int64_t done = 0;
    bool over = false;
    int write_errno = 0;
    const std::function<bool(const char*, std::size_t)> sink = [&](const char* data,
                                                                   std::size_t len) {
      if (static_cast<std::uint64_t>(len) > static_cast<std::uint64_t>(expected_size - done)) {
        over = true;
        return false;
      }
      if (!sys::writeAll(out_fd, data, len)) {
        write_errno = errno;
        return false;
      }
      hasher.update(data, len);
      done += static_cast<std::int64_t>(len);
      if (options_.progress) {
        try {
          options_.progress(done, expected_size);
        } catch (...) {
          // Progress is advisory; the transfer goes on.
        }
      }
      return true;
    };
    Exchange ex;
    ex.sink = &sink;
    if (auto r = get(ref, "/v2/" + ref.repository + "/blobs/" + digest, ex); !r) return r;
    const std::string object = "blob " + digest;
    if (ex.hop.status != 200) return statusError(who, ref, object, ex.hop);
    if (write_errno != 0)
      return failErrno(ErrorCode::kExecutionUnavailable,
                       who + ": " + repo + ": " + object + ": writing it out failed", write_errno);
    if (over)
      return fail(ErrorCode::kExecutionRejected,
                  who + ": " + repo + ": " + object + ": the registry sent more than the " +
                      std::to_string(expected_size) + " bytes expected");
    if (done != expected_size)
      return fail(ErrorCode::kExecutionRejected, who + ": " + repo + ": " + object +
                                                     ": the registry sent " + std::to_string(done) +
                                                     " bytes, " + std::to_string(expected_size) +
                                                     " expected");
    const std::string got = "sha256:" + hasher.finishHex();
    if (got != digest)
      return fail(
          ErrorCode::kExecutionRejected,
          who + ": " + repo + ": " + object + ": digest mismatch: the bytes sent hash to " + got);
    return {};
  } catch (const std::bad_alloc&) {
    return fail(ErrorCode::kExecutionUnavailable,
                "registry " + ref.registry + ": out of memory fetching a blob");
  }
}

}  // namespace airlock::images
