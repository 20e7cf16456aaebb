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
#include <string>
#include <string_view>

#include "airlock/core/error.h"
#include "airlock/port/cancel_token.h"
#include "airlock/port/execution_node.h"
#include "airlock/service/http_message.h"
#include "airlock/service/metrics.h"
#include "airlock/service/request_handler.h"

namespace airlock::execution {

struct InternalApiOptions {
  // The service credential every call must carry (required, non-empty).
  std::string credential;
  // What GET /internal/v1/node reports (NodeStatus): the node name its
  // environment ids carry, and how many environments it takes at once
  // (provision beyond it: EnvironmentBusy; 0: no bound).
  std::string node_name;
  std::size_t capacity = 0;
  // The reaper's question to the gateways (execution/stale_lease_client.h
  // over HTTP; empty: no stale-lease check, expiry still applies).
  StaleLeaseQuery stale_leases;
};

// Serves `node` (borrowed; must outlive the handler). Thread-safe.
class InternalApi final : public service::RequestHandler {
 public:
  InternalApi(ExecutionNode& node, InternalApiOptions options, service::Metrics& metrics);

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

 private:
  ExecutionNode& node_;
  InternalApiOptions options_;
  service::Metrics& metrics_;
};

}  // namespace airlock::execution
