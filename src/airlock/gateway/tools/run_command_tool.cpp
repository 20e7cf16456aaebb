// sandbox_run_command (spec 000, "sandbox.run_command"). Validation runs
// wholly before the execution service is touched, in the spec's order; see
// tool_registry.h (planRunCommand) for the list.
#include <cmath>
#include <limits>
#include <map>

#include "airlock/core/command_validation.h"
#include "airlock/core/encoding.h"
#include "airlock/core/environment_tiers.h"
#include "airlock/core/json.h"
#include "airlock/core/limits_defaults.h"
#include "airlock/core/timeout_rule.h"
#include "airlock/gateway/tools/builtin_tools.h"
#include "airlock/gateway/tools/output_excerpt.h"
#include "airlock/gateway/tools/tool_registry.h"
#include "airlock/gateway/tools/tool_support.h"
#include "airlock/port/execution_environment.h"

namespace airlock::gateway {

using detail::invalidArgument;
using nlohmann::json;

namespace {

// The model's command given as one string: teach the vector form with the
// model's own string in it.
tl::unexpected<ToolFailure> shellStringGiven(const std::string& text) {
  const json example = json::array({"bash", "-lc", text});
  return invalidArgument(
      "command",
      "command must be an argument vector (a JSON array of strings), not a string: write "
      "[\"python3\", \"script.py\"], or to run this text with a shell, " +
          example.dump(-1, ' ', false, json::error_handler_t::replace));
}

tl::expected<std::vector<std::string>, ToolFailure> parseArgv(const json& arguments) {
  const json* command = detail::member(arguments, "command");
  if (command == nullptr) {
    return invalidArgument("command",
                           "command is required: an argument vector like [\"python3\", "
                           "\"script.py\"]");
  }
  if (command->is_string()) return shellStringGiven(command->get<std::string>());
  if (!command->is_array()) {
    return invalidArgument("command",
                           "command must be an argument vector (a JSON array of strings) like "
                           "[\"python3\", \"script.py\"]");
  }
  if (command->empty()) {
    return invalidArgument("command",
                           "command must be a non-empty argument vector like [\"python3\", "
                           "\"script.py\"]");
  }
  // A vector longer than the byte cap can hold is refused before it is
  // copied (each element costs at least its terminating NUL).
  if (command->size() > static_cast<std::size_t>(kMaxArgvBytes)) {
    return invalidArgument("command", "command is larger than " + std::to_string(kMaxArgvBytes) +
                                          " bytes; pass large inputs through a workspace file");
  }
  std::vector<std::string> argv;
  argv.reserve(command->size());
  for (std::size_t i = 0; i < command->size(); ++i) {
    const json& element = (*command)[i];
    if (!element.is_string()) {
      const std::string name = "command[" + std::to_string(i) + "]";
      return invalidArgument(name, name +
                                       " must be a string; every element of command is one "
                                       "argument, e.g. [\"python3\", \"-c\", \"print(1)\"]");
    }
    argv.push_back(element.get<std::string>());
  }
  // ["ls -la"]: the one message the HTTP API and the CLI give too.
  if (auto problem = shellStringProblem(argv, ArgvSpelling::kJson))
    return invalidArgument("command", *problem);
  return argv;
}

// Which argument a core validateCommand message is about.
std::string argumentOf(const std::string& context) {
  if (context.rfind("command[", 0) == 0) return context.substr(0, context.find(']') + 1);
  return "command";
}

// nullopt when absent: the other bounds of the minimum rule still apply.
tl::expected<std::optional<std::chrono::seconds>, ToolFailure> parseTimeout(
    const json& arguments, const ToolOptions& options) {
  const json* value = detail::member(arguments, "timeout_seconds");
  if (value == nullptr) return std::nullopt;
  const auto problem = [] {
    return invalidArgument("timeout_seconds",
                           "timeout_seconds must be a positive whole number of seconds");
  };
  if (value->is_number_unsigned()) {
    const auto v = value->get<std::uint64_t>();
    if (v == 0) return problem();
    return std::chrono::seconds(std::min<std::uint64_t>(v, options.declared_timeout.count()));
  }
  if (value->is_number_integer()) {
    const auto v = value->get<std::int64_t>();
    if (v <= 0) return problem();
    return std::chrono::seconds(std::min<std::int64_t>(v, options.declared_timeout.count()));
  }
  if (value->is_number_float()) {
    // JSON Schema's "integer" includes 30.0; anything else is not a count.
    const double v = value->get<double>();
    if (!std::isfinite(v) || v <= 0 || std::floor(v) != v) return problem();
    const double clamped = std::min(v, static_cast<double>(options.declared_timeout.count()));
    return std::chrono::seconds(static_cast<std::int64_t>(clamped));
  }
  return problem();
}

// `env`: variables for this command only, each by the tier rules of a
// sandbox's environment (checkAddedVariable). Absent: none.
// TOOL_OUTPUT artifact of one whole stream, for the truncation path.
json exportStream(ToolContext& context, std::string_view stream_name, std::string_view bytes,
                  std::vector<std::string>& warnings) {
  if (context.artifacts == nullptr) {
    warnings.push_back(std::string(stream_name) +
                       " was cut to fit; no artifact store is configured, so the rest is lost");
    return nullptr;
  }
  ExportRequest request;
  request.bytes = bytes;
  request.filename = std::string(stream_name) + ".txt";
  request.media_type =
      isValidUtf8(bytes) ? "text/plain; charset=utf-8" : "application/octet-stream";
  request.origin = ExportOrigin::kToolOutput;
  request.trust = ExportTrust::kExternalUntrusted;
  auto created = context.artifacts->create(ToolScope{context.tenant_id, context.run_id}, request);
  if (!created) {
    warnings.push_back(
        std::string(stream_name) +
        " was cut to fit and could not be saved as an artifact: " + created.error().message());
    return nullptr;
  }
  return artifactRefJson(*created);
}

std::string omissionMarker(std::string_view stream_name, std::int64_t omitted,
                           const json& artifact) {
  std::string text =
      "\n[... " + std::to_string(omitted) + " bytes of " + std::string(stream_name) + " omitted";
  if (artifact.is_object()) {
    text += "; the whole " + std::string(stream_name) + " is artifact " +
            artifact.value("artifact_id", std::string());
  }
  return text + " ...]\n";
}

// Applies the model-facing output limit to one stream of the result.
void limitStream(json& result, ToolContext& context, std::string_view stream_name,
                 const std::string& bytes, std::int64_t share, std::vector<std::string>& warnings) {
  const std::string artifact_key = std::string(stream_name) + "_artifact";
  if (static_cast<std::int64_t>(bytes.size()) <= share) {
    result[artifact_key] = nullptr;
    return;
  }
  json artifact = exportStream(context, stream_name, bytes, warnings);
  // What the excerpt leaves out: everything but the head and tail kept.
  const std::int64_t omitted = static_cast<std::int64_t>(bytes.size()) - share;
  const std::string excerpt =
      headAndTail(bytes, share, omissionMarker(stream_name, omitted, artifact));
  result[std::string(stream_name)] = bytesToJson(excerpt);
  result[std::string(stream_name) + "_truncated"] = true;
  result[artifact_key] = std::move(artifact);
}

// What the model reads when a background process held the output open: the
// command did not hang, it left a process behind (usually a forgotten
// redirect), and that process is gone.
std::string heldOpenWarning(const std::vector<std::string>& streams) {
  std::string names;
  for (const auto& name : streams) names += (names.empty() ? "" : " and ") + name;
  return "the command exited, but a process it left running in the background still held " + names +
         " open; it was killed " +
         std::to_string(std::chrono::seconds(kOutputGraceAfterExit).count()) +
         " s after the exit and the command ended with its exit_code. This is not a hang. "
         "Nothing keeps running after a command returns; to start a background process "
         "without this wait, redirect its output (e.g. [\"bash\", \"-c\", \"server > "
         "server.log 2>&1 &\"])";
}

}  // namespace

tl::expected<ExecutionCommand, ToolFailure> planRunCommand(const json& arguments,
                                                           const ToolContext& context,
                                                           const ToolOptions& options) {
  if (!arguments.is_object()) {
    return invalidArgument("arguments",
                           "arguments must be a JSON object like {\"command\": "
                           "[\"python3\", \"script.py\"]}");
  }
  ExecutionCommand command;
  // 1. An array of strings, non-empty.
  auto argv = parseArgv(arguments);
  if (!argv) return tl::unexpected(argv.error());
  command.argv = std::move(*argv);

  // 2-3. NUL bytes, the size cap, command[0] absolute or bare: the core
  // rules, checked alone here (placeholders for the rest) so that their
  // order relative to working_directory and timeout_seconds is the spec's.
  {
    ExecutionCommand probe;
    probe.argv = command.argv;
    probe.working_directory = ".";
    probe.timeout_seconds = 1;
    probe.maximum_output_bytes = 1;
    if (auto valid = validateCommand(probe); !valid) {
      const std::string argument = argumentOf(valid.error().context);
      return invalidArgument(argument, valid.error().context);
    }
  }

  // 4. working_directory through the containment rules (the execution
  // service resolves it again against symlinks when it opens it).
  auto wd = detail::optionalString(arguments, "working_directory", ".");
  if (!wd) return tl::unexpected(wd.error());
  auto contained = detail::workspacePath("working_directory", *wd, /*allow_root=*/true);
  if (!contained) return tl::unexpected(contained.error());
  command.working_directory = *contained;

  // 5. timeout_seconds: positive, clamped to the declared timeout, then the
  // minimum rule (which bounds the command whether or not it was given).
  auto timeout = parseTimeout(arguments, options);
  if (!timeout) return tl::unexpected(timeout.error());
  auto effective = effectiveTimeout(TimeoutInputs{
      .service_hard_cap = options.service_hard_cap,
      .spec_wall_clock = context.spec_wall_clock.value_or(options.service_hard_cap),
      .remaining_run_budget = context.remaining_run_budget,
      .command_timeout = *timeout,
      .tool_declared_timeout = options.declared_timeout,
      .minimum_floor = options.minimum_floor,
  });
  if (!effective) {
    if (effective.error().code == ErrorCode::kToolValidationError) {
      return invalidArgument("timeout_seconds", effective.error().context);
    }
    return detail::failureFrom(effective.error());
  }
  command.timeout_seconds = effective->count();

  // Beyond the spec: variables for this command only.
  auto env = detail::envAdditions(arguments);
  if (!env) return tl::unexpected(env.error());
  command.env_additions = std::move(*env);

  // 6. Nothing else: a misspelt argument is not silently ignored.
  if (auto known = detail::onlyKnownArguments(
          arguments, {"command", "working_directory", "timeout_seconds", "env"});
      !known) {
    return tl::unexpected(known.error());
  }

  // The service's cap is the spec's hard ceiling, four times what the
  // model sees; the excess is what the truncation artifact preserves.
  command.maximum_output_bytes = options.max_output_bytes * 4;
  return command;
}

ToolResult runCommand(const json& arguments, ToolContext& context, const ToolOptions& options) {
  auto command = planRunCommand(arguments, context, options);
  if (!command) return tl::unexpected(command.error());

  auto executed = context.on_output
                      ? context.execution->executeStreaming(
                            context.environment, *command, context.cancel,
                            [&context](ExecutionEnvironment::OutputStream, std::string_view) {
                              context.on_output();
                            })
                      : context.execution->execute(context.environment, *command, context.cancel);
  if (!executed) {
    const Error& error = executed.error();
    // The service's own refusals of the command (a working directory that
    // is missing or leads outside through a symlink) are argument errors.
    std::string argument;
    if (error.context.find("working_directory") != std::string::npos)
      argument = "working_directory";
    return detail::failureFrom(error, argument);
  }
  const ExecutionResult& out = *executed;

  json result = out;  // the port's field names (core/json.h)
  std::vector<std::string> warnings;
  const auto [stdout_share, stderr_share] =
      splitOutputBudget(options.max_output_bytes, static_cast<std::int64_t>(out.stdout_data.size()),
                        static_cast<std::int64_t>(out.stderr_data.size()));
  limitStream(result, context, "stdout", out.stdout_data, stdout_share, warnings);
  limitStream(result, context, "stderr", out.stderr_data, stderr_share, warnings);
  if (!out.output_held_open.empty()) warnings.push_back(heldOpenWarning(out.output_held_open));
  if (!warnings.empty()) result["warnings"] = warnings;
  return result;
}

}  // namespace airlock::gateway
