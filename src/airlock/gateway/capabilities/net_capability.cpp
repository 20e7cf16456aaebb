// net.fetch: one request through the outbound guard, per call.
#include <algorithm>
#include <cctype>

#include "airlock/capability/broker/call_args.h"
#include "airlock/egress/classifier.h"
#include "airlock/egress/resolver.h"
#include "airlock/gateway/capabilities/capability_modules.h"

namespace airlock::gateway {

using namespace capability::handler_terms;

namespace {

bool isHeaderNameByte(unsigned char c) {
  // RFC 9110 tchar.
  return std::isalnum(c) != 0 ||
         std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
}

std::chrono::milliseconds leftUntil(BrokerClock::time_point t) {
  return std::max(std::chrono::milliseconds(0),
                  std::chrono::duration_cast<std::chrono::milliseconds>(t - BrokerClock::now()));
}

// args.headers into `request`: at most 100 names (RFC 9110 tokens) with
// string values without CR, LF or NUL, 64 KiB together.
std::optional<Refusal> parseHeaders(const Value& args, egress::OutboundRequest& request) {
  const Value* h = args.find("headers");
  if (h == nullptr || h->isNil()) return std::nullopt;
  if (h->asMap() == nullptr) return badRequest("args.headers must be a map of strings");
  if (h->asMap()->size() > 100) return badRequest("args.headers has more than 100 entries");
  std::size_t total = 0;
  for (const auto& [k, v] : *h->asMap()) {
    if (k.empty() || !std::all_of(k.begin(), k.end(), [](char c) {
          return isHeaderNameByte(static_cast<unsigned char>(c));
        }))
      return badRequest("args.headers has an invalid header name");
    const std::string* sv = v.asString();
    if (sv == nullptr || sv->find_first_of(std::string_view("\r\n\0", 3)) != std::string::npos)
      return badRequest("args.headers." + k + " must be a string without CR, LF or NUL");
    total += k.size() + sv->size();
    request.headers.emplace_back(k, *sv);
  }
  if (total > 65536) return badRequest("args.headers are larger than 64 KiB");
  return std::nullopt;
}

Answer netFetch(const NetServices& net, const CallContext& ctx) {
  auto req = parseNetFetchRequest(ctx.args);
  if (!req) return req.error();
  // A missing part of the composition is a deny policy: refused before any
  // lookup, with the guard's own reason code.
  auto policy =
      net.policy && net.resolver && net.classifier ? net.policy : egress::Policy::denyAll();
  std::shared_ptr<egress::Resolver> resolver = net.resolver;
  std::shared_ptr<const egress::AddressClassifier> classifier = net.classifier;
  if (!resolver || !classifier) {
    // Never consulted (denyAll decides before any lookup); the guard wants them non-null.
    resolver = std::make_shared<egress::GetaddrinfoResolver>();
    classifier = std::make_shared<const egress::AddressClassifier>(
        std::make_shared<egress::FixedSelfAddresses>(std::vector<egress::IpAddress>{}));
  }
  egress::OutboundLimits limits = net.limits;
  auto budget = leftUntil(ctx.deadline);
  if (req->timeout.count() > 0) budget = std::min(budget, req->timeout);
  if (budget.count() <= 0) return Refusal{"deadline_exceeded", "no time left for the request"};
  limits.hop_timeout = std::min(limits.hop_timeout, budget);
  limits.connect_timeout = std::min(limits.connect_timeout, budget);
  // One guard per call: the limits carry this call's budget. The guard is
  // three shared pointers; building it costs nothing next to a request.
  const egress::OutboundGuard guard(std::move(policy), std::move(resolver), std::move(classifier),
                                    limits);
  auto r = guard.fetch(req->request);
  if (!r) return Refusal{r.error().code, r.error().error.message()};
  Array headers;
  for (auto& [k, v] : r->headers) headers.push_back(Value::array({textOrBytes(k), textOrBytes(v)}));
  return Value::map({{"status", Value::integer(static_cast<std::int64_t>(r->status))},
                     {"final_url", textOrBytes(r->final_url)},
                     {"headers", Value::array(std::move(headers))},
                     {"body", textOrBytes(std::move(r->body))},
                     {"redirects", Value::integer(static_cast<std::int64_t>(
                                       r->hops.empty() ? 0 : r->hops.size() - 1))}});
}

}  // namespace

tl::expected<NetFetchRequest, Refusal> parseNetFetchRequest(const Value& args) {
  if (args.asMap() == nullptr) return tl::unexpected(badRequest("args must be a map"));
  NetFetchRequest req;
  auto url = capability::requiredString(args, "url");
  if (!url) return tl::unexpected(url.error());
  if (url->size() > 8192) return tl::unexpected(badRequest("args.url is longer than 8192 bytes"));
  req.request.url = std::move(*url);
  auto method = capability::optionalString(args, "method", "GET");
  if (!method) return tl::unexpected(method.error());
  for (auto& c : *method) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  static constexpr std::string_view kMethods[] = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"};
  if (std::find(std::begin(kMethods), std::end(kMethods), *method) == std::end(kMethods))
    return tl::unexpected(
        badRequest("args.method must be one of GET, HEAD, POST, PUT, PATCH, DELETE"));
  req.request.method = std::move(*method);
  if (auto refused = parseHeaders(args, req.request)) return tl::unexpected(std::move(*refused));
  auto body = capability::optionalData(args, "body");
  if (!body) return tl::unexpected(body.error());
  if (*body) {
    if ((*body)->size() > kNetBodyMaxBytes)
      return tl::unexpected(Refusal{"too_large", "args.body is larger than 8 MiB"});
    if (req.request.method == "GET" || req.request.method == "HEAD")
      return tl::unexpected(badRequest("args.body is not sent with " + req.request.method));
    req.request.body = std::move(**body);
  }
  auto timeout = capability::optionalUint(args, "timeout_ms", 0);
  if (!timeout) return tl::unexpected(timeout.error());
  req.timeout = std::chrono::milliseconds(std::min<std::uint64_t>(*timeout, 24ull * 3600 * 1000));
  return req;
}

Result<NetServices> productionNetServices(const airlock::EgressPolicy& egress) {
  auto policy = egress::compilePolicy(egress, "sandbox egress policy");
  if (!policy) return tl::unexpected(policy.error());
  NetServices net;
  net.policy = std::move(*policy);
  net.resolver = std::make_shared<egress::GetaddrinfoResolver>();
  net.classifier = std::make_shared<const egress::AddressClassifier>(
      std::make_shared<egress::InterfaceAddressSource>());
  return net;
}

void addNetCapabilities(capability::CapabilityTable& table, const NetServices& net) {
  auto shared = std::make_shared<const NetServices>(net);
  table.add("net.fetch", capability::CeilingClass::kNone,
            [shared](const CallContext& c) { return netFetch(*shared, c); });
}

}  // namespace airlock::gateway
