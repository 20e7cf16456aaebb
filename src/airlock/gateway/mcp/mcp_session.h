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
//   notifications/cancelled    cancels the tools/call in progress when its
//                              requestId matches (cancelRequest; the
//                              transport delivers it while the call runs)
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
// Errors (JSON-RPC 2.0): -32700 unparseable line, -32600 not a request
// object (a batch array, a missing/invalid jsonrpc, id or method; a request
// before initialize), -32601 unknown method, -32602 bad params (missing
// protocolVersion, tool name not a string or unknown, arguments not an
// object). Responses from the client (to requests this server never sends)
// and unknown notifications are ignored.
#pragma once

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

class Session {
 public:
  // registry and context are borrowed for the session's life.
  Session(const ToolRegistry& registry, ToolContext& context, ServerInfo info,
          BeforeCall before_call = {});

  // One incoming message (one line, without its newline). Returns the
  // response to write (one line of JSON, no newline), or nullopt when none
  // is due (a notification, a client response). Never throws.
  std::optional<std::string> handleLine(std::string_view line) noexcept;

  // A response for a line that was too long to read (id unknown: null).
  static std::string oversizedLineError(std::size_t max_bytes);

  // Cancellation of the tools/call in progress (MCP `notifications/cancelled`;
  // a signal). Thread-safe: called from the transport's reader while
  // handleLine runs a call on another thread. Each tools/call runs with its
  // own CancelToken in place of context.cancel, so cancelling ends the
  // running command with killed_by CANCELLED. cancelRequest does nothing
  // unless request_id is the call in progress; a call cancelled by the
  // client gets no response (MCP: the receiver does not answer a cancelled
  // request). cancelInFlight (the session is ending) still answers it, and
  // cancels every later call as soon as it starts.
  void cancelRequest(const nlohmann::json& request_id) noexcept;
  void cancelInFlight() noexcept;
  // Whether line is a `notifications/cancelled` message, and for which id.
  static std::optional<nlohmann::json> cancelledRequestOf(std::string_view line) noexcept;

  bool initialized() const noexcept { return negotiated_version_.has_value(); }
  const std::optional<std::string>& protocolVersion() const noexcept { return negotiated_version_; }

 private:
  nlohmann::json dispatch(const nlohmann::json& id, const std::string& method,
                          const nlohmann::json* params);
  nlohmann::json initialize(const nlohmann::json& id, const nlohmann::json* params);
  nlohmann::json listTools(const nlohmann::json& id);
  nlohmann::json callTool(const nlohmann::json& id, const nlohmann::json* params);

  const ToolRegistry& registry_;
  ToolContext& context_;
  ServerInfo info_;
  BeforeCall before_call_;
  std::optional<std::string> negotiated_version_;

  std::mutex in_flight_mu_;
  std::optional<nlohmann::json> in_flight_id_;    // guarded by in_flight_mu_
  const CancelToken* in_flight_token_ = nullptr;  // guarded by in_flight_mu_
  bool cancelled_by_client_ = false;              // guarded by in_flight_mu_
  bool stopping_ = false;                         // guarded by in_flight_mu_
};

}  // namespace airlock::gateway::mcp
