// Inside airlock_execution_capabilities: each module's registration, and
// what they share. Public contract: execution_capabilities.h.
#pragma once

#include "airlock/capability/broker/broker.h"
#include "airlock/core/error.h"
#include "airlock/execution/capabilities/execution_capabilities.h"

namespace airlock::execution {

// The refusal for an error of the port (workspace, side processes):
// WorkspaceEscape -> "workspace_escape", NotFound -> "not_found",
// ToolValidationError -> "bad_request", ExecutionRejected / EnvironmentBusy /
// EnvironmentGone -> "rejected", anything else -> "unavailable".
capability::wire::Refusal refusalFor(const Error& e);

void addProcCapabilities(capability::CapabilityTable& table,
                         const ExecutionCapabilityServices& services);  // proc.run
void addFsCapabilities(capability::CapabilityTable& table,
                       const ExecutionCapabilityServices& services);  // fs.*
void addJobCapabilities(capability::CapabilityTable& table,
                        const ExecutionCapabilityServices& services);  // job.*

}  // namespace airlock::execution
