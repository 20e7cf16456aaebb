#include "airlock/cli/run_command.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <memory>

#include "airlock/artifacts/artifact_writer.h"
#include "airlock/capability/broker/code_run.h"
#include "airlock/cli/artifact_command.h"
#include "airlock/cli/artifact_store_open.h"
#include "airlock/cli/exit_codes.h"
#include "airlock/cli/image_command.h"
#include "airlock/cli/summary.h"
#include "airlock/cli/termination_signals.h"
#include "airlock/core/json.h"
#include "airlock/execution/adapters.h"
#include "airlock/execution/capabilities/execution_capabilities.h"
#include "airlock/port/cancel_token.h"
#include "airlock/sys/io.h"
#include "airlock/workspace/local_workspace.h"

namespace airlock::cli {
namespace {

// Upper bound of --stdin: the bytes are held in memory and sent whole.
constexpr std::size_t kMaxStdinBytes = std::size_t{64} << 20;

Result<std::string> readAllStdin() {
  std::string data;
  char buffer[65536];
  for (;;) {
    ssize_t n = sys::readSome(STDIN_FILENO, buffer, sizeof buffer);
    if (n < 0) return failErrno(ErrorCode::kToolValidationError, "--stdin: reading stdin", errno);
    if (n == 0) return data;
    if (data.size() + static_cast<std::size_t>(n) > kMaxStdinBytes) {
      return fail(ErrorCode::kToolValidationError, "--stdin: more than 64 MiB on stdin");
    }
    data.append(buffer, static_cast<std::size_t>(n));
  }
}

// A newline before the summary when the command's output left the cursor
// mid-line on the terminal the summary goes to.
bool needsNewlineBeforeSummary(const ExecutionResult& result) {
  if (!::isatty(STDERR_FILENO)) return false;
  if (!result.stderr_data.empty()) return result.stderr_data.back() != '\n';
  return ::isatty(STDOUT_FILENO) && !result.stdout_data.empty() &&
         result.stdout_data.back() != '\n';
}

// The artifact store of --export and of code mode's job spill, opened
// before any sandbox exists so that a store that cannot open leaves nothing
// behind. For --export its failure is the run's; for code mode alone it only
// leaves the jobs without a spill (nullopt).
Result<std::optional<LocalArtifactStore>> openRunStore(const RunPlan& plan) {
  std::optional<LocalArtifactStore> store;
  if (plan.exports.empty() && !plan.code_path) return store;
  auto opened = openLocalArtifactStore(plan.state_dir);
  if (opened) {
    store = std::move(*opened);
  } else if (!plan.exports.empty()) {
    Error error = opened.error();
    error.context = "--export: " + error.context;
    return tl::unexpected(std::move(error));
  } else if (plan.verbose) {
    writeOut(STDERR_FILENO,
             "airlock: job output is not spilled: " + opened.error().message() + "\n");
  }
  return store;
}

// What ran in the sandbox: the command's (or the program's) result, and in
// code mode the program's outcome and audit.
struct RunOutput {
  Result<ExecutionResult> result = fail(ErrorCode::kExecutionUnavailable, "nothing ran");
  std::optional<capability::CodeRunResult> code;
};

// --copy-in, then the command, or in code mode the program (whose outcome
// and audit land in `code`); the command's or the program's result.
Result<ExecutionResult> runInSandbox(const RunPlan& plan, ExecutionEnvironment& env,
                                     const EnvironmentHandle& handle,
                                     const std::optional<LocalArtifactStore>& store,
                                     const CancelToken& cancel,
                                     std::optional<capability::CodeRunResult>& code) {
  if (plan.copy_in) {
    auto ws = env.workspace(handle);
    if (!ws) return tl::unexpected(ws.error());
    if (auto copied = workspace::copyIn(*plan.copy_in, **ws); !copied)
      return tl::unexpected(copied.error());
  }
  if (plan.code_path) {
    // Code mode: the program reaches the world through the capability
    // channel only and ends with one outcome (docs/capabilities.md).
    auto source = sys::readFile(AT_FDCWD, plan.code_path->c_str(), std::size_t{16} << 20);
    if (!source) {
      Error error = source.error();
      error.context = "--code: " + error.context;
      return tl::unexpected(std::move(error));
    }
    // schedule.* keeps its schedules beside the artifact metadata; without
    // a usable state directory schedule.* is refused "unavailable". Each
    // job's whole output lands in the local artifact store as the tenant
    // "local" and this run (`airlock artifact get` reads it); net.fetch
    // decides with the sandbox's own egress policy (deny unless
    // --network --egress-policy FILE).
    capability::CodeModeHost host;
    host.add_execution = execution::addExecutionCapabilities;
    if (auto schedules = openScheduleStore(plan.state_dir)) {
      host.schedules = std::move(*schedules);
    } else if (plan.verbose) {
      writeOut(STDERR_FILENO,
               "airlock: schedule.* unavailable: " + schedules.error().message() + "\n");
    }
    if (store) host.artifact_store = store->store.get();
    auto options = capability::codeRunOptionsFor(host, handle, plan.spec.egress);
    if (!options) return tl::unexpected(options.error());
    options->program = std::move(*source);
    options->limits = plan.command;
    options->cancel = &cancel;
    auto ran = capability::runCode(env, handle, *options);
    if (!ran) return tl::unexpected(ran.error());
    code = std::move(*ran);
    return code->execution;
  }
  return env.execute(handle, plan.command, &cancel);
}

// Writes what the run produced (the result, the outcome, the exports) to
// stdout and stderr; the process's exit status.
int reportRun(const RunPlan& plan, const RunOutput& run,
              const std::vector<std::pair<std::string, artifacts::ArtifactRef>>& exported,
              const std::vector<Error>& export_errors, bool exports_kept) {
  const auto& result = run.result;
  const auto& code_result = run.code;
  int status = kExitAirlockError;
  if (result) {
    if (plan.json) {
      nlohmann::json object = *result;
      if (code_result) {
        object["outcome"] = capability::outcomeToJson(code_result->outcome);
        nlohmann::json audit = nlohmann::json::array();
        for (const auto& line : code_result->audit_lines)
          audit.push_back(nlohmann::json::parse(line, nullptr, false));
        object["capability_audit"] = std::move(audit);
        if (code_result->audit_lines_dropped > 0)
          object["capability_audit_dropped"] = code_result->audit_lines_dropped;
      }
      if (exports_kept && !plan.exports.empty()) {
        nlohmann::json list = nlohmann::json::array();
        for (const auto& [path, ref] : exported) {
          list.push_back({{"path", path},
                          {"artifact_id", ref.artifact_id.str()},
                          {"sha256", ref.sha256},
                          {"size_bytes", ref.size_bytes},
                          {"media_type", ref.media_type}});
        }
        object["artifacts"] = std::move(list);
      }
      writeOut(STDOUT_FILENO,
               object.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
    } else if (code_result) {
      // Code mode: stdout carries the outcome alone; what the program
      // printed goes to stderr, before the summary.
      writeOut(STDERR_FILENO, result->stdout_data);
      writeOut(STDERR_FILENO, result->stderr_data);
      if (needsNewlineBeforeSummary(*result)) writeOut(STDERR_FILENO, "\n");
      writeOut(STDERR_FILENO, formatSummary(*result, plan.command));
      writeOut(STDOUT_FILENO,
               capability::outcomeToJson(code_result->outcome)
                       .dump(2, ' ', false, nlohmann::json::error_handler_t::replace) +
                   "\n");
    } else {
      writeOut(STDOUT_FILENO, result->stdout_data);
      writeOut(STDERR_FILENO, result->stderr_data);
      if (needsNewlineBeforeSummary(*result)) writeOut(STDERR_FILENO, "\n");
      writeOut(STDERR_FILENO, formatSummary(*result, plan.command));
      for (const auto& [path, ref] : exported) writeOut(STDERR_FILENO, formatExportLine(ref, path));
    }
    status = exitStatusFor(*result);
    for (const auto& error : export_errors) status = printErrorLine(error);
  } else {
    status = printErrorLine(result.error());
  }

  return status;
}

}  // namespace

int executeRun(RunPlan plan) {
  if (plan.read_stdin) {
    auto data = readAllStdin();
    if (!data) return printErrorLine(data.error());
    plan.command.stdin_data = std::move(*data);
  }

  auto token = CancelToken::create();
  if (!token) return printErrorLine(token.error());
  cancelOnTerminationSignals(*token);

  auto store = openRunStore(plan);
  if (!store) return printErrorLine(store.error());

  if (plan.egress_policy_without_network)
    writeOut(STDERR_FILENO,
             "airlock: note: the egress policy is valid, but without --network the command has no "
             "network\n");
  execution::LocalExecutionOptions execution_options;
  std::string image_digest;
  if (!plan.image.empty()) {
    auto image_store = openImageStore(plan.state_dir);
    if (!image_store) return printErrorLine(image_store.error());
    auto resolved = resolveImage(**image_store, plan.image, terminalPullProgress(plan.image));
    endTerminalPullProgress();
    if (!resolved) return printErrorLine(resolved.error());
    image_digest = resolved->stored.digest;
    if (plan.code_path)
      if (auto usable = checkCodeModeImage(**image_store, image_digest); !usable)
        return printErrorLine(usable.error());
    if (resolved->pulled || plan.verbose)
      writeOut(STDERR_FILENO, "airlock: image " + escapeForTerminal(plan.image) + " is " +
                                  image_digest + (resolved->pulled ? " (pulled)" : "") + "\n");
    execution_options.image_store = std::move(*image_store);
    execution_options.image_digests = {image_digest};
  }
  execution_options.adapter.state_dir = plan.state_dir;
  execution_options.egress = plan.spec.egress;
  execution_options.egress_log = plan.egress_log;
  execution_options.touch_egress_log = true;
  auto execution = execution::openLocalExecution(plan.mechanism, std::move(execution_options),
                                                 execution::DevelopmentMechanismsAllowed{});
  if (!execution) return printErrorLine(execution.error());
  execution::Adapter* adapter = &execution->adapter;
  ExecutionEnvironment& env = *adapter->env;
  plan.spec.image_digest = image_digest.empty() ? adapter->image_digest : image_digest;

  if (plan.verbose)
    writeOut(STDERR_FILENO, "airlock: mechanism " + std::string(mechanismName(plan.mechanism)) +
                                ", image " + plan.spec.image_digest + "\n");
  auto handle = env.provision(plan.spec);
  if (!handle) return printErrorLine(handle.error());
  if (plan.verbose)
    writeOut(STDERR_FILENO, "airlock: provisioned environment " + handle->environment_id + "\n");

  // From here on the sandbox exists and every path destroys it.
  RunOutput run;
  run.result = runInSandbox(plan, env, *handle, *store, *token, run.code);

  // --export: while the sandbox still exists, after the command. A failed
  // export is reported (after the result) and makes the status 125.
  std::vector<std::pair<std::string, artifacts::ArtifactRef>> exported;
  std::vector<Error> export_errors;
  if (run.result && *store) {
    for (const auto& path : plan.exports) {
      auto ref = exportWorkspacePath(env, *handle, *(*store)->store, path);
      if (ref) {
        exported.emplace_back(path, std::move(*ref));
      } else {
        export_errors.push_back(ref.error());
      }
    }
  }

  // The sandbox's processes were started with default dispositions; from
  // now on a closed stdout must be an error value, not a fatal signal that
  // would skip destroy.
  (void)::signal(SIGPIPE, SIG_IGN);
  const int status = reportRun(plan, run, exported, export_errors, store->has_value());

  if (auto destroyed = env.destroy(*handle); !destroyed) {
    Error error = destroyed.error();
    error.context = "destroying the sandbox: " + error.context;
    return printErrorLine(error);
  }
  if (plan.verbose)
    writeOut(STDERR_FILENO, "airlock: destroyed environment " + handle->environment_id + "\n");
  return status;
}

}  // namespace airlock::cli
