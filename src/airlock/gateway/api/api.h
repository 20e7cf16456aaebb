// The HTTP/JSON API of `airlock serve`: the gateway in front of an
// execution node (port/execution_node.h), as a transport-independent
// handler (service/request_handler.h): a request in, a response out. The
// Beast server (service/http_server.h) only moves bytes; everything a caller can get wrong is
// decided here, so it is tested without sockets.
//
// The routes, what each takes and how a call's tenant is checked are the
// table of routes.h (for clients: docs/openapi.yaml). Every route but
// /healthz needs "Authorization: Bearer <credential>": the service token
// (the operator's) or a tenant key (service/tenant_keys.h), which acts for
// its own tenant only (routes.h, "Tenants"); but the internal API's routes
// (kInternal), which take only the internal service credential and are
// absent (404, as any unknown path) until one is attached. Bodies are JSON
// but for file and artifact bytes. Errors are {"error": {"code",
// "message"}} with the stable lower_snake_case codes of core/error.h plus
// "unauthorized", "forbidden" (a tenant key on an operator route, or naming
// another tenant where no one object is named), "not_found" (an unknown path too),
// "method_not_allowed" (with an Allow header naming the path's methods), "bad_request" (a query
// parameter, or a top-level key of a JSON body, that the route does not
// take, named; service/request_keys.h) and "payload_too_large". Paths in errors are
// the workspace paths as given, never host paths.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "airlock/artifacts/artifact_store.h"
#include "airlock/artifacts/artifact_writer.h"
#include "airlock/artifacts/metadata_repository.h"
#include "airlock/artifacts/retention.h"
#include "airlock/capability/broker/code_run.h"
#include "airlock/capability/broker/execution_half.h"
#include "airlock/capability/schedule/schedule.h"
#include "airlock/core/error.h"
#include "airlock/core/types.h"
#include "airlock/gateway/api/routes.h"
#include "airlock/gateway/leases/lease_book.h"
#include "airlock/gateway/tools/tool_registry.h"
#include "airlock/port/cancel_token.h"
#include "airlock/port/execution_node.h"
#include "airlock/service/http_message.h"
#include "airlock/service/metrics.h"
#include "airlock/service/request_handler.h"
#include "airlock/service/settings.h"
#include "airlock/service/tenant_keys.h"

namespace airlock::gateway {

// The artifact store the API exports into and serves from (borrowed).
struct ArtifactBackend {
  artifacts::ArtifactStore* store = nullptr;
  artifacts::ArtifactRepository* repository = nullptr;
  artifacts::RetentionSettings retention;
  std::int64_t max_bytes = artifacts::kDefaultMaxArtifactBytes;
};

// One image the service runs (GET /v1/images; docs/images.md).
struct ServiceImage {
  std::string name;       // what POST /v1/environments `image` may say: "host", a setting's name
  std::string reference;  // as configured; "" for the host image
  std::string digest;     // "sha256:<hex>", what the EnvironmentSpec carries
};

// The images of a service: the first is the default of an environment that
// names none.
struct ServiceImages {
  std::vector<ServiceImage> images;
  // Only the host image (tests, and a service with no `images` setting).
  static ServiceImages hostOnly(std::string digest) {
    return ServiceImages{{ServiceImage{"host", "", std::move(digest)}}};
  }
};

// Shares the lease book (in memory until one is attached).
// Borrows the execution node (which keeps the registry
// of live environments, the claims and the reaper: port/execution_node.h)
// and the metrics. Thread-safe: handle() is called concurrently from the
// server's worker threads; execute on one environment at a time is refused
// by the adapter ("another command is running").
class Api final : public service::RequestHandler {
 public:
  // `clock` is the wall clock of schedules and artifacts (the adapter's;
  // empty: system_clock). `images` must hold at least one image, the
  // default first.
  Api(const service::Settings& settings, ExecutionNode& node, ServiceImages images,
      service::Metrics& metrics, std::function<Timestamp()> clock = {});

  service::HttpResponse handle(const service::HttpRequest& request) override;

  // True for a request of a route that streams (kStreams) with ?stream=1.
  bool wantsStream(const service::HttpRequest& request) const override;
  // True for a request of a route that runs a command or program for as
  // long as its own timeout (kRunsCommand): the server runs these on
  // threads of their own and bounds how many run.
  bool runsCommand(const service::HttpRequest& request) const override;
  // True for a request of a route that needs no token (kNoAuthentication):
  // the server answers it at once, on its loop.
  bool needsNoToken(const service::HttpRequest& request) const override;
  // True when the request carries the service token, a tenant key or the
  // internal credential (which one a route takes is admit()'s to check).
  bool authorized(const service::HttpRequest& request) const override;
  // The route table's pattern of `path` (routeLabel of routes.h).
  std::string routeLabel(std::string_view path) const override;
  // Runs a streaming execute. Each NDJSON line (no newline) goes to `emit`
  // as it is produced, the result line last. A request refused before the
  // command starts emits nothing and returns the error response; otherwise
  // the return value is the final response (its status tells the server
  // nothing more: the lines were the answer). `cancel` ends the command with
  // CANCELLED (the server cancels when the client goes away).
  service::HttpResponse handleStreaming(const service::HttpRequest& request,
                                        const std::function<void(std::string)>& emit,
                                        const CancelToken* cancel) override;

  // One reaper pass: the node's (environments past expires_at, with a
  // stale lease epoch by the lease book, or whose earlier destroy failed),
  // then expired artifacts are swept. Returns how many environments were
  // destroyed. Called on an interval by the server.
  int reap() override;
  // Destroys every environment (service shutdown).
  void destroyAll() override { node_.destroyAll(); }
  std::size_t liveCount() const { return node_.liveCount(); }
  LeaseBook& leases() { return *leases_; }
  // The lease book renewals go to and the reaper's question is answered
  // from (leases/lease_book.h); the in-memory one until this is called.
  void attachLeases(std::shared_ptr<LeaseBook> book) { leases_ = std::move(book); }
  // The service credential of the internal API (non-empty: a bearer token
  // the execution nodes hold). With it the kInternal routes exist and take
  // only it; the service token is refused there, and it is refused on
  // every other route.
  void attachInternalCredential(std::string credential) {
    internal_credential_ = std::move(credential);
  }
  service::Metrics& metrics() override { return metrics_; }
  // Enables the artifact routes; without it they answer 503.
  void attachArtifacts(ArtifactBackend backend) { artifacts_ = backend; }
  // The operator's egress policy (the settings' egress_policy, compiled and
  // validated at start). A provision with "network": true gets it as its
  // EnvironmentSpec.egress when it allows something, and is refused when it
  // does not (spec 000, "Egress needs two independent yeses"). Default: deny.
  void allowEgress(EgressPolicy policy) { egress_ = std::move(policy); }
  // The tenant keys a caller may present instead of the service token (the
  // settings' tenant_keys_file, loaded at start). Without them only the
  // service token is accepted. Call before serving.
  void attachTenantKeys(service::TenantKeys keys) { tenant_keys_ = std::move(keys); }
  // Enables schedule.* in code mode and the schedule routes; without it
  // schedule.* is refused "unavailable" and the routes answer 503.
  // The execution half of code mode's capability table (proc, fs, job):
  // the composition root passes execution::addExecutionCapabilities, so the
  // API links no execution code. Without it programs get none of them.
  void attachExecutionCapabilities(capability::AddExecutionCapabilities add);
  void attachSchedules(std::shared_ptr<capability::schedule::ScheduleStore> store,
                       capability::schedule::ScheduleCeilings ceilings = {});
  // One firing pass at the API's clock (the server calls it every
  // schedule_fire_interval): due occurrences move into the fire outbox.
  // Returns how many fired (0 without a store).
  Result<std::size_t> fireSchedules() override;

 private:
  friend struct RouteRows;  // routes.cpp: the table names the handlers below

  service::HttpResponse route(const service::HttpRequest& request);
  // The request's route and call, checked as routes.h says (the token, the
  // method, the query parameters, the tenant), or the response refusing it.
  tl::expected<RouteCall, service::HttpResponse> admit(const service::HttpRequest& request) const;
  // Who the request's bearer credential speaks for; nullopt when it carries
  // none this service knows (401).
  std::optional<Caller> callerOf(const service::HttpRequest& request) const;
  // The tenant check of the call's route (TenantScope) for `caller`: sets
  // call.tenant (and call.body for kBody routes); the refusal otherwise.
  std::optional<service::HttpResponse> checkTenant(RouteCall& call, const Caller& caller) const;
  // A tenant key's call that names another tenant: what an unknown id of the
  // route's one object gets (environment, artifact, note), or 403 on a route
  // of no one object (a listing, provision, upload, lease).
  service::HttpResponse refuseForeignTenant(const RouteCall& call,
                                            const std::optional<std::string>& environment,
                                            const std::string& key_tenant) const;

  // The handlers of routes.cpp's rows, each given its admitted call.
  service::HttpResponse health(const RouteCall& call);
  service::HttpResponse metricsText(const RouteCall& call);
  service::HttpResponse listImages(const RouteCall& call);
  service::HttpResponse provision(const RouteCall& call);
  service::HttpResponse listEnvironments(const RouteCall& call);
  service::HttpResponse getEnvironment(const RouteCall& call);
  service::HttpResponse destroyEnvironment(const RouteCall& call);
  // {"seconds": N}: expires_at becomes now + N, clamped to created_at plus
  // the environment_hard_cap setting, and never earlier than it was; 200
  // with the handle and max_expires_at (that bound).
  service::HttpResponse extendEnvironment(const RouteCall& call);
  service::HttpResponse execute(const RouteCall& call);
  // 204 once the running command of that execution_id is told to end
  // (CANCELLED).
  service::HttpResponse cancelExecution(const RouteCall& call);
  service::HttpResponse readFile(const RouteCall& call);
  service::HttpResponse writeFile(const RouteCall& call);
  service::HttpResponse listDirectory(const RouteCall& call);
  service::HttpResponse provenance(const RouteCall& call);
  // DELETE files?path=&recursive=: 204 once removed.
  service::HttpResponse removePath(const RouteCall& call);
  // POST files/rename {from, to, replace?}: 204 once moved.
  service::HttpResponse renamePath(const RouteCall& call);
  // GET stat?path=: type, size, mode, mtime.
  service::HttpResponse statPath(const RouteCall& call);
  // POST directories {path}: 204 once the directory exists (mkdir -p).
  service::HttpResponse makeDirectory(const RouteCall& call);
  // GET archive?path=DIR: DIR as a tar, streamed (workspace_tar.h).
  service::HttpResponse downloadArchive(const RouteCall& call);
  // PUT archive?path=DIR: the body (a tar, or zip) extracted into DIR -> 204.
  service::HttpResponse uploadArchive(const RouteCall& call);
  service::HttpResponse renewLease(const RouteCall& call);
  // POST /internal/v1/leases/stale: the reaper's question of an execution
  // node (port/stale_lease_wire.h) -> 200 {"stale": [ids]}; 400 naming
  // what is wrong with the body; 503 when the book cannot answer.
  service::HttpResponse staleLeases(const RouteCall& call);
  service::HttpResponse exportArtifact(const RouteCall& call);
  service::HttpResponse uploadArtifact(const RouteCall& call);
  service::HttpResponse getArtifact(const RouteCall& call);
  service::HttpResponse deleteArtifact(const RouteCall& call);
  service::HttpResponse downloadArtifact(const RouteCall& call);
  // GET /v1/runs/{run_id}/artifacts: the call's tenant's artifacts of the
  // run, newest first, at most ?limit= (1-1000, 100 when absent):
  // {"artifacts": [metadata...], "truncated": more rows than listed}.
  // They outlive the environment that made them (a job's spill, an export).
  service::HttpResponse listRunArtifacts(const RouteCall& call);
  service::HttpResponse runCode(const RouteCall& call);
  // GET lists the environment's schedules, DELETE cancels {name}.
  service::HttpResponse scheduleCall(const RouteCall& call);
  service::HttpResponse pendingFires(const RouteCall& call);
  service::HttpResponse acknowledgeFires(const RouteCall& call);
  // A run's notes (code mode's notes.*), of the call's tenant: GET lists
  // them ({"notes": [...]}, key order, ?prefix=), GET .../{key} one (404
  // when the run has none of that key).
  service::HttpResponse listNotes(const RouteCall& call);
  service::HttpResponse getNote(const RouteCall& call);
  service::HttpResponse listTools(const RouteCall& call);
  service::HttpResponse callTool(const RouteCall& call);
  // The environment's jobs (jobs.cpp; port/job_port.h): start -> 201, list,
  // poll (waits at most wait_ms), input -> 204, kill -> 204.
  service::HttpResponse startJob(const RouteCall& call);
  service::HttpResponse listJobs(const RouteCall& call);
  service::HttpResponse pollJob(const RouteCall& call);
  service::HttpResponse sendJobInput(const RouteCall& call);
  service::HttpResponse killJob(const RouteCall& call);
  service::HttpResponse resizeJob(const RouteCall& call);
  // The live environment of a job route's call, or the 404 refusing it.
  tl::expected<EnvironmentHandle, service::HttpResponse> jobEnvironment(const RouteCall& call);
  // What a program's capabilities (and a job's spill) reach on this
  // service: the execution half, schedules, the artifact store.
  capability::CodeModeHost codeModeHost() const;

  // The digest a provision body's `image` names (a name, reference or
  // digest; absent: the default). ExecutionRejected for an unknown name.
  Result<std::string> imageFrom(const nlohmann::json& body) const;
  struct PreparedExecute {
    EnvironmentHandle handle;
    ExecutionCommand command;
  };
  // The command of an execute request, or the response refusing it.
  tl::expected<PreparedExecute, service::HttpResponse> prepareExecute(
      const std::string& id, const service::HttpRequest& request);
  service::HttpResponse finishExecute(const std::string& id,
                                      std::chrono::steady_clock::duration busy,
                                      const Result<ExecutionResult>& result,
                                      nlohmann::json* result_json = nullptr);
  // The workspace of the call's environment and its "path" query
  // parameter, or the response refusing the call.
  struct WorkspaceTarget {
    std::shared_ptr<WorkspaceHandle> workspace;
    std::string path;
  };
  tl::expected<WorkspaceTarget, service::HttpResponse> workspaceTarget(const RouteCall& call);
  // The workspace of the call's environment alone (routes whose paths are in the body).
  tl::expected<std::shared_ptr<WorkspaceHandle>, service::HttpResponse> workspaceOf(
      const RouteCall& call);
  // The stored artifact the call names, of the call's tenant (another
  // tenant's is not_found), or the response refusing the call.
  tl::expected<artifacts::StoredArtifact, service::HttpResponse> artifactOf(const RouteCall& call);
  // Stores `stream` as an untrusted artifact of `scope` (an export or an
  // upload), updates the tenant's byte gauge and answers 201 with its
  // metadata; the store's error as the response otherwise.
  service::HttpResponse storeUntrustedArtifact(const artifacts::ArtifactWriterScope& scope,
                                               artifacts::MeasuredStream stream,
                                               std::string filename, std::string media_type);
  void sweepArtifacts();
  // The tenant a request names (nullopt: none, the operator's call), or
  // the 400 refusing a malformed one.
  static tl::expected<std::optional<std::string>, service::HttpResponse> namedTenant(
      const std::optional<std::string>& tenant_id);
  // With a named tenant: the 404 for an environment that is not live or not
  // that tenant's (the same answer as an unknown id); nullopt when the call
  // may go on (always, without a tenant).
  std::optional<service::HttpResponse> refuseOtherTenant(
      const std::string& id, const std::optional<std::string>& tenant) const;
  // Destroys the environment `id` if it is live (the node forgets it).
  Result<void> destroyLive(const std::string& id);

  const service::Settings& settings_;
  ExecutionNode& node_;
  const ServiceImages images_;
  service::Metrics& metrics_;
  std::function<Timestamp()> clock_;
  std::shared_ptr<LeaseBook> leases_ = makeMemoryLeaseBook();
  std::string internal_credential_;  // empty: the internal routes are absent
  std::optional<ArtifactBackend> artifacts_;
  service::TenantKeys tenant_keys_;
  EgressPolicy egress_;
  std::shared_ptr<const ToolRegistry> tools_;
  std::shared_ptr<capability::schedule::ScheduleStore> schedules_;
  capability::schedule::ScheduleCeilings schedule_ceilings_;
  capability::AddExecutionCapabilities add_execution_;
  // The names a program's table serves with add_execution_ (listed once, at
  // attach): what a code request's "capabilities" may name.
  std::vector<std::string> capability_names_;
};

}  // namespace airlock::gateway
