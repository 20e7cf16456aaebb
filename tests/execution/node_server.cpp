#include "node_server.h"

#include <utility>

namespace airlock::testing {

Result<std::unique_ptr<NodeServer>> NodeServer::start(std::unique_ptr<ExecutionEnvironment> adapter,
                                                      Wrap wrap) {
  std::unique_ptr<NodeServer> s(new NodeServer());
  s->adapter_ = std::move(adapter);
  s->node_ = std::make_unique<execution::LocalNode>(*s->adapter_);
  s->metrics_ = std::make_unique<service::Metrics>("test");
  airlock::node::InternalApiOptions options;
  options.credential = kTestCredential;
  options.node_name = "node-test";
  s->api_ = std::make_unique<airlock::node::InternalApi>(*s->node_, options, *s->metrics_);
  service::RequestHandler* front = s->api_.get();
  if (wrap) {
    s->front_ = wrap(*s->api_);
    front = s->front_.get();
  }
  s->settings_.listen = "127.0.0.1:0";
  auto server = service::HttpServer::create(s->settings_, *front, *s->node_);
  if (!server) return tl::unexpected(server.error());
  s->server_ = std::move(*server);
  s->port_ = s->server_->port();
  s->thread_ = std::thread([server = s->server_.get()] { server->run(); });
  return s;
}

NodeServer::~NodeServer() {
  stop();
}

void NodeServer::stop() {
  if (server_ != nullptr) server_->stop();
  if (thread_.joinable()) thread_.join();
}

gateway::RemoteNodeOptions NodeServer::remoteOptions() const {
  gateway::RemoteNodeOptions o;
  o.base_url = url();
  o.credential = kTestCredential;
  o.call_timeout = std::chrono::milliseconds(30'000);
  return o;
}

RemoteStack::RemoteStack(std::unique_ptr<NodeServer> server)
    : server_(std::move(server)),
      remote_(std::make_unique<gateway::RemoteNode>(server_->remoteOptions())) {}

RemoteStack::~RemoteStack() {
  remote_.reset();
  server_.reset();
}

Result<EnvironmentHandle> RemoteStack::provision(const EnvironmentSpec& spec) {
  return remote_->provision(spec);
}
Result<ExecutionResult> RemoteStack::execute(const EnvironmentHandle& handle,
                                             const ExecutionCommand& command,
                                             const CancelToken* cancel) {
  return remote_->execute(handle, command, cancel);
}
Result<ExecutionResult> RemoteStack::executeStreaming(const EnvironmentHandle& handle,
                                                      const ExecutionCommand& command,
                                                      const CancelToken* cancel,
                                                      const OutputSink& sink) {
  return remote_->executeStreaming(handle, command, cancel, sink);
}
Result<void> RemoteStack::cancel(const EnvironmentHandle& handle, std::string_view execution_id) {
  return remote_->cancel(handle, execution_id);
}
Result<void> RemoteStack::destroy(const EnvironmentHandle& handle) {
  return remote_->destroy(handle);
}
Result<EnvironmentHandle> RemoteStack::extend(const EnvironmentHandle& handle,
                                              Timestamp expires_at) {
  return remote_->extend(handle, expires_at);
}
Result<std::shared_ptr<WorkspaceHandle>> RemoteStack::workspace(const EnvironmentHandle& handle) {
  return remote_->workspace(handle);
}
Result<std::unique_ptr<SideProcess>> RemoteStack::startSideProcess(const EnvironmentHandle& handle,
                                                                   const SideCommand& command) {
  return remote_->startSideProcess(handle, command);
}
void RemoteStack::shutdown() noexcept {
  server_->adapter().shutdown();
}

}  // namespace airlock::testing
