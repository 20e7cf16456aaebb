#include "airlock/service/api.h"

#include <openssl/crypto.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "airlock/core/command_validation.h"
#include "airlock/core/encoding.h"
#include "airlock/core/environment_tiers.h"
#include "airlock/core/ids.h"
#include "airlock/core/json.h"
#include "airlock/core/limits_defaults.h"
#include "airlock/port/egress_route.h"
#include "airlock/service/request_keys.h"

namespace airlock::service {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// Largest output a caller may ask for: the result holds all of it.
constexpr std::int64_t kMaxOutputCeiling = std::int64_t{256} << 20;

HttpResponse jsonResponse(int status, const json& body) {
  HttpResponse r;
  r.status = status;
  r.body = body.dump();
  return r;
}

Error badRequest(std::string message) {
  return Error{ErrorCode::kToolValidationError, 0, std::move(message)};
}

// Platform identifiers (tenant, run): 1..128 bytes of [A-Za-z0-9._:-].
Result<std::string> identifier(const json& body, const char* field) {
  auto it = body.find(field);
  if (it == body.end() || !it->is_string())
    return tl::unexpected(badRequest(std::string(field) + " is required and must be a string"));
  const std::string v = it->get<std::string>();
  if (!isPlatformIdentifier(v))
    return tl::unexpected(
        badRequest(std::string(field) + " must be 1-128 characters of A-Z a-z 0-9 . _ : -"));
  return v;
}

Result<std::int64_t> integer(const json& body, const char* field,
                             std::optional<std::int64_t> fallback) {
  auto it = body.find(field);
  if (it == body.end() || it->is_null()) {
    if (fallback) return *fallback;
    return tl::unexpected(badRequest(std::string(field) + " is required"));
  }
  auto n = int64FromJson(*it);
  if (!n) return tl::unexpected(badRequest(std::string(field) + " " + n.error().context));
  return *n;
}

Result<json> parseBody(const std::string& body) {
  if (body.empty()) return json::object();
  auto j = parseUntrustedJson(body);
  if (!j)
    return tl::unexpected(badRequest("the request body is not valid JSON: " + j.error().context));
  if (!j->is_object()) return tl::unexpected(badRequest("the request body must be a JSON object"));
  return j;
}

Result<ResourceLimits> limitsFrom(const json& body, const Settings& settings) {
  ResourceLimits limits = settings.limit_defaults;
  auto it = body.find("limits");
  if (it == body.end() || it->is_null()) return limits;
  if (!it->is_object()) return tl::unexpected(badRequest("limits must be an object"));
  for (const auto& [key, value] : it->items()) {
    std::int64_t* field = key == "cpu_millicores"       ? &limits.cpu_millicores
                          : key == "memory_bytes"       ? &limits.memory_bytes
                          : key == "pids_max"           ? &limits.pids_max
                          : key == "workspace_bytes"    ? &limits.workspace_bytes
                          : key == "inodes_max"         ? &limits.inodes_max
                          : key == "wall_clock_seconds" ? &limits.wall_clock_seconds
                                                        : nullptr;
    if (field == nullptr) return tl::unexpected(badRequest("limits." + key + " is not a limit"));
    auto n = int64FromJson(value);
    if (!n) return tl::unexpected(badRequest("limits." + key + " " + n.error().context));
    *field = *n;
  }
  if (auto r = checkLimits(limits, settings.limit_ceilings); !r) return tl::unexpected(r.error());
  const LimitMinimums least = minimumLimits();
  if (limits.memory_bytes < least.memory_bytes || limits.pids_max < least.pids_max ||
      limits.cpu_millicores < least.cpu_millicores)
    return tl::unexpected(Error{ErrorCode::kExecutionRejected, 0,
                                "limits below the minimum a sandbox can start with (memory_bytes " +
                                    std::to_string(least.memory_bytes) + ", pids_max " +
                                    std::to_string(least.pids_max) + ", cpu_millicores " +
                                    std::to_string(least.cpu_millicores) + ")"});
  return limits;
}

Result<std::map<std::string, std::string>> environmentFrom(const json& body) {
  std::map<std::string, std::string> vars =
      buildEnvironment(
          std::vector<std::string>{}, [](std::string_view) { return std::nullopt; }, "",
          std::nullopt)
          .variables;
  auto it = body.find("environment");
  if (it == body.end() || it->is_null()) return vars;
  if (!it->is_object())
    return tl::unexpected(badRequest("environment must be an object of strings"));
  for (const auto& [name, value] : it->items()) {
    if (!isValidEnvName(name))
      return tl::unexpected(
          badRequest("environment name " + quoteForMessage(name) + " is not a valid name"));
    if (isTier0Name(name))
      return tl::unexpected(badRequest("environment name " + quoteForMessage(name) +
                                       " is a credential name and never enters a sandbox"));
    if (isTier2Name(name))
      return tl::unexpected(
          badRequest("environment name " + quoteForMessage(name) + " is set by Airlock itself"));
    if (!value.is_string() || value.get<std::string>().find('\0') != std::string::npos)
      return tl::unexpected(
          badRequest("environment value of " + name + " must be a string without NUL"));
    vars[name] = value.get<std::string>();
  }
  return vars;
}

Result<void> limitsInto(const json& body, ExecutionCommand& c);

Result<ExecutionCommand> commandFrom(const json& body) {
  ExecutionCommand c;
  auto argv = body.find("argv");
  if (argv == body.end() || !argv->is_array() || argv->empty())
    return tl::unexpected(badRequest("argv is required and must be a non-empty array of strings"));
  for (const auto& a : *argv) {
    if (!a.is_string()) return tl::unexpected(badRequest("argv must be an array of strings"));
    c.argv.push_back(a.get<std::string>());
  }
  if (auto problem = shellStringProblem(c.argv, ArgvSpelling::kJson))
    return tl::unexpected(badRequest(*problem));
  if (auto limits = limitsInto(body, c); !limits) return tl::unexpected(limits.error());
  if (auto in = body.find("stdin"); in != body.end() && !in->is_null()) {
    auto bytes = bytesFromJson(*in);
    if (!bytes) return tl::unexpected(badRequest("stdin: " + bytes.error().context));
    c.stdin_data = std::move(*bytes);
  }
  if (auto eid = body.find("execution_id"); eid != body.end() && !eid->is_null()) {
    if (!eid->is_string()) return tl::unexpected(badRequest("execution_id must be a string"));
    c.execution_id = eid->get<std::string>();
    if (c.execution_id.empty())
      return tl::unexpected(
          badRequest("execution_id must not be empty: leave it out for an execution that is not "
                     "cancelled by name"));
    if (auto valid = checkExecutionId(c.execution_id); !valid)
      return tl::unexpected(badRequest(valid.error().context));
  }
  return c;
}

// The limits of a command (working_directory, timeout_seconds,
// maximum_output_bytes) into `c`, with the execute route's defaults and caps.
Result<void> limitsInto(const json& body, ExecutionCommand& c) {
  if (auto wd = body.find("working_directory"); wd != body.end() && !wd->is_null()) {
    if (!wd->is_string()) return tl::unexpected(badRequest("working_directory must be a string"));
    c.working_directory = wd->get<std::string>();
  }
  auto timeout = integer(body, "timeout_seconds", kDeclaredRunCommandTimeoutSeconds);
  if (!timeout) return tl::unexpected(timeout.error());
  c.timeout_seconds = *timeout;
  auto cap = integer(body, "maximum_output_bytes", kDefaultMaximumOutputBytes);
  if (!cap) return tl::unexpected(cap.error());
  if (*cap <= 0 || *cap > kMaxOutputCeiling)
    return tl::unexpected(badRequest("maximum_output_bytes must be between 1 and " +
                                     std::to_string(kMaxOutputCeiling)));
  c.maximum_output_bytes = *cap;
  return {};
}

const char* provenanceName(WorkspaceProvenance p) {
  switch (p) {
    case WorkspaceProvenance::kToolWritten:
      return "TOOL_WRITTEN";
    case WorkspaceProvenance::kSandboxWritten:
      return "SANDBOX_WRITTEN";
    case WorkspaceProvenance::kUnknown:
      return "UNKNOWN";
  }
  return "UNKNOWN";
}

HttpResponse noContent() {
  HttpResponse r;
  r.status = 204;
  r.content_type.clear();
  return r;
}

// An EnvironmentHandle as the API answers it: the handle, and the digest of
// the image the environment runs.
json handleJson(const EnvironmentHandle& handle, const std::string& image_digest) {
  json j = handle;
  j["image_digest"] = image_digest;
  return j;
}

}  // namespace

namespace {

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

std::int64_t LeaseBook::renew(const std::string& tenant_id, const std::string& run_id,
                              std::int64_t epoch) {
  std::lock_guard lk(mu_);
  auto [it, inserted] = epochs_.emplace(std::pair(tenant_id, run_id), epoch);
  if (!inserted && epoch > it->second) it->second = epoch;
  return it->second;
}

std::vector<std::string> LeaseBook::stale(const std::vector<LiveLease>& leases) const {
  std::vector<std::string> out;
  for (const LiveLease& lease : leases)
    if (auto epoch = current(lease.tenant_id, lease.run_id); epoch && *epoch > lease.lease_epoch)
      out.push_back(lease.environment_id);
  return out;
}

std::optional<std::int64_t> LeaseBook::current(const std::string& tenant_id,
                                               const std::string& run_id) const {
  std::lock_guard lk(mu_);
  auto it = epochs_.find(std::pair(tenant_id, run_id));
  if (it == epochs_.end()) return std::nullopt;
  return it->second;
}

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
  tools_ = std::make_shared<const gateway::ToolRegistry>(gateway::builtinTools(tool_options));
}

bool Api::authorized(const HttpRequest& request) const {
  if (settings_.service_token.empty()) return false;
  // "<scheme> SP <token>" and nothing else: the scheme compared without
  // case (RFC 9110, "Authentication Scheme"), the token exactly. Any other
  // byte around them (CR, LF, HT, a second space: what is left of a folded
  // or padded value) fails the length or the comparison.
  constexpr std::string_view kScheme = "bearer";
  const std::string_view value = request.authorization;
  const std::string& token = settings_.service_token;
  if (value.size() != kScheme.size() + 1 + token.size()) return false;
  for (std::size_t i = 0; i < kScheme.size(); ++i)
    if ((value[i] | 0x20) != kScheme[i]) return false;
  return value[kScheme.size()] == ' ' &&
         CRYPTO_memcmp(value.data() + kScheme.size() + 1, token.data(), token.size()) == 0;
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
  const RouteLookup lookup = lookupRoute(request.method, target.substr(0, q));
  const bool open = !lookup.of_path.empty() &&
                    std::all_of(lookup.of_path.begin(), lookup.of_path.end(),
                                [](const Route* r) { return r->has(kNoAuthentication); });
  if (!open && !authorized(request)) return tl::unexpected(unauthorized());
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
  auto query = queryFor(route, q == std::string_view::npos ? "" : target.substr(q + 1));
  if (!query) return tl::unexpected(std::move(query.error()));
  RouteCall call{request, route, {}, std::move(*query), std::nullopt, nullptr};
  for (const auto& [name, raw] : lookup.segments) {
    auto value = percentDecoded(raw, false);
    if (!value)
      return tl::unexpected(errorResponse(
          badRequest("the " + std::string(name) + " in the path is not valid percent-encoding")));
    call.params.emplace(std::string(name), std::move(*value));
  }
  if (auto refused = checkTenant(call)) return tl::unexpected(std::move(*refused));
  return call;
}

std::optional<HttpResponse> Api::checkTenant(RouteCall& call) const {
  const Route& route = call.route;
  std::optional<std::string> named;
  std::optional<std::string> environment;
  if (route.tenant == TenantScope::kQuery || route.tenant == TenantScope::kQueryRequired)
    named = call.queryValue("tenant_id");
  if (route.tenant == TenantScope::kQueryRequired && !named)
    return errorResponse(badRequest("the tenant_id query parameter is required"));
  if (auto it = call.params.find("environment_id"); it != call.params.end())
    environment = it->second;
  if (route.has(kEnvironmentInBody)) {
    auto body = parseBody(call.request.body);
    if (!body) return errorResponse(body.error());
    if (auto t = body->find("tenant_id"); t != body->end()) {
      if (!t->is_string()) return errorResponse(badRequest("tenant_id must be a string"));
      named = t->get<std::string>();
    }
    if (auto e = body->find("environment_id"); e != body->end() && e->is_string())
      environment = e->get<std::string>();
    call.body = std::make_shared<const json>(std::move(*body));
  }
  auto tenant = namedTenant(named);
  if (!tenant) return std::move(tenant.error());
  call.tenant = std::move(*tenant);
  if (!environment) return std::nullopt;
  auto refused = refuseOtherTenant(*environment, call.tenant);
  // Destroy is idempotent: another tenant's environment is an unknown id,
  // which is success, and nothing is destroyed.
  if (refused && route.has(kUnknownIdSucceeds)) return noContent();
  return refused;
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

HttpResponse Api::provision(const RouteCall& call) {
  auto body = parseBody(call.request.body);
  if (!body) return errorResponse(body.error());
  if (auto refused = refuseUnknownKeys(*body, {"tenant_id", "run_id", "lease_epoch", "limits",
                                               "environment", "network", "image"}))
    return *refused;
  EnvironmentSpec spec;
  auto tenant = identifier(*body, "tenant_id");
  if (!tenant) return errorResponse(tenant.error());
  auto run = identifier(*body, "run_id");
  if (!run) return errorResponse(run.error());
  auto epoch = integer(*body, "lease_epoch", 0);
  if (!epoch) return errorResponse(epoch.error());
  if (*epoch < 0) return errorResponse(badRequest("lease_epoch must not be negative"));
  auto limits = limitsFrom(*body, settings_);
  if (!limits) return errorResponse(limits.error());
  auto vars = environmentFrom(*body);
  if (!vars) return errorResponse(vars.error());
  auto image = imageFrom(*body);
  if (!image) return errorResponse(image.error());
  bool network = false;
  if (auto it = body->find("network"); it != body->end() && !it->is_null()) {
    if (!it->is_boolean()) return errorResponse(badRequest("network must be true or false"));
    network = it->get<bool>();
  }
  // The call's yes alone is not enough: the operator's policy must allow
  // something, or the sandbox would be provisioned without the network the
  // caller asked for.
  if (network && !egressEnabled(egress_))
    return errorResponse(Error{ErrorCode::kExecutionRejected, 0,
                               "network was requested, but this service's egress_policy allows no "
                               "destination (an operator sets mode: allowlist with destinations)"});
  // The lease of this tenant's run: another tenant's run of the same id is
  // another lease.
  if (auto current = leases_.current(*tenant, *run); current && *epoch < *current)
    return errorResponse(Error{ErrorCode::kExecutionRejected, 0,
                               "lease_epoch " + std::to_string(*epoch) + " is older than run " +
                                   *run + "'s current epoch " + std::to_string(*current)});
  spec.tenant_id = *tenant;
  spec.run_id = *run;
  spec.lease_epoch = *epoch;
  spec.image_digest = *image;
  spec.limits = *limits;
  spec.environment = std::move(*vars);
  if (network) spec.egress = egress_;

  const auto started = Clock::now();
  auto handle = node_.provision(spec);
  if (!handle) return errorResponse(handle.error());
  metrics_.provisioned(std::chrono::duration<double>(Clock::now() - started).count());
  return jsonResponse(201, handleJson(*handle, spec.image_digest));
}

Result<std::string> Api::imageFrom(const json& body) const {
  auto it = body.find("image");
  if (it == body.end() || it->is_null()) return images_.images.front().digest;
  if (!it->is_string())
    return tl::unexpected(
        badRequest("image must be a string: the name of an image this service runs, or a digest"));
  const std::string named = it->get<std::string>();
  for (const auto& i : images_.images)
    if (i.name == named || i.digest == named || (!i.reference.empty() && i.reference == named))
      return i.digest;
  // A digest this service does not run goes to the mechanism, which refuses
  // it as every unknown digest is refused (ExecutionRejected).
  if (named.rfind("sha256:", 0) == 0) return named;
  std::string names;
  for (const auto& i : images_.images) names += (names.empty() ? "" : ", ") + i.name;
  return fail(ErrorCode::kExecutionRejected,
              "unknown image " + quoteForMessage(named) + " (this service runs " + names + ")");
}

HttpResponse Api::listImages(const RouteCall&) {
  json out = json::array();
  for (std::size_t i = 0; i < images_.images.size(); ++i) {
    const auto& image = images_.images[i];
    out.push_back(
        json{{"name", image.name},
             {"reference", image.reference.empty() ? json(nullptr) : json(image.reference)},
             {"digest", image.digest},
             {"default", i == 0}});
  }
  return jsonResponse(200, json{{"images", out}});
}

HttpResponse Api::listEnvironments(const RouteCall& call) {
  const std::optional<std::string>& tenant = call.tenant;
  json out = json::array();
  for (const LiveEnvironment& live : node_.live(tenant))
    out.push_back(handleJson(live.handle, live.image_digest));
  return jsonResponse(200, json{{"environments", out}});
}

tl::expected<std::optional<std::string>, HttpResponse> Api::namedTenant(
    const std::optional<std::string>& tenant_id) {
  if (!tenant_id) return std::nullopt;
  if (auto ok = identifier(json{{"tenant_id", *tenant_id}}, "tenant_id"); !ok)
    return tl::unexpected(errorResponse(ok.error()));
  return tenant_id;
}

std::optional<HttpResponse> Api::refuseOtherTenant(const std::string& id,
                                                   const std::optional<std::string>& tenant) const {
  if (!tenant) return std::nullopt;
  if (auto live = node_.find(id); live && live->handle.tenant_id == *tenant) return std::nullopt;
  return errorResponse(404, "not_found", "no live environment " + quoteForMessage(id));
}

HttpResponse Api::getEnvironment(const RouteCall& call) {
  const std::string& id = call.param("environment_id");
  auto live = node_.find(id);
  if (!live) return errorResponse(404, "not_found", "no live environment " + quoteForMessage(id));
  return jsonResponse(200, handleJson(live->handle, live->image_digest));
}

Result<void> Api::destroyLive(const std::string& id) {
  auto live = node_.find(id);
  if (!live) return {};
  return node_.destroy(live->handle);
}

HttpResponse Api::destroyEnvironment(const RouteCall& call) {
  // Idempotent: an unknown or already destroyed id is success.
  if (auto r = destroyLive(call.param("environment_id")); !r) return errorResponse(r.error());
  return noContent();
}

tl::expected<Api::PreparedExecute, HttpResponse> Api::prepareExecute(const std::string& id,
                                                                     const HttpRequest& request) {
  auto live = node_.find(id);
  if (!live)
    return tl::unexpected(
        errorResponse(404, "not_found", "no live environment " + quoteForMessage(id)));
  auto body = parseBody(request.body);
  if (!body) return tl::unexpected(errorResponse(body.error()));
  if (auto refused = refuseUnknownKeys(*body, {"argv", "working_directory", "timeout_seconds",
                                               "maximum_output_bytes", "stdin", "execution_id"}))
    return tl::unexpected(std::move(*refused));
  auto command = commandFrom(*body);
  if (!command) return tl::unexpected(errorResponse(command.error()));
  return PreparedExecute{live->handle, std::move(*command)};
}

HttpResponse Api::finishExecute(const std::string& id, Clock::duration busy,
                                const Result<ExecutionResult>& result, json* result_json) {
  if (!result) {
    // A foreign handle: the adapter destroyed the sandbox; forget it too.
    // An expired or destroyed one is gone from the adapter: forget it too.
    // Any other refusal (EnvironmentBusy: a command is running) leaves a
    // live sandbox, and its running command, alone.
    const ErrorCode code = result.error().code;
    if (code == ErrorCode::kSandboxEscapeSuspected || code == ErrorCode::kEnvironmentGone)
      (void)destroyLive(id);
    return errorResponse(result.error());
  }
  metrics_.executed(std::chrono::duration<double>(busy).count(),
                    result->killed_by ? json(*result->killed_by).get<std::string>() : "none");
  if (result->killed_by == KillReason::kExpired && destroyLive(id))
    metrics_.orphanReaped("expired");
  json object = *result;
  HttpResponse response = jsonResponse(200, object);
  if (result_json != nullptr) *result_json = std::move(object);
  return response;
}

HttpResponse Api::cancelExecution(const RouteCall& call) {
  const std::string& id = call.param("environment_id");
  const std::string& execution_id = call.param("execution_id");
  auto live = node_.find(id);
  if (!live) return errorResponse(404, "not_found", "no live environment " + quoteForMessage(id));
  if (auto cancelled = node_.cancel(live->handle, execution_id); !cancelled) {
    // Gone from the adapter (expired or reaped): forget it too, as execute does.
    if (cancelled.error().code == ErrorCode::kEnvironmentGone) (void)destroyLive(id);
    return errorResponse(cancelled.error());
  }
  return noContent();
}

HttpResponse Api::execute(const RouteCall& call) {
  const std::string& id = call.param("environment_id");
  auto prepared = prepareExecute(id, call.request);
  if (!prepared) return prepared.error();
  const auto started = Clock::now();
  Result<ExecutionResult> result;
  {
    auto claim = node_.claim(id, RunKind::kCommand);
    if (!claim) return errorResponse(claim.error());
    result = node_.execute(prepared->handle, prepared->command);
  }
  return finishExecute(id, Clock::now() - started, result);
}

bool Api::wantsStream(const HttpRequest& request) const {
  const std::size_t q = request.target.find('?');
  if (q == std::string::npos) return false;
  const Route* route =
      lookupRoute(request.method, std::string_view(request.target).substr(0, q)).route;
  return route != nullptr && route->has(kStreams) &&
         queryParam(request.target.substr(q + 1), "stream") == "1";
}

std::string Api::routeLabel(std::string_view path) const {
  return service::routeLabel(path);
}

bool Api::runsCommand(const HttpRequest& request) const {
  const Route* route =
      lookupRoute(request.method,
                  std::string_view(request.target).substr(0, request.target.find('?')))
          .route;
  return route != nullptr && route->has(kRunsCommand);
}

bool Api::needsNoToken(const HttpRequest& request) const {
  const Route* route =
      lookupRoute(request.method,
                  std::string_view(request.target).substr(0, request.target.find('?')))
          .route;
  return route != nullptr && route->has(kNoAuthentication);
}

HttpResponse Api::handleStreaming(const HttpRequest& request,
                                  const std::function<void(std::string)>& emit,
                                  const CancelToken* cancel) {
  try {
    auto call = admit(request);
    if (!call) return std::move(call.error());
    if (!call->route.has(kStreams)) return (this->*(call->route.handler))(*call);
    const std::string& id = call->param("environment_id");
    auto prepared = prepareExecute(id, request);
    if (!prepared) return prepared.error();
    auto claim = node_.claim(id, RunKind::kCommand);
    if (!claim) return errorResponse(claim.error());
    const auto started = Clock::now();
    auto result = node_.executeStreaming(
        prepared->handle, prepared->command, cancel,
        [&](ExecutionEnvironment::OutputStream stream, std::string_view bytes) {
          emit(json{{"stream",
                     stream == ExecutionEnvironment::OutputStream::kStdout ? "stdout" : "stderr"},
                    {"data", bytesToJson(bytes)}}
                   .dump());
        });
    json object;
    HttpResponse final = finishExecute(id, Clock::now() - started, result, &object);
    // The last line: the result, or the error that ended the execution.
    emit(result && final.status == 200 ? json{{"result", std::move(object)}}.dump() : final.body);
    return final;
  } catch (const std::exception&) {
    return errorResponse(500, "internal", "internal error");
  }
}

tl::expected<Api::WorkspaceTarget, HttpResponse> Api::workspaceTarget(const RouteCall& call) {
  const std::string& id = call.param("environment_id");
  auto live = node_.find(id);
  if (!live)
    return tl::unexpected(
        errorResponse(404, "not_found", "no live environment " + quoteForMessage(id)));
  auto path = call.queryValue("path");
  if (!path)
    return tl::unexpected(
        errorResponse(badRequest("the path query parameter is required (percent-encoded)")));
  auto ws = node_.workspace(live->handle);
  if (!ws) return tl::unexpected(errorResponse(ws.error()));
  return WorkspaceTarget{std::move(*ws), std::move(*path)};
}

HttpResponse Api::readFile(const RouteCall& call) {
  auto target = workspaceTarget(call);
  if (!target) return std::move(target.error());
  auto data = target->workspace->read(target->path);
  if (!data) return errorResponse(data.error());
  HttpResponse r;
  r.content_type = "application/octet-stream";
  r.body = std::move(*data);
  return r;
}

HttpResponse Api::writeFile(const RouteCall& call) {
  auto target = workspaceTarget(call);
  if (!target) return std::move(target.error());
  if (auto w = target->workspace->write(target->path, call.request.body); !w)
    return errorResponse(w.error());
  return noContent();
}

HttpResponse Api::listDirectory(const RouteCall& call) {
  auto target = workspaceTarget(call);
  if (!target) return std::move(target.error());
  auto entries = target->workspace->listdir(target->path);
  if (!entries) return errorResponse(entries.error());
  json out = json::array();
  for (const auto& e : *entries)
    out.push_back(json{{"name", bytesToJson(e.name)},
                       {"type", workspaceEntryTypeName(e.type)},
                       {"size_bytes", e.size_bytes}});
  return jsonResponse(200, json{{"path", bytesToJson(target->path)}, {"entries", out}});
}

HttpResponse Api::provenance(const RouteCall& call) {
  auto target = workspaceTarget(call);
  if (!target) return std::move(target.error());
  auto p = target->workspace->provenance(target->path);
  if (!p) return errorResponse(p.error());
  return jsonResponse(
      200, json{{"path", bytesToJson(target->path)}, {"provenance", provenanceName(*p)}});
}

HttpResponse Api::renewLease(const RouteCall& call) {
  const std::string& run_id = call.param("run_id");
  auto body = parseBody(call.request.body);
  if (!body) return errorResponse(body.error());
  if (auto refused = refuseUnknownKeys(*body, {"tenant_id", "lease_epoch"})) return *refused;
  json probe = {{"run_id", run_id}};
  if (auto ok = identifier(probe, "run_id"); !ok) return errorResponse(ok.error());
  // A run id is the platform's and unique only within a tenant: the lease
  // is the tenant's run's.
  auto tenant = identifier(*body, "tenant_id");
  if (!tenant) return errorResponse(tenant.error());
  auto epoch = integer(*body, "lease_epoch", std::nullopt);
  if (!epoch) return errorResponse(epoch.error());
  if (*epoch < 0) return errorResponse(badRequest("lease_epoch must not be negative"));
  const std::int64_t current = leases_.renew(*tenant, run_id, *epoch);
  return jsonResponse(200,
                      json{{"tenant_id", *tenant}, {"run_id", run_id}, {"lease_epoch", current}});
}

int Api::reap() {
  const int destroyed =
      node_.reap([this](const std::vector<LiveLease>& leases) { return leases_.stale(leases); });
  sweepArtifacts();
  return destroyed;
}

// The body helpers other route files share (api_body.h).
namespace body {
Result<nlohmann::json> parse(const std::string& text) {
  return parseBody(text);
}
Result<ExecutionCommand> commandLimits(const nlohmann::json& object) {
  ExecutionCommand c;
  if (auto limits = limitsInto(object, c); !limits) return tl::unexpected(limits.error());
  return c;
}
Result<std::int64_t> wholeNumber(const nlohmann::json& object, const char* field,
                                 std::optional<std::int64_t> fallback) {
  return integer(object, field, fallback);
}
HttpResponse reply(int status, const nlohmann::json& object) {
  return jsonResponse(status, object);
}
}  // namespace body

}  // namespace airlock::service
