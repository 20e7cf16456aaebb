#include "airlock/cli/run_command.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <memory>

#include "airlock/artifacts/artifact_writer.h"
#include "airlock/capability/broker/code_run.h"
#include "airlock/cli/adapters.h"
#include "airlock/cli/artifact_command.h"
#include "airlock/cli/artifact_store_open.h"
#include "airlock/cli/egress_runtime.h"
#include "airlock/cli/exit_codes.h"
#include "airlock/cli/summary.h"
#include "airlock/core/json.h"
#include "airlock/sandbox/cancel_token.h"
#include "airlock/sys/io.h"
#include "airlock/workspace/local_workspace.h"

namespace airlock::cli {
namespace {

// Upper bound of --stdin: the bytes are held in memory and sent whole.
constexpr std::size_t kMaxStdinBytes = std::size_t{64} << 20;

// The token the signal handler cancels. Set once before the handlers are
// installed; the handler only calls CancelToken::cancel (one write(2)).
std::atomic<const CancelToken*> g_cancel_token{nullptr};

extern "C" void onTerminationSignal(int /*signo*/) {
  const int saved_errno = errno;
  if (const CancelToken* token = g_cancel_token.load()) token->cancel();
  errno = saved_errno;
}

void installCancelHandlers(const CancelToken& token) {
  g_cancel_token.store(&token);
  struct sigaction action {};
  action.sa_handler = onTerminationSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
}

void writeFd(int fd, std::string_view bytes) {
  (void)sys::writeAll(fd, bytes.data(), bytes.size());
}

int reportError(const Error& error) {
  writeFd(STDERR_FILENO, formatErrorLine(error.message()));
  return exitStatusFor(error);
}

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

}  // namespace

int executeRun(RunPlan plan) {
  if (plan.read_stdin) {
    auto data = readAllStdin();
    if (!data) return reportError(data.error());
    plan.command.stdin_data = std::move(*data);
  }

  auto token = CancelToken::create();
  if (!token) return reportError(token.error());
  installCancelHandlers(*token);

  // The artifact store is opened before any sandbox exists, so that a
  // store that cannot open leaves nothing behind.
  // Code mode opens it too, for its jobs' spilled output; there a store
  // that cannot open only leaves the jobs without a spill.
  std::optional<LocalArtifactStore> store;
  if (!plan.exports.empty() || plan.code_path) {
    auto opened = openLocalArtifactStore(plan.state_dir);
    if (opened) {
      store = std::move(*opened);
    } else if (!plan.exports.empty()) {
      Error error = opened.error();
      error.context = "--export: " + error.context;
      return reportError(error);
    } else if (plan.verbose) {
      writeFd(STDERR_FILENO,
              "airlock: job output is not spilled: " + opened.error().message() + "\n");
    }
  }

  if (plan.egress_policy_without_network)
    writeFd(STDERR_FILENO,
            "airlock: note: the egress policy is valid, but without --network the command has no "
            "network\n");
  // The egress proxy, only for a sandbox with egress; declared before the
  // adapter so that it outlives every sandbox attached to it.
  EgressRuntime egress;
  if (egressEnabled(plan.spec.egress)) {
    auto started = startEgressRuntime(plan.egress_log);
    if (!started) {
      Error error = started.error();
      error.context = "--egress-log: " + error.context;
      return reportError(error);
    }
    egress = std::move(*started);
  } else if (auto touched = touchEgressLog(plan.egress_log); !touched) {
    Error error = touched.error();
    error.context = "--egress-log: " + error.context;
    return reportError(error);
  }

  AdapterOptions adapter_options;
  adapter_options.state_dir = plan.state_dir;
  adapter_options.egress_route = egress.route;
  auto adapter = createAdapter(plan.mechanism, adapter_options, DevelopmentMechanismsAllowed{});
  if (!adapter) return reportError(adapter.error());
  ExecutionEnvironment& env = *adapter->env;
  plan.spec.image_digest = adapter->image_digest;

  if (plan.verbose)
    writeFd(STDERR_FILENO, "airlock: mechanism " + std::string(mechanismName(plan.mechanism)) +
                               ", image " + adapter->image_digest + "\n");
  auto handle = env.provision(plan.spec);
  if (!handle) return reportError(handle.error());
  if (plan.verbose)
    writeFd(STDERR_FILENO, "airlock: provisioned environment " + handle->environment_id + "\n");

  // From here on the sandbox exists and every path destroys it.
  std::optional<capability::CodeRunResult> code_result;
  auto run = [&]() -> Result<ExecutionResult> {
    if (plan.copy_in) {
      auto ws = env.workspace(*handle);
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
      if (auto schedules = openScheduleStore(plan.state_dir)) {
        host.schedules = std::move(*schedules);
      } else if (plan.verbose) {
        writeFd(STDERR_FILENO,
                "airlock: schedule.* unavailable: " + schedules.error().message() + "\n");
      }
      if (store) host.artifact_store = store->store.get();
      auto options = capability::codeRunOptionsFor(host, *handle, plan.spec.egress);
      if (!options) return tl::unexpected(options.error());
      options->program = std::move(*source);
      options->limits = plan.command;
      options->cancel = &*token;
      auto ran = capability::runCode(env, *handle, *options);
      if (!ran) return tl::unexpected(ran.error());
      code_result = std::move(*ran);
      return code_result->execution;
    }
    return env.execute(*handle, plan.command, &*token);
  };
  auto result = run();

  // --export: while the sandbox still exists, after the command. A failed
  // export is reported (after the result) and makes the status 125.
  std::vector<std::pair<std::string, artifacts::ArtifactRef>> exported;
  std::vector<Error> export_errors;
  if (result && store) {
    for (const auto& path : plan.exports) {
      auto ref = exportWorkspacePath(env, *handle, *store->store, path);
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
      if (store && !plan.exports.empty()) {
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
      writeFd(STDOUT_FILENO,
              object.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
    } else if (code_result) {
      // Code mode: stdout carries the outcome alone; what the program
      // printed goes to stderr, before the summary.
      writeFd(STDERR_FILENO, result->stdout_data);
      writeFd(STDERR_FILENO, result->stderr_data);
      if (needsNewlineBeforeSummary(*result)) writeFd(STDERR_FILENO, "\n");
      writeFd(STDERR_FILENO, formatSummary(*result, plan.command));
      writeFd(STDOUT_FILENO,
              capability::outcomeToJson(code_result->outcome)
                      .dump(2, ' ', false, nlohmann::json::error_handler_t::replace) +
                  "\n");
    } else {
      writeFd(STDOUT_FILENO, result->stdout_data);
      writeFd(STDERR_FILENO, result->stderr_data);
      if (needsNewlineBeforeSummary(*result)) writeFd(STDERR_FILENO, "\n");
      writeFd(STDERR_FILENO, formatSummary(*result, plan.command));
      for (const auto& [path, ref] : exported) writeFd(STDERR_FILENO, formatExportLine(ref, path));
    }
    status = exitStatusFor(*result);
    for (const auto& error : export_errors) status = reportError(error);
  } else {
    status = reportError(result.error());
  }

  if (auto destroyed = env.destroy(*handle); !destroyed) {
    Error error = destroyed.error();
    error.context = "destroying the sandbox: " + error.context;
    return reportError(error);
  }
  if (plan.verbose)
    writeFd(STDERR_FILENO, "airlock: destroyed environment " + handle->environment_id + "\n");
  return status;
}

}  // namespace airlock::cli
