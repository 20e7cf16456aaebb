// The route table of the HTTP API (routes.h): the one place a path is
// spelled. A row is method, pattern, handler, tenant scope, flags, the
// query parameters it takes, and one line of help.
#include "airlock/gateway/api/routes.h"

#include <algorithm>

#include "airlock/gateway/api/api.h"

namespace airlock::gateway {

// A friend of Api: the table names its private handlers.
struct RouteRows {
  using T = TenantScope;
  static constexpr Route kRows[] = {
      // NOLINT(modernize-avoid-c-arrays): a constexpr table
      {"GET", "/healthz", &Api::health, T::kNone, kNoAuthentication, {}, "liveness"},
      {"GET", "/metrics", &Api::metricsText, T::kOperator, 0, {}, "Prometheus text"},
      {"GET", "/v1/images", &Api::listImages, T::kNone, 0, {}, "the images, default first"},
      {"POST", "/v1/environments", &Api::provision, T::kBody, 0, {}, "provision -> 201 handle"},
      {"GET",
       "/v1/environments",
       &Api::listEnvironments,
       T::kQuery,
       0,
       {"tenant_id"},
       "live environments (one tenant's with tenant_id)"},
      {"GET",
       "/v1/environments/{environment_id}",
       &Api::getEnvironment,
       T::kQuery,
       0,
       {"tenant_id"},
       "its handle"},
      {"DELETE",
       "/v1/environments/{environment_id}",
       &Api::destroyEnvironment,
       T::kQuery,
       kUnknownIdSucceeds,
       {"tenant_id"},
       "destroy (idempotent) -> 204"},
      {"POST",
       "/v1/environments/{environment_id}/extend",
       &Api::extendEnvironment,
       T::kQuery,
       0,
       {"tenant_id"},
       "live at least {seconds} more, up to created_at + the hard cap -> its handle"},
      {"POST",
       "/v1/environments/{environment_id}/execute",
       &Api::execute,
       T::kQuery,
       kRunsCommand | kStreams,
       {"tenant_id", "stream"},
       "run a command -> ExecutionResult (stream=1: NDJSON lines, the result last)"},
      {"POST",
       "/v1/environments/{environment_id}/executions/{execution_id}/cancel",
       &Api::cancelExecution,
       T::kQuery,
       0,
       {"tenant_id"},
       "end the running command execute named so -> 204 (it ends CANCELLED)"},
      {"GET",
       "/v1/environments/{environment_id}/files",
       &Api::readFile,
       T::kQuery,
       0,
       {"tenant_id", "path"},
       "a workspace file's bytes"},
      {"PUT",
       "/v1/environments/{environment_id}/files",
       &Api::writeFile,
       T::kQuery,
       0,
       {"tenant_id", "path"},
       "write a workspace file -> 204"},
      {"DELETE",
       "/v1/environments/{environment_id}/files",
       &Api::removePath,
       T::kQuery,
       0,
       {"tenant_id", "path", "recursive"},
       "remove a workspace file or directory (recursive=1 for one with entries) -> 204"},
      {"POST",
       "/v1/environments/{environment_id}/files/rename",
       &Api::renamePath,
       T::kQuery,
       0,
       {"tenant_id"},
       "move a workspace path {from, to, replace?} -> 204"},
      {"GET",
       "/v1/environments/{environment_id}/stat",
       &Api::statPath,
       T::kQuery,
       0,
       {"tenant_id", "path"},
       "a workspace path's type, size, mode and mtime (a symlink not followed)"},
      {"POST",
       "/v1/environments/{environment_id}/directories",
       &Api::makeDirectory,
       T::kQuery,
       0,
       {"tenant_id"},
       "create a workspace directory and its parents {path} -> 204"},
      {"GET",
       "/v1/environments/{environment_id}/archive",
       &Api::downloadArchive,
       T::kQuery,
       0,
       {"tenant_id", "path"},
       "a workspace directory as a tar, streamed (files and directories)"},
      {"PUT",
       "/v1/environments/{environment_id}/archive",
       &Api::uploadArchive,
       T::kQuery,
       0,
       {"tenant_id", "path"},
       "extract the body (a tar or zip) into a workspace directory -> 204"},
      {"GET",
       "/v1/environments/{environment_id}/list",
       &Api::listDirectory,
       T::kQuery,
       0,
       {"tenant_id", "path"},
       "a workspace directory's entries"},
      {"GET",
       "/v1/environments/{environment_id}/provenance",
       &Api::provenance,
       T::kQuery,
       0,
       {"tenant_id", "path"},
       "who last wrote a workspace file"},
      {"POST",
       "/v1/environments/{environment_id}/artifacts",
       &Api::exportArtifact,
       T::kQuery,
       kRunsCommand,
       {"tenant_id"},
       "export a workspace file -> 201 artifact metadata"},
      {"POST",
       "/v1/environments/{environment_id}/code",
       &Api::runCode,
       T::kQuery,
       kRunsCommand,
       {"tenant_id"},
       "run a Python program in code mode"},
      {"POST",
       "/v1/environments/{environment_id}/jobs",
       &Api::startJob,
       T::kQuery,
       0,
       {"tenant_id"},
       "start a background job -> 201 {job_id, cursors, wall_ms, deadline}"},
      {"GET",
       "/v1/environments/{environment_id}/jobs",
       &Api::listJobs,
       T::kQuery,
       0,
       {"tenant_id"},
       "the environment's jobs, oldest first"},
      {"GET",
       "/v1/environments/{environment_id}/jobs/{job_id}",
       &Api::pollJob,
       T::kQuery,
       kRunsCommand,
       {"tenant_id", "stdout_cursor", "stderr_cursor", "wait_ms"},
       "a job's state and output since the cursors (wait_ms: until it moves)"},
      {"POST",
       "/v1/environments/{environment_id}/jobs/{job_id}/input",
       &Api::sendJobInput,
       T::kQuery,
       kRunsCommand,
       {"tenant_id"},
       "write to a job's stdin (last: then close it) -> 204"},
      {"POST",
       "/v1/environments/{environment_id}/jobs/{job_id}/kill",
       &Api::killJob,
       T::kQuery,
       0,
       {"tenant_id"},
       "kill a job's process group -> 204"},
      {"POST",
       "/v1/environments/{environment_id}/jobs/{job_id}/resize",
       &Api::resizeJob,
       T::kQuery,
       0,
       {"tenant_id"},
       "set a PTY job's terminal size {rows, columns} -> 204"},
      {"GET",
       "/v1/environments/{environment_id}/schedules",
       &Api::scheduleCall,
       T::kQuery,
       0,
       {"tenant_id"},
       "the schedules its programs created"},
      {"DELETE",
       "/v1/environments/{environment_id}/schedules/{name}",
       &Api::scheduleCall,
       T::kQuery,
       0,
       {"tenant_id"},
       "cancel a schedule -> 204"},
      {"GET",
       "/v1/schedule-fires",
       &Api::pendingFires,
       T::kOperator,
       0,
       {"after", "limit"},
       "the fire outbox, oldest first"},
      {"POST",
       "/v1/schedule-fires/ack",
       &Api::acknowledgeFires,
       T::kOperator,
       0,
       {},
       "remove delivered fires"},
      {"POST",
       "/v1/artifacts",
       &Api::uploadArtifact,
       T::kQueryRequired,
       0,
       {"tenant_id", "run_id", "filename", "media_type"},
       "upload the body -> 201 metadata"},
      {"GET",
       "/v1/artifacts/{artifact_id}",
       &Api::getArtifact,
       T::kQueryRequired,
       0,
       {"tenant_id"},
       "an artifact's metadata"},
      {"DELETE",
       "/v1/artifacts/{artifact_id}",
       &Api::deleteArtifact,
       T::kQueryRequired,
       0,
       {"tenant_id"},
       "delete an artifact -> 204"},
      {"GET",
       "/v1/artifacts/{artifact_id}/content",
       &Api::downloadArtifact,
       T::kQueryRequired,
       0,
       {"tenant_id"},
       "an artifact's bytes, always as an attachment"},
      {"GET",
       "/v1/runs/{run_id}/artifacts",
       &Api::listRunArtifacts,
       T::kQueryRequired,
       0,
       {"tenant_id", "limit"},
       "the tenant's run's artifacts, newest first"},
      {"GET", "/v1/tools", &Api::listTools, T::kNone, 0, {}, "the model-facing tools"},
      {"POST",
       "/v1/tools/{name}",
       &Api::callTool,
       T::kBody,
       kRunsCommand | kEnvironmentInBody,
       {},
       "call a tool in the body's environment"},
      {"PUT",
       "/v1/runs/{run_id}/lease",
       &Api::renewLease,
       T::kBody,
       0,
       {},
       "report the tenant's run's current lease epoch"},
      {"POST",
       "/internal/v1/leases/stale",
       &Api::staleLeases,
       T::kNone,
       kInternal,
       {},
       "the reaper's question: which of these leases are stale"},
      {"GET",
       "/v1/runs/{run_id}/notes",
       &Api::listNotes,
       T::kQueryRequired,
       0,
       {"tenant_id", "prefix"},
       "the tenant's run's notes, in key order"},
      {"GET",
       "/v1/runs/{run_id}/notes/{key}",
       &Api::getNote,
       T::kQueryRequired,
       0,
       {"tenant_id"},
       "one note of the tenant's run"},
  };
};

namespace {

// The non-empty '/'-separated segments of `path`.
std::vector<std::string_view> segmentsOf(std::string_view path) {
  std::vector<std::string_view> parts;
  std::size_t i = 0;
  while (i < path.size()) {
    std::size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    if (j > i) parts.push_back(path.substr(i, j - i));
    i = j + 1;
  }
  return parts;
}

bool isNamed(std::string_view segment) {
  return segment.size() > 2 && segment.front() == '{' && segment.back() == '}';
}

// Whether `parts` fits `pattern`; the named segments go to `named` then.
bool matches(std::string_view pattern, const std::vector<std::string_view>& parts,
             std::vector<std::pair<std::string_view, std::string_view>>* named) {
  const auto expected = segmentsOf(pattern);
  if (expected.size() != parts.size()) return false;
  std::vector<std::pair<std::string_view, std::string_view>> found;
  for (std::size_t k = 0; k < parts.size(); ++k) {
    if (isNamed(expected[k])) {
      found.emplace_back(expected[k].substr(1, expected[k].size() - 2), parts[k]);
    } else if (expected[k] != parts[k]) {
      return false;
    }
  }
  if (named != nullptr) *named = std::move(found);
  return true;
}

}  // namespace

std::span<const std::string_view> Route::queryParams() const {
  const auto end = std::find(query.begin(), query.end(), std::string_view());
  return {query.data(), static_cast<std::size_t>(end - query.begin())};
}

bool Route::takes(std::string_view param) const {
  const auto params = queryParams();
  return std::find(params.begin(), params.end(), param) != params.end();
}

std::span<const Route> routes() {
  return RouteRows::kRows;
}

RouteLookup lookupRoute(std::string_view method, std::string_view path) {
  RouteLookup lookup;
  const auto parts = segmentsOf(path);
  for (const Route& route : routes()) {
    std::vector<std::pair<std::string_view, std::string_view>> named;
    if (!matches(route.pattern, parts, &named)) continue;
    lookup.of_path.push_back(&route);
    if (route.method == method) {
      lookup.route = &route;
      lookup.segments = std::move(named);
    }
  }
  return lookup;
}

std::string routeLabel(std::string_view path) {
  return std::string(routePattern(path));
}

std::string_view routePattern(std::string_view path) {
  const auto parts = segmentsOf(path);
  for (const Route& route : routes())
    if (matches(route.pattern, parts, nullptr)) return route.pattern;
  return "other";
}

std::string allowedMethods(const RouteLookup& lookup) {
  std::string out;
  for (const Route* route : lookup.of_path) {
    if (!out.empty()) out += ", ";
    out += route->method;
  }
  return out;
}

const std::string& RouteCall::param(std::string_view name) const {
  static const std::string kNone;
  auto it = params.find(name);
  return it == params.end() ? kNone : it->second;
}

std::optional<std::string> RouteCall::queryValue(std::string_view name) const {
  auto it = query.find(name);
  if (it == query.end()) return std::nullopt;
  return it->second;
}

}  // namespace airlock::gateway
