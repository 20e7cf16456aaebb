// The workspace file routes of the API (api.h): read, write, list,
// provenance, remove, rename, stat, mkdir and a directory as a tar in or out,
// by paths the workspace checks.
#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>

#include "airlock/archive/workspace_archive.h"
#include "airlock/core/command_validation.h"
#include "airlock/core/encoding.h"
#include "airlock/core/json.h"
#include "airlock/gateway/api/api.h"
#include "airlock/gateway/api/body.h"
#include "airlock/gateway/api/workspace_tar.h"

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

// A workspace path field of a JSON body: a string, or {"base64": ...} for
// a name that is not UTF-8 (as listings write them).
Result<std::string> pathField(const json& body, const char* field) {
  auto it = body.find(field);
  if (it == body.end() || it->is_null()) {
    return tl::unexpected(badRequest(std::string(field) + " is required: a workspace path"));
  }
  auto bytes = bytesFromJson(*it);
  if (!bytes) {
    return tl::unexpected(badRequest(std::string(field) +
                                     " must be a workspace path: a string or {\"base64\": ...}"));
  }
  return bytes;
}

// The `recursive` query value: absent or "0" is false, "1" is true.
Result<bool> recursiveFlag(const std::optional<std::string>& value) {
  if (!value || *value == "0") return false;
  if (*value == "1") return true;
  return tl::unexpected(badRequest("recursive must be 1 or 0, not " + quoteForMessage(*value, 64)));
}

// What the archive route found wrong with `path`, in the route's words: the
// workspace names the operation it used to look (a stat), which the caller
// never asked for.
Error archivePathProblem(const std::string& path, Error e) {
  const std::string named = quoteForMessage(path, 512);
  if (e.code == ErrorCode::kNotFound) {
    e.context = "archive: " + named + " does not exist in the workspace";
    return e;
  }
  for (std::string_view op : {"stat: ", "stat "})
    if (std::string_view(e.context).substr(0, op.size()) == op) {
      e.context = "archive: " + e.context.substr(op.size());
      break;
    }
  return e;
}

}  // namespace

tl::expected<std::shared_ptr<WorkspaceHandle>, HttpResponse> Api::workspaceOf(
    const RouteCall& call) {
  const std::string& id = call.param("environment_id");
  auto live = node_.find(id);
  if (!live)
    return tl::unexpected(
        errorResponse(404, "not_found", "no live environment " + quoteForMessage(id)));
  auto ws = node_.workspace(live->handle);
  if (!ws) return tl::unexpected(errorResponse(ws.error()));
  return std::move(*ws);
}

tl::expected<Api::WorkspaceTarget, HttpResponse> Api::workspaceTarget(const RouteCall& call) {
  auto ws = workspaceOf(call);
  if (!ws) return tl::unexpected(std::move(ws.error()));
  auto path = call.queryValue("path");
  if (!path)
    return tl::unexpected(
        errorResponse(badRequest("the path query parameter is required (percent-encoded)")));
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

HttpResponse Api::removePath(const RouteCall& call) {
  auto target = workspaceTarget(call);
  if (!target) return std::move(target.error());
  auto recursive = recursiveFlag(call.queryValue("recursive"));
  if (!recursive) return errorResponse(recursive.error());
  if (auto r = target->workspace->remove(target->path, *recursive); !r)
    return errorResponse(r.error());
  return noContent();
}

HttpResponse Api::renamePath(const RouteCall& call) {
  auto parsed = parseBody(call.request.body);
  if (!parsed) return errorResponse(parsed.error());
  const json& body = *parsed;
  if (auto refused = refuseUnknownKeys(body, {"from", "to", "replace"})) return *refused;
  auto from = pathField(body, "from");
  if (!from) return errorResponse(from.error());
  auto to = pathField(body, "to");
  if (!to) return errorResponse(to.error());
  auto replace = body.find("replace");
  if (replace != body.end() && !replace->is_null() && !replace->is_boolean())
    return errorResponse(badRequest("replace must be true or false"));
  const bool replace_existing =
      replace != body.end() && replace->is_boolean() && replace->get<bool>();
  auto ws = workspaceOf(call);
  if (!ws) return std::move(ws.error());
  if (auto r = (*ws)->rename(*from, *to, replace_existing); !r) return errorResponse(r.error());
  return noContent();
}

HttpResponse Api::statPath(const RouteCall& call) {
  auto target = workspaceTarget(call);
  if (!target) return std::move(target.error());
  auto st = target->workspace->stat(target->path);
  if (!st) return errorResponse(st.error());
  const auto mtime =
      std::chrono::time_point_cast<std::chrono::milliseconds>(std::chrono::system_clock::time_point(
          std::chrono::duration_cast<std::chrono::system_clock::duration>(
              std::chrono::nanoseconds(st->mtime_ns))));
  return jsonResponse(200, json{{"path", bytesToJson(target->path)},
                                {"type", workspaceEntryTypeName(st->type)},
                                {"size_bytes", st->size_bytes},
                                {"mode", st->mode},
                                {"mtime", formatTimestamp(mtime)},
                                {"mtime_ns", st->mtime_ns}});
}

HttpResponse Api::makeDirectory(const RouteCall& call) {
  auto parsed = parseBody(call.request.body);
  if (!parsed) return errorResponse(parsed.error());
  if (auto refused = refuseUnknownKeys(*parsed, {"path"})) return *refused;
  auto path = pathField(*parsed, "path");
  if (!path) return errorResponse(path.error());
  auto ws = workspaceOf(call);
  if (!ws) return std::move(ws.error());
  if (auto r = (*ws)->mkdir(*path); !r) return errorResponse(r.error());
  return noContent();
}

HttpResponse Api::downloadArchive(const RouteCall& call) {
  auto target = workspaceTarget(call);
  if (!target) return std::move(target.error());
  auto st = target->workspace->stat(target->path);
  if (!st) return errorResponse(archivePathProblem(target->path, st.error()));
  if (st->type != WorkspaceEntry::Type::kDirectory) {
    return errorResponse(
        badRequest("archive: " + quoteForMessage(target->path, 512) + " is not a directory"));
  }
  auto tar = workspaceTar(target->workspace, target->path);
  if (!tar) return errorResponse(tar.error());
  HttpResponse r;
  r.content_type = "application/x-tar";
  r.body_source = std::shared_ptr<sys::ByteSource>(std::move(*tar));
  return r;
}

// The body is held whole (the server reads a request body into memory, up
// to max_body_bytes); each member is checked before anything is written.
HttpResponse Api::uploadArchive(const RouteCall& call) {
  auto target = workspaceTarget(call);
  if (!target) return std::move(target.error());
  auto into = checkRelativePath(target->path);
  if (!into) return errorResponse(into.error());
  const archive::ArchiveInput input{-1, call.request.body, "the request body"};
  const archive::ExtractOptions options{"archive", std::move(*into)};
  if (auto r = archive::extractArchive(input, *target->workspace, options); !r)
    return errorResponse(r.error());
  return noContent();
}

}  // namespace airlock::gateway
