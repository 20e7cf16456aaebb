#include "airlock/core/command_validation.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "airlock/core/encoding.h"
#include "airlock/core/environment_tiers.h"
#include "airlock/core/ids.h"
#include "airlock/core/limits_defaults.h"

namespace airlock {

std::string_view pathProblemName(PathProblem problem) noexcept {
  switch (problem) {
    case PathProblem::kEmptyComponent:
      return "EMPTY_COMPONENT";
    case PathProblem::kDotComponent:
      return "DOT_COMPONENT";
    case PathProblem::kAbsolutePath:
      return "ABSOLUTE_PATH";
    case PathProblem::kNulByte:
      return "NUL_BYTE";
    case PathProblem::kNameTooLong:
      return "NAME_TOO_LONG";
    case PathProblem::kPathTooLong:
      return "PATH_TOO_LONG";
  }
  return "UNKNOWN";
}

std::optional<PathProblem> findPathProblem(std::string_view path) noexcept {
  if (path.empty()) return PathProblem::kEmptyComponent;
  if (path.find('\0') != std::string_view::npos) return PathProblem::kNulByte;
  if (path.front() == '/') return PathProblem::kAbsolutePath;
  if (path.size() > kMaxPathBytes) return PathProblem::kPathTooLong;
  if (path == ".") return std::nullopt;
  // Components are rejected, never normalized: normalizing is where
  // traversal bugs come from (spec 000, resolve rule 1).
  std::size_t start = 0;
  while (true) {
    const std::size_t slash = path.find('/', start);
    const std::string_view component = path.substr(
        start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (component.empty()) return PathProblem::kEmptyComponent;
    if (component == "." || component == "..") return PathProblem::kDotComponent;
    if (component.size() > kMaxPathComponentBytes) return PathProblem::kNameTooLong;
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return std::nullopt;
}

namespace {

std::string describe(PathProblem problem) {
  switch (problem) {
    case PathProblem::kEmptyComponent:
      return "has an empty component (EMPTY_COMPONENT); remove repeated, leading or trailing "
             "'/' and use \".\" for the workspace root";
    case PathProblem::kDotComponent:
      return "has a \".\" or \"..\" component (DOT_COMPONENT); name the path from the workspace "
             "root without dot segments";
    case PathProblem::kAbsolutePath:
      return "is absolute (ABSOLUTE_PATH); give a path relative to /workspace";
    case PathProblem::kNulByte:
      return "contains a NUL byte (NUL_BYTE)";
    case PathProblem::kNameTooLong:
      return "has a component longer than 255 bytes (NAME_TOO_LONG)";
    case PathProblem::kPathTooLong:
      return "is longer than 4096 bytes (PATH_TOO_LONG)";
  }
  return "is invalid";
}

bool isShellSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

tl::unexpected<Error> invalidCommand(std::string context) {
  return fail(ErrorCode::kToolValidationError, std::move(context));
}

}  // namespace

Result<std::string> checkRelativePath(std::string_view path) {
  if (const auto problem = findPathProblem(path)) {
    return fail(ErrorCode::kWorkspaceEscape,
                "path " + quoteForMessage(path) + " " + describe(*problem));
  }
  if (path == ".") return std::string();
  return std::string(path);
}

Result<void> checkExecutionId(std::string_view execution_id) {
  if (execution_id.empty() || isPlatformIdentifier(execution_id)) return {};
  return invalidCommand("execution_id " + quoteForMessage(execution_id) + " must be 1-" +
                        std::to_string(kMaxPlatformIdBytes) + " characters of A-Z a-z 0-9 . _ : -");
}

Result<void> checkExecutionIdToCancel(std::string_view execution_id) {
  if (execution_id.empty())
    return invalidCommand("cancel needs the execution_id of the command to cancel");
  return checkExecutionId(execution_id);
}

Result<void> validateCommand(const ExecutionCommand& command) {
  if (command.argv.empty()) {
    return invalidCommand(
        "command must be a non-empty argument vector like [\"python3\", \"script.py\"]");
  }
  std::int64_t total = 0;
  for (std::size_t i = 0; i < command.argv.size(); ++i) {
    const std::string& arg = command.argv[i];
    if (arg.find('\0') != std::string::npos) {
      return invalidCommand("command[" + std::to_string(i) + "] contains a NUL byte");
    }
    total += static_cast<std::int64_t>(arg.size()) + 1;
    if (total > kMaxArgvBytes) {
      return invalidCommand("command is larger than " + std::to_string(kMaxArgvBytes) +
                            " bytes; pass large inputs through stdin or a workspace file");
    }
  }
  const std::string& program = command.argv[0];
  if (program.empty()) {
    return invalidCommand(
        "command[0] is empty; name a program like \"python3\" or "
        "\"/usr/bin/python3\"");
  }
  if (program.front() != '/' && program.find('/') != std::string::npos) {
    return invalidCommand(
        "command[0] " + quoteForMessage(program) +
        " is a relative path; name a program on the image PATH or by absolute path, and run a "
        "workspace script through its interpreter, e.g. [\"bash\", " +
        quoteForMessage(program) + "]");
  }
  if (auto wd = checkRelativePath(command.working_directory); !wd) {
    return invalidCommand("working_directory " + wd.error().context);
  }
  if (command.timeout_seconds <= 0) {
    return invalidCommand("timeout_seconds must be a positive number of seconds, got " +
                          std::to_string(command.timeout_seconds));
  }
  if (command.maximum_output_bytes <= 0) {
    return invalidCommand("maximum_output_bytes must be positive, got " +
                          std::to_string(command.maximum_output_bytes));
  }
  if (auto id = checkExecutionId(command.execution_id); !id) return id;
  for (const auto& [name, value] : command.env_additions)
    if (auto added = checkAddedVariable("env", name, value); !added) return added;
  return {};
}

std::string shellQuote(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  out += "'";
  return out;
}

std::optional<std::string> shellStringProblem(const std::vector<std::string>& argv,
                                              ArgvSpelling spelling) {
  if (argv.empty()) return std::nullopt;
  const std::string& first = argv[0];
  if (std::none_of(first.begin(), first.end(), isShellSpace)) return std::nullopt;
  std::string whole = first;
  for (std::size_t i = 1; i < argv.size(); ++i) whole += " " + argv[i];
  const std::string suggestion =
      spelling == ArgvSpelling::kCommandLine
          ? "airlock run -- sh -c " + shellQuote(whole)
          : nlohmann::json::array({"sh", "-c", whole})
                .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return "the command " + quoteForMessage(first) +
         " is a shell string, but Airlock runs an argument vector and picks no shell for you; to "
         "run it with a "
         "shell, say so: " +
         suggestion;
}

}  // namespace airlock
