// MCP's stdio transport: messages are single lines of JSON separated by
// '\n' (no embedded newlines), read from the client on one fd and written
// to it on another. Nothing else is written to the output fd.
#pragma once

#include <cstddef>

#include "airlock/core/error.h"
#include "airlock/gateway/mcp/mcp_session.h"

namespace airlock::gateway::mcp {

// A line longer than this is dropped (up to its newline) and answered with
// Session::oversizedLineError. Large enough for a workspace_write_text of
// ToolOptions::write_text_max_bytes with JSON escaping.
inline constexpr std::size_t kMaxMessageBytes = std::size_t{64} << 20;

enum class StdioEnd {
  kEndOfInput,   // the client closed its end (EOF on in_fd)
  kStopped,      // stop_fd became readable (a signal asked the session to end)
  kOutputClosed  // writing a response failed (EPIPE: the client is gone)
};

// Reads messages from in_fd until EOF, until stop_fd (if >= 0) is readable,
// or until the output cannot be written, handing each line to the session
// and writing its responses to out_fd followed by '\n'. A trailing '\r' is
// removed from a line; empty lines are skipped; a final line without '\n'
// at EOF is still handled (EOF lets queued requests finish first).
//
// Messages are handled one at a time, in order, on the calling thread; a
// reader thread frames the input meanwhile, so that while a tools/call runs
// a `notifications/cancelled` for it cancels it (Session::cancelRequest),
// and stop_fd becoming readable cancels it (Session::cancelInFlight), drops
// requests not yet started and ends the session.
// ExecutionUnavailable when reading fails for another reason than EOF.
Result<StdioEnd> serveStdio(Session& session, int in_fd, int out_fd, int stop_fd = -1,
                            std::size_t max_message_bytes = kMaxMessageBytes);

}  // namespace airlock::gateway::mcp
