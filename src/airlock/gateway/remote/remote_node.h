// RemoteNode: an execution node on another process or machine, reached over
// its internal API (execution/internal_api.h) — the gateway's side of the
// wire (spec 000, "Where the boundary is": "the port is the same either
// way"). Every ExecutionNode method becomes one HTTP call carrying the
// service credential; values cross as JSON, file and export bytes stream.
//
// Failures of the wire itself (connection refused or reset, a timeout, a
// malformed answer) are ExecutionUnavailable, which the port marks
// retriable: a node that died mid-command yields it for its environments.
// An answer the node gave is returned as its own Error (code and message).
//
// Links no execution or sandbox code (a structural gate walks the
// includes of gateway/). Thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/core/error.h"
#include "airlock/port/execution_node.h"

namespace airlock::gateway {

struct RemoteNodeOptions {
  std::string base_url;    // "http://127.0.0.1:7001" (no path)
  std::string credential;  // the service credential (bearer)
  std::chrono::milliseconds connect_timeout{2000};
  // Calls that do not run a command (provision, files, jobs): the most one
  // takes. A command's call lasts as long as its own timeout.
  std::chrono::milliseconds call_timeout{120'000};
};

class RemoteNode final : public ExecutionNode {
 public:
  explicit RemoteNode(RemoteNodeOptions options);
  ~RemoteNode() override;
  RemoteNode(const RemoteNode&) = delete;
  RemoteNode& operator=(const RemoteNode&) = delete;

  // GET /internal/v1/node: the node's name, live count and capacity
  // (ExecutionUnavailable when it does not answer).
  Result<NodeStatus> status() const;
  const RemoteNodeOptions& options() const { return options_; }

  Result<EnvironmentHandle> provision(const EnvironmentSpec& spec) override;
  Result<ExecutionResult> execute(const EnvironmentHandle& handle, const ExecutionCommand& command,
                                  const CancelToken* cancel = nullptr) override;
  Result<ExecutionResult> executeStreaming(const EnvironmentHandle& handle,
                                           const ExecutionCommand& command,
                                           const CancelToken* cancel,
                                           const OutputSink& sink) override;
  Result<void> cancel(const EnvironmentHandle& handle, std::string_view execution_id) override;
  Result<void> destroy(const EnvironmentHandle& handle) override;
  Result<EnvironmentHandle> extend(const EnvironmentHandle& handle, Timestamp expires_at) override;
  Result<std::shared_ptr<WorkspaceHandle>> workspace(const EnvironmentHandle& handle) override;

  std::vector<LiveEnvironment> live(
      const std::optional<std::string>& tenant_id = std::nullopt) const override;
  std::optional<LiveEnvironment> find(const std::string& environment_id) const override;
  Result<RunClaim> claim(const std::string& environment_id, RunKind kind) override;
  // The node reaps on its own timer (asking the gateways which leases are
  // stale); a gateway's pass does nothing here and returns 0.
  int reap(const StaleLeaseQuery& stale) override;
  // Nothing: a gateway that stops leaves the node's environments to the
  // node (another gateway serves them; expiry still applies).
  void destroyAll() override;
  std::size_t liveCount() const override;

  Result<JobStarted> startJob(const EnvironmentHandle& handle,
                              const JobStartRequest& request) override;
  Result<JobSnapshot> pollJob(const EnvironmentHandle& handle,
                              const JobPollRequest& request) override;
  Result<void> sendJobInput(const EnvironmentHandle& handle, const std::string& job_id,
                            std::string_view bytes, bool last, std::uint64_t timeout_ms,
                            const CancelToken* cancel) override;
  Result<void> resizeJob(const EnvironmentHandle& handle, const std::string& job_id,
                         const TerminalSize& size) override;
  Result<void> killJob(const EnvironmentHandle& handle, const std::string& job_id) override;
  Result<std::vector<JobSnapshot>> listJobs(const EnvironmentHandle& handle) override;

 protected:
  void release(const std::string& environment_id, RunKind kind) noexcept override;

 private:
  RemoteNodeOptions options_;
};

}  // namespace airlock::gateway
