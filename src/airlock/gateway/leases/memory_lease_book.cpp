// The in-memory lease book (lease_book.h makeMemoryLeaseBook).
#include <map>
#include <mutex>
#include <utility>

#include "airlock/gateway/leases/lease_book.h"

namespace airlock::gateway {
namespace {

class MemoryLeaseBook final : public LeaseBook {
 public:
  Result<std::int64_t> renew(const std::string& tenant_id, const std::string& run_id,
                             std::int64_t epoch) override {
    std::lock_guard lk(mu_);
    auto [it, inserted] = epochs_.emplace(std::pair(tenant_id, run_id), epoch);
    if (!inserted && epoch > it->second) it->second = epoch;
    return it->second;
  }

  Result<std::optional<std::int64_t>> current(const std::string& tenant_id,
                                              const std::string& run_id) const override {
    std::lock_guard lk(mu_);
    return find(tenant_id, run_id);
  }

  Result<std::vector<std::string>> stale(const std::vector<LiveLease>& leases) const override {
    std::lock_guard lk(mu_);
    std::vector<std::string> out;
    for (const LiveLease& lease : leases)
      if (auto epoch = find(lease.tenant_id, lease.run_id); epoch && *epoch > lease.lease_epoch)
        out.push_back(lease.environment_id);
    return out;
  }

 private:
  std::optional<std::int64_t> find(const std::string& tenant_id, const std::string& run_id) const {
    auto it = epochs_.find(std::pair(tenant_id, run_id));
    if (it == epochs_.end()) return std::nullopt;
    return it->second;
  }

  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, std::int64_t> epochs_;  // (tenant, run) -> epoch
};

}  // namespace

std::shared_ptr<LeaseBook> makeMemoryLeaseBook() {
  return std::make_shared<MemoryLeaseBook>();
}

}  // namespace airlock::gateway
