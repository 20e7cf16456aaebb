// The Model Context Protocol server side of one session:
// JSON-RPC 2.0 messages in, responses out, the tool layer behind it. No I/O
// here: mcp_stdio.h moves the lines, `airlock mcp` (cli/mcp_command.h)
// provisions the sandbox the ToolContext names.
//
// Methods:
//   initialize                 version negotiation, capabilities {tools},
//                              serverInfo, instructions. Must come first
//                              (ping excepted); a second one is refused.
//   notifications/initialized  accepted (notifications get no response)
//   notifications/cancelled    cancels the tools/call with that requestId,
//                              running or waiting (cancelRequest); neither
//                              gets a response
//   ping                       {}
//   tools/list                 every registered tool: name, title,
//                              description, inputSchema, outputSchema (from
//                              protocol 2025-06-18), annotations
//   tools/call                 {name, arguments}: the tool's JSON result as
//                              structuredContent plus the same JSON as one
//                              text content block, isError false; a tool
//                              failure is a result with isError true and the
//                              message as text (the model reads it and can
//                              correct itself), never a JSON-RPC error.
//                              With params._meta.progressToken (a string or
//                              an integer), notifications/progress carrying
//                              that token are sent while the call runs: one
//                              as it starts, one every progress interval,
//                              one soon after the command writes output
//                              (at most four a second), none after its
//                              response.
// A transport runs tools/call apart from the other requests (accept, then
// runCall on a worker), so ping, tools/list and cancellations are answered
// while a call runs; handleLine does both in one go.
// Errors (JSON-RPC 2.0): -32700 unparseable line, -32600 not a request
// object (a batch array, a missing/invalid jsonrpc, id or method; a request
// before initialize), -32601 unknown method, -32602 bad params (missing
// protocolVersion, tool name not a string or unknown, arguments not an
// object). Responses from the client (to requests this server never sends)
// and unknown notifications are ignored.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/gateway/tools/tool_registry.h"
#include "airlock/port/cancel_token.h"

namespace airlock::gateway::mcp {

// Newest first; initialize answers with the client's version when it is one
// of these, otherwise with the first.
inline const std::vector<std::string>& supportedProtocolVersions() {
  static const std::vector<std::string> versions{"2025-11-25", "2025-06-18", "2025-03-26",
                                                 "2024-11-05"};
  return versions;
}

inline constexpr int kParseError = -32700;
inline constexpr int kInvalidRequest = -32600;
inline constexpr int kMethodNotFound = -32601;
inline constexpr int kInvalidParams = -32602;
inline constexpr int kInternalError = -32603;

struct ServerInfo {
  std::string name = "airlock";
  std::string version;
  std::string instructions;  // sent in the initialize result when not empty
};

// Called before each tools/call with the context about to be used; may
// replace the sandbox (a new environment handle) and return a notice that
// is prepended to the call's text content.
using BeforeCall = std::function<std::optional<std::string>(ToolContext&)>;

// Writes one message line (no newline) to the client; the transport's,
// callable from the thread running a call while others write responses.
using Notify = std::function<void(std::string line)>;

// How often a call with a progressToken reports that it is still running.
inline constexpr std::chrono::milliseconds kProgressInterval{2000};

// A tools/call that passed the protocol checks, to be run by runCall.
struct PendingCall {
  nlohmann::json id;
  std::string name;  // a registered tool
  nlohmann::json arguments;
  std::optional<nlohmann::json> progress_token;  // params._meta.progressToken
};

// What became of one line: a response to write now (none for a
// notification), or a call to run (accept never runs a tool).
struct Accepted {
  std::optional<std::string> response;
  std::optional<PendingCall> call;
};

class Session {
 public:
  // registry and context are borrowed for the session's life.
  Session(const ToolRegistry& registry, ToolContext& context, ServerInfo info,
          BeforeCall before_call = {});

  // One incoming message (one line, without its newline). Returns the
  // response to write (one line of JSON, no newline), or nullopt when none
  // is due (a notification, a client response). Never throws.
  // accept, then runCall without progress notifications.
  std::optional<std::string> handleLine(std::string_view line) noexcept;

  // One incoming line: answered at once, except a valid tools/call, which
  // is returned to run with runCall (until then it is waiting, and
  // cancelRequest for its id means it never runs). Never throws.
  Accepted accept(std::string_view line) noexcept;
  // Runs an accepted call, one at a time. Returns its response, or nullopt
  // when the client cancelled it (waiting or running). notify (may be
  // empty) carries its progress notifications, all written before this
  // returns. Never throws.
  std::optional<std::string> runCall(PendingCall call, const Notify& notify) noexcept;
  // An accepted call the transport will not run (it is dropping it).
  void forgetCall(const nlohmann::json& request_id) noexcept;

  // How often a call with a progressToken reports that it is still running
  // (default kProgressInterval); set before any call runs.
  void setProgressInterval(std::chrono::milliseconds interval) noexcept {
    progress_interval_ = interval;
  }

  // A response for a line that was too long to read (id unknown: null).
  static std::string oversizedLineError(std::size_t max_bytes);
  // The response to a tools/call refused because `waiting` calls already
  // wait their turn.
  static std::string busyError(const nlohmann::json& id, std::size_t waiting);

  // Cancellation (MCP `notifications/cancelled`; a signal). Thread-safe:
  // called while runCall runs a call on another thread. Each tools/call
  // runs with its own CancelToken in place of context.cancel, so cancelling
  // ends the running command with killed_by CANCELLED. cancelRequest does
  // nothing unless request_id is the call running or an accepted one
  // waiting; a call cancelled by the client gets no response (MCP: the
  // receiver does not answer a cancelled request). cancelInFlight (the
  // session is ending) still answers it, and cancels every later call as
  // soon as it starts.
  void cancelRequest(const nlohmann::json& request_id) noexcept;
  void cancelInFlight() noexcept;

  bool initialized() const noexcept { return negotiated_version_.has_value(); }
  const std::optional<std::string>& protocolVersion() const noexcept { return negotiated_version_; }

 private:
  nlohmann::json initialize(const nlohmann::json& id, const nlohmann::json* params);
  nlohmann::json listTools(const nlohmann::json& id);
  nlohmann::json dispatch(const nlohmann::json& id, const std::string& method,
                          const nlohmann::json* params, std::optional<PendingCall>& call);
  nlohmann::json prepareCall(const nlohmann::json& id, const nlohmann::json* params,
                             std::optional<PendingCall>& call);
  // Registers the call as running; false when the client cancelled it.
  bool startCall(const nlohmann::json& id, const CancelToken* token);
  void endCall(bool& cancelled_by_client);
  nlohmann::json resultOf(ToolResult outcome, const std::optional<std::string>& notice) const;

  const ToolRegistry& registry_;
  ToolContext& context_;
  ServerInfo info_;
  BeforeCall before_call_;
  std::optional<std::string> negotiated_version_;
  std::chrono::milliseconds progress_interval_ = kProgressInterval;

  std::mutex in_flight_mu_;
  std::optional<nlohmann::json> in_flight_id_;    // guarded by in_flight_mu_
  const CancelToken* in_flight_token_ = nullptr;  // guarded by in_flight_mu_
  bool cancelled_by_client_ = false;              // guarded by in_flight_mu_
  bool stopping_ = false;                         // guarded by in_flight_mu_
  std::vector<nlohmann::json> waiting_ids_;       // accepted, not started; guarded
  std::vector<nlohmann::json> cancelled_ids_;     // of those, cancelled; guarded
  const CancelToken* saved_cancel_ = nullptr;     // context.cancel outside a call
};

}  // namespace airlock::gateway::mcp
