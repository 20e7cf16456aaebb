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
// Three threads: a reader frames the input; the calling thread handles the
// lines in order, answering at once everything but tools/call (ping,
// tools/list, initialize, errors; a `notifications/cancelled` reaches
// Session::cancelRequest); a worker runs the tools/call one at a time in
// the order received (at most 32 waiting; more get Session::busyError).
// Responses and a call's progress notifications go through one writer, a
// whole line at a time, so a ping is answered while a long call runs and
// responses may come out of request order. stop_fd becoming readable
// cancels the running call (Session::cancelInFlight; its response is still
// written), drops requests and calls not yet started and ends the session.
// At EOF the waiting calls still run and are answered before it returns.
// A failed write (the client is gone) cancels the running call and ends
// the session: kOutputClosed.
// ExecutionUnavailable when reading fails for another reason than EOF.
Result<StdioEnd> serveStdio(Session& session, int in_fd, int out_fd, int stop_fd = -1,
                            std::size_t max_message_bytes = kMaxMessageBytes);

}  // namespace airlock::gateway::mcp
