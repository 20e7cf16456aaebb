// The job routes of the API (api.h; docs/serve.md "Jobs"): an environment's
// background jobs through the execution node's JobPort (port/job_port.h),
// the same registry code mode's job.* and the job_* tools use (a job is
// shown as the tools show it: tools/job_tools.h), so either door polls, feeds and
// kills what the other started. Each job's whole output is spilled, once it
// is terminal, as untrusted artifacts of the environment's tenant and run.
#include <nlohmann/json.hpp>

#include "airlock/capability/broker/code_run.h"
#include "airlock/core/command_validation.h"
#include "airlock/core/encoding.h"
#include "airlock/core/environment_tiers.h"
#include "airlock/core/json.h"
#include "airlock/gateway/api/api.h"
#include "airlock/gateway/api/body.h"
#include "airlock/gateway/tools/job_tools.h"

namespace airlock::gateway {
namespace {

using json = nlohmann::json;

// The longest a job's input write may wait for room in its stdin.
constexpr std::uint64_t kSendTimeoutMs = 30'000;

// {argv, working_directory?, env?, wall_ms?, pty?} into a start request.
Result<JobStartRequest> startFrom(const json& body) {
  JobStartRequest r;
  auto argv = argvFrom(body);
  if (!argv) return tl::unexpected(argv.error());
  r.command.argv = std::move(*argv);
  if (auto wd = body.find("working_directory"); wd != body.end() && !wd->is_null()) {
    if (!wd->is_string()) return tl::unexpected(badRequest("working_directory must be a string"));
    r.command.working_directory = wd->get<std::string>();
  }
  auto env = envAdditionsFrom(body);
  if (!env) return tl::unexpected(env.error());
  r.command.env_additions = std::move(*env);
  if (auto w = body.find("wall_ms"); w != body.end() && !w->is_null()) {
    auto wall = countField(body, {"wall_ms", "milliseconds"}, std::nullopt);
    if (!wall) return tl::unexpected(wall.error());
    r.wall_ms = *wall;
  }
  if (auto pty = body.find("pty"); pty != body.end() && !pty->is_null()) {
    if (auto unknown = service::unknownKeyMessage(*pty, {"rows", "columns"}))
      return tl::unexpected(badRequest("pty: " + *unknown));
    auto size = terminalSizeFromJson(*pty, "pty");
    if (!size) return tl::unexpected(size.error());
    r.command.terminal = *size;
  }
  return r;
}

}  // namespace

tl::expected<EnvironmentHandle, HttpResponse> Api::jobEnvironment(const RouteCall& call) {
  const std::string& id = call.param("environment_id");
  auto live = node_.find(id);
  if (!live)
    return tl::unexpected(
        errorResponse(404, "not_found", "no live environment " + quoteForMessage(id)));
  return live->handle;
}

HttpResponse Api::startJob(const RouteCall& call) {
  const std::string& id = call.param("environment_id");
  auto live = node_.find(id);
  if (!live) return errorResponse(404, "not_found", "no live environment " + quoteForMessage(id));
  auto body = parseBody(call.request.body);
  if (!body) return errorResponse(body.error());
  if (auto refused =
          refuseUnknownKeys(*body, {"argv", "working_directory", "env", "wall_ms", "pty"}))
    return *refused;
  auto request = startFrom(*body);
  if (!request) return errorResponse(request.error());
  // The spill goes where a program's jobs' goes: the environment's
  // tenant and run, in the service's artifact store.
  auto options = capability::codeRunOptionsFor(codeModeHost(), live->handle, live->egress);
  if (!options) return errorResponse(options.error());
  request->spill = options->job_spill;
  auto started = node_.startJob(live->handle, *request);
  if (!started) return errorResponse(started.error());
  return jsonResponse(201, jobStartedJson(*started));
}

HttpResponse Api::listJobs(const RouteCall& call) {
  auto handle = jobEnvironment(call);
  if (!handle) return std::move(handle.error());
  auto listed = node_.listJobs(*handle);
  if (!listed) return errorResponse(listed.error());
  json out = json::array();
  for (const auto& j : *listed) out.push_back(jobJson(j, false));
  return jsonResponse(200, json{{"jobs", std::move(out)}});
}

HttpResponse Api::pollJob(const RouteCall& call) {
  auto handle = jobEnvironment(call);
  if (!handle) return std::move(handle.error());
  JobPollRequest poll;
  poll.job_id = call.param("job_id");
  auto out = queryCount(call.queryValue("stdout_cursor"), {"stdout_cursor", ""}, 0);
  if (!out) return errorResponse(out.error());
  auto err = queryCount(call.queryValue("stderr_cursor"), {"stderr_cursor", ""}, 0);
  if (!err) return errorResponse(err.error());
  auto wait = queryCount(call.queryValue("wait_ms"), {"wait_ms", "milliseconds", kMaxJobWaitMs}, 0);
  if (!wait) return errorResponse(wait.error());
  poll.stdout_cursor = *out;
  poll.stderr_cursor = *err;
  poll.wait_ms = *wait;
  auto state = node_.pollJob(*handle, poll);
  if (!state) return errorResponse(state.error());
  return jsonResponse(200, jobJson(*state, true));
}

HttpResponse Api::sendJobInput(const RouteCall& call) {
  auto handle = jobEnvironment(call);
  if (!handle) return std::move(handle.error());
  auto body = parseBody(call.request.body);
  if (!body) return errorResponse(body.error());
  if (auto refused = refuseUnknownKeys(*body, {"data", "last"})) return *refused;
  std::string data;
  if (auto d = body->find("data"); d != body->end() && !d->is_null()) {
    auto bytes = bytesFromJson(*d);
    if (!bytes) return errorResponse(badRequest("data: " + bytes.error().context));
    data = std::move(*bytes);
  }
  bool last = false;
  if (auto l = body->find("last"); l != body->end() && !l->is_null()) {
    if (!l->is_boolean()) return errorResponse(badRequest("last must be true or false"));
    last = l->get<bool>();
  }
  auto sent =
      node_.sendJobInput(*handle, call.param("job_id"), data, last, kSendTimeoutMs, nullptr);
  if (!sent) return errorResponse(sent.error());
  return noContent();
}

HttpResponse Api::killJob(const RouteCall& call) {
  auto handle = jobEnvironment(call);
  if (!handle) return std::move(handle.error());
  auto killed = node_.killJob(*handle, call.param("job_id"));
  if (!killed) return errorResponse(killed.error());
  return noContent();
}

HttpResponse Api::resizeJob(const RouteCall& call) {
  auto handle = jobEnvironment(call);
  if (!handle) return std::move(handle.error());
  auto body = parseBody(call.request.body);
  if (!body) return errorResponse(body.error());
  if (auto refused = refuseUnknownKeys(*body, {"rows", "columns"})) return *refused;
  auto size = terminalSizeFromJson(*body, "");
  if (!size) return errorResponse(size.error());
  auto resized = node_.resizeJob(*handle, call.param("job_id"), *size);
  if (!resized) return errorResponse(resized.error());
  return noContent();
}

}  // namespace airlock::gateway
