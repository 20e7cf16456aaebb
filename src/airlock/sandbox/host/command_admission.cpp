#include "airlock/sandbox/host/command_admission.h"

#include <fcntl.h>

#include "airlock/core/command_validation.h"
#include "airlock/core/timeout_rule.h"
#include "airlock/workspace/resolve.h"

namespace airlock::host {

Result<std::string> checkCommand(const ExecutionCommand& command) {
  if (auto r = validateCommand(command); !r) return tl::unexpected(r.error());
  auto cwd = checkRelativePath(command.working_directory);
  if (!cwd) return fail(ErrorCode::kToolValidationError, cwd.error().context);
  return cwd;
}

bool sameOwner(const EnvironmentHandle& record, const EnvironmentHandle& given) noexcept {
  return record.tenant_id == given.tenant_id && record.run_id == given.run_id &&
         record.lease_epoch == given.lease_epoch;
}

Error ownerMismatch(const std::string& environment_id) {
  return Error{ErrorCode::kSandboxEscapeSuspected, 0,
               "handle does not match environment " + environment_id +
                   " (tenant, run or lease epoch differ); the environment was destroyed"};
}

Error expiredError(const std::string& environment_id) {
  return Error{ErrorCode::kEnvironmentGone, 0, "environment " + environment_id + " has expired"};
}

Result<void> checkWorkingDirectory(int workspace_fd, const std::string& cwd) {
  if (cwd.empty()) return {};
  auto dir = workspace::openBeneath(workspace_fd, cwd, O_PATH | O_DIRECTORY);
  if (dir) return {};
  return fail(ErrorCode::kToolValidationError, "working_directory \"" + cwd +
                                                   "\" is not a directory inside the workspace (" +
                                                   dir.error().message() + ")");
}

Result<std::chrono::milliseconds> commandTimeout(std::chrono::seconds service_hard_cap,
                                                 const ResourceLimits& limits,
                                                 const ExecutionCommand& command) {
  auto effective = effectiveTimeout(TimeoutInputs{
      service_hard_cap, std::chrono::seconds(limits.wall_clock_seconds), std::nullopt,
      std::chrono::seconds(command.timeout_seconds), service_hard_cap, std::chrono::seconds(0)});
  if (!effective) return tl::unexpected(effective.error());
  return std::chrono::milliseconds(*effective);
}

std::map<std::string, std::string> commandVariables(
    const std::map<std::string, std::string>& environment,
    const std::map<std::string, std::string>& additions, const std::string& cwd) {
  std::map<std::string, std::string> variables = environment;
  for (const auto& [k, v] : additions) variables[k] = v;
  variables["PWD"] = cwd.empty() ? std::string("/workspace") : "/workspace/" + cwd;
  return variables;
}

std::vector<std::string> commandEnvironment(const std::map<std::string, std::string>& environment,
                                            const std::map<std::string, std::string>& additions,
                                            const std::string& cwd) {
  std::vector<std::string> env;
  for (const auto& [k, v] : commandVariables(environment, additions, cwd))
    env.push_back(k + "=" + v);
  return env;
}

}  // namespace airlock::host
