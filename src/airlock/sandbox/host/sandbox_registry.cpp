#include "airlock/sandbox/host/sandbox_registry.h"

#include <algorithm>

namespace airlock::host {

Error goneError(const std::string& environment_id, bool expired) {
  if (expired) return expiredError(environment_id);
  return Error{ErrorCode::kEnvironmentGone, 0,
               "unknown or destroyed environment " + environment_id};
}

Error foreignTenantError(HandleMatch match) {
  return Error{match == HandleMatch::kTenantRefused ? ErrorCode::kExecutionRejected
                                                    : ErrorCode::kSandboxEscapeSuspected,
               0, "environment does not belong to this tenant"};
}

void ExpiredIds::add(const std::string& environment_id) {
  ids_.push_back(environment_id);
  if (ids_.size() > kCapacity) ids_.pop_front();
}

bool ExpiredIds::contains(const std::string& environment_id) const {
  return std::find(ids_.begin(), ids_.end(), environment_id) != ids_.end();
}

}  // namespace airlock::host
