#include "airlock/gateway/mcp/mcp_session.h"

#include <algorithm>
#include <exception>

#include "airlock/core/json.h"

namespace airlock::gateway::mcp {

using nlohmann::json;

namespace {

std::string dumpLine(const json& message) {
  // One line: dump escapes control characters inside strings, and bytes
  // that are not UTF-8 (a caller bug) are replaced rather than thrown on.
  return message.dump(-1, ' ', false, json::error_handler_t::replace);
}

json errorResponse(const json& id, int code, std::string message) {
  return json{
      {"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", std::move(message)}}}};
}

json resultResponse(const json& id, json result) {
  return json{{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
}

bool validId(const json& id) {
  return id.is_string() || id.is_number_integer() || id.is_number_unsigned() ||
         id.is_number_float();
}

// structuredContent and outputSchema exist from protocol 2025-06-18 on.
bool hasStructuredContent(const std::optional<std::string>& version) {
  return version && *version >= "2025-06-18";
}

std::string failureText(const ToolFailure& failure) {
  return std::string(errorCodeName(failure.code)) + ": " + failure.message;
}

}  // namespace

Session::Session(const ToolRegistry& registry, ToolContext& context, ServerInfo info,
                 BeforeCall before_call)
    : registry_(registry),
      context_(context),
      info_(std::move(info)),
      before_call_(std::move(before_call)) {}

std::string Session::oversizedLineError(std::size_t max_bytes) {
  return dumpLine(errorResponse(
      nullptr, kInvalidRequest,
      "Invalid Request: message longer than " + std::to_string(max_bytes) + " bytes"));
}

std::optional<std::string> Session::handleLine(std::string_view line) noexcept {
  try {
    auto parsed = parseUntrustedJson(line);
    if (!parsed) {
      return dumpLine(
          errorResponse(nullptr, kParseError, "Parse error: " + parsed.error().context));
    }
    json message = std::move(*parsed);
    if (message.is_array()) {
      return dumpLine(
          errorResponse(nullptr, kInvalidRequest, "Invalid Request: batches are not supported"));
    }
    if (!message.is_object()) {
      return dumpLine(
          errorResponse(nullptr, kInvalidRequest, "Invalid Request: a message is a JSON object"));
    }
    const auto id_it = message.find("id");
    const bool has_id = id_it != message.end();
    const json id = has_id && validId(*id_it) ? *id_it : json(nullptr);
    const auto method_it = message.find("method");

    // A response from the client: this server sends no requests, so there
    // is nothing to match it to.
    if (method_it == message.end() && (message.contains("result") || message.contains("error"))) {
      return std::nullopt;
    }
    const auto version_it = message.find("jsonrpc");
    if (version_it == message.end() || *version_it != "2.0") {
      return dumpLine(
          errorResponse(id, kInvalidRequest, "Invalid Request: \"jsonrpc\" must be \"2.0\""));
    }
    if (method_it == message.end() || !method_it->is_string()) {
      return dumpLine(
          errorResponse(id, kInvalidRequest, "Invalid Request: \"method\" must be a string"));
    }
    const std::string method = method_it->get<std::string>();
    const auto params_it = message.find("params");
    const json* params = params_it == message.end() ? nullptr : &*params_it;
    if (params != nullptr && !params->is_object() && !params->is_array()) {
      if (!has_id) return std::nullopt;
      return dumpLine(errorResponse(id, kInvalidParams, "Invalid params: must be an object"));
    }

    if (!has_id) return std::nullopt;  // a notification: never answered
    if (!validId(*id_it)) {
      return dumpLine(errorResponse(nullptr, kInvalidRequest,
                                    "Invalid Request: \"id\" must be a string or a number"));
    }
    json response = dispatch(id, method, params);
    if (response.is_null()) return std::nullopt;  // a call the client cancelled
    return dumpLine(response);
  } catch (const std::exception& e) {
    return dumpLine(
        errorResponse(nullptr, kInternalError, std::string("Internal error: ") + e.what()));
  } catch (...) {
    return dumpLine(errorResponse(nullptr, kInternalError, "Internal error"));
  }
}

json Session::dispatch(const json& id, const std::string& method, const json* params) {
  if (method == "ping") return resultResponse(id, json::object());
  if (method == "initialize") return initialize(id, params);
  if (!initialized()) {
    return errorResponse(id, kInvalidRequest,
                         "Invalid Request: the session is not initialized; send initialize first");
  }
  if (method == "tools/list") return listTools(id);
  if (method == "tools/call") return callTool(id, params);
  return errorResponse(id, kMethodNotFound, "Method not found: " + method.substr(0, 200));
}

json Session::initialize(const json& id, const json* params) {
  if (initialized()) {
    return errorResponse(id, kInvalidRequest,
                         "Invalid Request: the session is already initialized");
  }
  if (params == nullptr || !params->is_object()) {
    return errorResponse(id, kInvalidParams, "Invalid params: initialize takes an object");
  }
  const auto requested = params->find("protocolVersion");
  if (requested == params->end() || !requested->is_string()) {
    return errorResponse(id, kInvalidParams,
                         "Invalid params: \"protocolVersion\" must be a string");
  }
  const auto& versions = supportedProtocolVersions();
  const std::string asked = requested->get<std::string>();
  negotiated_version_ = std::find(versions.begin(), versions.end(), asked) != versions.end()
                            ? asked
                            : versions.front();

  json result{{"protocolVersion", *negotiated_version_},
              {"capabilities", {{"tools", {{"listChanged", false}}}}},
              {"serverInfo", {{"name", info_.name}, {"version", info_.version}}}};
  if (!info_.instructions.empty()) result["instructions"] = info_.instructions;
  return resultResponse(id, std::move(result));
}

json Session::listTools(const json& id) {
  json tools = json::array();
  for (const Tool& tool : registry_.tools()) {
    json entry{{"name", tool.name},
               {"title", tool.title},
               {"description", tool.description},
               {"inputSchema", tool.input_schema},
               {"annotations",
                {{"title", tool.title},
                 {"readOnlyHint", tool.read_only},
                 {"destructiveHint", !tool.read_only && !tool.idempotent},
                 {"idempotentHint", tool.idempotent},
                 {"openWorldHint", false}}}};
    if (hasStructuredContent(negotiated_version_)) entry["outputSchema"] = tool.output_schema;
    tools.push_back(std::move(entry));
  }
  return resultResponse(id, json{{"tools", std::move(tools)}});
}

json Session::callTool(const json& id, const json* params) {
  if (params == nullptr || !params->is_object()) {
    return errorResponse(id, kInvalidParams, "Invalid params: tools/call takes {name, arguments}");
  }
  const auto name_it = params->find("name");
  if (name_it == params->end() || !name_it->is_string()) {
    return errorResponse(id, kInvalidParams, "Invalid params: \"name\" must be a string");
  }
  const std::string name = name_it->get<std::string>();
  if (registry_.find(name) == nullptr) {
    return errorResponse(
        id, kInvalidParams,
        "Invalid params: unknown tool " +
            json(name).dump(-1, ' ', false, json::error_handler_t::replace).substr(0, 200));
  }
  json arguments = json::object();
  if (const auto args_it = params->find("arguments");
      args_it != params->end() && !args_it->is_null()) {
    if (!args_it->is_object()) {
      return errorResponse(id, kInvalidParams, "Invalid params: \"arguments\" must be an object");
    }
    arguments = *args_it;
  }

  std::optional<std::string> notice;
  if (before_call_) notice = before_call_(context_);

  // A token of this call's own, so that cancelling it ends this call only.
  auto token = CancelToken::create();
  const CancelToken* saved = context_.cancel;
  if (token) {
    std::lock_guard lock(in_flight_mu_);
    in_flight_id_ = id;
    in_flight_token_ = &*token;
    cancelled_by_client_ = false;
    context_.cancel = &*token;
    if (stopping_) token->cancel();  // the session ended before this call began
  }
  ToolResult outcome = registry_.call(name, arguments, context_);
  bool cancelled_by_client = false;
  {
    std::lock_guard lock(in_flight_mu_);
    in_flight_id_.reset();
    in_flight_token_ = nullptr;
    cancelled_by_client = cancelled_by_client_;
    cancelled_by_client_ = false;
    context_.cancel = saved;
  }
  if (cancelled_by_client) return nullptr;

  json content = json::array();
  if (notice) content.push_back(json{{"type", "text"}, {"text", *notice}});
  json result;
  if (outcome) {
    content.push_back(json{
        {"type", "text"}, {"text", outcome->dump(-1, ' ', false, json::error_handler_t::replace)}});
    result = json{{"content", std::move(content)}, {"isError", false}};
    if (hasStructuredContent(negotiated_version_))
      result["structuredContent"] = std::move(*outcome);
  } else {
    content.push_back(json{{"type", "text"}, {"text", failureText(outcome.error())}});
    result = json{{"content", std::move(content)}, {"isError", true}};
  }
  return resultResponse(id, std::move(result));
}

void Session::cancelRequest(const json& request_id) noexcept {
  std::lock_guard lock(in_flight_mu_);
  if (in_flight_token_ == nullptr || !in_flight_id_ || *in_flight_id_ != request_id) return;
  cancelled_by_client_ = true;
  in_flight_token_->cancel();
}

void Session::cancelInFlight() noexcept {
  std::lock_guard lock(in_flight_mu_);
  stopping_ = true;
  if (in_flight_token_ != nullptr) in_flight_token_->cancel();
}

std::optional<json> Session::cancelledRequestOf(std::string_view line) noexcept {
  // Cheap test first: every line passes through here.
  if (line.find("notifications/cancelled") == std::string_view::npos) return std::nullopt;
  try {
    const auto parsed = parseUntrustedJson(line);
    if (!parsed) return std::nullopt;
    const json& message = *parsed;
    if (!message.is_object() || message.contains("id")) return std::nullopt;
    if (message.value("method", json()) != "notifications/cancelled") return std::nullopt;
    const auto params = message.find("params");
    if (params == message.end() || !params->is_object()) return std::nullopt;
    const auto id = params->find("requestId");
    if (id == params->end() || !validId(*id)) return std::nullopt;
    return *id;
  } catch (...) {
    return std::nullopt;
  }
}

}  // namespace airlock::gateway::mcp
