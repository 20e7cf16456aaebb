// The lease book of the gateway (spec 000, "Nothing outlives its lease"):
// the current lease epoch of each (tenant, run), as the platform last
// reported it (PUT /v1/runs/{run_id}/lease). An environment whose epoch is
// older than its run's current one is stale, and the execution node's
// reaper destroys it: the book answers its StaleLeaseQuery. Run ids are the
// platform's and only unique within a tenant: two tenants' runs of one id
// are two leases. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "airlock/port/execution_node.h"

namespace airlock::gateway {

class LeaseBook {
 public:
  // Raises the run's current epoch; a lower epoch than the known one is
  // ignored (leases move forward). Returns the current epoch.
  std::int64_t renew(const std::string& tenant_id, const std::string& run_id, std::int64_t epoch);
  std::optional<std::int64_t> current(const std::string& tenant_id,
                                      const std::string& run_id) const;
  // The environment ids of `leases` whose run's current epoch is newer than
  // theirs: the answer to the execution node's reaper (StaleLeaseQuery).
  std::vector<std::string> stale(const std::vector<LiveLease>& leases) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, std::int64_t> epochs_;  // (tenant, run) -> epoch
};

}  // namespace airlock::gateway
