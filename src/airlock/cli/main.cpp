// The `airlock` command: `run`, `image`, `artifact`, `serve`, `mcp`, `egress`, `doctor`,
// `version`.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <initializer_list>
#include <iostream>

#include "airlock/cli/artifact_command.h"
#include "airlock/cli/doctor.h"
#include "airlock/cli/egress_command.h"
#include "airlock/cli/exit_codes.h"
#include "airlock/cli/image_command.h"
#include "airlock/cli/mcp_command.h"
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

int usageError(const std::string& message) {
  return airlock::cli::printErrorLine(message);
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

// --state-dir DIR on each of a command's subcommands, into one target.
void addStateDir(std::initializer_list<CLI::App*> subcommands, std::string& target,
                 const std::string& help) {
  for (CLI::App* sub : subcommands) sub->add_option("--state-dir", target, help)->type_name("DIR");
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
  run->add_option("--export", flags.exports,
                  "After the command, keep this workspace file as an artifact in the local store "
                  "(repeatable; see airlock artifact)")
      ->allow_extra_args(false)
      ->type_name("PATH");
  text("--state-dir", flags.state_dir, "DIR",
       "Where the artifact store and the mechanism's state live (default /run/airlock)");
  run->add_flag("--network", flags.network,
                "Let the command reach the destinations of --egress-policy through Airlock's "
                "proxy (HTTPS_PROXY is set; nothing else is reachable)");
  text("--egress-policy", flags.egress_policy, "FILE",
       "The egress allowlist (YAML, docs/egress.md); without --network it is only checked");
  text("--egress-log", flags.egress_log, "FILE",
       "Append the proxy's decisions here, one JSON line each (default: stderr)");
  text("--image", flags.image, "REF|DIGEST",
       "Run in this image: a reference (pulled the first time, then the stored digest is used), "
       "a stored digest, or host (the default: this machine's /usr; docs/images.md)");
  text("--code", flags.code, "FILE.py",
       "Code mode: run this Python program with the capability channel (import airlock_cap) "
       "and print its structured outcome as JSON (docs/capabilities.md)");
  run->add_option("--mechanism", flags.mechanism,
                  "Sandbox mechanism: linux (default), gvisor or fake")
      ->type_name("NAME");
  run->add_flag("--json", flags.json, "Print the ExecutionResult as JSON on stdout, nothing else");
  run->add_flag("-v,--verbose", flags.verbose,
                "Log the image digest and the sandbox's lifecycle on stderr");
  run->add_flag("-i,--stdin", flags.read_stdin,
                "Send this process's stdin to the command (read to the end first)");
  run->add_option("command", flags.argv, "The command and its arguments, after --")
      ->type_name("ARGV");

  // `airlock artifact list|get|rm` on the local store (cli/artifact_command.h).
  std::string artifact_state_dir = cli::kDefaultStateDir;
  std::string artifact_id;
  std::optional<std::string> artifact_output;
  bool artifact_json = false;
  CLI::App* artifact = app.add_subcommand(
      "artifact", "List, fetch or delete the artifacts kept by airlock run --export.");
  artifact->require_subcommand(1);
  artifact
      ->add_option("--state-dir", artifact_state_dir,
                   "Where the artifact store lives (default /run/airlock)")
      ->type_name("DIR");
  CLI::App* artifact_list =
      artifact->add_subcommand("list", "One line per artifact: id, size, created, filename.");
  artifact_list->add_flag("--json", artifact_json, "Print a JSON array of the artifacts' metadata");
  CLI::App* artifact_get =
      artifact->add_subcommand("get",
                               "Write an artifact's bytes to FILE, or to its original filename "
                               "(made safe) here; never overwrites.");
  artifact_get->add_option("id", artifact_id, "The artifact id")->required()->type_name("ID");
  artifact_get
      ->add_option_function<std::string>(
          "-o,--output", [&artifact_output](const std::string& value) { artifact_output = value; },
          "The file to create; - writes the bytes to stdout")
      ->type_name("FILE");
  CLI::App* artifact_rm = artifact->add_subcommand("rm", "Delete an artifact and its metadata.");
  artifact_rm->add_option("id", artifact_id, "The artifact id")->required()->type_name("ID");
  addStateDir({artifact_list, artifact_get, artifact_rm}, artifact_state_dir,
              "Where the artifact store lives (default /run/airlock)");

  // `airlock image pull|import|ls|rm` on the local store (cli/image_command.h).
  std::string image_state_dir = cli::kDefaultStateDir;
  std::string image_name;
  bool image_json = false;
  CLI::App* image = app.add_subcommand(
      "image", "Pull, import, list or remove the images airlock run --image uses.");
  image->require_subcommand(1);
  CLI::App* image_pull = image->add_subcommand(
      "pull", "Resolve a reference at its registry to a digest and store that image.");
  image_pull->add_option("reference", image_name, "REGISTRY/NAME:TAG or REGISTRY/NAME@DIGEST")
      ->required()
      ->type_name("REF");
  CLI::App* image_import = image->add_subcommand(
      "import",
      "Store the image of an OCI image layout directory, or an OCI or docker save archive.");
  image_import->add_option("path", image_name, "The layout directory or the archive")
      ->required()
      ->type_name("PATH");
  std::string image_ref_name;
  image_import
      ->add_option("--ref", image_ref_name,
                   "Of a layout holding several images, the one its index names so (its tag)")
      ->type_name("NAME");
  CLI::App* image_ls =
      image->add_subcommand("ls", "One line per stored image: digest, size, references.");
  CLI::App* image_rm = image->add_subcommand(
      "rm", "Drop a reference, or an image by digest, and collect what nothing uses.");
  image_rm->add_option("name", image_name, "A reference or a digest")
      ->required()
      ->type_name("NAME");
  addStateDir({image_pull, image_import, image_ls, image_rm}, image_state_dir,
              "Where the image store lives, under images/ (default /run/airlock)");
  for (CLI::App* sub : {image_pull, image_import, image_ls})
    sub->add_flag("--json", image_json, "Print JSON");

  // `airlock egress check` (cli/egress_command.h).
  cli::EgressCheckFlags egress_flags;
  CLI::App* egress = app.add_subcommand(
      "egress", "Egress policy tools (the policy: docs/egress.md; egress check: docs/cli.md).");
  egress->require_subcommand(1);
  CLI::App* egress_check = egress->add_subcommand(
      "check",
      "Decide URL|host:port against a policy (no connection is made); exit 0 allowed, 1 denied.");
  egress_check->add_option("--policy", egress_flags.policy_file, "The egress policy (YAML)")
      ->required()
      ->type_name("FILE");
  egress_check->add_flag("--json", egress_flags.json, "Print the decision as one JSON object");
  egress_check->add_option("target", egress_flags.target, "An http(s) URL or host:port")
      ->required()
      ->type_name("URL|HOST:PORT");

  app.add_subcommand("doctor",
                     "Report what this machine offers the linux mechanism; exit 1 if it "
                     "cannot run.");
  app.add_subcommand("version", "Print the version.");
  std::optional<std::string> serve_config;
  CLI::App* serve = app.add_subcommand(
      "serve",
      "Serve the HTTP API (settings: --config FILE and AIRLOCK_* variables; docs/serve.md).");
  serve
      ->add_option_function<std::string>(
          "--config", [&serve_config](const std::string& value) { serve_config = value; },
          "YAML settings file")
      ->type_name("FILE");

  // `airlock mcp`: the model-facing tools over MCP (stdio) on one sandbox
  // per session; the limit flags are `airlock run`'s (cli/mcp_command.h).
  cli::McpFlags mcp_flags;
  CLI::App* mcp = app.add_subcommand(
      "mcp", "Serve the model-facing tools over MCP on stdin/stdout, on one sandbox per session.");
  auto mcp_text = [&](const char* name, std::optional<std::string>& target, const char* type,
                      const std::string& help) {
    mcp->add_option_function<std::string>(
           name, [&target](const std::string& value) { target = value; }, help)
        ->type_name(type);
  };
  mcp_text("--memory", mcp_flags.run.memory, "SIZE", "Memory limit of the sandbox (as for run)");
  mcp_text("--cpus", mcp_flags.run.cpus, "N", "CPUs (as for run)");
  mcp_text("--pids", mcp_flags.run.pids, "N", "Maximum processes and threads (as for run)");
  mcp_text("--disk", mcp_flags.run.disk, "SIZE", "Size of /workspace (as for run)");
  mcp_text("--inodes", mcp_flags.run.inodes, "N", "Maximum files in /workspace (as for run)");
  mcp_text("--timeout", mcp_flags.run.timeout, "DURATION",
           "Wall-clock limit of each command (default " +
               std::to_string(defaults.wall_clock_seconds) + "s; the model can only lower it)");
  mcp_text("--max-output", mcp_flags.run.max_output, "SIZE",
           "What the model sees of stdout and stderr together (default " +
               formatSize(kDefaultMaximumOutputBytes) + "); the rest is exported");
  mcp_text("--copy-in", mcp_flags.run.copy_in, "DIR|ARCHIVE",
           "Seed /workspace of the session's sandbox from a directory or tar/zip archive");
  mcp_text("--export-dir", mcp_flags.export_dir, "DIR",
           "Where artifact.export writes files (DIR/<artifact_id>/<filename>)");
  mcp->add_option("--env", mcp_flags.run.env_names,
                  "Pass this variable from your environment through (repeatable; "
                  "credentials are refused)")
      ->allow_extra_args(false)
      ->type_name("NAME");
  mcp->add_option("--mechanism", mcp_flags.run.mechanism,
                  "Sandbox mechanism: linux (default), gvisor or fake")
      ->type_name("NAME");
  mcp->add_flag("-v,--verbose", mcp_flags.run.verbose,
                "Log the sandbox's lifecycle on stderr (stdout carries only MCP messages)");

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
        return usageError(
            std::string("unknown command \"") + argv[1] +
            "\": use run, artifact, serve, mcp, egress, doctor or version (see airlock --help)");
      }
      return usageError(
          "a subcommand is required: run, artifact, serve, mcp, egress, doctor or version (see "
          "airlock --help)");
    }
    return usageError(e.what());
  }

  if (app.got_subcommand("version")) {
    std::cout << "airlock " << AIRLOCK_VERSION << "\n";
    return 0;
  }
  if (app.got_subcommand("doctor")) return cli::runDoctor();
  if (app.got_subcommand("egress")) return cli::runEgressCheck(egress_flags);
  if (app.got_subcommand("image")) {
    if (image->got_subcommand("pull"))
      return cli::runImagePull(image_state_dir, image_name, image_json);
    if (image->got_subcommand("import"))
      return cli::runImageImport(image_state_dir, image_name, image_ref_name, image_json);
    if (image->got_subcommand("ls")) return cli::runImageList(image_state_dir, image_json);
    return cli::runImageRemove(image_state_dir, image_name);
  }
  if (app.got_subcommand("artifact")) {
    if (artifact_state_dir.empty()) return usageError("--state-dir: the directory is empty");
    if (artifact->got_subcommand("list"))
      return cli::runArtifactList(artifact_state_dir, artifact_json);
    if (artifact->got_subcommand("get"))
      return cli::runArtifactGet(artifact_state_dir, artifact_id, artifact_output);
    return cli::runArtifactRm(artifact_state_dir, artifact_id);
  }
  if (app.got_subcommand("serve")) return cli::executeServe(serve_config);
  if (app.got_subcommand("mcp")) {
    auto mcp_env = [](std::string_view name) -> std::optional<std::string> {
      const char* value = std::getenv(std::string(name).c_str());
      if (value == nullptr) return std::nullopt;
      return std::string(value);
    };
    return cli::runMcp(mcp_flags, mcp_env, AIRLOCK_VERSION);
  }

  auto host_env = [](std::string_view name) -> std::optional<std::string> {
    const char* value = std::getenv(std::string(name).c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
  auto plan = cli::planRun(flags, host_env);
  if (!plan) return usageError(plan.error().message());
  return cli::executeRun(std::move(*plan));
}
