#include "airlock/gateway/api/lease_book.h"

namespace airlock::gateway {

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

}  // namespace airlock::gateway
