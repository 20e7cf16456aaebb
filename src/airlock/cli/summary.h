// How `airlock run` reports a result to a person (docs/cli.md, "Output").
// The command's own bytes are written through unchanged; everything Airlock
// adds goes to stderr, prefixed "airlock:", with every byte that came from
// the sandbox (file names) escaped so it cannot drive the terminal.
#pragma once

#include <string>
#include <string_view>

#include "airlock/core/error.h"
#include "airlock/core/types.h"

namespace airlock::cli {

enum class Backslash : bool { kKeep, kEscape };

// Control bytes (< 0x20, 0x7f) escaped as \n, \t, \r or \xNN, and the
// backslash as \\ when asked (so that escaped names stay unambiguous); every
// other byte (UTF-8 included) unchanged. Always one line.
std::string escapeForTerminal(std::string_view bytes, Backslash backslash = Backslash::kEscape);

// The summary lines, each ending in '\n':
//   airlock: exit 0 in 23 ms
//   airlock: killed by TIMEOUT after 2001 ms (timed out)
//   airlock: stdout truncated at the output cap of 1000 bytes (--max-output)
//   airlock: 2 files changed
//     CREATED out.txt (3 bytes, sha256 98ea6e4f…)
//     DELETED gone.txt
std::string formatSummary(const ExecutionResult& result, const ExecutionCommand& command);

// "airlock: error: <message>\n" with the message's control bytes escaped to
// one line (backslashes kept, so a suggested command can be pasted).
std::string formatErrorLine(std::string_view message);

// Writes all of `bytes` to `fd`; a failure (a closed terminal) is ignored.
void writeOut(int fd, std::string_view bytes);
// The CLI's one error reporter: writes formatErrorLine(message) to
// standard error and returns the exit status of an Airlock failure
// (kExitAirlockError, 125).
int printErrorLine(std::string_view message);

// printErrorLine(error.message()), returning exitStatusFor(error) (125).
int printErrorLine(const Error& error);

}  // namespace airlock::cli
