// The execution node's internal API (spec 000, "Where the boundary is" and
// "The execution service holds nothing worth stealing"): the ExecutionNode
// port (port/execution_node.h, with its ExecutionEnvironment, WorkspaceHandle
// and JobPort) served over HTTP to the gateways, and only to them: every
// route but the health check needs "Authorization: Bearer <service
// credential>", a secret of the deployment that no sandbox can read. The
// gateway side of the wire is gateway/remote/remote_node.h (RemoteNode);
// `airlock serve --role execution` serves this handler.
//
// The node holds no database, no artifact store credential and no tenant
// key: what crosses this API is the port's own values (ids, specs, byte
// strings), and bytes a gateway streams in or out (files, exports).
//
// Routes live under /internal/v1; the table and the JSON shapes are in the
// .cpp (and docs/scaling.md). Errors are {"error": {"code", "message"}} with
// the codes of core/error.h, so RemoteNode returns the port's own Error.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "airlock/core/error.h"
#include "airlock/port/cancel_token.h"
#include "airlock/port/execution_node.h"
#include "airlock/service/http_message.h"
#include "airlock/service/metrics.h"
#include "airlock/service/request_handler.h"

namespace airlock::node {

struct InternalApiOptions {
  // The service credential every call must carry (required, non-empty).
  std::string credential;
  // What GET /internal/v1/node reports (NodeStatus): the node name its
  // environment ids carry, and how many environments it takes at once
  // (provision beyond it: EnvironmentBusy; 0: no bound).
  std::string node_name;
  std::size_t capacity = 0;
  // The reaper's question to the gateways (node/stale_lease_client.h
  // over HTTP; empty: no stale-lease check, expiry still applies).
  StaleLeaseQuery stale_leases;
};

// Serves `node` (borrowed; must outlive the handler). Thread-safe.
class InternalApi final : public service::RequestHandler {
 public:
  InternalApi(ExecutionNode& node, InternalApiOptions options, service::Metrics& metrics);
  ~InternalApi() override;
  InternalApi(const InternalApi&) = delete;
  InternalApi& operator=(const InternalApi&) = delete;

  service::HttpResponse handle(const service::HttpRequest& request) override;
  service::HttpResponse handleStreaming(const service::HttpRequest& request,
                                        const std::function<void(std::string)>& emit,
                                        const CancelToken* cancel) override;
  bool wantsStream(const service::HttpRequest& request) const override;
  bool runsCommand(const service::HttpRequest& request) const override;
  bool needsNoToken(const service::HttpRequest& request) const override;
  bool authorized(const service::HttpRequest& request) const override;
  std::string routeLabel(std::string_view path) const override;
  // The node's reaper pass, asking options.stale_leases.
  int reap() override;
  Result<std::size_t> fireSchedules() override { return std::size_t{0}; }
  void destroyAll() override { node_.destroyAll(); }
  service::Metrics& metrics() override { return metrics_; }

  NodeStatus status() const;

  // Every route as (method, full path), in table order: what the tests
  // walk (each needs the credential but GET /internal/v1/health).
  static std::vector<std::pair<std::string, std::string>> routeTable();

 private:
  struct Route;
  struct Claims;
  using Json = nlohmann::json;
  static std::span<const Route> routes();
  // The route of a request; `path_known` (optional) says whether its path
  // is a route's under another method.
  static const Route* routeOf(const service::HttpRequest& request, bool* path_known);

  service::HttpResponse methodNotAllowed(const service::HttpRequest& request, const Json& body);
  service::HttpResponse health(const service::HttpRequest& request, const Json& body);
  service::HttpResponse nodeStatus(const service::HttpRequest& request, const Json& body);
  service::HttpResponse provision(const service::HttpRequest& request, const Json& body);
  service::HttpResponse listLive(const service::HttpRequest& request, const Json& body);
  service::HttpResponse findLive(const service::HttpRequest& request, const Json& body);
  service::HttpResponse destroy(const service::HttpRequest& request, const Json& body);
  service::HttpResponse extend(const service::HttpRequest& request, const Json& body);
  service::HttpResponse execute(const service::HttpRequest& request, const Json& body);
  service::HttpResponse cancel(const service::HttpRequest& request, const Json& body);
  service::HttpResponse claim(const service::HttpRequest& request, const Json& body);
  service::HttpResponse releaseClaim(const service::HttpRequest& request, const Json& body);
  Result<std::shared_ptr<WorkspaceHandle>> workspaceOf(const Json& body);
  service::HttpResponse workspaceOpen(const service::HttpRequest& request, const Json& body);
  service::HttpResponse workspaceRead(const service::HttpRequest& request, const Json& body);
  service::HttpResponse workspaceWrite(const service::HttpRequest& request, const Json& body);
  service::HttpResponse workspacePlace(const service::HttpRequest& request, const Json& body);
  service::HttpResponse workspaceMkdir(const service::HttpRequest& request, const Json& body);
  service::HttpResponse workspaceListdir(const service::HttpRequest& request, const Json& body);
  service::HttpResponse workspaceProvenance(const service::HttpRequest& request, const Json& body);
  service::HttpResponse workspaceRemove(const service::HttpRequest& request, const Json& body);
  service::HttpResponse workspaceRename(const service::HttpRequest& request, const Json& body);
  service::HttpResponse workspaceStat(const service::HttpRequest& request, const Json& body);
  service::HttpResponse workspaceExport(const service::HttpRequest& request, const Json& body);
  service::HttpResponse jobStart(const service::HttpRequest& request, const Json& body);
  service::HttpResponse jobPoll(const service::HttpRequest& request, const Json& body);
  service::HttpResponse jobInput(const service::HttpRequest& request, const Json& body);
  service::HttpResponse jobResize(const service::HttpRequest& request, const Json& body);
  service::HttpResponse jobKill(const service::HttpRequest& request, const Json& body);
  service::HttpResponse jobList(const service::HttpRequest& request, const Json& body);

  ExecutionNode& node_;
  InternalApiOptions options_;
  service::Metrics& metrics_;
  // The claims gateways hold (by claim id; released by id, or dropped when
  // their environment is destroyed) and the provisions under way.
  std::unique_ptr<Claims> claims_;
};

}  // namespace airlock::node
