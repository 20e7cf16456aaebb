#include "airlock/execution/job_engine.h"

#include <sys/eventfd.h>
#include <sys/wait.h>

#include <algorithm>
#include <csignal>
#include <optional>
#include <thread>
#include <utility>

#include "airlock/core/encoding.h"
#include "airlock/execution/job_spool.h"
#include "airlock/sys/io.h"

namespace airlock::execution {

using Steady = std::chrono::steady_clock;

struct EnvironmentJobs::Job {
  std::string id;
  std::vector<std::string> argv;
  std::unique_ptr<SideProcess> proc;
  JobSpillSettings spill_settings;
  std::uint64_t wall_ms = 0;
  // start + the wall asked for, fixed at start; the epoch for a job that
  // lives as long as its environment.
  Timestamp own_deadline;
  // Orders sends (one write to proc's stdin at a time). Never held with
  // `mu`: the pump takes `mu` for every chunk of output, and a send that
  // waited for room in stdin under `mu` would stop the very reads that let
  // the job take its input.
  Mutex send_mu;
  Mutex mu;  // guards the members below
  CondVar cv;
  struct Stream {
    std::string tail;
    std::uint64_t total = 0;
    bool eof = false;
  };
  Stream out GUARDED_BY(mu);
  Stream err GUARDED_BY(mu);
  std::optional<int> status GUARDED_BY(mu);
  JobKillReason kill_reason GUARDED_BY(mu) = JobKillReason::kNone;
  // Exited, both streams at end of file, and the spill settled.
  bool done GUARDED_BY(mu) = false;
  std::optional<std::pair<JobStreamSpill, JobStreamSpill>> spill GUARDED_BY(mu);
  std::optional<TerminalSize> terminal GUARDED_BY(mu);  // a PTY job's current size
  std::thread pump;
};

namespace {

using Job = EnvironmentJobs::Job;

Error noSuchJob(const std::string& id) {
  return Error{ErrorCode::kNotFound, 0, "no job is named " + quoteForMessage(id)};
}

JobStreamSlice sliceSince(const Job::Stream& s, std::uint64_t cursor) {
  JobStreamSlice slice;
  slice.cursor = s.total;
  const std::uint64_t start = s.total - s.tail.size();
  if (cursor < start) {
    slice.dropped = start - cursor;
    slice.data = s.tail;
  } else if (cursor < s.total) {
    slice.data = s.tail.substr(static_cast<std::size_t>(cursor - start));
  }
  return slice;
}

// When a job ends at the latest: its own deadline or its environment's
// expiry (the epoch: none), whichever comes first.
Timestamp endOf(Timestamp own_deadline, Timestamp expires_at) {
  const Timestamp none{};
  if (own_deadline == none) return expires_at;
  if (expires_at == none) return own_deadline;
  return std::min(own_deadline, expires_at);
}

JobSnapshot snapshotOf(const Job& job, std::optional<std::pair<std::uint64_t, std::uint64_t>> since,
                       Timestamp expires_at) REQUIRES(job.mu) {
  JobSnapshot s;
  s.job_id = job.id;
  s.argv = job.argv;
  s.wall_ms = job.wall_ms;
  s.deadline = endOf(job.own_deadline, expires_at);
  s.kill_reason = job.kill_reason;
  s.state = !job.status                               ? JobState::kRunning
            : job.kill_reason != JobKillReason::kNone ? JobState::kKilled
                                                      : JobState::kExited;
  if (job.status && WIFEXITED(*job.status) && s.state == JobState::kExited)
    s.exit_code = WEXITSTATUS(*job.status);
  if (job.status && WIFSIGNALED(*job.status)) s.signal = WTERMSIG(*job.status);
  s.pending = !job.done;
  if (since) {
    s.out = sliceSince(job.out, since->first);
    s.err = sliceSince(job.err, since->second);
  } else {
    s.out.cursor = job.out.total;
    s.err.cursor = job.err.total;
  }
  if (job.done) s.spill = job.spill;
  s.terminal = job.terminal;
  return s;
}

}  // namespace

EnvironmentJobs::EnvironmentJobs(ExecutionEnvironment& env, EnvironmentHandle handle,
                                 JobSettings settings, std::function<Timestamp()> clock)
    : env_(env),
      handle_(std::move(handle)),
      expires_ms_(handle_.expires_at.time_since_epoch().count()),
      settings_(settings),
      clock_(std::move(clock)),
      stop_(::eventfd(0, EFD_CLOEXEC)) {
  if (!clock_)
    clock_ = [] {
      return std::chrono::time_point_cast<std::chrono::milliseconds>(
          std::chrono::system_clock::now());
    };
}

EnvironmentJobs::~EnvironmentJobs() {
  close();
}

void EnvironmentJobs::close() noexcept {
  std::map<std::uint64_t, std::shared_ptr<Job>> jobs;
  {
    MutexLock lk(mu_);
    closed_ = true;
    jobs = jobs_;
  }
  stopping_.store(true);
  std::uint64_t one = 1;
  (void)sys::writeAll(stop_.get(), &one, sizeof one);
  for (auto& [n, job] : jobs) {
    {
      MutexLock lk(job->mu);
      if (!job->status) job->kill_reason = JobKillReason::kEnvironment;
    }
    job->proc->killGroup();
    if (job->pump.joinable()) job->pump.join();
  }
}

Timestamp EnvironmentJobs::expiresAt() const {
  return Timestamp(std::chrono::milliseconds(expires_ms_.load()));
}

void EnvironmentJobs::setExpiresAt(Timestamp expires_at) {
  expires_ms_.store(expires_at.time_since_epoch().count());
}

Result<JobStarted> EnvironmentJobs::grant(const std::optional<std::uint64_t>& wall_ms) const {
  const Timestamp now = clock_();
  // An environment without expires_at (the epoch) clamps nothing.
  const Timestamp expires_at = expiresAt();
  const bool expires = expires_at.time_since_epoch().count() > 0;
  const std::uint64_t asked = wall_ms.value_or(settings_.default_wall_ms);
  JobStarted granted;
  if (asked == 0) {
    if (!settings_.allow_session_lifetime)
      return fail(ErrorCode::kExecutionRejected,
                  "wall_ms 0 (a job for the environment's whole life) is not allowed here");
    granted.deadline = expires_at;  // the epoch: none
    return granted;
  }
  granted.wall_ms = asked;
  if (expires) {
    const auto left = std::max(expires_at - now, std::chrono::milliseconds(0));
    granted.wall_ms = std::min<std::uint64_t>(asked, static_cast<std::uint64_t>(left.count()));
  }
  granted.deadline = now + std::chrono::milliseconds(granted.wall_ms);
  return granted;
}

Result<JobStarted> EnvironmentJobs::start(const JobStartRequest& request) {
  {
    MutexLock lk(mu_);
    if (closed_)
      return fail(ErrorCode::kExecutionRejected,
                  "environment " + quoteForMessage(handle_.environment_id) + " is being destroyed");
    std::size_t running = 0;
    for (auto& [n, job] : jobs_) {
      MutexLock jl(job->mu);
      if (!job->done) ++running;
    }
    if (running >= settings_.max_running_jobs)
      return fail(ErrorCode::kExecutionRejected,
                  "environment " + quoteForMessage(handle_.environment_id) + " already runs " +
                      std::to_string(running) + " jobs, the most it may");
  }
  if (request.command.terminal)
    if (auto ok = checkTerminalSize(*request.command.terminal); !ok)
      return tl::unexpected(ok.error());
  auto granted = grant(request.wall_ms);
  if (!granted) return granted;
  SideCommand command = request.command;
  command.with_stdin = true;
  auto proc = env_.startSideProcess(handle_, command);
  if (!proc) return tl::unexpected(proc.error());
  auto job = std::make_shared<Job>();
  job->argv = command.argv;
  job->proc = std::move(*proc);
  job->spill_settings = request.spill;
  job->wall_ms = granted->wall_ms;
  {
    MutexLock jl(job->mu);
    job->terminal = command.terminal;
  }
  // The pump ends the job at its own deadline (start + the wall asked for,
  // unclamped); the environment's expiry ends it by destroying the
  // environment, so an extended environment keeps its jobs.
  std::optional<Steady::time_point> steady_deadline;
  if (const std::uint64_t asked = request.wall_ms.value_or(settings_.default_wall_ms); asked > 0) {
    job->own_deadline = clock_() + std::chrono::milliseconds(asked);
    steady_deadline = Steady::now() + std::chrono::milliseconds(asked);
  }
  MutexLock lk(mu_);
  if (closed_) {  // closed while it started: it dies here
    job->proc->killGroup();
    return fail(ErrorCode::kExecutionRejected,
                "environment " + quoteForMessage(handle_.environment_id) + " is being destroyed");
  }
  const std::uint64_t number = ++next_;
  job->id = "job-" + std::to_string(number);
  granted->job_id = job->id;
  jobs_[number] = job;
  job->pump = std::thread([this, job, steady_deadline] { pump(*job, steady_deadline); });
  forgetOldJobs();
  return granted;
}

void EnvironmentJobs::forgetOldJobs() {
  // The oldest finished records beyond max_kept_jobs. Their pumps have
  // published `done` and are returning; joining them is brief.
  std::vector<std::shared_ptr<Job>> forgotten;
  for (auto it = jobs_.begin(); it != jobs_.end() && jobs_.size() > settings_.max_kept_jobs;) {
    bool done = false;
    {
      MutexLock jl(it->second->mu);
      done = it->second->done;
    }
    if (!done) {
      ++it;
      continue;
    }
    forgotten.push_back(it->second);
    it = jobs_.erase(it);
  }
  for (auto& job : forgotten)
    if (job->pump.joinable()) job->pump.join();
}

void EnvironmentJobs::pump(Job& job, std::optional<Steady::time_point> deadline) {
  // Local, so that every spool file is closed when the pump returns.
  std::optional<StreamSpool> spools[2];
  const JobSpillSettings& cfg = job.spill_settings;
  if (cfg.sink) {
    spools[0].emplace();
    spools[1].emplace();
  }
  SidePumpHooks hooks;  // no stdin_data: send feeds stdin
  hooks.output = [&](bool is_stdout, std::string_view chunk) {
    {
      MutexLock lk(job.mu);
      Job::Stream& s = is_stdout ? job.out : job.err;
      s.tail.append(chunk);
      s.total += chunk.size();
      if (s.tail.size() > kJobTailBytes) s.tail.erase(0, s.tail.size() - kJobTailBytes);
      job.cv.notifyAll();
    }
    // The disk write is outside job.mu: a poll never waits for it.
    if (auto& spool = spools[is_stdout ? 0 : 1])
      spool->append(cfg, spooled_, chunk.data(), chunk.size());
  };
  hooks.output_ended = [&](bool is_stdout) {
    MutexLock lk(job.mu);
    (is_stdout ? job.out : job.err).eof = true;
    job.cv.notifyAll();
  };
  hooks.exited = [&](int wait_status) {
    MutexLock lk(job.mu);
    job.status = wait_status;
    job.cv.notifyAll();
  };
  hooks.stop_fd = stop_.get();
  hooks.deadline = deadline;
  hooks.continue_after_deadline = true;  // collect the killed job's exit and output
  const SidePumpOutcome pumped = job.proc->pump(hooks);
  if (pumped.end != SidePumpEnd::kFinished && pumped.end != SidePumpEnd::kDeadline) {
    // Closing (or the poll failed): nobody can ask for a spill any more.
    MutexLock lk(job.mu);
    job.out.eof = job.err.eof = true;
    if (!job.status) {
      job.status = SIGKILL;
      if (job.kill_reason == JobKillReason::kNone) job.kill_reason = JobKillReason::kEnvironment;
    }
    job.done = true;
    job.cv.notifyAll();
    return;
  }
  if (pumped.end == SidePumpEnd::kDeadline) {
    MutexLock lk(job.mu);
    if (job.kill_reason == JobKillReason::kNone) job.kill_reason = JobKillReason::kDeadline;
  }
  // Terminal: store each stream, then publish the spill with `done`.
  std::pair<JobStreamSpill, JobStreamSpill> spill{
      storeSpill(cfg, job.id + ".stdout", spools[0], stopping_),
      storeSpill(cfg, job.id + ".stderr", spools[1], stopping_)};
  spools[0].reset();
  spools[1].reset();
  MutexLock lk(job.mu);
  job.spill = std::move(spill);
  job.done = true;
  job.cv.notifyAll();
}

Result<std::shared_ptr<Job>> EnvironmentJobs::find(const std::string& job_id) {
  MutexLock lk(mu_);
  for (auto& [n, job] : jobs_)
    if (job->id == job_id) return job;
  return tl::unexpected(noSuchJob(job_id));
}

Result<JobSnapshot> EnvironmentJobs::poll(const JobPollRequest& request) {
  auto found = find(request.job_id);
  if (!found) return tl::unexpected(found.error());
  Job& j = **found;
  MutexLock lk(j.mu);
  if (request.wait_ms > 0) {
    // Until a cursor moves, the job settles, the wait passes or the caller
    // cancels (checked on every wake).
    const auto until =
        Steady::now() + std::chrono::milliseconds(std::min(request.wait_ms, kMaxJobWaitMs));
    auto cancelled = [&] { return request.cancel != nullptr && request.cancel->cancelled(); };
    while (
        !(j.out.total > request.stdout_cursor || j.err.total > request.stderr_cursor || j.done) &&
        Steady::now() < until && !cancelled()) {
      j.cv.waitUntil(j.mu, std::min(until, Steady::now() + std::chrono::milliseconds(50)));
    }
  }
  return snapshotOf(j, std::pair(request.stdout_cursor, request.stderr_cursor), expiresAt());
}

Result<void> EnvironmentJobs::send(const std::string& job_id, std::string_view bytes, bool last,
                                   std::uint64_t timeout_ms, const CancelToken* cancel) {
  auto found = find(job_id);
  if (!found) return tl::unexpected(found.error());
  Job& j = **found;
  MutexLock lk(j.send_mu);
  if (!j.proc->stdinOpen()) return fail(ErrorCode::kExecutionRejected, "the job's input is closed");
  const auto deadline = Steady::now() + std::chrono::milliseconds(timeout_ms);
  switch (j.proc->writeStdin(bytes, deadline, cancel != nullptr ? cancel->pollFd() : -1)) {
    case SideInputEnd::kWritten:
      break;
    case SideInputEnd::kClosed:
      return fail(ErrorCode::kExecutionRejected, "the job's input is closed");
    case SideInputEnd::kDeadline:
    case SideInputEnd::kStopped:
      return fail(ErrorCode::kEnvironmentBusy, "the job did not take its input in time");
  }
  if (last) j.proc->closeStdin();
  return {};
}

Result<void> EnvironmentJobs::kill(const std::string& job_id) {
  auto found = find(job_id);
  if (!found) return tl::unexpected(found.error());
  Job& j = **found;
  {
    MutexLock lk(j.mu);
    if (!j.status && j.kill_reason == JobKillReason::kNone)
      j.kill_reason = JobKillReason::kRequested;
  }
  j.proc->killGroup();
  return {};
}

Result<void> EnvironmentJobs::resize(const std::string& job_id, const TerminalSize& size) {
  auto found = find(job_id);
  if (!found) return tl::unexpected(found.error());
  Job& j = **found;
  {
    MutexLock lk(j.mu);
    if (!j.terminal)
      return fail(ErrorCode::kToolValidationError,
                  "job " + quoteForMessage(job_id) + " was not started with a terminal (pty)");
  }
  if (auto ok = checkTerminalSize(size); !ok) return ok;
  // One resize at a time, in the order asked (send_mu orders a job's input
  // the same way), so the size kept is the terminal's last one.
  MutexLock order(j.send_mu);
  {
    MutexLock lk(j.mu);
    if (j.status) return fail(ErrorCode::kExecutionRejected, "the job has ended");
  }
  // Not under j.mu: the pump takes it for every chunk of output.
  if (auto r = j.proc->resizeTerminal(size); !r) {
    MutexLock lk(j.mu);
    if (j.status || r.error().code == ErrorCode::kExecutionRejected)
      return fail(ErrorCode::kExecutionRejected, "the job has ended");
    return r;
  }
  MutexLock lk(j.mu);
  j.terminal = size;
  return {};
}

std::vector<JobSnapshot> EnvironmentJobs::list() {
  std::vector<std::shared_ptr<Job>> jobs;
  {
    MutexLock lk(mu_);
    for (auto& [n, job] : jobs_) jobs.push_back(job);
  }
  std::vector<JobSnapshot> out;
  for (auto& job : jobs) {
    MutexLock lk(job->mu);
    out.push_back(snapshotOf(*job, std::nullopt, expiresAt()));
  }
  return out;
}

SingleEnvironmentJobs::SingleEnvironmentJobs(ExecutionEnvironment& env, EnvironmentHandle handle,
                                             JobSettings settings)
    : environment_id_(handle.environment_id), jobs_(env, std::move(handle), settings) {}

Result<void> SingleEnvironmentJobs::check(const EnvironmentHandle& handle) const {
  if (handle.environment_id != environment_id_)
    return fail(ErrorCode::kExecutionRejected,
                "no live environment " + quoteForMessage(handle.environment_id));
  return {};
}

Result<JobStarted> SingleEnvironmentJobs::startJob(const EnvironmentHandle& handle,
                                                   const JobStartRequest& request) {
  if (auto ok = check(handle); !ok) return tl::unexpected(ok.error());
  return jobs_.start(request);
}

Result<JobSnapshot> SingleEnvironmentJobs::pollJob(const EnvironmentHandle& handle,
                                                   const JobPollRequest& request) {
  if (auto ok = check(handle); !ok) return tl::unexpected(ok.error());
  return jobs_.poll(request);
}

Result<void> SingleEnvironmentJobs::sendJobInput(const EnvironmentHandle& handle,
                                                 const std::string& job_id, std::string_view bytes,
                                                 bool last, std::uint64_t timeout_ms,
                                                 const CancelToken* cancel) {
  if (auto ok = check(handle); !ok) return ok;
  return jobs_.send(job_id, bytes, last, timeout_ms, cancel);
}

Result<void> SingleEnvironmentJobs::killJob(const EnvironmentHandle& handle,
                                            const std::string& job_id) {
  if (auto ok = check(handle); !ok) return ok;
  return jobs_.kill(job_id);
}

Result<void> SingleEnvironmentJobs::resizeJob(const EnvironmentHandle& handle,
                                              const std::string& job_id, const TerminalSize& size) {
  if (auto ok = check(handle); !ok) return ok;
  return jobs_.resize(job_id, size);
}

Result<std::vector<JobSnapshot>> SingleEnvironmentJobs::listJobs(const EnvironmentHandle& handle) {
  if (auto ok = check(handle); !ok) return tl::unexpected(ok.error());
  return jobs_.list();
}

}  // namespace airlock::execution
