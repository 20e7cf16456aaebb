// The commands that run sandboxes: `airlock run`, `airlock serve` and
// `airlock mcp` (cli/command.h). run and mcp declare their limit flags with
// one helper, and planRun (cli/run_plan.h) parses them for both; serve takes
// its limits from its settings (docs/serve.md).
#include <CLI/CLI.hpp>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

#include "airlock/cli/command.h"
#include "airlock/cli/mcp_command.h"
#include "airlock/cli/run_command.h"
#include "airlock/cli/run_plan.h"
#include "airlock/cli/serve_command.h"
#include "airlock/cli/summary.h"
#include "airlock/core/limits_defaults.h"
#include "airlock/core/units.h"

namespace airlock::cli {
namespace {

constexpr const char* kRunFooter = R"(Exit status:
  0-124, 127-255  the command's own exit status (127: command not found)
  125             Airlock failed: bad input, or the sandbox could not be
                  provisioned, run or destroyed (one line on stderr)
  126             the command was killed; the kill reason is printed
A command that itself exits 125 or 126 looks the same: --json tells them
apart (exit_code and killed_by are separate fields).

Examples:
  airlock run -- python3 -c 'print(1)'
  airlock run --timeout 5s --memory 256M --copy-in ./src -- sh -c 'make test'
  airlock run --json -- ls -la
  airlock run --export out.txt -- sh -c 'date > out.txt'   (then: airlock artifact list)
)";

// This process's environment, for --env.
std::optional<std::string> processEnvironment(std::string_view name) {
  const char* value = std::getenv(std::string(name).c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

// 2000 -> "2", 1500 -> "1.5", 250 -> "0.25".
std::string formatCpus(std::int64_t millicores) {
  std::string text = std::to_string(millicores / 1000);
  if (std::int64_t frac = millicores % 1000; frac != 0) {
    std::string digits = std::to_string(1000 + frac).substr(1);
    while (digits.back() == '0') digits.pop_back();
    text += "." + digits;
  }
  return text;
}

// An option whose value is kept as typed, nullopt when not given.
void addText(CLI::App& app, const char* name, std::optional<std::string>& target, const char* type,
             const std::string& help) {
  app.add_option_function<std::string>(
         name, [&target](const std::string& value) { target = value; }, help)
      ->type_name(type);
}

// The help of each limit flag, as the command explains it.
struct LimitFlagHelp {
  std::string memory, cpus, pids, disk, inodes, timeout, max_output, copy_in;
};

// The flags run and mcp share: the limits (--memory, --cpus, --pids,
// --disk, --inodes, --timeout, --max-output), --copy-in and --env, into
// the RunFlags planRun parses.
void addLimitFlags(CLI::App& app, RunFlags& flags, const LimitFlagHelp& help) {
  addText(app, "--memory", flags.memory, "SIZE", help.memory);
  addText(app, "--cpus", flags.cpus, "N", help.cpus);
  addText(app, "--pids", flags.pids, "N", help.pids);
  addText(app, "--disk", flags.disk, "SIZE", help.disk);
  addText(app, "--inodes", flags.inodes, "N", help.inodes);
  addText(app, "--timeout", flags.timeout, "DURATION", help.timeout);
  addText(app, "--max-output", flags.max_output, "SIZE", help.max_output);
  addText(app, "--copy-in", flags.copy_in, "DIR|ARCHIVE", help.copy_in);
  app.add_option("--env", flags.env_names,
                 "Pass this variable from your environment through (repeatable; "
                 "credentials are refused)")
      ->allow_extra_args(false)
      ->type_name("NAME");
}

void addMechanismFlag(CLI::App& app, std::string& target) {
  app.add_option("--mechanism", target, "Sandbox mechanism: linux (default), gvisor or fake")
      ->type_name("NAME");
}

class RunCommand final : public Command {
 public:
  std::string_view name() const override { return "run"; }
  std::string_view summary() const override {
    return "Run one command in a fresh sandbox and report it.";
  }
  void defineUsage(CLI::App& app) override {
    app.positionals_at_end(true);
    app.footer(kRunFooter);
    const ResourceLimits defaults = defaultLimits();
    addLimitFlags(
        app, flags_,
        {"Memory limit, e.g. 512M (default " + formatSize(defaults.memory_bytes) + ")",
         "CPUs, e.g. 1 or 0.5 (default " + formatCpus(defaults.cpu_millicores) + ")",
         "Maximum processes and threads (default " + std::to_string(defaults.pids_max) + ")",
         "Size of /workspace (default " + formatSize(defaults.workspace_bytes) + ")",
         "Maximum files in /workspace (default " + std::to_string(defaults.inodes_max) + ")",
         "Wall-clock limit, e.g. 30s, 500ms, 2m; rounded up to whole seconds (default " +
             std::to_string(defaults.wall_clock_seconds) + "s)",
         "Cap on stdout and stderr together (default " + formatSize(kDefaultMaximumOutputBytes) +
             ")",
         "Copy a directory, or extract a tar/zip archive, into /workspace first"});
    defineRunOwnFlags(app);
  }
  int execute(const CLI::App& /*app*/) override {
    auto plan = planRun(flags_, processEnvironment);
    if (!plan) return printErrorLine(plan.error());
    return executeRun(std::move(*plan));
  }

 private:
  void defineRunOwnFlags(CLI::App& app);

  RunFlags flags_;
};

void RunCommand::defineRunOwnFlags(CLI::App& app) {
  app.add_option("--export", flags_.exports,
                 "After the command, keep this workspace file as an artifact in the local store "
                 "(repeatable; see airlock artifact)")
      ->allow_extra_args(false)
      ->type_name("PATH");
  addText(app, "--state-dir", flags_.state_dir, "DIR",
          "Where the artifact store and the mechanism's state live (default /run/airlock)");
  app.add_flag("--network", flags_.network,
               "Let the command reach the destinations of --egress-policy through Airlock's "
               "proxy (HTTPS_PROXY is set; nothing else is reachable)");
  addText(app, "--egress-policy", flags_.egress_policy, "FILE",
          "The egress allowlist (YAML, docs/egress.md); without --network it is only checked");
  addText(app, "--egress-log", flags_.egress_log, "FILE",
          "Append the proxy's decisions here, one JSON line each (default: stderr)");
  addText(app, "--image", flags_.image, "REF|DIGEST",
          "Run in this image: a reference (pulled the first time, then the stored digest is "
          "used), a stored digest, or host (the default: this machine's /usr; docs/images.md)");
  addText(app, "--code", flags_.code, "FILE.py",
          "Code mode: run this Python program with the capability channel (import airlock_cap) "
          "and print its structured outcome as JSON (docs/capabilities.md)");
  addMechanismFlag(app, flags_.mechanism);
  app.add_flag("--json", flags_.json, "Print the ExecutionResult as JSON on stdout, nothing else");
  app.add_flag("-v,--verbose", flags_.verbose,
               "Log the image digest and the sandbox's lifecycle on stderr");
  app.add_flag("-i,--stdin", flags_.read_stdin,
               "Send this process's stdin to the command (read to the end first)");
  app.add_option("command", flags_.argv, "The command and its arguments, after --")
      ->type_name("ARGV");
}

class ServeCommand final : public Command {
 public:
  std::string_view name() const override { return "serve"; }
  std::string_view summary() const override {
    return "Serve the HTTP API (settings: --config FILE and AIRLOCK_* variables; docs/serve.md).";
  }
  void defineUsage(CLI::App& app) override {
    addText(app, "--config", config_, "FILE", "YAML settings file");
    addText(app, "--role", role_, "ROLE",
            "Serve one side only: gateway (the public API over execution_nodes) or execution "
            "(an execution node's internal API); default both in one process");
  }
  int execute(const CLI::App& /*app*/) override { return executeServe(config_, role_); }

 private:
  std::optional<std::string> config_;
  std::optional<std::string> role_;
};

// `airlock mcp`: the model-facing tools over MCP (stdio) on one sandbox per
// session; the limit flags are `airlock run`'s (cli/mcp_command.h).
class McpCommand final : public Command {
 public:
  explicit McpCommand(std::string version) : version_(std::move(version)) {}
  std::string_view name() const override { return "mcp"; }
  std::string_view summary() const override {
    return "Serve the model-facing tools over MCP on stdin/stdout, on one sandbox per session.";
  }
  void defineUsage(CLI::App& app) override {
    const ResourceLimits defaults = defaultLimits();
    addLimitFlags(
        app, flags_.run,
        {"Memory limit of the sandbox (as for run)", "CPUs (as for run)",
         "Maximum processes and threads (as for run)", "Size of /workspace (as for run)",
         "Maximum files in /workspace (as for run)",
         "Wall-clock limit of each command (default " +
             std::to_string(defaults.wall_clock_seconds) + "s; the model can only lower it)",
         "What the model sees of stdout and stderr together (default " +
             formatSize(kDefaultMaximumOutputBytes) + "); the rest is exported",
         "Seed /workspace of the session's sandbox from a directory or tar/zip archive"});
    addText(app, "--export-dir", flags_.export_dir, "DIR",
            "Where artifact_export writes files (DIR/<artifact_id>/<filename>)");
    addMechanismFlag(app, flags_.run.mechanism);
    app.add_flag("-v,--verbose", flags_.run.verbose,
                 "Log the sandbox's lifecycle on stderr (stdout carries only MCP messages)");
  }
  int execute(const CLI::App& /*app*/) override {
    return runMcp(flags_, processEnvironment, version_);
  }

 private:
  std::string version_;
  McpFlags flags_;
};

}  // namespace

std::unique_ptr<Command> makeRunCommand() {
  return std::make_unique<RunCommand>();
}

std::unique_ptr<Command> makeServeCommand() {
  return std::make_unique<ServeCommand>();
}

std::unique_ptr<Command> makeMcpCommand(std::string version) {
  return std::make_unique<McpCommand>(std::move(version));
}

}  // namespace airlock::cli
