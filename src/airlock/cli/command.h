// The `airlock` command line as a registry of command objects
// (docs/cli.md). Each subcommand is a Command: its name, a one-line
// summary, its usage (the options, arguments, subcommands and footer it
// declares on a CLI11 App) and what it does once they are parsed. The
// top-level help and the messages for a missing or an unknown subcommand
// are generated from the registry, so a command added to it is listed
// everywhere.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace CLI {
class App;
}  // namespace CLI

namespace airlock::cli {

class Command {
 public:
  virtual ~Command() = default;

  // The word after `airlock` ("run").
  virtual std::string_view name() const = 0;
  // One line for the top-level help.
  virtual std::string_view summary() const = 0;
  // Declares the command's options, arguments and subcommands on `app`, the
  // CLI11 subcommand made from name() and summary(). The parsed values land
  // in this object, which must outlive the parse.
  virtual void defineUsage(CLI::App& app) = 0;
  // Does the command after a successful parse; `app` is the same App, as
  // parsed (which of its own subcommands was given). Returns the process
  // exit status (cli/exit_codes.h); errors are one line on stderr
  // (summary.h printErrorLine).
  virtual int execute(const CLI::App& app) = 0;
};

using CommandRegistry = std::vector<std::unique_ptr<Command>>;

// Every command of the airlock binary, in the order the help lists them:
// run, image, artifact, serve, mcp, egress, tenant-key, doctor, version. `version` is
// what `airlock version` and `airlock --version` print after "airlock ".
CommandRegistry airlockCommands(const std::string& version);

// The registry's names for a message: "run, image, ... or version".
std::string commandNameList(const CommandRegistry& commands);

// Parses argv (argc entries, argv[0] the program) against the registry and
// executes the command it names. --help and --version print on stdout and
// return 0; any parse error is one "airlock: error: ..." line on stderr and
// kExitAirlockError. Otherwise the command's own exit status.
int runCommandLine(const CommandRegistry& commands, const std::string& version, int argc,
                   char** argv);

// The commands, one factory each (cli/sandbox_commands.cpp,
// cli/store_commands.cpp, cli/tool_commands.cpp).
std::unique_ptr<Command> makeRunCommand();
std::unique_ptr<Command> makeServeCommand();
std::unique_ptr<Command> makeMcpCommand(std::string version);
std::unique_ptr<Command> makeImageCommand();
std::unique_ptr<Command> makeArtifactCommand();
std::unique_ptr<Command> makeEgressCommand();
std::unique_ptr<Command> makeTenantKeyCommand();  // cli/tenant_key_command.cpp
std::unique_ptr<Command> makeDoctorCommand();
std::unique_ptr<Command> makeVersionCommand(std::string version);

}  // namespace airlock::cli
