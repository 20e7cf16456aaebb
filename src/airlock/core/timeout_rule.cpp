#include "airlock/core/timeout_rule.h"

#include <algorithm>
#include <string>

namespace airlock {
namespace {

std::string secondsText(std::chrono::seconds s) {
  return std::to_string(s.count()) + " s";
}

}  // namespace

Result<std::chrono::seconds> effectiveTimeout(const TimeoutInputs& in) {
  using std::chrono::seconds;
  // Operator settings first: a broken configuration is not the caller's fault.
  if (in.service_hard_cap <= seconds{0}) {
    return fail(ErrorCode::kConfigurationError,
                "service hard cap must be positive, got " + secondsText(in.service_hard_cap));
  }
  if (in.tool_declared_timeout <= seconds{0}) {
    return fail(ErrorCode::kConfigurationError, "tool declared timeout must be positive, got " +
                                                    secondsText(in.tool_declared_timeout));
  }
  if (in.spec_wall_clock <= seconds{0}) {
    return fail(ErrorCode::kExecutionRejected, "limits.wall_clock_seconds must be positive, got " +
                                                   secondsText(in.spec_wall_clock));
  }
  if (in.command_timeout && *in.command_timeout <= seconds{0}) {
    return fail(ErrorCode::kToolValidationError,
                "timeout_seconds must be a positive number of seconds, got " +
                    std::to_string(in.command_timeout->count()));
  }
  if (in.remaining_run_budget &&
      (*in.remaining_run_budget < in.minimum_floor || *in.remaining_run_budget <= seconds{0})) {
    // Starting a command that is certain to be killed wastes a sandbox start.
    return fail(ErrorCode::kExecutionRejected,
                "remaining run budget " + secondsText(*in.remaining_run_budget) +
                    " is under the minimum of " + secondsText(in.minimum_floor) +
                    " needed to start a command");
  }

  seconds effective = std::min(in.service_hard_cap, in.spec_wall_clock);
  if (in.remaining_run_budget) effective = std::min(effective, *in.remaining_run_budget);
  if (in.command_timeout) {
    effective = std::min(effective, std::min(*in.command_timeout, in.tool_declared_timeout));
  }
  return effective;
}

}  // namespace airlock
