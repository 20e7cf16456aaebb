// The timeout rule (spec 000, "Timeouts compose by minimum").
//
// effective = min(service hard cap, spec wall clock, remaining run budget,
//                 command timeout clamped to the tool's declared timeout).
// The service hard cap applies whether or not anything else is supplied. A
// command is not started when the remaining run budget is under the floor.
#pragma once

#include <chrono>
#include <optional>

#include "airlock/core/error.h"

namespace airlock {

struct TimeoutInputs {
  std::chrono::seconds service_hard_cap;                     // operator; always applies
  std::chrono::seconds spec_wall_clock;                      // EnvironmentSpec.limits
  std::optional<std::chrono::seconds> remaining_run_budget;  // from the run deadline
  std::optional<std::chrono::seconds> command_timeout;       // model/caller supplied
  std::chrono::seconds tool_declared_timeout;                // e.g. 300 for run_command
  std::chrono::seconds minimum_floor{5};                     // default 5 s
};

// Returns the effective timeout (always > 0), or ExecutionRejected when the
// remaining run budget is under the floor, or ToolValidationError when the
// command timeout is not positive.
Result<std::chrono::seconds> effectiveTimeout(const TimeoutInputs& in);

}  // namespace airlock
