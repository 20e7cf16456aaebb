#include <CLI/CLI.hpp>
#include <utility>

#include "airlock/cli/command.h"
#include "airlock/cli/summary.h"

namespace airlock::cli {
namespace {

constexpr const char* kDescription =
    "Airlock runs agent-written code in a sandbox with hard limits.";

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

// The one line for a parse error CLI11 raised; app is the top level.
std::string describeParseError(const CommandRegistry& commands, const CLI::App& app,
                               const CLI::ParseError& error, int argc, char** argv) {
  if (!app.get_subcommands().empty()) return error.what();
  if (argc > 1 && argv[1][0] != '-') {
    return std::string("unknown command \"") + argv[1] + "\": use " + commandNameList(commands) +
           " (see airlock --help)";
  }
  return "a subcommand is required: " + commandNameList(commands) + " (see airlock --help)";
}

}  // namespace

CommandRegistry airlockCommands(const std::string& version) {
  CommandRegistry commands;
  commands.push_back(makeRunCommand());
  commands.push_back(makeImageCommand());
  commands.push_back(makeArtifactCommand());
  commands.push_back(makeServeCommand());
  commands.push_back(makeMcpCommand(version));
  commands.push_back(makeEgressCommand());
  commands.push_back(makeTenantKeyCommand());
  commands.push_back(makeDoctorCommand());
  commands.push_back(makeVersionCommand(version));
  return commands;
}

std::string commandNameList(const CommandRegistry& commands) {
  std::string list;
  for (std::size_t i = 0; i < commands.size(); ++i) {
    if (i > 0) list += i + 1 == commands.size() ? " or " : ", ";
    list += commands[i]->name();
  }
  return list;
}

int runCommandLine(const CommandRegistry& commands, const std::string& version, int argc,
                   char** argv) {
  CLI::App app{kDescription, "airlock"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "airlock " + version);
  std::vector<std::pair<Command*, CLI::App*>> defined;
  for (const auto& command : commands) {
    CLI::App* sub =
        app.add_subcommand(std::string(command->name()), std::string(command->summary()));
    command->defineUsage(*sub);
    defined.emplace_back(command.get(), sub);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ExtrasError&) {
    return printErrorLine(describeExtras(app.remaining(/*recurse=*/true)));
  } catch (const CLI::ParseError& e) {
    return printErrorLine(describeParseError(commands, app, e, argc, argv));
  }
  for (auto [command, sub] : defined) {
    if (app.got_subcommand(sub)) return command->execute(*sub);
  }
  return printErrorLine("a subcommand is required: " + commandNameList(commands) +
                        " (see airlock --help)");
}

}  // namespace airlock::cli
