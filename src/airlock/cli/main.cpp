// The `airlock` command (DESIGN.md 1 and 3): `run`, `serve`, `doctor`, `version`.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>

#include "airlock/cli/doctor.h"
#include "airlock/cli/exit_codes.h"
#include "airlock/cli/run_command.h"
#include "airlock/cli/run_plan.h"
#include "airlock/cli/serve_command.h"
#include "airlock/cli/summary.h"
#include "airlock/core/limits_defaults.h"
#include "airlock/core/units.h"
#include "airlock/sys/io.h"

#ifndef AIRLOCK_VERSION
#define AIRLOCK_VERSION "0.0.0"
#endif

namespace {

using airlock::cli::kExitAirlockError;

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
)";

int usageError(const std::string& message) {
  const std::string line = airlock::cli::formatErrorLine(message);
  (void)airlock::sys::writeAll(STDERR_FILENO, line.data(), line.size());
  return kExitAirlockError;
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

// CLI11 lists unexpected arguments with the `--` separator among them;
// name the first real one and say where options go.
std::string describeExtras(const std::vector<std::string>& extras) {
  for (const auto& arg : extras) {
    if (arg == "--") continue;
    if (!arg.empty() && arg[0] == '-') {
      return "unknown option " + arg +
             " (options go before --, the command after it; see airlock run --help)";
    }
    return "unexpected argument \"" + arg + "\" (see airlock --help)";
  }
  return "unexpected arguments (see airlock --help)";
}

}  // namespace

int main(int argc, char** argv) {
  using namespace airlock;

  CLI::App app{"Airlock runs agent-written code in a sandbox with hard limits.", "airlock"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("airlock ") + AIRLOCK_VERSION);

  cli::RunFlags flags;
  const ResourceLimits defaults = defaultLimits();
  CLI::App* run = app.add_subcommand("run", "Run one command in a fresh sandbox and report it.");
  run->positionals_at_end(true);
  run->footer(kRunFooter);
  auto text = [&](const char* name, std::optional<std::string>& target, const char* type,
                  const std::string& help) {
    run->add_option_function<std::string>(
           name, [&target](const std::string& value) { target = value; }, help)
        ->type_name(type);
  };
  text("--memory", flags.memory, "SIZE",
       "Memory limit, e.g. 512M (default " + formatSize(defaults.memory_bytes) + ")");
  text("--cpus", flags.cpus, "N",
       "CPUs, e.g. 1 or 0.5 (default " + formatCpus(defaults.cpu_millicores) + ")");
  text("--pids", flags.pids, "N",
       "Maximum processes and threads (default " + std::to_string(defaults.pids_max) + ")");
  text("--disk", flags.disk, "SIZE",
       "Size of /workspace (default " + formatSize(defaults.workspace_bytes) + ")");
  text("--inodes", flags.inodes, "N",
       "Maximum files in /workspace (default " + std::to_string(defaults.inodes_max) + ")");
  text("--timeout", flags.timeout, "DURATION",
       "Wall-clock limit, e.g. 30s, 500ms, 2m; rounded up to whole seconds (default " +
           std::to_string(defaults.wall_clock_seconds) + "s)");
  text(
      "--max-output", flags.max_output, "SIZE",
      "Cap on stdout and stderr together (default " + formatSize(kDefaultMaximumOutputBytes) + ")");
  text("--copy-in", flags.copy_in, "DIR|ARCHIVE",
       "Copy a directory, or extract a tar/zip archive, into /workspace first");
  run->add_option("--env", flags.env_names,
                  "Pass this variable from your environment through (repeatable; "
                  "credentials are refused)")
      ->allow_extra_args(false)
      ->type_name("NAME");
  run->add_option("--mechanism", flags.mechanism, "Sandbox mechanism: linux (default) or fake")
      ->type_name("NAME");
  run->add_flag("--json", flags.json, "Print the ExecutionResult as JSON on stdout, nothing else");
  run->add_flag("-v,--verbose", flags.verbose,
                "Log the image digest and the sandbox's lifecycle on stderr");
  run->add_flag("-i,--stdin", flags.read_stdin,
                "Send this process's stdin to the command (read to the end first)");
  run->add_option("command", flags.argv, "The command and its arguments, after --")
      ->type_name("ARGV");

  app.add_subcommand("doctor",
                     "Report what this machine offers the linux mechanism; exit 1 if it "
                     "cannot run.");
  app.add_subcommand("version", "Print the version.");
  std::optional<std::string> serve_config;
  CLI::App* serve = app.add_subcommand(
      "serve", "Serve the HTTP API (settings: --config FILE and AIRLOCK_* variables; docs/cli.md).");
  serve->add_option_function<std::string>(
           "--config", [&serve_config](const std::string& value) { serve_config = value; },
           "YAML settings file")
      ->type_name("FILE");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ExtrasError&) {
    return usageError(describeExtras(app.remaining(/*recurse=*/true)));
  } catch (const CLI::ParseError& e) {
    if (app.get_subcommands().empty()) {
      if (argc > 1 && argv[1][0] != '-') {
        return usageError(std::string("unknown command \"") + argv[1] +
                          "\": use run, serve, doctor or version (see airlock --help)");
      }
      return usageError("a subcommand is required: run, serve, doctor or version (see airlock --help)");
    }
    return usageError(e.what());
  }

  if (app.got_subcommand("version")) {
    std::cout << "airlock " << AIRLOCK_VERSION << "\n";
    return 0;
  }
  if (app.got_subcommand("doctor")) return cli::runDoctor();
  if (app.got_subcommand("serve")) return cli::executeServe(serve_config);

  auto host_env = [](std::string_view name) -> std::optional<std::string> {
    const char* value = std::getenv(std::string(name).c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
  auto plan = cli::planRun(flags, host_env);
  if (!plan) return usageError(plan.error().message());
  return cli::executeRun(std::move(*plan));
}
