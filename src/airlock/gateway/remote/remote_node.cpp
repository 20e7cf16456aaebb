#include "airlock/gateway/remote/remote_node.h"

#include <utility>

namespace airlock::gateway {

// A first shape: no call crosses the wire yet; every method answers
// ExecutionUnavailable, and the node is never found.

namespace {
Error notYet() {
  return Error{ErrorCode::kExecutionUnavailable, 0,
               "calls to a remote execution node are not built yet"};
}
}  // namespace

RemoteNode::RemoteNode(RemoteNodeOptions options) : options_(std::move(options)) {}
RemoteNode::~RemoteNode() = default;

Result<NodeStatus> RemoteNode::status() const {
  return tl::unexpected(notYet());
}
Result<EnvironmentHandle> RemoteNode::provision(const EnvironmentSpec& /*spec*/) {
  return tl::unexpected(notYet());
}
Result<ExecutionResult> RemoteNode::execute(const EnvironmentHandle& /*handle*/,
                                            const ExecutionCommand& /*command*/,
                                            const CancelToken* /*cancel*/) {
  return tl::unexpected(notYet());
}
Result<ExecutionResult> RemoteNode::executeStreaming(const EnvironmentHandle& /*handle*/,
                                                     const ExecutionCommand& /*command*/,
                                                     const CancelToken* /*cancel*/,
                                                     const OutputSink& /*sink*/) {
  return tl::unexpected(notYet());
}
Result<void> RemoteNode::cancel(const EnvironmentHandle& /*handle*/,
                                std::string_view /*execution_id*/) {
  return tl::unexpected(notYet());
}
Result<void> RemoteNode::destroy(const EnvironmentHandle& /*handle*/) {
  return tl::unexpected(notYet());
}
Result<EnvironmentHandle> RemoteNode::extend(const EnvironmentHandle& /*handle*/,
                                             Timestamp /*expires_at*/) {
  return tl::unexpected(notYet());
}
Result<std::shared_ptr<WorkspaceHandle>> RemoteNode::workspace(
    const EnvironmentHandle& /*handle*/) {
  return tl::unexpected(notYet());
}
std::vector<LiveEnvironment> RemoteNode::live(
    const std::optional<std::string>& /*tenant_id*/) const {
  return {};
}
std::optional<LiveEnvironment> RemoteNode::find(const std::string& /*environment_id*/) const {
  return std::nullopt;
}
Result<RunClaim> RemoteNode::claim(const std::string& /*environment_id*/, RunKind /*kind*/) {
  return tl::unexpected(notYet());
}
int RemoteNode::reap(const StaleLeaseQuery& /*stale*/) {
  return 0;
}
void RemoteNode::destroyAll() {}
std::size_t RemoteNode::liveCount() const {
  return 0;
}
Result<JobStarted> RemoteNode::startJob(const EnvironmentHandle& /*handle*/,
                                        const JobStartRequest& /*request*/) {
  return tl::unexpected(notYet());
}
Result<JobSnapshot> RemoteNode::pollJob(const EnvironmentHandle& /*handle*/,
                                        const JobPollRequest& /*request*/) {
  return tl::unexpected(notYet());
}
Result<void> RemoteNode::sendJobInput(const EnvironmentHandle& /*handle*/,
                                      const std::string& /*job_id*/, std::string_view /*bytes*/,
                                      bool /*last*/, std::uint64_t /*timeout_ms*/,
                                      const CancelToken* /*cancel*/) {
  return tl::unexpected(notYet());
}
Result<void> RemoteNode::resizeJob(const EnvironmentHandle& /*handle*/,
                                   const std::string& /*job_id*/, const TerminalSize& /*size*/) {
  return tl::unexpected(notYet());
}
Result<void> RemoteNode::killJob(const EnvironmentHandle& /*handle*/,
                                 const std::string& /*job_id*/) {
  return tl::unexpected(notYet());
}
Result<std::vector<JobSnapshot>> RemoteNode::listJobs(const EnvironmentHandle& /*handle*/) {
  return tl::unexpected(notYet());
}
void RemoteNode::release(const std::string& /*environment_id*/, RunKind /*kind*/) noexcept {}

}  // namespace airlock::gateway
