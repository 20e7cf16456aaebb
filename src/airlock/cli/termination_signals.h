// Ctrl-C and `kill` as cancellation, for the commands that run until told
// to stop (`airlock run`, `airlock mcp`): SIGINT and SIGTERM cancel one
// CancelToken (port/cancel_token.h) instead of ending the process, so the
// command still destroys what it provisioned.
#pragma once

#include "airlock/port/cancel_token.h"

namespace airlock::cli {

// From now on SIGINT and SIGTERM call token.cancel() (async-signal-safe,
// errno kept) with SA_RESTART. `token` must outlive the process's last
// signal; a later call replaces it. One token per process: the commands
// that use it are exclusive.
void cancelOnTerminationSignals(const CancelToken& token);

}  // namespace airlock::cli
