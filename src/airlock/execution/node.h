// LocalNode: the execution node (port/execution_node.h) of one process,
// over an adapter it borrows (spec 000, "Where the boundary is", "Nothing
// outlives its lease"). The port's methods go to the adapter unchanged;
// around them the node keeps the registry of what it provisioned, the busy
// time of each environment, the claims of commands and programs, and the
// reaper, and each live environment's jobs (job_engine.h).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "airlock/execution/job_engine.h"
#include "airlock/port/execution_node.h"

namespace airlock::execution {

class LocalNode final : public ExecutionNode {
 public:
  // `adapter` is borrowed and must outlive the node. `clock` is the wall
  // clock the reaper compares expires_at with (the adapter's; empty:
  // system_clock). `events` observes the registry (metrics). `jobs` is what
  // each environment's jobs are allowed (job_port.h JobSettings).
  explicit LocalNode(ExecutionEnvironment& adapter, std::function<Timestamp()> clock = {},
                     ExecutionNodeEvents events = {}, JobSettings jobs = {});
  ~LocalNode() override;
  LocalNode(const LocalNode&) = delete;
  LocalNode& operator=(const LocalNode&) = delete;

  // The port, forwarded to the adapter (provision registers, destroy
  // forgets, execute adds busy time).
  Result<EnvironmentHandle> provision(const EnvironmentSpec& spec) override;
  Result<ExecutionResult> execute(const EnvironmentHandle& handle, const ExecutionCommand& command,
                                  const CancelToken* cancel = nullptr) override;
  Result<ExecutionResult> executeStreaming(const EnvironmentHandle& handle,
                                           const ExecutionCommand& command,
                                           const CancelToken* cancel,
                                           const OutputSink& sink) override;
  Result<void> cancel(const EnvironmentHandle& handle, std::string_view execution_id) override;
  Result<void> destroy(const EnvironmentHandle& handle) override;
  // The adapter's extend; the registry then holds the handle it returns, so
  // find, live and the reaper use the new expires_at.
  Result<EnvironmentHandle> extend(const EnvironmentHandle& handle, Timestamp expires_at) override;
  Result<std::shared_ptr<WorkspaceHandle>> workspace(const EnvironmentHandle& handle) override;
  Result<std::unique_ptr<SideProcess>> startSideProcess(const EnvironmentHandle& handle,
                                                        const SideCommand& command) override;
  Result<std::unique_ptr<CapabilityChannel>> openCapabilityChannel(
      const EnvironmentHandle& handle) override;
  void shutdown() noexcept override;

  // The node (port/execution_node.h).
  std::vector<LiveEnvironment> live(
      const std::optional<std::string>& tenant_id = std::nullopt) const override;
  std::optional<LiveEnvironment> find(const std::string& environment_id) const override;
  Result<RunClaim> claim(const std::string& environment_id, RunKind kind) override;
  int reap(const StaleLeaseQuery& stale) override;
  void destroyAll() override;
  std::size_t liveCount() const override;

  // The jobs (port/job_port.h), per live environment.
  Result<JobStarted> startJob(const EnvironmentHandle& handle,
                              const JobStartRequest& request) override;
  Result<JobSnapshot> pollJob(const EnvironmentHandle& handle,
                              const JobPollRequest& request) override;
  Result<void> sendJobInput(const EnvironmentHandle& handle, const std::string& job_id,
                            std::string_view bytes, bool last, std::uint64_t timeout_ms,
                            const CancelToken* cancel) override;
  Result<void> killJob(const EnvironmentHandle& handle, const std::string& job_id) override;
  Result<void> resizeJob(const EnvironmentHandle& handle, const std::string& job_id,
                         const TerminalSize& size) override;
  Result<std::vector<JobSnapshot>> listJobs(const EnvironmentHandle& handle) override;

 protected:
  void release(const std::string& environment_id, RunKind kind) noexcept override;

 private:
  void addBusy(const std::string& environment_id, std::chrono::steady_clock::duration busy);
  // The jobs of the live environment `handle` names (made at first use);
  // ExecutionRejected when it is not live or not that tenant's.
  Result<std::shared_ptr<EnvironmentJobs>> jobsOf(const EnvironmentHandle& handle);

  ExecutionEnvironment& adapter_;
  std::function<Timestamp()> clock_;
  const ExecutionNodeEvents events_;
  mutable std::mutex mu_;
  std::map<std::string, LiveEnvironment> live_;
  // What runs, per environment (under mu_).
  std::set<std::string> programs_running_;
  std::multiset<std::string> commands_running_;
  const JobSettings job_settings_;
  // Each live environment's jobs (under mu_); closed before its destroy.
  std::map<std::string, std::shared_ptr<EnvironmentJobs>> jobs_;
};

}  // namespace airlock::execution
