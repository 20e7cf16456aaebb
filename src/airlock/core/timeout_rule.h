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

// Returns the effective timeout (always > 0). Errors, checked in this order:
// * ConfigurationError when service_hard_cap or tool_declared_timeout is not
//   positive (operator settings);
// * ExecutionRejected when spec_wall_clock is not positive;
// * ToolValidationError when the command timeout is present and not positive;
// * ExecutionRejected when the remaining run budget is present and under the
//   floor (or not positive), naming both numbers.
// An absent command timeout leaves the other three bounds; the declared
// timeout only clamps a supplied command timeout.
Result<std::chrono::seconds> effectiveTimeout(const TimeoutInputs& in);

}  // namespace airlock
