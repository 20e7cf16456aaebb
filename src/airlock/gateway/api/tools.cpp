// The model-facing tools over HTTP (api.h: /v1/tools): the gateway's tool
// layer, called with a ToolContext built from the environment the platform
// names, and an ArtifactExporter bound to the artifact store.
#include <nlohmann/json.hpp>

#include "airlock/artifacts/artifact_writer.h"
#include "airlock/capability/broker/code_run.h"
#include "airlock/core/encoding.h"
#include "airlock/gateway/api/api.h"
#include "airlock/gateway/api/body.h"

namespace airlock::gateway {
namespace {

using json = nlohmann::json;

HttpResponse jsonReply(int status, const json& body) {
  HttpResponse r;
  r.status = status;
  r.body = body.dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

// The tool layer's ArtifactExporter over the store: tenant and run from the
// scope the tool copied out of its context, size and digest from the bytes.
class StoreExporter final : public ArtifactExporter {
 public:
  StoreExporter(const ArtifactBackend& backend, std::function<Timestamp()> clock)
      : backend_(backend), clock_(std::move(clock)) {}

  Result<ExportedArtifact> create(const ToolScope& scope, const ExportRequest& request) override {
    auto tenant = artifacts::TenantId::parse(scope.tenant_id);
    if (!tenant) return tl::unexpected(tenant.error());
    const auto origin =
        request.origin == ExportOrigin::kModelOutput  ? artifacts::ArtifactOrigin::kModelOutput
        : request.origin == ExportOrigin::kToolOutput ? artifacts::ArtifactOrigin::kToolOutput
                                                      : artifacts::ArtifactOrigin::kSandboxExport;
    const auto trust = request.trust == ExportTrust::kInternalTool
                           ? artifacts::TrustLevel::kInternalTool
                           : artifacts::TrustLevel::kExternalUntrusted;
    // Sandbox bytes never rise above EXTERNAL_UNTRUSTED, whatever the label.
    const auto floor = origin == artifacts::ArtifactOrigin::kSandboxExport
                           ? artifacts::TrustLevel::kExternalUntrusted
                           : artifacts::TrustLevel::kInternalTool;
    artifacts::ArtifactWriterScope writer_scope{*tenant, scope.run_id, origin, floor};
    auto writer =
        artifacts::makeArtifactWriter(*backend_.store, writer_scope, backend_.retention, clock_);
    auto ref = writer->create(artifacts::measuredBytes(std::string(request.bytes)),
                              request.filename, request.media_type, trust);
    if (!ref) return tl::unexpected(ref.error());
    return ExportedArtifact{ref->artifact_id.str(), ref->sha256, ref->size_bytes, ref->media_type};
  }

 private:
  ArtifactBackend backend_;
  std::function<Timestamp()> clock_;
};

}  // namespace

HttpResponse Api::listTools(const RouteCall&) {
  json out = json::array();
  for (const auto& tool : tools_->tools()) {
    out.push_back(json{{"name", tool.name},
                       {"title", tool.title},
                       {"description", tool.description},
                       {"input_schema", tool.input_schema},
                       {"output_schema", tool.output_schema},
                       {"read_only", tool.read_only},
                       {"idempotent", tool.idempotent}});
  }
  return jsonReply(200, json{{"tools", out}});
}

HttpResponse Api::callTool(const RouteCall& call) {
  const std::string& name = call.param("name");
  if (tools_->find(name) == nullptr)
    return errorResponse(404, "not_found", "no tool " + quoteForMessage(name));
  // The dispatcher has parsed the body and checked its tenant
  // (kEnvironmentInBody): a call naming a tenant reaches only that
  // tenant's environments.
  const json& body = *call.body;
  if (auto refused = refuseUnknownKeys(body, {"environment_id", "tenant_id", "arguments"}))
    return *refused;
  auto env_id = body.find("environment_id");
  if (env_id == body.end() || !env_id->is_string())
    return errorResponse(400, "tool_validation_error",
                         "environment_id is required and must be a string");
  auto live = node_.find(env_id->get<std::string>());
  if (!live)
    return errorResponse(404, "not_found",
                         "no live environment " + quoteForMessage(env_id->get<std::string>()));
  const json arguments = body.contains("arguments") ? body["arguments"] : json::object();

  std::optional<StoreExporter> exporter;
  if (artifacts_) exporter.emplace(*artifacts_, clock_);
  ToolContext context;
  context.tenant_id = live->handle.tenant_id;
  context.run_id = live->handle.run_id;
  context.environment = live->handle;
  context.execution = &node_;  // the node adds a command's time to the environment's busy time
  context.artifacts = exporter ? &*exporter : nullptr;
  if (live->wall_clock_seconds > 0)
    context.spec_wall_clock = std::chrono::seconds(live->wall_clock_seconds);
  // The job_* tools: the node's registry, the spill where a program's jobs'
  // goes (the environment's tenant and run).
  context.jobs = &node_;
  if (auto options = capability::codeRunOptionsFor(codeModeHost(), live->handle, live->egress))
    context.job_spill = options->job_spill;

  auto result = tools_->call(name, arguments, context);
  if (!result) {
    json error = {{"code", errorCodeName(result.error().code)},
                  {"message", result.error().message}};
    if (!result.error().argument.empty()) error["argument"] = result.error().argument;
    return jsonReply(httpStatusFor(result.error().code), json{{"error", error}});
  }
  return jsonReply(200, json{{"result", *result}});
}

}  // namespace airlock::gateway
