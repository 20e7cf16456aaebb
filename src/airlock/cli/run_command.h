// `airlock run`, the side-effecting half: create the adapter, provision,
// copy in, execute with Ctrl-C wired to cancellation, print, and always
// destroy. The plan was validated before (run_plan.h).
#pragma once

#include "airlock/cli/run_plan.h"

namespace airlock::cli {

// Runs the plan and returns the process exit status (cli/exit_codes.h).
// Reads stdin first when plan.read_stdin. Output goes to fds 1 and 2.
int executeRun(RunPlan plan);

}  // namespace airlock::cli
