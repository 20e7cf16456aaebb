// The workspace file routes of the API (api.h): read, write, list and
// provenance, by a path the workspace checks.
#include <nlohmann/json.hpp>

#include "airlock/core/encoding.h"
#include "airlock/core/json.h"
#include "airlock/gateway/api/api.h"
#include "airlock/gateway/api/body.h"

namespace airlock::gateway {
namespace {

using json = nlohmann::json;

const char* provenanceName(WorkspaceProvenance p) {
  switch (p) {
    case WorkspaceProvenance::kToolWritten:
      return "TOOL_WRITTEN";
    case WorkspaceProvenance::kSandboxWritten:
      return "SANDBOX_WRITTEN";
    case WorkspaceProvenance::kUnknown:
      return "UNKNOWN";
  }
  return "UNKNOWN";
}

}  // namespace

tl::expected<Api::WorkspaceTarget, HttpResponse> Api::workspaceTarget(const RouteCall& call) {
  const std::string& id = call.param("environment_id");
  auto live = node_.find(id);
  if (!live)
    return tl::unexpected(
        errorResponse(404, "not_found", "no live environment " + quoteForMessage(id)));
  auto path = call.queryValue("path");
  if (!path)
    return tl::unexpected(
        errorResponse(badRequest("the path query parameter is required (percent-encoded)")));
  auto ws = node_.workspace(live->handle);
  if (!ws) return tl::unexpected(errorResponse(ws.error()));
  return WorkspaceTarget{std::move(*ws), std::move(*path)};
}

HttpResponse Api::readFile(const RouteCall& call) {
  auto target = workspaceTarget(call);
  if (!target) return std::move(target.error());
  auto data = target->workspace->read(target->path);
  if (!data) return errorResponse(data.error());
  HttpResponse r;
  r.content_type = "application/octet-stream";
  r.body = std::move(*data);
  return r;
}

HttpResponse Api::writeFile(const RouteCall& call) {
  auto target = workspaceTarget(call);
  if (!target) return std::move(target.error());
  if (auto w = target->workspace->write(target->path, call.request.body); !w)
    return errorResponse(w.error());
  return noContent();
}

HttpResponse Api::listDirectory(const RouteCall& call) {
  auto target = workspaceTarget(call);
  if (!target) return std::move(target.error());
  auto entries = target->workspace->listdir(target->path);
  if (!entries) return errorResponse(entries.error());
  json out = json::array();
  for (const auto& e : *entries)
    out.push_back(json{{"name", bytesToJson(e.name)},
                       {"type", workspaceEntryTypeName(e.type)},
                       {"size_bytes", e.size_bytes}});
  return jsonResponse(200, json{{"path", bytesToJson(target->path)}, {"entries", out}});
}

HttpResponse Api::provenance(const RouteCall& call) {
  auto target = workspaceTarget(call);
  if (!target) return std::move(target.error());
  auto p = target->workspace->provenance(target->path);
  if (!p) return errorResponse(p.error());
  return jsonResponse(
      200, json{{"path", bytesToJson(target->path)}, {"provenance", provenanceName(*p)}});
}

}  // namespace airlock::gateway
