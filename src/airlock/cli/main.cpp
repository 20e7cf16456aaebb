// The `airlock` command: the registry of commands (cli/command.h) run on
// the process's arguments.
#include "airlock/cli/command.h"

#ifndef AIRLOCK_VERSION
#define AIRLOCK_VERSION "0.0.0"
#endif

int main(int argc, char** argv) {
  const auto commands = airlock::cli::airlockCommands(AIRLOCK_VERSION);
  return airlock::cli::runCommandLine(commands, AIRLOCK_VERSION, argc, argv);
}
