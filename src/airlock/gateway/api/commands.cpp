// The command routes of the API (api.h): execute, streamed or not, and
// cancel by execution id.
#include <nlohmann/json.hpp>

#include "airlock/core/command_validation.h"
#include "airlock/core/encoding.h"
#include "airlock/core/environment_tiers.h"
#include "airlock/core/ids.h"
#include "airlock/core/json.h"
#include "airlock/gateway/api/api.h"
#include "airlock/gateway/api/body.h"

namespace airlock::gateway {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// The command of an execute body: argv, its limits, stdin, env, execution_id.
Result<ExecutionCommand> commandFrom(const json& body) {
  ExecutionCommand c;
  auto argv = argvFrom(body);
  if (!argv) return tl::unexpected(argv.error());
  c.argv = std::move(*argv);
  if (auto limits = limitsInto(body, c); !limits) return tl::unexpected(limits.error());
  if (auto in = body.find("stdin"); in != body.end() && !in->is_null()) {
    auto bytes = bytesFromJson(*in);
    if (!bytes) return tl::unexpected(badRequest("stdin: " + bytes.error().context));
    c.stdin_data = std::move(*bytes);
  }
  auto env = envAdditionsFrom(body);
  if (!env) return tl::unexpected(env.error());
  c.env_additions = std::move(*env);
  if (auto eid = body.find("execution_id"); eid != body.end() && !eid->is_null()) {
    if (!eid->is_string()) return tl::unexpected(badRequest("execution_id must be a string"));
    c.execution_id = eid->get<std::string>();
    if (c.execution_id.empty())
      return tl::unexpected(
          badRequest("execution_id must not be empty: leave it out for an execution that is not "
                     "cancelled by name"));
    if (auto valid = checkExecutionId(c.execution_id); !valid)
      return tl::unexpected(badRequest(valid.error().context));
  }
  return c;
}

}  // namespace

tl::expected<Api::PreparedExecute, HttpResponse> Api::prepareExecute(const std::string& id,
                                                                     const HttpRequest& request) {
  auto live = node_.find(id);
  if (!live)
    return tl::unexpected(
        errorResponse(404, "not_found", "no live environment " + quoteForMessage(id)));
  auto body = parseBody(request.body);
  if (!body) return tl::unexpected(errorResponse(body.error()));
  if (auto refused =
          refuseUnknownKeys(*body, {"argv", "working_directory", "timeout_seconds",
                                    "maximum_output_bytes", "stdin", "env", "execution_id"}))
    return tl::unexpected(std::move(*refused));
  auto command = commandFrom(*body);
  if (!command) return tl::unexpected(errorResponse(command.error()));
  return PreparedExecute{live->handle, std::move(*command)};
}

HttpResponse Api::finishExecute(const std::string& id, Clock::duration busy,
                                const Result<ExecutionResult>& result, json* result_json) {
  if (!result) {
    // A foreign handle: the adapter destroyed the sandbox; forget it too.
    // An expired or destroyed one is gone from the adapter: forget it too.
    // Any other refusal (EnvironmentBusy: a command is running) leaves a
    // live sandbox, and its running command, alone.
    const ErrorCode code = result.error().code;
    if (code == ErrorCode::kSandboxEscapeSuspected || code == ErrorCode::kEnvironmentGone)
      (void)destroyLive(id);
    return errorResponse(result.error());
  }
  metrics_.executed(std::chrono::duration<double>(busy).count(),
                    result->killed_by ? json(*result->killed_by).get<std::string>() : "none");
  if (result->killed_by == KillReason::kExpired && destroyLive(id))
    metrics_.orphanReaped("expired");
  json object = *result;
  HttpResponse response = jsonResponse(200, object);
  if (result_json != nullptr) *result_json = std::move(object);
  return response;
}

HttpResponse Api::cancelExecution(const RouteCall& call) {
  const std::string& id = call.param("environment_id");
  const std::string& execution_id = call.param("execution_id");
  auto live = node_.find(id);
  if (!live) return errorResponse(404, "not_found", "no live environment " + quoteForMessage(id));
  if (auto cancelled = node_.cancel(live->handle, execution_id); !cancelled) {
    // Gone from the adapter (expired or reaped): forget it too, as execute does.
    if (cancelled.error().code == ErrorCode::kEnvironmentGone) (void)destroyLive(id);
    return errorResponse(cancelled.error());
  }
  return noContent();
}

HttpResponse Api::execute(const RouteCall& call) {
  const std::string& id = call.param("environment_id");
  auto prepared = prepareExecute(id, call.request);
  if (!prepared) return prepared.error();
  const auto started = Clock::now();
  Result<ExecutionResult> result;
  {
    auto claim = node_.claim(id, RunKind::kCommand);
    if (!claim) return errorResponse(claim.error());
    result = node_.execute(prepared->handle, prepared->command);
  }
  return finishExecute(id, Clock::now() - started, result);
}

HttpResponse Api::handleStreaming(const HttpRequest& request,
                                  const std::function<void(std::string)>& emit,
                                  const CancelToken* cancel) {
  try {
    auto call = admit(request);
    if (!call) return std::move(call.error());
    if (!call->route.has(kStreams)) return (this->*(call->route.handler))(*call);
    const std::string& id = call->param("environment_id");
    auto prepared = prepareExecute(id, request);
    if (!prepared) return prepared.error();
    auto claim = node_.claim(id, RunKind::kCommand);
    if (!claim) return errorResponse(claim.error());
    const auto started = Clock::now();
    auto result = node_.executeStreaming(
        prepared->handle, prepared->command, cancel,
        [&](ExecutionEnvironment::OutputStream stream, std::string_view bytes) {
          emit(json{{"stream",
                     stream == ExecutionEnvironment::OutputStream::kStdout ? "stdout" : "stderr"},
                    {"data", bytesToJson(bytes)}}
                   .dump());
        });
    json object;
    HttpResponse final = finishExecute(id, Clock::now() - started, result, &object);
    // The last line: the result, or the error that ended the execution.
    emit(result && final.status == 200 ? json{{"result", std::move(object)}}.dump() : final.body);
    return final;
  } catch (const std::exception&) {
    return errorResponse(500, "internal", "internal error");
  }
}

}  // namespace airlock::gateway
