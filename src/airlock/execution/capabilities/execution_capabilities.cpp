#include "airlock/execution/capabilities/execution_capabilities.h"

#include "airlock/execution/capabilities/capability_modules.h"

namespace airlock::execution {

capability::wire::Refusal refusalFor(const Error& e) {
  using capability::wire::Refusal;
  switch (e.code) {
    case ErrorCode::kWorkspaceEscape:
      return Refusal{"workspace_escape", e.message()};
    case ErrorCode::kNotFound:
      return Refusal{"not_found", e.message()};
    case ErrorCode::kToolValidationError:
      return Refusal{"bad_request", e.message()};
    case ErrorCode::kExecutionRejected:
    case ErrorCode::kEnvironmentBusy:
    case ErrorCode::kEnvironmentGone:
      return Refusal{"rejected", e.message()};
    default:
      return Refusal{"unavailable", e.message()};
  }
}

void addExecutionCapabilities(capability::CapabilityTable& table,
                              const ExecutionCapabilityServices& services) {
  addProcCapabilities(table, services);
  addFsCapabilities(table, services);
  addJobCapabilities(table, services);
}

}  // namespace airlock::execution
