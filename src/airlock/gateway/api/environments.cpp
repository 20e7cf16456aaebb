// The environment routes of the API (api.h): provision, list, get, destroy,
// the images, the lease of a run, the reaper pass and the reaper's question
// of a node on another machine.
#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

#include "airlock/core/command_validation.h"
#include "airlock/core/encoding.h"
#include "airlock/core/environment_tiers.h"
#include "airlock/core/ids.h"
#include "airlock/core/json.h"
#include "airlock/core/limits_defaults.h"
#include "airlock/gateway/api/api.h"
#include "airlock/gateway/api/body.h"
#include "airlock/port/egress_route.h"
#include "airlock/port/stale_lease_wire.h"

namespace airlock::gateway {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// An environment as every route answers it (provision, list, get, extend):
// the handle, the digest of the image it runs, and max_expires_at, the
// latest expires_at an extension can reach (created_at + the hard cap).
json environmentJson(const EnvironmentHandle& handle, const std::string& image_digest,
                     std::chrono::seconds hard_cap) {
  json j = handle;
  j["image_digest"] = image_digest;
  j["max_expires_at"] = formatTimestamp(handle.created_at + hard_cap);
  return j;
}

// A body's lease_epoch: a whole number, 0 or more (an int64 where kept).
Result<std::int64_t> leaseEpoch(const json& body, std::optional<std::uint64_t> fallback) {
  constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  auto epoch = countField(body, {"lease_epoch", "", kMax}, fallback);
  if (!epoch) return tl::unexpected(epoch.error());
  return static_cast<std::int64_t>(*epoch);
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
  if (auto ok = variablesInto(body, "environment", vars); !ok) return tl::unexpected(ok.error());
  return vars;
}

}  // namespace

namespace {
// The tenant of a kBody call: the dispatcher's (a tenant key's, or the
// body's tenant_id, checked), or the error of a body that names none.
Result<std::string> callTenant(const RouteCall& call) {
  if (call.tenant) return *call.tenant;
  return platformIdentifier(*call.body, "tenant_id");
}
}  // namespace

HttpResponse Api::provision(const RouteCall& call) {
  // The dispatcher has parsed the body and checked its tenant (kBody).
  const json* body = call.body.get();
  if (auto refused = refuseUnknownKeys(*body, {"tenant_id", "run_id", "lease_epoch", "limits",
                                               "environment", "network", "image"}))
    return *refused;
  EnvironmentSpec spec;
  auto tenant = callTenant(call);
  if (!tenant) return errorResponse(tenant.error());
  auto run = platformIdentifier(*body, "run_id");
  if (!run) return errorResponse(run.error());
  auto epoch = leaseEpoch(*body, 0);
  if (!epoch) return errorResponse(epoch.error());
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
  auto current = leases_->current(*tenant, *run);
  if (!current) return errorResponse(current.error());
  if (*current && *epoch < **current)
    return errorResponse(Error{ErrorCode::kExecutionRejected, 0,
                               "lease_epoch " + std::to_string(*epoch) + " is older than run " +
                                   *run + "'s current epoch " + std::to_string(**current)});
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
  return jsonResponse(201,
                      environmentJson(*handle, spec.image_digest, settings_.environment_hard_cap));
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
    out.push_back(environmentJson(live.handle, live.image_digest, settings_.environment_hard_cap));
  return jsonResponse(200, json{{"environments", out}});
}

HttpResponse Api::getEnvironment(const RouteCall& call) {
  const std::string& id = call.param("environment_id");
  auto live = node_.find(id);
  if (!live) return errorResponse(404, "not_found", "no live environment " + quoteForMessage(id));
  return jsonResponse(
      200, environmentJson(live->handle, live->image_digest, settings_.environment_hard_cap));
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

HttpResponse Api::extendEnvironment(const RouteCall& call) {
  const std::string& id = call.param("environment_id");
  auto body = parseBody(call.request.body);
  if (!body) return errorResponse(body.error());
  if (auto refused = refuseUnknownKeys(*body, {"seconds"})) return *refused;
  auto seconds = wholeNumber(*body, "seconds", std::nullopt);
  if (!seconds) return errorResponse(seconds.error());
  const std::chrono::seconds cap = settings_.environment_hard_cap;
  if (*seconds < 1 || *seconds > cap.count())
    return errorResponse(badRequest("seconds must be 1 to " + std::to_string(cap.count()) +
                                    " (environment_hard_cap), got " + std::to_string(*seconds)));
  auto live = node_.find(id);
  if (!live) return errorResponse(404, "not_found", "no live environment " + quoteForMessage(id));
  // Asking past the hard cap is clamped to it (the answer's max_expires_at
  // says where that is); asking for less than is left changes nothing.
  const Timestamp most = live->handle.created_at + cap;
  const Timestamp wanted = std::min(clock_() + std::chrono::seconds(*seconds), most);
  auto extended = node_.extend(live->handle, wanted);
  if (!extended) return errorResponse(extended.error());
  return jsonResponse(200, environmentJson(*extended, live->image_digest, cap));
}

HttpResponse Api::renewLease(const RouteCall& call) {
  const std::string& run_id = call.param("run_id");
  // The dispatcher has parsed the body and checked its tenant (kBody).
  const json* body = call.body.get();
  if (auto refused = refuseUnknownKeys(*body, {"tenant_id", "lease_epoch"})) return *refused;
  json probe = {{"run_id", run_id}};
  if (auto ok = platformIdentifier(probe, "run_id"); !ok) return errorResponse(ok.error());
  // A run id is the platform's and unique only within a tenant: the lease
  // is the tenant's run's.
  auto tenant = callTenant(call);
  if (!tenant) return errorResponse(tenant.error());
  auto epoch = leaseEpoch(*body, std::nullopt);
  if (!epoch) return errorResponse(epoch.error());
  auto current = leases_->renew(*tenant, run_id, *epoch);
  if (!current) return errorResponse(current.error());
  return jsonResponse(200,
                      json{{"tenant_id", *tenant}, {"run_id", run_id}, {"lease_epoch", *current}});
}

int Api::reap() {
  // A book that cannot answer names nothing stale: everything is kept, and
  // expires_at still ends each environment.
  const int destroyed = node_.reap([this](const std::vector<LiveLease>& leases) {
    return leases_->stale(leases).value_or(std::vector<std::string>{});
  });
  sweepArtifacts();
  return destroyed;
}

HttpResponse Api::staleLeases(const RouteCall& call) {
  auto body = parseBody(call.request.body);
  if (!body) return errorResponse(body.error());
  auto leases = staleLeaseQuestionFrom(*body);
  if (!leases) return errorResponse(leases.error());
  auto stale = leases_->stale(*leases);
  if (!stale) return errorResponse(stale.error());
  HttpResponse answer;  // 200, application/json
  answer.body = staleLeaseAnswerBody(*stale);
  return answer;
}

}  // namespace airlock::gateway
