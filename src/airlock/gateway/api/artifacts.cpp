// The artifact routes of the API (api.h): export from a workspace, upload,
// metadata, download as an attachment, delete; and the retention sweep the
// reaper runs.
#include <cctype>
#include <nlohmann/json.hpp>

#include "airlock/artifacts/artifact_writer.h"
#include "airlock/artifacts/workspace_export.h"
#include "airlock/core/encoding.h"
#include "airlock/core/json.h"
#include "airlock/gateway/api/api.h"
#include "airlock/gateway/api/body.h"

namespace airlock::gateway {
namespace {

using json = nlohmann::json;

json metadataJson(const artifacts::ArtifactId& id, const artifacts::ArtifactMetadata& m) {
  json j = {{"artifact_id", id.str()},
            {"tenant_id", m.tenant_id.str()},
            {"run_id", m.run_id ? json(*m.run_id) : json(nullptr)},
            {"origin", artifacts::artifactOriginName(m.origin)},
            {"filename", bytesToJson(m.filename)},
            {"media_type", m.media_type},
            {"size_bytes", m.size_bytes},
            {"sha256", m.sha256},
            {"trust", artifacts::trustLevelName(m.trust)},
            {"created_at", formatTimestamp(m.created_at)},
            {"expires_at", m.expires_at ? json(formatTimestamp(*m.expires_at)) : json(nullptr)}};
  return j;
}

// A media type as the caller gave it: printable ASCII, no ';' games beyond
// parameters, at most 127 bytes; empty means application/octet-stream.
Result<std::string> mediaType(const std::string& text) {
  if (text.empty()) return std::string("application/octet-stream");
  if (text.size() > 127 || text.find('/') == std::string::npos)
    return fail(ErrorCode::kToolValidationError,
                "media_type " + quoteForMessage(text) + " is not a media type");
  for (unsigned char c : text)
    if (c < 0x21 || c > 0x7e)
      return fail(ErrorCode::kToolValidationError,
                  "media_type " + quoteForMessage(text) + " is not a media type");
  return text;
}

// Content-Disposition for a download. filename* (RFC 5987) carries the name
// percent-encoded, everything but unreserved characters escaped; the plain
// filename= is the name itself when it is only [A-Za-z0-9._-] and does not
// start with '.', otherwise "artifact" (a client that ignores filename*
// never sees a path, a control character or a hidden file).
std::string contentDisposition(const std::string& filename, const std::string& artifact_id) {
  std::string encoded;
  bool plain = !filename.empty() && filename.front() != '.';
  for (unsigned char c : filename) {
    const bool unreserved = std::isalnum(c) || c == '.' || c == '-' || c == '_' || c == '~';
    if (!(std::isalnum(c) || c == '.' || c == '-' || c == '_')) plain = false;
    if (unreserved) {
      encoded.push_back(static_cast<char>(c));
    } else {
      encoded += '%';
      appendHexByte(encoded, c, HexCase::kUpper);
    }
  }
  if (encoded.empty()) encoded = artifact_id;
  return "attachment; filename=\"" + (plain ? filename : std::string("artifact")) +
         "\"; filename*=UTF-8''" + encoded;
}

}  // namespace

HttpResponse Api::exportArtifact(const RouteCall& call) {
  if (!artifacts_)
    return errorResponse(503, "execution_unavailable", "no artifact store is configured");
  const std::string& id = call.param("environment_id");
  auto live = node_.find(id);
  if (!live) return errorResponse(404, "not_found", "no live environment " + quoteForMessage(id));
  auto parsed = parseBody(call.request.body);
  if (!parsed) return errorResponse(parsed.error());
  const json& body = *parsed;
  if (auto refused = refuseUnknownKeys(body, {"path", "filename", "media_type"})) return *refused;
  auto path_it = body.find("path");
  if (path_it == body.end() || !path_it->is_string())
    return errorResponse(400, "tool_validation_error", "path is required and must be a string");
  const std::string path = path_it->get<std::string>();
  auto media = mediaType(body.value("media_type", std::string()));
  if (!media) return errorResponse(media.error());
  auto tenant = artifacts::TenantId::parse(live->handle.tenant_id);
  if (!tenant) return errorResponse(tenant.error());

  auto ws = node_.workspace(live->handle);
  if (!ws) return errorResponse(ws.error());
  auto opened = artifacts::openWorkspaceExport(**ws, path, artifacts_->max_bytes);
  if (!opened) return errorResponse(opened.error());
  artifacts::MeasuredStream stream = std::move(opened->stream);
  std::string filename = std::move(opened->filename);
  if (auto f = body.find("filename"); f != body.end() && f->is_string())
    filename = f->get<std::string>();

  artifacts::ArtifactWriterScope scope{*tenant, live->handle.run_id,
                                       artifacts::ArtifactOrigin::kSandboxExport,
                                       artifacts::TrustLevel::kExternalUntrusted};
  return storeUntrustedArtifact(scope, std::move(stream), std::move(filename), std::move(*media));
}

HttpResponse Api::uploadArtifact(const RouteCall& call) {
  if (!artifacts_)
    return errorResponse(503, "execution_unavailable", "no artifact store is configured");
  // The dispatcher has checked the tenant_id is there (kQueryRequired).
  auto tenant = artifacts::TenantId::parse(call.tenant.value_or(""));
  if (!tenant) return errorResponse(tenant.error());
  auto media = mediaType(call.queryValue("media_type").value_or(""));
  if (!media) return errorResponse(media.error());
  const std::string filename = call.queryValue("filename").value_or("upload");
  artifacts::ArtifactWriterScope scope{*tenant, call.queryValue("run_id"),
                                       artifacts::ArtifactOrigin::kUpload,
                                       artifacts::TrustLevel::kExternalUntrusted};
  return storeUntrustedArtifact(scope, artifacts::measuredBytes(call.request.body), filename,
                                std::move(*media));
}

HttpResponse Api::storeUntrustedArtifact(const artifacts::ArtifactWriterScope& scope,
                                         artifacts::MeasuredStream stream, std::string filename,
                                         std::string media_type) {
  auto writer =
      artifacts::makeArtifactWriter(*artifacts_->store, scope, artifacts_->retention, clock_);
  auto ref = writer->create(std::move(stream), std::move(filename), std::move(media_type),
                            artifacts::TrustLevel::kExternalUntrusted);
  if (!ref) return errorResponse(ref.error());
  auto stored = artifacts_->repository->find(ref->artifact_id);
  if (!stored) return errorResponse(stored.error());
  if (auto bytes = artifacts_->repository->tenantBytes(scope.tenant_id))
    metrics_.artifactBytes(scope.tenant_id.str(), static_cast<double>(*bytes));
  return jsonResponse(201, metadataJson(stored->artifact_id, stored->metadata));
}

tl::expected<artifacts::StoredArtifact, HttpResponse> Api::artifactOf(const RouteCall& call) {
  if (!artifacts_)
    return tl::unexpected(
        errorResponse(503, "execution_unavailable", "no artifact store is configured"));
  const std::string& artifact_id = call.param("artifact_id");
  auto notFound = [&] { return tl::unexpected(unknownArtifact(artifact_id)); };
  auto id = artifacts::ArtifactId::parse(artifact_id);
  if (!id) return notFound();
  auto stored = artifacts_->repository->find(*id);
  // Another tenant's artifact does not exist for this caller (the
  // dispatcher has checked the tenant_id is there: kQueryRequired).
  if (!stored || stored->metadata.tenant_id.str() != call.tenant) return notFound();
  return std::move(*stored);
}

HttpResponse Api::getArtifact(const RouteCall& call) {
  auto stored = artifactOf(call);
  if (!stored) return std::move(stored.error());
  return jsonResponse(200, metadataJson(stored->artifact_id, stored->metadata));
}

HttpResponse Api::deleteArtifact(const RouteCall& call) {
  auto stored = artifactOf(call);
  if (!stored) return std::move(stored.error());
  auto removed = artifacts_->store->remove(stored->artifact_id);
  if (!removed) return errorResponse(removed.error());
  return noContent();
}

HttpResponse Api::downloadArtifact(const RouteCall& call) {
  auto stored = artifactOf(call);
  if (!stored) return std::move(stored.error());
  artifacts::ArtifactRef ref{stored->artifact_id, stored->metadata.sha256,
                             stored->metadata.size_bytes, stored->metadata.media_type};
  auto source = artifacts_->store->open(ref);
  if (!source) return errorResponse(source.error());
  auto bytes =
      artifacts::readAll(**source, static_cast<std::size_t>(stored->metadata.size_bytes) + 1);
  if (!bytes) return errorResponse(bytes.error());
  HttpResponse r;
  r.content_type = "application/octet-stream";  // served as an attachment, never rendered
  r.body = std::move(*bytes);
  r.headers = {{"Content-Disposition",
                contentDisposition(stored->metadata.filename, stored->artifact_id.str())},
               {"X-Content-Type-Options", "nosniff"},
               {"X-Airlock-Media-Type", stored->metadata.media_type},
               {"X-Airlock-Sha256", stored->metadata.sha256}};
  return r;
}

HttpResponse Api::listRunArtifacts(const RouteCall& call) {
  if (!artifacts_ || artifacts_->repository == nullptr)
    return errorResponse(503, "execution_unavailable", "no artifact store is configured");
  const std::string& run_id = call.param("run_id");
  if (auto ok = platformIdentifier(json{{"run_id", run_id}}, "run_id"); !ok)
    return errorResponse(ok.error());
  constexpr std::uint64_t kMaxListed = 1000;
  auto limit = queryCount(call.queryValue("limit"), {"limit", "", kMaxListed}, 100);
  if (!limit || *limit == 0)
    return errorResponse(
        badRequest("limit must be a whole number from 1 to " + std::to_string(kMaxListed)));
  auto tenant = artifacts::TenantId::parse(*call.tenant);
  if (!tenant) return errorResponse(badRequest(tenant.error().context));
  // One row past the page says whether there are more.
  auto rows = artifacts_->repository->listForRun(*tenant, run_id, *limit + 1);
  if (!rows) return errorResponse(rows.error());
  const bool truncated = rows->size() > *limit;
  json out = json::array();
  for (std::size_t i = 0; i < rows->size() && i < *limit; ++i)
    out.push_back(metadataJson((*rows)[i].artifact_id, (*rows)[i].metadata));
  return jsonResponse(200, json{{"artifacts", std::move(out)}, {"truncated", truncated}});
}

void Api::sweepArtifacts() {
  if (!artifacts_) return;
  artifacts::RetentionSweeper sweeper(*artifacts_->store, *artifacts_->repository, clock_);
  (void)sweeper.sweepOnce();
  // Notes live as long as the run's other metadata: they expire with it.
  if (artifacts_->repository != nullptr) (void)artifacts_->repository->removeExpiredNotes(clock_());
}

}  // namespace airlock::gateway
