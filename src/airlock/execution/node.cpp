#include "airlock/execution/node.h"

#include <utility>

#include "airlock/core/encoding.h"

namespace airlock::execution {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

LocalNode::LocalNode(ExecutionEnvironment& adapter, std::function<Timestamp()> clock,
                     ExecutionNodeEvents events, JobSettings jobs)
    : adapter_(adapter), clock_(std::move(clock)), events_(std::move(events)), job_settings_(jobs) {
  if (!clock_)
    clock_ = [] {
      return std::chrono::time_point_cast<std::chrono::milliseconds>(
          std::chrono::system_clock::now());
    };
}

Result<EnvironmentHandle> LocalNode::provision(const EnvironmentSpec& spec) {
  auto handle = adapter_.provision(spec);
  if (!handle) return handle;
  std::lock_guard lk(mu_);
  live_[handle->environment_id] = LiveEnvironment{
      *handle, Clock::now(), {}, spec.limits.wall_clock_seconds, 0, spec.egress, spec.image_digest};
  if (events_.live_count) events_.live_count(live_.size());
  return handle;
}

void LocalNode::addBusy(const std::string& environment_id, Clock::duration busy) {
  std::lock_guard lk(mu_);
  if (auto it = live_.find(environment_id); it != live_.end()) it->second.busy += busy;
}

Result<ExecutionResult> LocalNode::execute(const EnvironmentHandle& handle,
                                           const ExecutionCommand& command,
                                           const CancelToken* cancel) {
  const auto started = Clock::now();
  auto result = adapter_.execute(handle, command, cancel);
  addBusy(handle.environment_id, Clock::now() - started);
  return result;
}

Result<ExecutionResult> LocalNode::executeStreaming(const EnvironmentHandle& handle,
                                                    const ExecutionCommand& command,
                                                    const CancelToken* cancel,
                                                    const OutputSink& sink) {
  const auto started = Clock::now();
  auto result = adapter_.executeStreaming(handle, command, cancel, sink);
  addBusy(handle.environment_id, Clock::now() - started);
  return result;
}

Result<void> LocalNode::cancel(const EnvironmentHandle& handle, std::string_view execution_id) {
  return adapter_.cancel(handle, execution_id);
}

LocalNode::~LocalNode() {
  std::map<std::string, std::shared_ptr<EnvironmentJobs>> jobs;
  {
    std::lock_guard lk(mu_);
    jobs.swap(jobs_);
  }
  for (auto& [id, j] : jobs) j->close();
}

Result<void> LocalNode::destroy(const EnvironmentHandle& handle) {
  // The environment's jobs die first: their processes are killed and their
  // pumps joined before the sandbox (and what a pump reads) goes.
  std::shared_ptr<EnvironmentJobs> jobs;
  {
    std::lock_guard lk(mu_);
    if (auto it = jobs_.find(handle.environment_id); it != jobs_.end()) {
      jobs = std::move(it->second);
      jobs_.erase(it);
    }
  }
  if (jobs) jobs->close();
  auto r = adapter_.destroy(handle);
  std::lock_guard lk(mu_);
  auto it = live_.find(handle.environment_id);
  if (!r) {
    if (it != live_.end()) ++it->second.destroy_failures;
    if (events_.destroy_failed) events_.destroy_failed();
    return r;
  }
  if (it != live_.end()) {
    if (events_.destroyed)
      events_.destroyed(
          std::chrono::duration<double>(Clock::now() - it->second.provisioned_at).count());
    live_.erase(it);
  }
  if (events_.live_count) events_.live_count(live_.size());
  return {};
}

Result<EnvironmentHandle> LocalNode::extend(const EnvironmentHandle& handle, Timestamp expires_at) {
  auto extended = adapter_.extend(handle, expires_at);
  if (!extended) return extended;
  std::lock_guard lk(mu_);
  if (auto it = live_.find(handle.environment_id); it != live_.end()) it->second.handle = *extended;
  if (auto it = jobs_.find(handle.environment_id); it != jobs_.end())
    it->second->setExpiresAt(extended->expires_at);
  return extended;
}

Result<std::shared_ptr<WorkspaceHandle>> LocalNode::workspace(const EnvironmentHandle& handle) {
  return adapter_.workspace(handle);
}

Result<std::unique_ptr<SideProcess>> LocalNode::startSideProcess(const EnvironmentHandle& handle,
                                                                 const SideCommand& command) {
  return adapter_.startSideProcess(handle, command);
}

Result<std::unique_ptr<CapabilityChannel>> LocalNode::openCapabilityChannel(
    const EnvironmentHandle& handle) {
  return adapter_.openCapabilityChannel(handle);
}

void LocalNode::shutdown() noexcept {
  adapter_.shutdown();
}

std::vector<LiveEnvironment> LocalNode::live(const std::optional<std::string>& tenant_id) const {
  std::vector<LiveEnvironment> out;
  std::lock_guard lk(mu_);
  for (const auto& [id, live] : live_)
    if (!tenant_id || live.handle.tenant_id == *tenant_id) out.push_back(live);
  return out;
}

std::optional<LiveEnvironment> LocalNode::find(const std::string& environment_id) const {
  std::lock_guard lk(mu_);
  auto it = live_.find(environment_id);
  if (it == live_.end()) return std::nullopt;
  return it->second;
}

Result<RunClaim> LocalNode::claim(const std::string& environment_id, RunKind kind) {
  std::lock_guard lk(mu_);
  if (programs_running_.contains(environment_id))
    return fail(ErrorCode::kExecutionRejected,
                "a program is running in environment " + quoteForMessage(environment_id));
  if (kind == RunKind::kProgram) {
    if (commands_running_.contains(environment_id))
      return fail(ErrorCode::kExecutionRejected,
                  "another command is running in environment " + quoteForMessage(environment_id));
    programs_running_.insert(environment_id);
  } else {
    // Two commands: the adapter refuses the second ("another command is
    // running"), as it always has.
    commands_running_.insert(environment_id);
  }
  return makeClaim(*this, environment_id, kind);
}

void LocalNode::release(const std::string& environment_id, RunKind kind) noexcept {
  std::lock_guard lk(mu_);
  if (kind == RunKind::kProgram) {
    programs_running_.erase(environment_id);
  } else if (auto it = commands_running_.find(environment_id); it != commands_running_.end()) {
    commands_running_.erase(it);
  }
}

int LocalNode::reap(const StaleLeaseQuery& stale) {
  std::map<std::string, std::pair<EnvironmentHandle, const char*>> doomed;  // by id
  std::map<std::string, EnvironmentHandle> leased;  // live, neither retried nor expired
  std::vector<LiveLease> leases;
  const Timestamp now = clock_();
  {
    std::lock_guard lk(mu_);
    for (const auto& [id, live] : live_) {
      const EnvironmentHandle& h = live.handle;
      leases.push_back(LiveLease{h.tenant_id, h.run_id, h.lease_epoch, id});
      if (live.destroy_failures > 0)
        doomed.emplace(id, std::pair(h, "retried"));
      else if (h.expires_at <= now)
        doomed.emplace(id, std::pair(h, "expired"));
      else
        leased.emplace(id, h);
    }
  }
  // Asked without the registry locked: the answer comes from the gateway.
  if (stale && !leases.empty())
    for (const std::string& id : stale(leases))
      if (auto it = leased.find(id); it != leased.end())
        doomed.emplace(id, std::pair(it->second, "stale_lease"));
  int destroyed = 0;
  for (const auto& [id, doom] : doomed) {
    if (!destroy(doom.first)) continue;
    ++destroyed;
    if (events_.reaped) events_.reaped(doom.second);
  }
  return destroyed;
}

void LocalNode::destroyAll() {
  std::vector<EnvironmentHandle> handles;
  {
    std::lock_guard lk(mu_);
    for (const auto& [id, live] : live_) handles.push_back(live.handle);
  }
  for (const auto& handle : handles) (void)destroy(handle);
}

std::size_t LocalNode::liveCount() const {
  std::lock_guard lk(mu_);
  return live_.size();
}

Result<std::shared_ptr<EnvironmentJobs>> LocalNode::jobsOf(const EnvironmentHandle& handle) {
  std::lock_guard lk(mu_);
  auto it = live_.find(handle.environment_id);
  if (it == live_.end() || it->second.handle.tenant_id != handle.tenant_id)
    return fail(ErrorCode::kExecutionRejected,
                "no live environment " + quoteForMessage(handle.environment_id));
  auto& jobs = jobs_[handle.environment_id];
  if (!jobs)
    jobs = std::make_shared<EnvironmentJobs>(adapter_, it->second.handle, job_settings_, clock_);
  return jobs;
}

Result<JobStarted> LocalNode::startJob(const EnvironmentHandle& handle,
                                       const JobStartRequest& request) {
  auto jobs = jobsOf(handle);
  if (!jobs) return tl::unexpected(jobs.error());
  return (*jobs)->start(request);
}

Result<JobSnapshot> LocalNode::pollJob(const EnvironmentHandle& handle,
                                       const JobPollRequest& request) {
  auto jobs = jobsOf(handle);
  if (!jobs) return tl::unexpected(jobs.error());
  return (*jobs)->poll(request);
}

Result<void> LocalNode::sendJobInput(const EnvironmentHandle& handle, const std::string& job_id,
                                     std::string_view bytes, bool last, std::uint64_t timeout_ms,
                                     const CancelToken* cancel) {
  auto jobs = jobsOf(handle);
  if (!jobs) return tl::unexpected(jobs.error());
  return (*jobs)->send(job_id, bytes, last, timeout_ms, cancel);
}

Result<void> LocalNode::killJob(const EnvironmentHandle& handle, const std::string& job_id) {
  auto jobs = jobsOf(handle);
  if (!jobs) return tl::unexpected(jobs.error());
  return (*jobs)->kill(job_id);
}

Result<void> LocalNode::resizeJob(const EnvironmentHandle& handle, const std::string& job_id,
                                  const TerminalSize& size) {
  auto jobs = jobsOf(handle);
  if (!jobs) return tl::unexpected(jobs.error());
  return (*jobs)->resize(job_id, size);
}

Result<std::vector<JobSnapshot>> LocalNode::listJobs(const EnvironmentHandle& handle) {
  auto jobs = jobsOf(handle);
  if (!jobs) return tl::unexpected(jobs.error());
  return (*jobs)->list();
}

}  // namespace airlock::execution
