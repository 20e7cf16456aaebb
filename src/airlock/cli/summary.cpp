#include "airlock/cli/summary.h"

#include <unistd.h>

#include "airlock/cli/exit_codes.h"
#include "airlock/core/encoding.h"
#include "airlock/port/execution_environment.h"
#include "airlock/sys/io.h"

namespace airlock::cli {

std::string escapeForTerminal(std::string_view bytes, Backslash backslash) {
  std::string out;
  out.reserve(bytes.size());
  appendEscaped(out, bytes, {.backslash = backslash == Backslash::kEscape});
  return out;
}

std::string formatErrorLine(std::string_view message) {
  return "airlock: error: " + escapeForTerminal(message, Backslash::kKeep) + "\n";
}

std::string formatSummary(const ExecutionResult& result, const ExecutionCommand& command) {
  std::string out;
  const std::string ms = std::to_string(result.duration_ms) + " ms";
  if (result.killed_by) {
    out += "airlock: killed by " + std::string(killReasonName(*result.killed_by)) + " after " + ms;
    if (result.timed_out) out += " (timed out)";
    out += "\n";
  } else if (result.exit_code) {
    out += "airlock: exit " + std::to_string(*result.exit_code) + " in " + ms + "\n";
  } else {
    out += "airlock: ended without an exit status in " + ms + "\n";
  }
  if (!result.output_held_open.empty()) {
    std::string streams;
    for (const auto& name : result.output_held_open)
      streams += (streams.empty() ? "" : " and ") + name;
    out += "airlock: a background process held " + streams +
           " open after the command exited; it was killed " +
           std::to_string(std::chrono::seconds(kOutputGraceAfterExit).count()) +
           " s later (redirect its output to return at once)\n";
  }
  const std::string cap = std::to_string(command.maximum_output_bytes);
  if (result.stdout_truncated) {
    out += "airlock: stdout truncated at the output cap of " + cap + " bytes (--max-output)\n";
  }
  if (result.stderr_truncated) {
    out += "airlock: stderr truncated at the output cap of " + cap + " bytes (--max-output)\n";
  }
  const auto count = result.files_changed.size();
  if (count > 0 || result.files_changed_truncated) {
    out += "airlock: " + std::to_string(count) + (result.files_changed_truncated ? "+" : "") +
           (count == 1 ? " file changed\n" : " files changed\n");
  }
  for (const auto& change : result.files_changed) {
    out += "  " + std::string(changeKindName(change.change)) + " " + escapeForTerminal(change.path);
    if (change.change != ChangeKind::kDeleted) {
      out +=
          " (" + std::to_string(change.size_bytes) + (change.size_bytes == 1 ? " byte" : " bytes");
      if (change.sha256) out += ", sha256 " + change.sha256->substr(0, 8) + "\u2026";
      out += ")";
    }
    out += "\n";
  }
  if (result.files_changed_truncated) {
    out += "  \u2026 more changes not listed (the listing is capped)\n";
  }
  return out;
}

void writeOut(int fd, std::string_view bytes) {
  (void)sys::writeAll(fd, bytes.data(), bytes.size());
}

int printErrorLine(std::string_view message) {
  writeOut(STDERR_FILENO, formatErrorLine(message));
  return kExitAirlockError;
}

int printErrorLine(const Error& error) {
  printErrorLine(std::string_view(error.message()));
  return exitStatusFor(error);
}

}  // namespace airlock::cli
