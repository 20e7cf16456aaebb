// The checks an execute makes before its command runs, the same for every
// mechanism (spec 000, "The three methods and what may fail";
// "sandbox.run_command" validation), in this order:
//   1. the command itself (ToolValidationError): checkCommand;
//   2. the handle (EnvironmentGone when unknown; SandboxEscapeSuspected when
//      its tenant, run or lease epoch differ from the sandbox's record, after
//      which the adapter destroys the sandbox): sameOwner, ownerMismatch;
//   3. one command at a time (EnvironmentBusy), and the sandbox not lost
//      (ExecutionUnavailable): the sandbox's lifecycle (sandbox_lifecycle.h);
//   4. the sandbox's life (EnvironmentGone past expires_at): expiredError;
//   5. the working directory inside the workspace, through the containment
//      function (ToolValidationError): checkWorkingDirectory;
//   6. the effective timeout (timeout_rule.h): commandTimeout.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "airlock/core/error.h"
#include "airlock/core/types.h"

namespace airlock::host {

// validateCommand, then the working directory's lexical check; the
// normalized working directory ("" for the workspace root).
Result<std::string> checkCommand(const ExecutionCommand& command);

// Whether `given` names the tenant, run and lease epoch of the sandbox's
// `record`.
bool sameOwner(const EnvironmentHandle& record, const EnvironmentHandle& given) noexcept;
// SandboxEscapeSuspected, saying the environment was destroyed.
Error ownerMismatch(const std::string& environment_id);

// EnvironmentGone: the environment reached its expires_at.
Error expiredError(const std::string& environment_id);

// ToolValidationError unless `cwd` (from checkCommand) is a directory
// beneath the workspace root `workspace_fd`.
Result<void> checkWorkingDirectory(int workspace_fd, const std::string& cwd);

// The effective timeout: the command's, under the sandbox's wall clock and
// the service's hard cap (the tool's declared timeout was applied above the
// port).
Result<std::chrono::milliseconds> commandTimeout(std::chrono::seconds service_hard_cap,
                                                 const ResourceLimits& limits,
                                                 const ExecutionCommand& command);

// The command's environment by name: the sandbox's `environment`, then the
// command's `additions` over it (ExecutionCommand::env_additions, already
// checked by checkCommand), then PWD set to the working directory
// (/workspace/<cwd>).
std::map<std::string, std::string> commandVariables(
    const std::map<std::string, std::string>& environment,
    const std::map<std::string, std::string>& additions, const std::string& cwd);

// commandVariables as "KEY=value" entries, for the sandbox's exec.
std::vector<std::string> commandEnvironment(const std::map<std::string, std::string>& environment,
                                            const std::map<std::string, std::string>& additions,
                                            const std::string& cwd);

}  // namespace airlock::host
