// An execution node served over its internal API on 127.0.0.1 (an
// ephemeral port) for tests: an adapter, the LocalNode over it, the
// InternalApi (or a handler a test wraps around it) and a real
// service::HttpServer on a thread of its own; and the ExecutionEnvironment
// a gateway sees through a RemoteNode to it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "airlock/core/error.h"
#include "airlock/execution/node.h"
#include "airlock/gateway/remote/remote_node.h"
#include "airlock/node/internal_api.h"
#include "airlock/service/http_server.h"

namespace airlock::testing {

inline constexpr const char* kTestCredential = "test-service-credential-0123456789";

class NodeServer {
 public:
  // A handler in front of the InternalApi (a test double); empty: the API.
  using Wrap = std::function<std::unique_ptr<service::RequestHandler>(airlock::node::InternalApi&)>;

  // Serves `adapter` (owned) until stop() or destruction.
  static Result<std::unique_ptr<NodeServer>> start(std::unique_ptr<ExecutionEnvironment> adapter,
                                                   Wrap wrap = {});
  ~NodeServer();
  NodeServer(const NodeServer&) = delete;
  NodeServer& operator=(const NodeServer&) = delete;

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  gateway::RemoteNodeOptions remoteOptions() const;
  ExecutionEnvironment& adapter() { return *adapter_; }
  execution::LocalNode& node() { return *node_; }
  // Stops serving (idempotent): what it held is destroyed.
  void stop();

 private:
  NodeServer() = default;
  std::unique_ptr<ExecutionEnvironment> adapter_;
  std::unique_ptr<execution::LocalNode> node_;
  std::unique_ptr<service::Metrics> metrics_;
  std::unique_ptr<airlock::node::InternalApi> api_;
  std::unique_ptr<service::RequestHandler> front_;
  service::Settings settings_;  // the server keeps a reference
  std::unique_ptr<service::HttpServer> server_;
  std::thread thread_;
  std::uint16_t port_ = 0;
};

// What the contract suite drives: a RemoteNode to a NodeServer, owning
// both. shutdown() is the node's (the service stopping behind the wire).
class RemoteStack final : public ExecutionEnvironment {
 public:
  explicit RemoteStack(std::unique_ptr<NodeServer> server);
  ~RemoteStack() override;
  RemoteStack(const RemoteStack&) = delete;
  RemoteStack& operator=(const RemoteStack&) = delete;

  gateway::RemoteNode& remote() { return *remote_; }
  NodeServer& server() { return *server_; }

  Result<EnvironmentHandle> provision(const EnvironmentSpec& spec) override;
  Result<ExecutionResult> execute(const EnvironmentHandle& handle, const ExecutionCommand& command,
                                  const CancelToken* cancel) override;
  Result<ExecutionResult> executeStreaming(const EnvironmentHandle& handle,
                                           const ExecutionCommand& command,
                                           const CancelToken* cancel,
                                           const OutputSink& sink) override;
  Result<void> cancel(const EnvironmentHandle& handle, std::string_view execution_id) override;
  Result<void> destroy(const EnvironmentHandle& handle) override;
  Result<EnvironmentHandle> extend(const EnvironmentHandle& handle, Timestamp expires_at) override;
  Result<std::shared_ptr<WorkspaceHandle>> workspace(const EnvironmentHandle& handle) override;
  Result<std::unique_ptr<SideProcess>> startSideProcess(const EnvironmentHandle& handle,
                                                        const SideCommand& command) override;
  void shutdown() noexcept override;

 private:
  std::unique_ptr<NodeServer> server_;
  std::unique_ptr<gateway::RemoteNode> remote_;
};

}  // namespace airlock::testing
