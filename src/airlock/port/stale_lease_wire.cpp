#include "airlock/port/stale_lease_wire.h"

#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "airlock/core/ids.h"

namespace airlock {
namespace {

using json = nlohmann::json;

tl::unexpected<Error> invalid(std::string message) {
  return fail(ErrorCode::kToolValidationError, std::move(message));
}

// leases[i] of a question, checked.
Result<LiveLease> leaseFrom(const json& item, std::size_t index) {
  const std::string where = "leases[" + std::to_string(index) + "]";
  if (!item.is_object())
    return invalid(where + " must be an object {tenant_id, run_id, lease_epoch, environment_id}");
  for (const auto& [key, value] : item.items())
    if (key != "tenant_id" && key != "run_id" && key != "lease_epoch" && key != "environment_id")
      return invalid(where + " has the unknown key \"" + key +
                     "\" (it takes tenant_id, run_id, lease_epoch, environment_id)");
  LiveLease lease;
  for (auto [key, field] : {std::pair{"tenant_id", &lease.tenant_id}, {"run_id", &lease.run_id}}) {
    auto it = item.find(key);
    if (it == item.end() || !it->is_string() || !isPlatformIdentifier(it->get<std::string>()))
      return invalid(where + "." + key + " must be 1-" + std::to_string(kMaxPlatformIdBytes) +
                     " bytes of A-Z a-z 0-9 . _ : -");
    *field = it->get<std::string>();
  }
  auto env = item.find("environment_id");
  if (env == item.end() || !env->is_string() || !environmentIdNode(env->get<std::string>()))
    return invalid(where + ".environment_id must be an environment id (<node>.<uuid> or <uuid>)");
  lease.environment_id = env->get<std::string>();
  auto epoch = item.find("lease_epoch");
  const bool whole =
      epoch != item.end() && (epoch->is_number_unsigned() ||
                              (epoch->is_number_integer() && epoch->get<std::int64_t>() >= 0));
  if (!whole || epoch->get<std::uint64_t>() >
                    static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
    return invalid(where + ".lease_epoch must be a whole number from 0 to 2^63-1");
  lease.lease_epoch = epoch->get<std::int64_t>();
  return lease;
}

}  // namespace

std::string staleLeaseQuestionBody(const std::vector<LiveLease>& leases) {
  json list = json::array();
  for (const LiveLease& lease : leases)
    list.push_back({{"tenant_id", lease.tenant_id},
                    {"run_id", lease.run_id},
                    {"lease_epoch", lease.lease_epoch},
                    {"environment_id", lease.environment_id}});
  return json{{"leases", std::move(list)}}.dump();
}

Result<std::vector<LiveLease>> staleLeaseQuestionFrom(const json& body) {
  if (!body.is_object()) return invalid("the body must be a JSON object {\"leases\": [...]}");
  for (const auto& [key, value] : body.items())
    if (key != "leases") return invalid("unknown key \"" + key + "\" (the body takes leases)");
  auto list = body.find("leases");
  if (list == body.end() || !list->is_array())
    return invalid("leases must be an array of {tenant_id, run_id, lease_epoch, environment_id}");
  if (list->size() > kMaxStaleLeaseQuestion)
    return invalid("at most " + std::to_string(kMaxStaleLeaseQuestion) +
                   " leases per question; got " + std::to_string(list->size()));
  std::vector<LiveLease> leases;
  leases.reserve(list->size());
  for (std::size_t i = 0; i < list->size(); ++i) {
    auto lease = leaseFrom((*list)[i], i);
    if (!lease) return tl::unexpected(lease.error());
    leases.push_back(std::move(*lease));
  }
  return leases;
}

std::string staleLeaseAnswerBody(const std::vector<std::string>& stale) {
  return json{{"stale", stale}}.dump();
}

Result<std::vector<std::string>> staleLeaseAnswerFrom(const std::string& body,
                                                      const std::vector<LiveLease>& asked) {
  const json answer = json::parse(body, nullptr, /*allow_exceptions=*/false);
  auto list = answer.is_object() ? answer.find("stale") : answer.end();
  if (!answer.is_object() || list == answer.end() || !list->is_array())
    return invalid("the answer is not {\"stale\": [environment ids]}");
  std::set<std::string> ids;
  for (const LiveLease& lease : asked) ids.insert(lease.environment_id);
  std::vector<std::string> stale;
  for (const json& id : *list) {
    if (!id.is_string()) return invalid("the answer's stale list holds a non-string");
    if (ids.erase(id.get<std::string>()) > 0) stale.push_back(id.get<std::string>());
  }
  return stale;
}

}  // namespace airlock
