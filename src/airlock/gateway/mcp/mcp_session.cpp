#include "airlock/gateway/mcp/mcp_session.h"

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <thread>

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

// Removes the first element equal to id; whether there was one.
bool takeId(std::vector<json>& ids, const json& id) {
  const auto it = std::find(ids.begin(), ids.end(), id);
  if (it == ids.end()) return false;
  ids.erase(it);
  return true;
}

// params._meta.progressToken when it is a string or an integer (MCP:
// "Progress"); anything else asks for no progress.
std::optional<json> progressTokenOf(const json& params) {
  const auto meta = params.find("_meta");
  if (meta == params.end() || !meta->is_object()) return std::nullopt;
  const auto token = meta->find("progressToken");
  if (token == meta->end()) return std::nullopt;
  if (!token->is_string() && !token->is_number_integer() && !token->is_number_unsigned()) {
    return std::nullopt;
  }
  return *token;
}

// While a call with a progress token runs: notifications/progress with
// that token, one at once, one every interval, and one soon after the
// command writes output (at most one per kMinProgressGap), on a thread of
// its own. Destroying it stops the notifications: none is written after.
class ProgressTicker {
 public:
  ProgressTicker(const std::optional<json>& token, const Notify& notify,
                 std::chrono::milliseconds interval) {
    if (!token || !notify) return;
    thread_ =
        std::thread([this, token = *token, &notify, interval] { run(token, notify, interval); });
  }
  ProgressTicker(const ProgressTicker&) = delete;
  ProgressTicker& operator=(const ProgressTicker&) = delete;
  ~ProgressTicker() {
    {
      std::lock_guard lock(mu_);
      done_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();  // its last write is done
  }

  bool active() const noexcept { return thread_.joinable(); }
  // The command wrote output. Does not block (only a short lock).
  void outputSeen() {
    {
      std::lock_guard lock(mu_);
      output_ = true;
    }
    wake_.notify_all();
  }

 private:
  static constexpr std::chrono::milliseconds kMinProgressGap{250};

  void run(const json& token, const Notify& notify, std::chrono::milliseconds interval) {
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    for (std::int64_t tick = 0;; ++tick) {
      const auto sent = Clock::now();
      const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(sent - start).count();
      notify(dumpLine(json{{"jsonrpc", "2.0"},
                           {"method", "notifications/progress"},
                           {"params",
                            {{"progressToken", token},
                             {"progress", tick},
                             {"message", "running for " + std::to_string(seconds) + " s"}}}}));
      std::unique_lock lock(mu_);
      for (;;) {
        if (done_) return;
        auto next = sent + interval;
        if (output_) next = std::min(next, sent + kMinProgressGap);
        if (Clock::now() >= next) break;
        wake_.wait_until(lock, next);
      }
      output_ = false;
    }
  }

  std::mutex mu_;
  std::condition_variable wake_;
  bool done_ = false;    // guarded by mu_
  bool output_ = false;  // guarded by mu_
  std::thread thread_;
};

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

std::string Session::busyError(const json& id, std::size_t waiting) {
  return dumpLine(errorResponse(id, kInternalError,
                                "Server busy: " + std::to_string(waiting) +
                                    " tool calls are already waiting to run; send this one "
                                    "again when one has finished"));
}

std::optional<std::string> Session::handleLine(std::string_view line) noexcept {
  Accepted accepted = accept(line);
  if (accepted.call) return runCall(std::move(*accepted.call), Notify{});
  return accepted.response;
}

Accepted Session::accept(std::string_view line) noexcept {
  const auto now = [](const json& response) { return Accepted{dumpLine(response), std::nullopt}; };
  try {
    auto parsed = parseUntrustedJson(line);
    if (!parsed) {
      return now(errorResponse(nullptr, kParseError, "Parse error: " + parsed.error().context));
    }
    json message = std::move(*parsed);
    if (message.is_array()) {
      return now(
          errorResponse(nullptr, kInvalidRequest, "Invalid Request: batches are not supported"));
    }
    if (!message.is_object()) {
      return now(
          errorResponse(nullptr, kInvalidRequest, "Invalid Request: a message is a JSON object"));
    }
    const auto id_it = message.find("id");
    const bool has_id = id_it != message.end();
    const json id = has_id && validId(*id_it) ? *id_it : json(nullptr);
    const auto method_it = message.find("method");

    // A response from the client: this server sends no requests, so there
    // is nothing to match it to.
    if (method_it == message.end() && (message.contains("result") || message.contains("error"))) {
      return {};
    }
    const auto version_it = message.find("jsonrpc");
    if (version_it == message.end() || *version_it != "2.0") {
      return now(
          errorResponse(id, kInvalidRequest, "Invalid Request: \"jsonrpc\" must be \"2.0\""));
    }
    if (method_it == message.end() || !method_it->is_string()) {
      return now(
          errorResponse(id, kInvalidRequest, "Invalid Request: \"method\" must be a string"));
    }
    const std::string method = method_it->get<std::string>();
    const auto params_it = message.find("params");
    const json* params = params_it == message.end() ? nullptr : &*params_it;
    if (params != nullptr && !params->is_object() && !params->is_array()) {
      if (!has_id) return {};
      return now(errorResponse(id, kInvalidParams, "Invalid params: must be an object"));
    }

    if (!has_id) {  // a notification: never answered
      if (method == "notifications/cancelled" && params != nullptr && params->is_object()) {
        const auto request_id = params->find("requestId");
        if (request_id != params->end() && validId(*request_id)) cancelRequest(*request_id);
      }
      return {};
    }
    if (!validId(*id_it)) {
      return now(errorResponse(nullptr, kInvalidRequest,
                               "Invalid Request: \"id\" must be a string or a number"));
    }
    std::optional<PendingCall> call;
    json response = dispatch(id, method, params, call);
    if (call) return Accepted{std::nullopt, std::move(call)};
    return now(response);
  } catch (const std::exception& e) {
    return now(errorResponse(nullptr, kInternalError, std::string("Internal error: ") + e.what()));
  } catch (...) {
    return now(errorResponse(nullptr, kInternalError, "Internal error"));
  }
}

json Session::dispatch(const json& id, const std::string& method, const json* params,
                       std::optional<PendingCall>& call) {
  if (method == "ping") return resultResponse(id, json::object());
  if (method == "initialize") return initialize(id, params);
  if (!initialized()) {
    return errorResponse(id, kInvalidRequest,
                         "Invalid Request: the session is not initialized; send initialize first");
  }
  if (method == "tools/list") return listTools(id);
  if (method == "tools/call") return prepareCall(id, params, call);
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

json Session::prepareCall(const json& id, const json* params, std::optional<PendingCall>& call) {
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
  call = PendingCall{id, name, std::move(arguments), progressTokenOf(*params)};
  std::lock_guard lock(in_flight_mu_);
  waiting_ids_.push_back(id);
  return nullptr;
}

std::optional<std::string> Session::runCall(PendingCall call, const Notify& notify) noexcept {
  try {
    // A token of this call's own, so that cancelling it ends this call only.
    auto token = CancelToken::create();
    if (!startCall(call.id, token ? &*token : nullptr)) return std::nullopt;
    std::optional<std::string> notice;
    if (before_call_) notice = before_call_(context_);
    ToolResult outcome = [&] {
      ProgressTicker ticker(call.progress_token, notify, progress_interval_);
      if (ticker.active()) context_.on_output = [&ticker] { ticker.outputSeen(); };
      ToolResult result = registry_.call(call.name, call.arguments, context_);
      context_.on_output = nullptr;
      return result;
    }();
    bool cancelled_by_client = false;
    endCall(cancelled_by_client);
    if (cancelled_by_client) return std::nullopt;
    return dumpLine(resultResponse(call.id, resultOf(std::move(outcome), notice)));
  } catch (const std::exception& e) {
    return dumpLine(
        errorResponse(call.id, kInternalError, std::string("Internal error: ") + e.what()));
  } catch (...) {
    return dumpLine(errorResponse(call.id, kInternalError, "Internal error"));
  }
}

bool Session::startCall(const json& id, const CancelToken* token) {
  std::lock_guard lock(in_flight_mu_);
  takeId(waiting_ids_, id);
  if (takeId(cancelled_ids_, id)) return false;
  saved_cancel_ = context_.cancel;
  if (token != nullptr) {
    in_flight_id_ = id;
    in_flight_token_ = token;
    cancelled_by_client_ = false;
    context_.cancel = token;
    if (stopping_) token->cancel();  // the session ended before this call began
  }
  return true;
}

void Session::endCall(bool& cancelled_by_client) {
  std::lock_guard lock(in_flight_mu_);
  in_flight_id_.reset();
  in_flight_token_ = nullptr;
  cancelled_by_client = cancelled_by_client_;
  cancelled_by_client_ = false;
  context_.cancel = saved_cancel_;
}

json Session::resultOf(ToolResult outcome, const std::optional<std::string>& notice) const {
  json content = json::array();
  if (notice) content.push_back(json{{"type", "text"}, {"text", *notice}});
  if (!outcome) {
    content.push_back(json{{"type", "text"}, {"text", failureText(outcome.error())}});
    return json{{"content", std::move(content)}, {"isError", true}};
  }
  content.push_back(json{{"type", "text"},
                         {"text", outcome->dump(-1, ' ', false, json::error_handler_t::replace)}});
  json result{{"content", std::move(content)}, {"isError", false}};
  if (hasStructuredContent(negotiated_version_)) result["structuredContent"] = std::move(*outcome);
  return result;
}

void Session::forgetCall(const json& request_id) noexcept {
  std::lock_guard lock(in_flight_mu_);
  takeId(waiting_ids_, request_id);
  takeId(cancelled_ids_, request_id);
}

void Session::cancelRequest(const json& request_id) noexcept {
  std::lock_guard lock(in_flight_mu_);
  if (in_flight_token_ != nullptr && in_flight_id_ && *in_flight_id_ == request_id) {
    cancelled_by_client_ = true;
    in_flight_token_->cancel();
    return;
  }
  const bool waiting =
      std::find(waiting_ids_.begin(), waiting_ids_.end(), request_id) != waiting_ids_.end();
  const bool already =
      std::find(cancelled_ids_.begin(), cancelled_ids_.end(), request_id) != cancelled_ids_.end();
  if (waiting && !already) cancelled_ids_.push_back(request_id);
}

void Session::cancelInFlight() noexcept {
  std::lock_guard lock(in_flight_mu_);
  stopping_ = true;
  if (in_flight_token_ != nullptr) in_flight_token_->cancel();
}

}  // namespace airlock::gateway::mcp
