// The wire of the execution node's internal API. Every route is under
// /internal/v1 and needs "Authorization: Bearer <service credential>" but
// GET /internal/v1/health. Bodies and answers are JSON (port/wire_json.h
// and core/json.h); a handle travels whole ("handle": EnvironmentHandle),
// so the node checks its tenant, run and epoch as an in-process caller's.
//
//   GET  /health                  -> 200 {"status": "ok"}
//   GET  /node                    -> 200 NodeStatus
//   POST /environments            EnvironmentSpec -> 201 EnvironmentHandle
//   GET  /environments[?tenant_id=T] -> 200 {"environments": [LiveEnvironment]}
//   POST /environments/find       {environment_id} -> 200 {"environment": LiveEnvironment|null}
//   POST /destroy                 {handle} -> 204
//   POST /extend                  {handle, expires_at} -> 200 EnvironmentHandle
//   POST /execute[?stream=1]      {handle, command: ExecutionCommand,
//                                 cancelled (optional: the caller's token was
//                                 cancelled before the call)} -> 200
//                                 ExecutionResult; streamed: NDJSON lines
//                                 {"stream": "stdout"|"stderr", "data": bytes},
//                                 then {"result": ExecutionResult} or
//                                 {"error": Error}. A streamed call whose
//                                 client goes away cancels its command.
//   POST /cancel                  {handle, execution_id} -> 204
//   POST /claims                  {environment_id, kind: "command"|"program"}
//                                 -> 201 {"claim_id"}
//   POST /claims/release          {claim_id} -> 204 (an unknown id too)
//   POST /workspace/open          {handle} -> 204 (the workspace is there)
//   POST /workspace/read          {handle, path} -> 200 {"data": bytes}
//   POST /workspace/write         {handle, path, data} -> 204
//   POST /workspace/place         {handle, path, data} -> 204 (placeFile)
//   POST /workspace/mkdir         {handle, path} -> 204
//   POST /workspace/listdir       {handle, path} -> 200 {"entries": [WorkspaceEntry]}
//   POST /workspace/provenance    {handle, path} -> 200 {"provenance"}
//   POST /workspace/remove        {handle, path, recursive} -> 204
//   POST /workspace/rename        {handle, from, to, replace} -> 204
//   POST /workspace/stat          {handle, path} -> 200 WorkspaceStat
//   POST /workspace/export        {handle, path, max_bytes} -> 200
//                                 application/octet-stream, chunked: one
//                                 line {"size_bytes", "sha256" (lowercase
//                                 hex, measured by the node at open),
//                                 "filename" (bytes)} and "\n", then the
//                                 file's bytes as they are read; a file
//                                 that changes while it streams cuts the
//                                 response (no last chunk). The gateway
//                                 hashes what arrives and refuses a
//                                 mismatch (ArtifactIntegrityError).
//   POST /jobs/start              {handle, request: JobStartRequest} -> 201 JobStarted
//   POST /jobs/poll               {handle, poll: JobPollRequest} -> 200 JobSnapshot
//   POST /jobs/input              {handle, job_id, data, last, timeout_ms} -> 204
//   POST /jobs/resize             {handle, job_id, size: TerminalSize} -> 204
//   POST /jobs/kill               {handle, job_id} -> 204
//   POST /jobs/list               {handle} -> 200 {"jobs": [JobSnapshot]}
//
// Errors: {"error": {"code", "message"}} with the HTTP status of
// service::httpStatusFor; 401 without the credential, 404 for an unknown
// path, 405 (with Allow) for a known path and another method, 413 for a body
// over its route's bound (kControlBodyBytes; routes that carry file or
// command bytes take up to the server's own bound).
#include "airlock/node/internal_api.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "airlock/core/encoding.h"
#include "airlock/core/json.h"
#include "airlock/port/wire_json.h"
#include "airlock/service/bearer.h"
#include "airlock/sys/random.h"

namespace airlock::node {

using json = nlohmann::json;
using service::HttpRequest;
using service::HttpResponse;

namespace {

constexpr std::string_view kPrefix = "/internal/v1";
// The most a body of a route that carries no file or command bytes takes.
constexpr std::size_t kControlBodyBytes = std::size_t{1} << 20;

enum RouteFlag : unsigned {
  kNoAuthentication = 1U << 0U,
  kRunsCommand = 1U << 1U,
  kStreams = 1U << 2U,
  kCarriesBytes = 1U << 3U,
};

HttpResponse jsonAnswer(int status, const json& body) {
  HttpResponse r;
  r.status = status;
  r.body = body.dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

HttpResponse noContent() {
  HttpResponse r;
  r.status = 204;
  r.content_type.clear();
  return r;
}

HttpResponse badRequest(const std::string& message) {
  return service::errorResponse(400, "bad_request", message);
}

HttpResponse answerError(const Error& error) {
  return service::errorResponse(error);
}

// The path of a target, without its query.
std::string_view pathOf(std::string_view target) {
  return target.substr(0, target.find('?'));
}
std::string queryOf(std::string_view target) {
  const std::size_t q = target.find('?');
  return q == std::string_view::npos ? std::string() : std::string(target.substr(q + 1));
}

// The byte string in member `name` (a string, or {"base64": ...}).
Result<std::string> bytesMember(const json& body, const char* name) {
  const auto it = body.find(name);
  if (it == body.end())
    return fail(ErrorCode::kToolValidationError,
                std::string("invalid JSON: field \"") + name + "\" is missing");
  auto bytes = bytesFromJson(*it);
  if (!bytes)
    return fail(ErrorCode::kToolValidationError,
                std::string("invalid JSON: field \"") + name + "\" " + bytes.error().context);
  return bytes;
}

// An execute body's "cancelled" (optional, false when absent): a
// cancelled token when it is true, nullopt otherwise.
Result<std::optional<CancelToken>> cancelledBefore(const json& body) {
  const auto it = body.find("cancelled");
  if (it == body.end() || it->is_null() || *it == false) return std::optional<CancelToken>();
  if (!it->is_boolean())
    return fail(ErrorCode::kToolValidationError,
                "invalid JSON: field \"cancelled\" must be true or false");
  auto token = CancelToken::create();
  if (!token) return tl::unexpected(token.error());
  token->cancel();
  return std::optional<CancelToken>(std::move(*token));
}

// An export's answer: its metadata line, then the file's bytes.
class PreambleSource final : public sys::ByteSource {
 public:
  PreambleSource(std::string preamble, std::unique_ptr<sys::ByteSource> rest)
      : preamble_(std::move(preamble)), rest_(std::move(rest)) {}
  Result<std::size_t> read(char* buffer, std::size_t size) override {
    if (offset_ < preamble_.size()) {
      const std::size_t n = std::min(size, preamble_.size() - offset_);
      std::copy_n(preamble_.data() + offset_, n, buffer);
      offset_ += n;
      return n;
    }
    return rest_->read(buffer, size);
  }

 private:
  std::string preamble_;
  std::size_t offset_ = 0;
  std::unique_ptr<sys::ByteSource> rest_;
};

}  // namespace

// One route: its method, its path under kPrefix, its handler and traits.
struct InternalApi::Route {
  const char* method;
  const char* path;
  HttpResponse (InternalApi::*handler)(const HttpRequest&, const json&);
  unsigned flags;
  bool has(unsigned flag) const { return (flags & flag) != 0; }
};

struct InternalApi::Claims {
  std::mutex mu;
  std::map<std::string, std::pair<std::string, RunClaim>>
      by_id;  // claim id -> (environment, claim)
  std::atomic<std::size_t> provisioning{0};
};

std::span<const InternalApi::Route> InternalApi::routes() {
  static const Route kRoutes[] = {
      {"GET", "/health", &InternalApi::health, kNoAuthentication},
      {"GET", "/node", &InternalApi::nodeStatus, 0},
      {"POST", "/environments", &InternalApi::provision, 0},
      {"GET", "/environments", &InternalApi::listLive, 0},
      {"POST", "/environments/find", &InternalApi::findLive, 0},
      {"POST", "/destroy", &InternalApi::destroy, 0},
      {"POST", "/extend", &InternalApi::extend, 0},
      {"POST", "/execute", &InternalApi::execute, kRunsCommand | kStreams | kCarriesBytes},
      {"POST", "/cancel", &InternalApi::cancel, 0},
      {"POST", "/claims", &InternalApi::claim, 0},
      {"POST", "/claims/release", &InternalApi::releaseClaim, 0},
      {"POST", "/workspace/open", &InternalApi::workspaceOpen, 0},
      {"POST", "/workspace/read", &InternalApi::workspaceRead, 0},
      {"POST", "/workspace/write", &InternalApi::workspaceWrite, kCarriesBytes},
      {"POST", "/workspace/place", &InternalApi::workspacePlace, kCarriesBytes},
      {"POST", "/workspace/mkdir", &InternalApi::workspaceMkdir, 0},
      {"POST", "/workspace/listdir", &InternalApi::workspaceListdir, 0},
      {"POST", "/workspace/provenance", &InternalApi::workspaceProvenance, 0},
      {"POST", "/workspace/remove", &InternalApi::workspaceRemove, 0},
      {"POST", "/workspace/rename", &InternalApi::workspaceRename, 0},
      {"POST", "/workspace/stat", &InternalApi::workspaceStat, 0},
      {"POST", "/workspace/export", &InternalApi::workspaceExport, 0},
      {"POST", "/jobs/start", &InternalApi::jobStart, 0},
      {"POST", "/jobs/poll", &InternalApi::jobPoll, kRunsCommand},
      {"POST", "/jobs/input", &InternalApi::jobInput, kRunsCommand | kCarriesBytes},
      {"POST", "/jobs/resize", &InternalApi::jobResize, 0},
      {"POST", "/jobs/kill", &InternalApi::jobKill, 0},
      {"POST", "/jobs/list", &InternalApi::jobList, 0},
  };
  return kRoutes;
}

std::vector<std::pair<std::string, std::string>> InternalApi::routeTable() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Route& r : routes()) out.emplace_back(r.method, std::string(kPrefix) + r.path);
  return out;
}

InternalApi::InternalApi(ExecutionNode& node, InternalApiOptions options, service::Metrics& metrics)
    : node_(node),
      options_(std::move(options)),
      metrics_(metrics),
      claims_(std::make_unique<Claims>()) {}

InternalApi::~InternalApi() = default;

const InternalApi::Route* InternalApi::routeOf(const HttpRequest& request, bool* path_known) {
  const std::string_view path = pathOf(request.target);
  if (path_known != nullptr) *path_known = false;
  if (!path.starts_with(kPrefix)) return nullptr;
  const std::string_view rest = path.substr(kPrefix.size());
  for (const Route& r : routes()) {
    if (rest != r.path) continue;
    if (path_known != nullptr) *path_known = true;
    if (request.method == r.method) return &r;
  }
  return nullptr;
}

HttpResponse InternalApi::handle(const HttpRequest& request) {
  try {
    bool known = false;
    const Route* route = routeOf(request, &known);
    if (route == nullptr) {
      if (!known)
        return service::errorResponse(404, "not_found",
                                      "no route " + quoteForMessage(pathOf(request.target)));
      return methodNotAllowed(request, json());
    }
    if (!route->has(kNoAuthentication) && !authorized(request))
      return service::errorResponse(401, "unauthorized",
                                    "the service credential is missing or wrong");
    if (!route->has(kCarriesBytes) && request.body.size() > kControlBodyBytes)
      return service::errorResponse(
          413, "payload_too_large",
          "the body is larger than " + std::to_string(kControlBodyBytes) + " bytes");
    json body;
    if (request.method == "POST") {
      auto parsed = parseUntrustedJson(request.body);
      if (!parsed)
        return badRequest("the request body is not valid JSON: " + parsed.error().context);
      if (!parsed->is_object()) return badRequest("the request body must be a JSON object");
      body = std::move(*parsed);
    }
    return (this->*(route->handler))(request, body);
  } catch (const std::exception&) {
    return service::errorResponse(500, "internal", "internal error");
  }
}

HttpResponse InternalApi::methodNotAllowed(const HttpRequest& request, const json& /*body*/) {
  const std::string_view path = pathOf(request.target);
  std::string allow;
  for (const Route& r : routes()) {
    if (path.substr(std::min(path.size(), kPrefix.size())) != r.path) continue;
    if (!allow.empty()) allow += ", ";
    allow += r.method;
  }
  HttpResponse r = service::errorResponse(
      405, "method_not_allowed", request.method + " is not allowed on " + quoteForMessage(path));
  r.headers.emplace_back("Allow", allow);
  return r;
}

bool InternalApi::wantsStream(const HttpRequest& request) const {
  const Route* route = routeOf(request, nullptr);
  return route != nullptr && route->has(kStreams) &&
         service::queryParam(queryOf(request.target), "stream") == "1";
}

bool InternalApi::runsCommand(const HttpRequest& request) const {
  const Route* route = routeOf(request, nullptr);
  return route != nullptr && route->has(kRunsCommand);
}

bool InternalApi::needsNoToken(const HttpRequest& request) const {
  const Route* route = routeOf(request, nullptr);
  return route != nullptr && route->has(kNoAuthentication);
}

bool InternalApi::authorized(const HttpRequest& request) const {
  return !options_.credential.empty() &&
         service::bearerMatches(request.authorization, options_.credential);
}

std::string InternalApi::routeLabel(std::string_view path) const {
  const std::string_view bare = pathOf(path);
  if (!bare.starts_with(kPrefix)) return "other";
  for (const Route& r : routes()) {
    if (bare.substr(kPrefix.size()) == r.path) return std::string(kPrefix) + r.path;
  }
  return "other";
}

int InternalApi::reap() {
  return node_.reap(options_.stale_leases);
}

NodeStatus InternalApi::status() const {
  return NodeStatus{options_.node_name, node_.liveCount(), options_.capacity};
}

// --- the node --------------------------------------------------------------

HttpResponse InternalApi::health(const HttpRequest& /*request*/, const json& /*body*/) {
  return jsonAnswer(200, json{{"status", "ok"}});
}

HttpResponse InternalApi::nodeStatus(const HttpRequest& /*request*/, const json& /*body*/) {
  return jsonAnswer(200, json(status()));
}

HttpResponse InternalApi::provision(const HttpRequest& /*request*/, const json& body) {
  auto spec = wireFromJson<EnvironmentSpec>(body);
  if (!spec) return answerError(spec.error());
  // Room is counted with the provisions under way, so two at once cannot
  // both take the last place.
  struct Pending {
    std::atomic<std::size_t>& n;
    explicit Pending(std::atomic<std::size_t>& c) : n(c) { ++n; }
    ~Pending() { --n; }
    Pending(const Pending&) = delete;
    Pending& operator=(const Pending&) = delete;
  } pending(claims_->provisioning);
  if (options_.capacity > 0 && node_.liveCount() + claims_->provisioning.load() > options_.capacity)
    return answerError(Error{ErrorCode::kEnvironmentBusy, 0,
                             "execution node " + quoteForMessage(options_.node_name) +
                                 " is at its capacity of " + std::to_string(options_.capacity) +
                                 " environments"});
  auto handle = node_.provision(*spec);
  if (!handle) return answerError(handle.error());
  return jsonAnswer(201, json(*handle));
}

HttpResponse InternalApi::listLive(const HttpRequest& request, const json& /*body*/) {
  const std::string query = queryOf(request.target);
  std::optional<std::string> tenant;
  if (!query.empty()) {
    tenant = service::queryParam(query, "tenant_id");
    if (!tenant || tenant->empty())
      return badRequest("the only query parameter here is a non-empty tenant_id");
  }
  json out = json::array();
  for (const auto& live : node_.live(tenant)) out.push_back(live);
  return jsonAnswer(200, json{{"environments", std::move(out)}});
}

HttpResponse InternalApi::findLive(const HttpRequest& /*request*/, const json& body) {
  auto id = wireMember<std::string>(body, "environment_id");
  if (!id) return answerError(id.error());
  auto live = node_.find(*id);
  return jsonAnswer(200, json{{"environment", live ? json(*live) : json(nullptr)}});
}

HttpResponse InternalApi::destroy(const HttpRequest& /*request*/, const json& body) {
  auto handle = wireMember<EnvironmentHandle>(body, "handle");
  if (!handle) return answerError(handle.error());
  auto destroyed = node_.destroy(*handle);
  if (!destroyed) return answerError(destroyed.error());
  // Claims on it die with it (a gateway that went away never releases).
  std::vector<RunClaim> dropped;
  {
    std::lock_guard lk(claims_->mu);
    for (auto it = claims_->by_id.begin(); it != claims_->by_id.end();) {
      if (it->second.first == handle->environment_id) {
        dropped.push_back(std::move(it->second.second));
        it = claims_->by_id.erase(it);
      } else {
        ++it;
      }
    }
  }
  return noContent();
}

HttpResponse InternalApi::extend(const HttpRequest& /*request*/, const json& body) {
  auto handle = wireMember<EnvironmentHandle>(body, "handle");
  if (!handle) return answerError(handle.error());
  auto text = wireMember<std::string>(body, "expires_at");
  if (!text) return answerError(text.error());
  auto expires = parseTimestamp(*text);
  if (!expires) return badRequest("expires_at: " + expires.error().context);
  auto extended = node_.extend(*handle, *expires);
  if (!extended) return answerError(extended.error());
  return jsonAnswer(200, json(*extended));
}

HttpResponse InternalApi::execute(const HttpRequest& /*request*/, const json& body) {
  auto handle = wireMember<EnvironmentHandle>(body, "handle");
  if (!handle) return answerError(handle.error());
  auto command = wireMember<ExecutionCommand>(body, "command");
  if (!command) return answerError(command.error());
  auto cancelled_before = cancelledBefore(body);
  if (!cancelled_before) return answerError(cancelled_before.error());
  auto result = node_.execute(*handle, *command, *cancelled_before ? &**cancelled_before : nullptr);
  if (!result) return answerError(result.error());
  return jsonAnswer(200, json(*result));
}

HttpResponse InternalApi::handleStreaming(const HttpRequest& request,
                                          const std::function<void(std::string)>& emit,
                                          const CancelToken* cancel) {
  try {
    const Route* route = routeOf(request, nullptr);
    if (route == nullptr || !route->has(kStreams) || !authorized(request)) return handle(request);
    auto parsed = parseUntrustedJson(request.body);
    if (!parsed) return badRequest("the request body is not valid JSON: " + parsed.error().context);
    auto handle_value = wireMember<EnvironmentHandle>(*parsed, "handle");
    if (!handle_value) return answerError(handle_value.error());
    auto command = wireMember<ExecutionCommand>(*parsed, "command");
    if (!command) return answerError(command.error());
    // A caller whose token was cancelled before the call: the command
    // starts under a cancelled token, as it would in the caller's process.
    auto cancelled_before = cancelledBefore(*parsed);
    if (!cancelled_before) return answerError(cancelled_before.error());
    if (*cancelled_before) cancel = &**cancelled_before;
    auto result = node_.executeStreaming(
        *handle_value, *command, cancel,
        [&](ExecutionEnvironment::OutputStream stream, std::string_view bytes) {
          emit(json{{"stream",
                     stream == ExecutionEnvironment::OutputStream::kStdout ? "stdout" : "stderr"},
                    {"data", bytesToJson(bytes)}}
                   .dump(-1, ' ', false, json::error_handler_t::replace));
        });
    if (!result) {
      emit(json{{"error", json(result.error())}}.dump(-1, ' ', false,
                                                      json::error_handler_t::replace));
      return answerError(result.error());
    }
    emit(json{{"result", json(*result)}}.dump(-1, ' ', false, json::error_handler_t::replace));
    return jsonAnswer(200, json{{"status", "ok"}});
  } catch (const std::exception&) {
    return service::errorResponse(500, "internal", "internal error");
  }
}

HttpResponse InternalApi::cancel(const HttpRequest& /*request*/, const json& body) {
  auto handle = wireMember<EnvironmentHandle>(body, "handle");
  if (!handle) return answerError(handle.error());
  auto id = wireMember<std::string>(body, "execution_id");
  if (!id) return answerError(id.error());
  auto cancelled = node_.cancel(*handle, *id);
  if (!cancelled) return answerError(cancelled.error());
  return noContent();
}

HttpResponse InternalApi::claim(const HttpRequest& /*request*/, const json& body) {
  auto id = wireMember<std::string>(body, "environment_id");
  if (!id) return answerError(id.error());
  auto kind_name = wireMember<std::string>(body, "kind");
  if (!kind_name) return answerError(kind_name.error());
  RunKind kind = RunKind::kCommand;
  if (*kind_name == "program") {
    kind = RunKind::kProgram;
  } else if (*kind_name != "command") {
    return badRequest("kind must be \"command\" or \"program\"");
  }
  auto claimed = node_.claim(*id, kind);
  if (!claimed) return answerError(claimed.error());
  auto claim_id = sys::randomHexToken(16);
  if (!claim_id) return answerError(claim_id.error());
  {
    std::lock_guard lk(claims_->mu);
    claims_->by_id.emplace(*claim_id, std::pair<std::string, RunClaim>(*id, std::move(*claimed)));
  }
  return jsonAnswer(201, json{{"claim_id", *claim_id}});
}

HttpResponse InternalApi::releaseClaim(const HttpRequest& /*request*/, const json& body) {
  auto id = wireMember<std::string>(body, "claim_id");
  if (!id) return answerError(id.error());
  std::optional<RunClaim> released;  // released outside the lock
  {
    std::lock_guard lk(claims_->mu);
    if (auto it = claims_->by_id.find(*id); it != claims_->by_id.end()) {
      released.emplace(std::move(it->second.second));
      claims_->by_id.erase(it);
    }
  }
  return noContent();
}

// --- the workspace -----------------------------------------------------------

Result<std::shared_ptr<WorkspaceHandle>> InternalApi::workspaceOf(const json& body) {
  auto handle = wireMember<EnvironmentHandle>(body, "handle");
  if (!handle) return tl::unexpected(handle.error());
  auto ws = node_.workspace(*handle);
  // The gateway's handle was taken while the environment lived: once it is
  // gone, the handle's operations are refused as an in-process handle's
  // are (ExecutionRejected), not answered as an unknown environment.
  if (!ws && ws.error().code == ErrorCode::kEnvironmentGone)
    return fail(ErrorCode::kExecutionRejected, "the workspace of environment " +
                                                   quoteForMessage(handle->environment_id) +
                                                   " is gone (" + ws.error().message() + ")");
  return ws;
}

HttpResponse InternalApi::workspaceOpen(const HttpRequest& /*request*/, const json& body) {
  auto handle = wireMember<EnvironmentHandle>(body, "handle");
  if (!handle) return answerError(handle.error());
  auto ws = node_.workspace(*handle);
  if (!ws) return answerError(ws.error());
  return noContent();
}

namespace {

// Runs `op` on the workspace and the decoded path: its answer, or the error.
template <class Op>
HttpResponse withPath(Result<std::shared_ptr<WorkspaceHandle>> ws, const json& body,
                      const char* field, Op&& op) {
  if (!ws) return answerError(ws.error());
  auto path = wireMember<std::string>(body, field);
  if (!path) return answerError(path.error());
  return op(**ws, *path);
}

template <class T>
HttpResponse voidOrError(const Result<T>& r) {
  if (!r) return answerError(r.error());
  return noContent();
}

}  // namespace

HttpResponse InternalApi::workspaceRead(const HttpRequest& /*request*/, const json& body) {
  return withPath(workspaceOf(body), body, "path", [](WorkspaceHandle& ws, const std::string& p) {
    auto data = ws.read(p);
    if (!data) return answerError(data.error());
    return jsonAnswer(200, json{{"data", bytesToJson(*data)}});
  });
}

HttpResponse InternalApi::workspaceWrite(const HttpRequest& /*request*/, const json& body) {
  auto data = bytesMember(body, "data");
  if (!data) return answerError(data.error());
  return withPath(workspaceOf(body), body, "path", [&](WorkspaceHandle& ws, const std::string& p) {
    return voidOrError(ws.write(p, *data));
  });
}

HttpResponse InternalApi::workspacePlace(const HttpRequest& /*request*/, const json& body) {
  auto data = bytesMember(body, "data");
  if (!data) return answerError(data.error());
  return withPath(workspaceOf(body), body, "path", [&](WorkspaceHandle& ws, const std::string& p) {
    return voidOrError(ws.placeFile(p, *data));
  });
}

HttpResponse InternalApi::workspaceMkdir(const HttpRequest& /*request*/, const json& body) {
  return withPath(workspaceOf(body), body, "path", [](WorkspaceHandle& ws, const std::string& p) {
    return voidOrError(ws.mkdir(p));
  });
}

HttpResponse InternalApi::workspaceListdir(const HttpRequest& /*request*/, const json& body) {
  return withPath(workspaceOf(body), body, "path", [](WorkspaceHandle& ws, const std::string& p) {
    auto entries = ws.listdir(p);
    if (!entries) return answerError(entries.error());
    json out = json::array();
    for (const auto& e : *entries) out.push_back(e);
    return jsonAnswer(200, json{{"entries", std::move(out)}});
  });
}

HttpResponse InternalApi::workspaceProvenance(const HttpRequest& /*request*/, const json& body) {
  return withPath(workspaceOf(body), body, "path", [](WorkspaceHandle& ws, const std::string& p) {
    auto provenance = ws.provenance(p);
    if (!provenance) return answerError(provenance.error());
    return jsonAnswer(200, json{{"provenance", json(*provenance)}});
  });
}

HttpResponse InternalApi::workspaceRemove(const HttpRequest& /*request*/, const json& body) {
  auto recursive = wireMember<bool>(body, "recursive");
  if (!recursive) return answerError(recursive.error());
  return withPath(workspaceOf(body), body, "path", [&](WorkspaceHandle& ws, const std::string& p) {
    return voidOrError(ws.remove(p, *recursive));
  });
}

HttpResponse InternalApi::workspaceRename(const HttpRequest& /*request*/, const json& body) {
  auto to = wireMember<std::string>(body, "to");
  if (!to) return answerError(to.error());
  auto replace = wireMember<bool>(body, "replace");
  if (!replace) return answerError(replace.error());
  return withPath(workspaceOf(body), body, "from", [&](WorkspaceHandle& ws, const std::string& p) {
    return voidOrError(ws.rename(p, *to, *replace));
  });
}

HttpResponse InternalApi::workspaceStat(const HttpRequest& /*request*/, const json& body) {
  return withPath(workspaceOf(body), body, "path", [](WorkspaceHandle& ws, const std::string& p) {
    auto st = ws.stat(p);
    if (!st) return answerError(st.error());
    return jsonAnswer(200, json(*st));
  });
}

HttpResponse InternalApi::workspaceExport(const HttpRequest& /*request*/, const json& body) {
  auto max_bytes = wireMember<std::int64_t>(body, "max_bytes");
  if (!max_bytes) return answerError(max_bytes.error());
  if (*max_bytes < 0) return badRequest("max_bytes must not be negative");
  return withPath(workspaceOf(body), body, "path", [&](WorkspaceHandle& ws, const std::string& p) {
    auto stream = ws.openExport(p, *max_bytes);
    if (!stream) return answerError(stream.error());
    HttpResponse r;
    r.status = 200;
    r.content_type = "application/octet-stream";
    const std::string preamble = json{{"size_bytes", stream->size_bytes},
                                      {"sha256", stream->sha256},
                                      {"filename", bytesToJson(stream->filename)}}
                                     .dump(-1, ' ', false, json::error_handler_t::replace) +
                                 "\n";
    r.body_source = std::make_shared<PreambleSource>(preamble, std::move(stream->reader));
    return r;
  });
}

// --- jobs --------------------------------------------------------------------

namespace {

// What a remote job's spill says: the sink that would store it lives with
// the gateway, and its stream back is not built yet.
constexpr const char* kNoRemoteSpill =
    "job output is not yet spilled through a remote execution node";

void markUnspilled(JobSnapshot& snapshot) {
  if (!snapshot.spill) return;
  for (JobStreamSpill* s : {&snapshot.spill->first, &snapshot.spill->second}) {
    if (s->error) s->error = kNoRemoteSpill;
  }
}

}  // namespace

HttpResponse InternalApi::jobStart(const HttpRequest& /*request*/, const json& body) {
  auto handle = wireMember<EnvironmentHandle>(body, "handle");
  if (!handle) return answerError(handle.error());
  auto request = wireMember<JobStartRequest>(body, "request");
  if (!request) return answerError(request.error());
  auto started = node_.startJob(*handle, *request);
  if (!started) return answerError(started.error());
  return jsonAnswer(201, json(*started));
}

HttpResponse InternalApi::jobPoll(const HttpRequest& /*request*/, const json& body) {
  auto handle = wireMember<EnvironmentHandle>(body, "handle");
  if (!handle) return answerError(handle.error());
  auto poll = wireMember<JobPollRequest>(body, "poll");
  if (!poll) return answerError(poll.error());
  auto snapshot = node_.pollJob(*handle, *poll);
  if (!snapshot) return answerError(snapshot.error());
  markUnspilled(*snapshot);
  return jsonAnswer(200, json(*snapshot));
}

HttpResponse InternalApi::jobInput(const HttpRequest& /*request*/, const json& body) {
  auto handle = wireMember<EnvironmentHandle>(body, "handle");
  if (!handle) return answerError(handle.error());
  auto job_id = wireMember<std::string>(body, "job_id");
  if (!job_id) return answerError(job_id.error());
  auto data = bytesMember(body, "data");
  if (!data) return answerError(data.error());
  auto last = wireMember<bool>(body, "last");
  if (!last) return answerError(last.error());
  auto t = body.find("timeout_ms");
  if (t == body.end()) return badRequest("field \"timeout_ms\" is missing");
  auto timeout = countFromJson(*t, CountSpec{"timeout_ms", "milliseconds", kMaxJobWaitMs});
  if (!timeout) return answerError(timeout.error());
  return voidOrError(node_.sendJobInput(*handle, *job_id, *data, *last, *timeout, nullptr));
}

HttpResponse InternalApi::jobResize(const HttpRequest& /*request*/, const json& body) {
  auto handle = wireMember<EnvironmentHandle>(body, "handle");
  if (!handle) return answerError(handle.error());
  auto job_id = wireMember<std::string>(body, "job_id");
  if (!job_id) return answerError(job_id.error());
  auto size = wireMember<TerminalSize>(body, "size");
  if (!size) return answerError(size.error());
  return voidOrError(node_.resizeJob(*handle, *job_id, *size));
}

HttpResponse InternalApi::jobKill(const HttpRequest& /*request*/, const json& body) {
  auto handle = wireMember<EnvironmentHandle>(body, "handle");
  if (!handle) return answerError(handle.error());
  auto job_id = wireMember<std::string>(body, "job_id");
  if (!job_id) return answerError(job_id.error());
  return voidOrError(node_.killJob(*handle, *job_id));
}

HttpResponse InternalApi::jobList(const HttpRequest& /*request*/, const json& body) {
  auto handle = wireMember<EnvironmentHandle>(body, "handle");
  if (!handle) return answerError(handle.error());
  auto jobs = node_.listJobs(*handle);
  if (!jobs) return answerError(jobs.error());
  json out = json::array();
  for (auto& j : *jobs) {
    markUnspilled(j);
    out.push_back(j);
  }
  return jsonAnswer(200, json{{"jobs", std::move(out)}});
}

}  // namespace airlock::node
