// Exit statuses of `airlock run` (docs/cli.md, "Exit status"). The one
// place where results and errors become process exit codes.
//
//   0-124, 127-255  the command's own exit status, passed through
//   125             Airlock itself failed: bad input, or the sandbox could not
//                   be provisioned, run or destroyed (one line on stderr)
//   126             the command was killed for a reason Airlock names
//                   (TIMEOUT, MEMORY, OUTPUT_LIMIT, PIDS, DISK, CANCELLED,
//                   EXPIRED, SERVICE_SHUTDOWN)
//
// A command that itself exits 125 or 126 is indistinguishable by status
// alone; --json carries exit_code and killed_by separately.
#pragma once

#include "airlock/core/error.h"
#include "airlock/core/types.h"

namespace airlock::cli {

inline constexpr int kExitAirlockError = 125;
inline constexpr int kExitKilled = 126;

// The process exit status for a finished execution.
inline int exitStatusFor(const ExecutionResult& result) {
  if (result.killed_by.has_value() || !result.exit_code.has_value()) return kExitKilled;
  const int code = *result.exit_code;
  return code >= 0 && code <= 255 ? code : kExitAirlockError;
}

// Every error that crosses into the CLI is Airlock's failure, whatever its
// code: the code is in the message, the status is 125.
inline int exitStatusFor(const Error& /*error*/) {
  return kExitAirlockError;
}

}  // namespace airlock::cli
