// The job engine of the execution side (port/job_port.h; spec 001
// "cap/job"): one registry of background jobs per environment. Each job is
// a side process (ExecutionEnvironment::startSideProcess) with a pump
// thread that keeps a rolling tail of kJobTailBytes per stream, counts
// every byte (cursors are byte offsets), spools each stream whole
// (job_spool.h) and, once the job is terminal, hands the spools to the
// JobOutputSink its start named.
//
// Owners: LocalNode keeps one per live environment and closes it before
// the environment is destroyed; a capability table given no node keeps one
// of its own (SingleEnvironmentJobs), closed with the table.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/core/thread_annotations.h"
#include "airlock/port/job_port.h"
#include "airlock/sys/unique_fd.h"

namespace airlock::execution {

// One environment's jobs. Thread-safe. The environment (borrowed) must
// outlive this.
class EnvironmentJobs {
 public:
  // `clock`: the wall clock expires_at is compared with (empty:
  // system_clock).
  EnvironmentJobs(ExecutionEnvironment& env, EnvironmentHandle handle, JobSettings settings,
                  std::function<Timestamp()> clock = {});
  ~EnvironmentJobs();
  EnvironmentJobs(const EnvironmentJobs&) = delete;
  EnvironmentJobs& operator=(const EnvironmentJobs&) = delete;

  // JobPort's methods for this environment (errors as there).
  Result<JobStarted> start(const JobStartRequest& request);
  Result<JobSnapshot> poll(const JobPollRequest& request);
  Result<void> send(const std::string& job_id, std::string_view bytes, bool last,
                    std::uint64_t timeout_ms, const CancelToken* cancel);
  Result<void> kill(const std::string& job_id);
  Result<void> resize(const std::string& job_id, const TerminalSize& size);
  std::vector<JobSnapshot> list();

  // Kills every job, abandons the spills in progress and joins every pump:
  // afterwards no process, thread or spool of these jobs is left, and
  // start is refused (ExecutionRejected). Idempotent.
  void close() noexcept;

  // The environment's expiry as the jobs see it: a job started after an
  // extension is clamped to the new one, and the deadline a poll or list
  // reports is the earlier of the job's own and this.
  void setExpiresAt(Timestamp expires_at);

  struct Job;

 private:
  Result<std::shared_ptr<Job>> find(const std::string& job_id);
  // The deadline of a job asking for `wall_ms`, or the refusal.
  Result<JobStarted> grant(const std::optional<std::uint64_t>& wall_ms) const;
  void pump(Job& job, std::optional<std::chrono::steady_clock::time_point> deadline);
  Timestamp expiresAt() const;
  void forgetOldJobs() REQUIRES(mu_);

  ExecutionEnvironment& env_;
  const EnvironmentHandle handle_;
  std::atomic<std::int64_t> expires_ms_;  // Unix milliseconds; 0: none
  const JobSettings settings_;
  std::function<Timestamp()> clock_;
  sys::UniqueFd stop_;  // eventfd: readable once closing
  std::atomic<bool> stopping_{false};
  std::atomic<std::uint64_t> spooled_{0};  // bytes spooled by every job (max_total_bytes)
  Mutex mu_;
  std::map<std::uint64_t, std::shared_ptr<Job>> jobs_ GUARDED_BY(mu_);  // by number, oldest first
  std::uint64_t next_ GUARDED_BY(mu_) = 0;
  bool closed_ GUARDED_BY(mu_) = false;
};

// A JobPort over one environment's jobs (the capability table's own when it
// is given no node's registry). A handle of another environment is
// ExecutionRejected.
class SingleEnvironmentJobs final : public JobPort {
 public:
  SingleEnvironmentJobs(ExecutionEnvironment& env, EnvironmentHandle handle,
                        JobSettings settings = {});
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

 private:
  Result<void> check(const EnvironmentHandle& handle) const;
  std::string environment_id_;
  EnvironmentJobs jobs_;
};

}  // namespace airlock::execution
