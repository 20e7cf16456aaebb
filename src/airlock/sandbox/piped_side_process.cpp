#include "airlock/sandbox/piped_side_process.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "airlock/core/command_validation.h"
#include "airlock/core/environment_tiers.h"

namespace airlock {

Result<PreparedSideCommand> prepareSideCommand(
    const std::map<std::string, std::string>& sandbox_environment, const SideCommand& command) {
  if (command.argv.empty() || command.argv[0].empty())
    return fail(ErrorCode::kToolValidationError, "argv must name a program");
  for (const auto& a : command.argv)
    if (a.find('\0') != std::string::npos)
      return fail(ErrorCode::kToolValidationError, "argv must not contain NUL bytes");
  auto cwd = checkRelativePath(command.working_directory);
  if (!cwd) return fail(ErrorCode::kToolValidationError, cwd.error().context);
  std::map<std::string, std::string> env = sandbox_environment;
  for (const auto& [k, v] : command.env_additions) {
    if (!isValidEnvName(k) || v.find('\0') != std::string::npos)
      return fail(ErrorCode::kToolValidationError, "invalid environment variable " + k);
    env[k] = v;
  }
  env["PWD"] = cwd->empty() ? std::string("/workspace") : "/workspace/" + *cwd;
  PreparedSideCommand prepared;
  prepared.working_directory = std::move(*cwd);
  prepared.env.reserve(env.size());
  for (const auto& [k, v] : env) prepared.env.push_back(k + "=" + v);
  return prepared;
}

Result<void> makePipe(sys::UniqueFd& read_end, sys::UniqueFd& write_end) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return failErrno(ErrorCode::kExecutionUnavailable, "pipe", errno);
  read_end.reset(p[0]);
  write_end.reset(p[1]);
  return {};
}

Result<SidePipes> makeSidePipes(bool with_stdin) {
  SidePipes pipes;
  if (with_stdin)
    if (auto r = makePipe(pipes.stdin_read, pipes.stdin_write); !r)
      return tl::unexpected(r.error());
  if (auto r = makePipe(pipes.stdout_read, pipes.stdout_write); !r)
    return tl::unexpected(r.error());
  if (auto r = makePipe(pipes.stderr_read, pipes.stderr_write); !r)
    return tl::unexpected(r.error());
  return pipes;
}

PipedSideProcess::PipedSideProcess(sys::UniqueFd stdin_write, sys::UniqueFd stdout_read,
                                   sys::UniqueFd stderr_read) noexcept
    : stdin_(std::move(stdin_write)),
      stdout_(std::move(stdout_read)),
      stderr_(std::move(stderr_read)) {
  for (const sys::UniqueFd* fd : {&stdin_, &stdout_, &stderr_})
    if (fd->valid()) ::fcntl(fd->get(), F_SETFL, O_NONBLOCK);
}

}  // namespace airlock
