// The API's dispatcher (api.h, routes.h): the token, the route a request
// reaches and its tenant check, and the routes of the service itself
// (health, metrics).

#include <algorithm>
#include <nlohmann/json.hpp>

#include "airlock/core/encoding.h"
#include "airlock/gateway/api/api.h"
#include "airlock/gateway/api/body.h"
#include "airlock/service/bearer.h"

namespace airlock::gateway {
namespace {

using json = nlohmann::json;

// The answer to a query parameter `route` does not take.
HttpResponse refuseParameter(const Route& route, std::string_view name) {
  if (name == "tenant_id" && route.tenant == TenantScope::kOperator)
    return errorResponse(
        400, "bad_request",
        "tenant_id is not taken here: this route is the operator's and spans every tenant");
  if (name == "tenant_id" && route.tenant == TenantScope::kBody)
    return errorResponse(400, "bad_request",
                         "tenant_id is not taken in the query here: this route's tenant is the "
                         "\"tenant_id\" of its JSON body");
  std::string takes;
  for (std::string_view p : route.queryParams()) (takes += takes.empty() ? "" : ", ") += p;
  return errorResponse(400, "bad_request",
                       "unknown query parameter " + quoteForMessage(name) + "; this route takes" +
                           (takes.empty() ? std::string(" none") : ": " + takes));
}

// The query's parameters, percent-decoded, when each is one `route` takes
// and is named once; otherwise the 400 naming the first that is not.
tl::expected<std::map<std::string, std::string, std::less<>>, HttpResponse> queryFor(
    const Route& route, std::string_view query) {
  std::map<std::string, std::string, std::less<>> params;
  for (std::size_t i = 0; i < query.size();) {
    std::size_t amp = query.find('&', i);
    if (amp == std::string_view::npos) amp = query.size();
    const std::string_view item = query.substr(i, amp - i);
    i = amp + 1;
    if (item.empty()) continue;
    const std::size_t eq = item.find('=');
    const std::string_view name = item.substr(0, eq);
    if (!route.takes(name)) return tl::unexpected(refuseParameter(route, name));
    auto value = percentDecoded(
        eq == std::string_view::npos ? std::string_view() : item.substr(eq + 1), true);
    if (!value)
      return tl::unexpected(errorResponse(badRequest(
          "the " + std::string(name) + " query parameter is not valid percent-encoding")));
    if (!params.emplace(std::string(name), std::move(*value)).second)
      return tl::unexpected(errorResponse(
          400, "bad_request", "query parameter " + quoteForMessage(name) + " is given twice"));
  }
  return params;
}

HttpResponse unauthorized() {
  return errorResponse(401, "unauthorized",
                       "missing or wrong bearer token (Authorization: Bearer <token>)");
}

}  // namespace

Api::Api(const Settings& settings, ExecutionNode& node, ServiceImages images, Metrics& metrics,
         std::function<Timestamp()> clock)
    : settings_(settings),
      node_(node),
      images_(std::move(images)),
      metrics_(metrics),
      clock_(std::move(clock)) {
  attachExecutionCapabilities({});  // the gateway half alone until one is attached
  if (!clock_)
    clock_ = [] {
      return std::chrono::time_point_cast<std::chrono::milliseconds>(
          std::chrono::system_clock::now());
    };
  gateway::ToolOptions tool_options;
  tool_options.service_hard_cap = std::chrono::seconds(settings_.limit_ceilings.wall_clock_seconds);
  tool_options.environment_lifetime = settings_.environment_lifetime;
  tool_options.environment_hard_cap = settings_.environment_hard_cap;
  tools_ = std::make_shared<const gateway::ToolRegistry>(gateway::builtinTools(tool_options));
}

std::optional<Caller> Api::callerOf(const HttpRequest& request) const {
  if (service::bearerMatches(request.authorization, settings_.service_token)) return Caller{};
  const auto token = service::bearerToken(request.authorization);
  if (!token) return std::nullopt;
  auto tenant = tenant_keys_.tenantOf(*token);
  if (!tenant) return std::nullopt;
  return Caller{std::move(tenant)};
}

bool Api::authorized(const HttpRequest& request) const {
  return callerOf(request).has_value() ||
         service::bearerMatches(request.authorization, internal_credential_);
}

HttpResponse Api::handle(const HttpRequest& request) {
  try {
    return route(request);
  } catch (const std::exception& e) {
    // A bug, not the caller's input: nothing of the request is echoed.
    return errorResponse(500, "internal", "internal error");
  }
}

HttpResponse Api::route(const HttpRequest& request) {
  auto call = admit(request);
  if (!call) return std::move(call.error());
  return (this->*(call->route.handler))(*call);
}

tl::expected<RouteCall, HttpResponse> Api::admit(const HttpRequest& request) const {
  const std::string_view target = request.target;
  const std::size_t q = target.find('?');
  RouteLookup lookup = lookupRoute(request.method, target.substr(0, q));
  const auto internal = [](const Route* r) { return r->has(kInternal); };
  if (internal_credential_.empty()) {  // the internal routes are absent
    std::erase_if(lookup.of_path, internal);
    if (lookup.route != nullptr && internal(lookup.route)) lookup.route = nullptr;
  }
  const bool open = !lookup.of_path.empty() &&
                    std::all_of(lookup.of_path.begin(), lookup.of_path.end(),
                                [](const Route* r) { return r->has(kNoAuthentication); });
  // An internal route takes the internal credential alone; every other
  // route the service token or a tenant key (callerOf).
  const bool on_internal = !lookup.of_path.empty() &&
                           std::all_of(lookup.of_path.begin(), lookup.of_path.end(), internal);
  std::optional<Caller> caller;
  if (on_internal) {
    if (!open && !service::bearerMatches(request.authorization, internal_credential_))
      return tl::unexpected(unauthorized());
  } else {
    caller = callerOf(request);
    if (!open && !caller) return tl::unexpected(unauthorized());
  }
  if (lookup.of_path.empty())
    return tl::unexpected(errorResponse(404, "not_found", "no such route"));
  if (lookup.route == nullptr) {
    const std::string allow = allowedMethods(lookup);
    HttpResponse refused = errorResponse(405, "method_not_allowed",
                                         "method not allowed on this route; it takes " + allow);
    refused.headers.emplace_back("Allow", allow);
    return tl::unexpected(std::move(refused));
  }
  const Route& route = *lookup.route;
  // Before the query is looked at: an operator route says nothing else to a
  // tenant key.
  if (caller && caller->key_tenant && route.tenant == TenantScope::kOperator)
    return tl::unexpected(
        errorResponse(403, "forbidden",
                      "this route is the operator's: a tenant key may not call it (use the "
                      "service token)"));
  auto query = queryFor(route, q == std::string_view::npos ? "" : target.substr(q + 1));
  if (!query) return tl::unexpected(std::move(query.error()));
  RouteCall call{request, route, {}, std::move(*query), std::nullopt, nullptr};
  // stream=true or stream=0 would otherwise answer unstreamed, unexplained.
  if (auto stream = call.queryValue("stream"); stream && *stream != "1")
    return tl::unexpected(errorResponse(badRequest(
        "the stream query parameter takes only 1 (to stream); got " + quoteForMessage(*stream))));
  for (const auto& [name, raw] : lookup.segments) {
    auto value = percentDecoded(raw, false);
    if (!value)
      return tl::unexpected(errorResponse(
          badRequest("the " + std::string(name) + " in the path is not valid percent-encoding")));
    call.params.emplace(std::string(name), std::move(*value));
  }
  if (auto refused = checkTenant(call, caller.value_or(Caller{})))
    return tl::unexpected(std::move(*refused));
  return call;
}

std::optional<HttpResponse> Api::checkTenant(RouteCall& call, const Caller& caller) const {
  const Route& route = call.route;
  std::optional<std::string> named;
  std::optional<std::string> environment;
  if (route.tenant == TenantScope::kQuery || route.tenant == TenantScope::kQueryRequired)
    named = call.queryValue("tenant_id");
  if (route.tenant == TenantScope::kQueryRequired && !named && !caller.key_tenant)
    return errorResponse(badRequest("the tenant_id query parameter is required"));
  if (auto it = call.params.find("environment_id"); it != call.params.end())
    environment = it->second;
  if (route.tenant == TenantScope::kBody) {
    auto body = parseBody(call.request.body);
    if (!body) return errorResponse(body.error());
    if (auto t = body->find("tenant_id"); t != body->end()) {
      if (!t->is_string()) return errorResponse(badRequest("tenant_id must be a string"));
      named = t->get<std::string>();
    }
    if (route.has(kEnvironmentInBody))
      if (auto e = body->find("environment_id"); e != body->end() && e->is_string())
        environment = e->get<std::string>();
    call.body = std::make_shared<const json>(std::move(*body));
  }
  auto tenant = namedTenant(named);
  if (!tenant) return std::move(tenant.error());
  if (caller.key_tenant) {
    if (*tenant && **tenant != *caller.key_tenant)
      return refuseForeignTenant(call, environment, *caller.key_tenant);
    *tenant = caller.key_tenant;
  }
  call.tenant = std::move(*tenant);
  if (!environment) return std::nullopt;
  auto refused = refuseOtherTenant(*environment, call.tenant);
  // Destroy is idempotent: another tenant's environment is an unknown id,
  // which is success, and nothing is destroyed.
  if (refused && route.has(kUnknownIdSucceeds)) return noContent();
  return refused;
}

HttpResponse Api::refuseForeignTenant(const RouteCall& call,
                                      const std::optional<std::string>& environment,
                                      const std::string& key_tenant) const {
  // Whether the named tenant, or the object, exists is not told: the
  // answer is the one an id naming nothing gets.
  if (environment)
    return call.route.has(kUnknownIdSucceeds) ? noContent() : unknownEnvironment(*environment);
  if (auto it = call.params.find("artifact_id"); it != call.params.end())
    return unknownArtifact(it->second);
  if (auto key = call.params.find("key"); key != call.params.end()) {
    const std::string& run = call.param("run_id");
    if (auto ok = platformIdentifier(json{{"run_id", run}}, "run_id"); !ok)
      return errorResponse(ok.error());
    return unknownNote(run, key->second);
  }
  return errorResponse(403, "forbidden",
                       "this key acts for tenant " + quoteForMessage(key_tenant) +
                           " only, and tenant_id names another");
}

tl::expected<std::optional<std::string>, HttpResponse> Api::namedTenant(
    const std::optional<std::string>& tenant_id) {
  if (!tenant_id) return std::nullopt;
  if (auto ok = platformIdentifier(json{{"tenant_id", *tenant_id}}, "tenant_id"); !ok)
    return tl::unexpected(errorResponse(ok.error()));
  return tenant_id;
}

std::optional<HttpResponse> Api::refuseOtherTenant(const std::string& id,
                                                   const std::optional<std::string>& tenant) const {
  if (!tenant) return std::nullopt;
  if (auto live = node_.find(id); live && live->handle.tenant_id == *tenant) return std::nullopt;
  return unknownEnvironment(id);
}

namespace {
// The route a request's method and path (its target without the query)
// name, or null.
const Route* routeOf(const HttpRequest& request) {
  return lookupRoute(request.method,
                     std::string_view(request.target).substr(0, request.target.find('?')))
      .route;
}
}  // namespace

bool Api::wantsStream(const HttpRequest& request) const {
  const std::size_t q = request.target.find('?');
  if (q == std::string::npos) return false;
  const Route* route = routeOf(request);
  return route != nullptr && route->has(kStreams) &&
         queryParam(request.target.substr(q + 1), "stream") == "1";
}

std::string Api::routeLabel(std::string_view path) const {
  return gateway::routeLabel(path);
}

bool Api::runsCommand(const HttpRequest& request) const {
  const Route* route = routeOf(request);
  return route != nullptr && route->has(kRunsCommand);
}

bool Api::needsNoToken(const HttpRequest& request) const {
  const Route* route = routeOf(request);
  return route != nullptr && route->has(kNoAuthentication);
}

HttpResponse Api::health(const RouteCall&) {
  return jsonResponse(200, json{{"status", "ok"}});
}

HttpResponse Api::metricsText(const RouteCall&) {
  HttpResponse r;
  r.content_type = "text/plain; version=0.0.4";
  r.body = metrics_.render();
  return r;
}

}  // namespace airlock::gateway
