// job.*: background side processes, each with a pump thread that keeps a
// rolling tail per stream (cursors are byte offsets into the stream) and
// spools the whole output for the spill (job_spool.h).
#include <sys/eventfd.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <map>
#include <thread>
#include <utility>
#include <vector>

#include "airlock/capability/broker/call_args.h"
#include "airlock/core/thread_annotations.h"
#include "airlock/execution/capabilities/capability_modules.h"
#include "airlock/execution/capabilities/job_spool.h"
#include "airlock/sys/io.h"

namespace airlock::execution {

using namespace capability::handler_terms;

namespace {

struct Job {
  std::string id;
  std::vector<std::string> argv;
  std::unique_ptr<SideProcess> proc;
  // Orders job.send calls (one write to proc's stdin at a time). Never held
  // with `mu`: the pump takes `mu` for every chunk of output, and a send that
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
  bool killed GUARDED_BY(mu) = false;
  // Exited, both streams at end of file, and the spill settled.
  bool done GUARDED_BY(mu) = false;
  // Set with `done` (stdout, stderr).
  std::optional<std::pair<StreamSpill, StreamSpill>> spill GUARDED_BY(mu);
  std::thread pump;
};

class JobTable {
 public:
  JobTable(sys::UniqueFd stop, JobSpillServices spill)
      : stop_(std::move(stop)), spill_(std::move(spill)) {}
  ~JobTable() {
    stopping_.store(true);
    std::uint64_t one = 1;
    (void)sys::writeAll(stop_.get(), &one, sizeof one);
    MutexLock lk(mu_);
    for (auto& [id, job] : jobs_) {
      job->proc->killGroup();
      if (job->pump.joinable()) job->pump.join();
    }
  }
  std::shared_ptr<Job> add(std::vector<std::string> argv, std::unique_ptr<SideProcess> proc) {
    auto job = std::make_shared<Job>();
    job->argv = std::move(argv);
    job->proc = std::move(proc);
    MutexLock lk(mu_);
    job->id = "job-" + std::to_string(++next_);
    jobs_[job->id] = job;
    job->pump = std::thread([this, job] { pump(*job); });
    return job;
  }
  std::shared_ptr<Job> find(const std::string& id) {
    MutexLock lk(mu_);
    auto it = jobs_.find(id);
    return it == jobs_.end() ? nullptr : it->second;
  }
  std::vector<std::shared_ptr<Job>> all() {
    MutexLock lk(mu_);
    std::vector<std::shared_ptr<Job>> v;
    for (auto& [id, j] : jobs_) v.push_back(j);
    return v;
  }

 private:
  void pump(Job& job) {
    // Local, so that every spool file is closed when the pump returns.
    std::optional<StreamSpool> spools[2];
    if (spill_.sink) {
      spools[0].emplace();
      spools[1].emplace();
    }
    SidePumpHooks hooks;  // no stdin_data: job.write feeds stdin
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
        spool->append(spill_, spooled_, chunk.data(), chunk.size());
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
    const SidePumpOutcome pumped = job.proc->pump(hooks);
    if (pumped.end != SidePumpEnd::kFinished) {
      // The table is going away (or the poll failed): nobody can ask for a
      // spill any more.
      MutexLock lk(job.mu);
      job.out.eof = job.err.eof = true;
      if (!job.status) job.status = SIGKILL;
      job.done = true;
      job.cv.notifyAll();
      return;
    }
    // Terminal: store each stream, then publish the spill with `done`.
    std::pair<StreamSpill, StreamSpill> spill{
        storeSpill(spill_, job.id + ".stdout", spools[0], stopping_),
        storeSpill(spill_, job.id + ".stderr", spools[1], stopping_)};
    spools[0].reset();
    spools[1].reset();
    MutexLock lk(job.mu);
    job.spill = std::move(spill);
    job.done = true;
    job.cv.notifyAll();
  }

  sys::UniqueFd stop_;
  const JobSpillServices spill_;
  std::atomic<bool> stopping_{false};
  std::atomic<std::uint64_t> spooled_{
      0};  // bytes spooled by every job (JobSpillServices::max_total_bytes)
  Mutex mu_;
  std::map<std::string, std::shared_ptr<Job>> jobs_ GUARDED_BY(mu_);
  std::uint64_t next_ GUARDED_BY(mu_) = 0;
};

// The part of a stream after `cursor`: {data, cursor, dropped}. Cursors are
// byte offsets into the stream; output older than the tail is counted in
// `dropped` (it left the window unread).
Value streamSince(const Job::Stream& s, std::uint64_t cursor) {
  const std::uint64_t start = s.total - s.tail.size();
  std::uint64_t dropped = 0;
  std::string data;
  if (cursor < start) {
    dropped = start - cursor;
    data = s.tail;
  } else if (cursor < s.total) {
    data = s.tail.substr(static_cast<std::size_t>(cursor - start));
  }
  return Value::map({{"data", textOrBytes(std::move(data))},
                     {"cursor", Value::unsignedInteger(s.total)},
                     {"dropped", Value::unsignedInteger(dropped)}});
}

// One stream's spill: the error string, or {artifact_id (nil for an empty
// stream), media_type (nil likewise), sha256, size_bytes, truncated,
// dropped_bytes}.
Value streamSpillValue(const StreamSpill& s) {
  if (s.error) return Value::string(*s.error);
  return Value::map({{"artifact_id", s.artifact_id ? Value::string(*s.artifact_id) : Value::nil()},
                     {"media_type", s.artifact_id ? Value::string(s.media_type) : Value::nil()},
                     {"sha256", Value::string(s.sha256)},
                     {"size_bytes", Value::unsignedInteger(s.size_bytes)},
                     {"truncated", Value::boolean(s.dropped_bytes > 0)},
                     {"dropped_bytes", Value::unsignedInteger(s.dropped_bytes)}});
}

// Nil until the job is done.
Value jobSpillValue(const Job& job) REQUIRES(job.mu) {
  if (!job.done || !job.spill) return Value::nil();
  return Value::map({{"stdout", streamSpillValue(job.spill->first)},
                     {"stderr", streamSpillValue(job.spill->second)}});
}

const char* jobStateName(const Job& job) REQUIRES(job.mu) {
  return !job.status ? "running" : job.killed ? "killed" : "exited";
}

Value jobState(const Job& job, std::uint64_t out_cursor, std::uint64_t err_cursor)
    REQUIRES(job.mu) {
  Map m;
  m.emplace_back("job_id", Value::string(job.id));
  m.emplace_back("state", Value::string(jobStateName(job)));
  if (job.status && WIFEXITED(*job.status) && !job.killed)
    m.emplace_back("exit_code", Value::integer(WEXITSTATUS(*job.status)));
  else
    m.emplace_back("exit_code", Value::nil());
  m.emplace_back("pending", Value::boolean(!job.done));
  m.emplace_back("stdout", streamSince(job.out, out_cursor));
  m.emplace_back("stderr", streamSince(job.err, err_cursor));
  m.emplace_back("spill", jobSpillValue(job));
  return Value::map(std::move(m));
}

tl::expected<std::shared_ptr<Job>, Refusal> findJob(JobTable& t, const Value& args) {
  auto id = capability::requiredString(args, "job_id");
  if (!id) return tl::unexpected(id.error());
  auto job = t.find(*id);
  if (!job) return tl::unexpected(Refusal{"job_not_found", "no job is named " + *id});
  return job;
}

Answer jobStart(const ExecutionCapabilityServices& s, JobTable& t, const CallContext& ctx) {
  auto req = parseProcRequest(ctx.args, false);
  if (!req) return req.error();
  req->command.with_stdin = true;
  auto proc = s.env->startSideProcess(s.handle, req->command);
  if (!proc) return refusalFor(proc.error());
  auto job = t.add(req->command.argv, std::move(*proc));
  return Value::map({{"job_id", Value::string(job->id)},
                     {"stdout_cursor", Value::unsignedInteger(0)},
                     {"stderr_cursor", Value::unsignedInteger(0)}});
}

Answer jobPollOrWait(JobTable& t, const CallContext& ctx, bool wait) {
  auto job = findJob(t, ctx.args);
  if (!job) return job.error();
  auto oc = capability::optionalUint(ctx.args, "stdout_cursor", 0);
  if (!oc) return oc.error();
  auto ec = capability::optionalUint(ctx.args, "stderr_cursor", 0);
  if (!ec) return ec.error();
  auto timeout = capability::optionalUint(ctx.args, "timeout_ms", 0);
  if (!timeout) return timeout.error();
  Job& j = **job;
  MutexLock lk(j.mu);
  if (wait) {
    // Until a cursor moves, the job settles, the timeout or the deadline
    // passes, or the call is cancelled (checked on every wake).
    auto until = ctx.deadline - std::chrono::milliseconds(20);
    if (*timeout > 0)
      until = std::min(until, BrokerClock::now() + std::chrono::milliseconds(*timeout));
    while (!(j.out.total > *oc || j.err.total > *ec || j.done) && BrokerClock::now() < until &&
           !ctx.cancel.cancelled()) {
      j.cv.waitUntil(j.mu, std::min(until, BrokerClock::now() + std::chrono::milliseconds(50)));
    }
  }
  return jobState(j, *oc, *ec);
}

Answer jobSend(JobTable& t, const CallContext& ctx, bool last) {
  auto job = findJob(t, ctx.args);
  if (!job) return job.error();
  auto data = capability::optionalData(ctx.args, "data");
  if (!data) return data.error();
  Job& j = **job;
  MutexLock lk(j.send_mu);
  if (!j.proc->stdinOpen()) return Refusal{"job_refused", "the job's input is closed"};
  switch (j.proc->writeStdin(data->value_or(""), ctx.deadline, ctx.cancel.pollFd())) {
    case SideInputEnd::kWritten:
      break;
    case SideInputEnd::kClosed:
      return Refusal{"job_refused", "the job's input is closed"};
    case SideInputEnd::kDeadline:
    case SideInputEnd::kStopped:
      return Refusal{"deadline_exceeded", "the job did not take its input in time"};
  }
  if (last) j.proc->closeStdin();
  return Value::nil();
}

Answer jobKill(JobTable& t, const CallContext& ctx) {
  auto job = findJob(t, ctx.args);
  if (!job) return job.error();
  Job& j = **job;
  {
    MutexLock lk(j.mu);
    if (!j.status) j.killed = true;
  }
  j.proc->killGroup();
  return Value::nil();
}

Answer jobList(JobTable& t) {
  Array out;
  for (auto& j : t.all()) {
    MutexLock lk(j->mu);
    Array argv;
    for (auto& a : j->argv) argv.push_back(textOrBytes(a));
    out.push_back(Value::map({{"job_id", Value::string(j->id)},
                              {"argv", Value::array(std::move(argv))},
                              {"state", Value::string(jobStateName(*j))},
                              {"spill", jobSpillValue(*j)}}));
  }
  return Value::array(std::move(out));
}

}  // namespace

void addJobCapabilities(capability::CapabilityTable& table,
                        const ExecutionCapabilityServices& services) {
  using capability::CeilingClass;
  auto jobs =
      std::make_shared<JobTable>(sys::UniqueFd(::eventfd(0, EFD_CLOEXEC)), services.job_spill);
  table.add("job.start", CeilingClass::kSpawn,
            [s = services, jobs](const CallContext& c) { return jobStart(s, *jobs, c); });
  table.add("job.poll", CeilingClass::kNone,
            [jobs](const CallContext& c) { return jobPollOrWait(*jobs, c, false); });
  table.add("job.wait", CeilingClass::kNone,
            [jobs](const CallContext& c) { return jobPollOrWait(*jobs, c, true); });
  table.add("job.send", CeilingClass::kSend,
            [jobs](const CallContext& c) { return jobSend(*jobs, c, false); });
  table.add("job.send_last", CeilingClass::kSend,
            [jobs](const CallContext& c) { return jobSend(*jobs, c, true); });
  table.add("job.kill", CeilingClass::kNone,
            [jobs](const CallContext& c) { return jobKill(*jobs, c); });
  table.add("job.list", CeilingClass::kNone, [jobs](const CallContext&) { return jobList(*jobs); });
}

}  // namespace airlock::execution
