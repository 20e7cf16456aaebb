// RemoteNode: an execution node on another process or machine, reached over
// its internal API (node/internal_api.h) — the gateway's side of the
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
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
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
  // A handle whose methods each call the node; openExport streams the
  // file (never held whole), and its reader hashes what arrives: bytes whose
  // length or SHA-256 differ from what the node measured end the stream
  // with ArtifactIntegrityError.
  Result<std::shared_ptr<WorkspaceHandle>> workspace(const EnvironmentHandle& handle) override;
  // Code mode does not cross the wire yet: ExecutionUnavailable, naming it.
  Result<std::unique_ptr<SideProcess>> startSideProcess(const EnvironmentHandle& handle,
                                                        const SideCommand& command) override;
  Result<std::unique_ptr<CapabilityChannel>> openCapabilityChannel(
      const EnvironmentHandle& handle) override;

  // live() and find() on a node that does not answer: empty and nullopt.
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

  // Jobs: the spill sink does not cross; a remote job's spill reports
  // "job output is not yet spilled through a remote execution node".
  // pollJob's CancelToken and sendJobInput's are not forwarded (the wait
  // and the write are bounded by their own timeouts).
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

 public:
  // How to reach the node (the .cpp's), shared with workspace handles and
  // exports that outlive a call.
  struct Wire;

 private:
  RemoteNodeOptions options_;
  std::shared_ptr<const Wire> wire_;
  // The node's claim ids of the claims this gateway holds, by environment
  // and kind (claims of one kind on one environment are interchangeable).
  std::mutex claims_mu_;
  std::multimap<std::pair<std::string, RunKind>, std::string> claims_;
};

}  // namespace airlock::gateway
