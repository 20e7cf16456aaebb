// job.*: code mode's door onto the environment's jobs (port/job_port.h).
// The jobs are the execution node's, one registry per environment, so a job
// a program started keeps running after it returns and a later program, the
// HTTP API or a tool lists, polls, feeds and kills it. A table given no
// node's registry keeps one of its own, closed with the table.
#include <algorithm>
#include <utility>
#include <vector>

#include "airlock/capability/broker/call_args.h"
#include "airlock/execution/capabilities/capability_modules.h"
#include "airlock/execution/job_engine.h"

namespace airlock::execution {

using namespace capability::handler_terms;

namespace {

std::uint64_t unixMs(Timestamp t) {
  return static_cast<std::uint64_t>(std::max<std::int64_t>(0, t.time_since_epoch().count()));
}

Value streamValue(const JobStreamSlice& s) {
  return Value::map({{"data", textOrBytes(s.data)},
                     {"cursor", Value::unsignedInteger(s.cursor)},
                     {"dropped", Value::unsignedInteger(s.dropped)}});
}

// One stream's spill: the error string, or {artifact_id (nil for an empty
// stream), media_type (nil likewise), sha256, size_bytes, truncated,
// dropped_bytes}.
Value streamSpillValue(const JobStreamSpill& s) {
  if (s.error) return Value::string(*s.error);
  return Value::map({{"artifact_id", s.artifact_id ? Value::string(*s.artifact_id) : Value::nil()},
                     {"media_type", s.artifact_id ? Value::string(s.media_type) : Value::nil()},
                     {"sha256", Value::string(s.sha256)},
                     {"size_bytes", Value::unsignedInteger(s.size_bytes)},
                     {"truncated", Value::boolean(s.dropped_bytes > 0)},
                     {"dropped_bytes", Value::unsignedInteger(s.dropped_bytes)}});
}

// Nil until the job is done.
Value spillValue(const JobSnapshot& s) {
  if (s.pending || !s.spill) return Value::nil();
  return Value::map({{"stdout", streamSpillValue(s.spill->first)},
                     {"stderr", streamSpillValue(s.spill->second)}});
}

Value killReasonValue(const JobSnapshot& s) {
  const char* reason = jobKillReasonName(s.kill_reason);
  return reason != nullptr ? Value::string(reason) : Value::nil();
}

Value stateValue(const JobSnapshot& s) {
  Map m;
  m.emplace_back("job_id", Value::string(s.job_id));
  m.emplace_back("state", Value::string(jobStateName(s.state)));
  m.emplace_back("exit_code", s.exit_code ? Value::integer(*s.exit_code) : Value::nil());
  m.emplace_back("kill_reason", killReasonValue(s));
  m.emplace_back("pending", Value::boolean(s.pending));
  m.emplace_back("stdout", streamValue(s.out));
  m.emplace_back("stderr", streamValue(s.err));
  m.emplace_back("spill", spillValue(s));
  return Value::map(std::move(m));
}

// The refusal for an error of the port: job_not_found, job_refused,
// deadline_exceeded, or refusalFor's.
Refusal jobRefusal(const Error& e) {
  if (e.code == ErrorCode::kNotFound) return Refusal{"job_not_found", e.message()};
  if (e.code == ErrorCode::kEnvironmentBusy) return Refusal{"deadline_exceeded", e.message()};
  if (e.code == ErrorCode::kExecutionRejected &&
      (e.message().starts_with("the job's input is closed") ||
       e.message().starts_with("the job has ended")))
    return Refusal{"job_refused", e.message()};
  return refusalFor(e);
}

Refusal noJobs() {
  return Refusal{"unavailable", "this table serves no environment"};
}

// What every handler acts on: the port and the environment.
struct JobDoor {
  JobPort* port = nullptr;
  EnvironmentHandle handle;
  JobSpillServices spill;
  std::shared_ptr<JobPort> owned;  // the table's own registry, when it has no node's
};

// A terminal size from `size` (a map {rows, columns}, each 1 to
// kMaxTerminalCells); `where` names it in the refusal ("args.pty." or
// "args.").
tl::expected<TerminalSize, Refusal> terminalSizeOf(const Value& size, const std::string& where) {
  if (size.asMap() == nullptr)
    return tl::unexpected(
        badRequest(where.substr(0, where.size() - 1) + " must be a map {rows, columns}"));
  for (const auto& [key, v] : *size.asMap())
    if (key != "rows" && key != "columns")
      return tl::unexpected(
          badRequest(where + key + " is not a terminal size's field (rows, columns)"));
  TerminalSize out;
  for (auto [field, cells] : {std::pair{"rows", &out.rows}, std::pair{"columns", &out.columns}}) {
    const Value* v = size.find(field);
    const auto n = v != nullptr ? v->asUnsigned() : std::nullopt;
    if (!n || *n < 1 || *n > kMaxTerminalCells)
      return tl::unexpected(badRequest(where + field + " must be an integer from 1 to " +
                                       std::to_string(kMaxTerminalCells)));
    *cells = static_cast<std::uint16_t>(*n);
  }
  return out;
}

// session: job.start_for_session (wall 0, whatever the arguments say).
Answer jobStart(const JobDoor& d, const CallContext& ctx, bool session) {
  if (d.port == nullptr) return noJobs();
  auto req = parseProcRequest(ctx.args, false);
  if (!req) return req.error();
  JobStartRequest start;
  start.command = std::move(req->command);
  start.spill = d.spill;
  if (const Value* pty = ctx.args.find("pty"); pty != nullptr && !pty->isNil()) {
    auto size = terminalSizeOf(*pty, "args.pty.");
    if (!size) return size.error();
    start.command.terminal = *size;
  }
  if (session) {
    start.wall_ms = 0;
  } else if (ctx.args.find("wall_ms") != nullptr && !ctx.args.find("wall_ms")->isNil()) {
    auto wall = capability::optionalUint(ctx.args, "wall_ms", 0);
    if (!wall) return wall.error();
    start.wall_ms = *wall;
  }
  auto started = d.port->startJob(d.handle, start);
  if (!started) return jobRefusal(started.error());
  return Value::map({{"job_id", Value::string(started->job_id)},
                     {"stdout_cursor", Value::unsignedInteger(0)},
                     {"stderr_cursor", Value::unsignedInteger(0)},
                     {"wall_ms", Value::unsignedInteger(started->wall_ms)},
                     {"deadline_ms", Value::unsignedInteger(unixMs(started->deadline))}});
}

Answer jobPollOrWait(const JobDoor& d, const CallContext& ctx, bool wait) {
  if (d.port == nullptr) return noJobs();
  auto id = capability::requiredString(ctx.args, "job_id");
  if (!id) return id.error();
  JobPollRequest poll;
  poll.job_id = *id;
  auto oc = capability::optionalUint(ctx.args, "stdout_cursor", 0);
  if (!oc) return oc.error();
  auto ec = capability::optionalUint(ctx.args, "stderr_cursor", 0);
  if (!ec) return ec.error();
  auto timeout = capability::optionalUint(ctx.args, "timeout_ms", 0);
  if (!timeout) return timeout.error();
  poll.stdout_cursor = *oc;
  poll.stderr_cursor = *ec;
  if (wait) {
    // Bounded by the call's own deadline (less a margin to answer in).
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        ctx.deadline - std::chrono::milliseconds(20) - BrokerClock::now());
    std::uint64_t ms = left.count() > 0 ? static_cast<std::uint64_t>(left.count()) : 0;
    if (*timeout > 0) ms = std::min<std::uint64_t>(ms, *timeout);
    poll.wait_ms = std::max<std::uint64_t>(ms, 1);
    poll.cancel = &ctx.cancel;
  }
  auto state = d.port->pollJob(d.handle, poll);
  if (!state) return jobRefusal(state.error());
  return stateValue(*state);
}

Answer jobSend(const JobDoor& d, const CallContext& ctx, bool last) {
  if (d.port == nullptr) return noJobs();
  auto id = capability::requiredString(ctx.args, "job_id");
  if (!id) return id.error();
  auto data = capability::optionalData(ctx.args, "data");
  if (!data) return data.error();
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(ctx.deadline - BrokerClock::now());
  const std::uint64_t ms = left.count() > 0 ? static_cast<std::uint64_t>(left.count()) : 0;
  auto sent = d.port->sendJobInput(d.handle, *id, data->value_or(""), last, ms, &ctx.cancel);
  if (!sent) return jobRefusal(sent.error());
  return Value::nil();
}

Answer jobKill(const JobDoor& d, const CallContext& ctx) {
  if (d.port == nullptr) return noJobs();
  auto id = capability::requiredString(ctx.args, "job_id");
  if (!id) return id.error();
  auto killed = d.port->killJob(d.handle, *id);
  if (!killed) return jobRefusal(killed.error());
  return Value::nil();
}

Answer jobResize(const JobDoor& d, const CallContext& ctx) {
  if (d.port == nullptr) return noJobs();
  auto id = capability::requiredString(ctx.args, "job_id");
  if (!id) return id.error();
  Map fields;
  for (const char* field : {"rows", "columns"})
    if (const Value* v = ctx.args.find(field)) fields.emplace_back(field, *v);
  auto size = terminalSizeOf(Value::map(std::move(fields)), "args.");
  if (!size) return size.error();
  auto resized = d.port->resizeJob(d.handle, *id, *size);
  if (!resized) return jobRefusal(resized.error());
  return Value::nil();
}

Answer jobList(const JobDoor& d) {
  if (d.port == nullptr) return noJobs();
  auto listed = d.port->listJobs(d.handle);
  if (!listed) return jobRefusal(listed.error());
  Array out;
  for (const auto& j : *listed) {
    Array argv;
    for (const auto& a : j.argv) argv.push_back(textOrBytes(a));
    out.push_back(Value::map({{"job_id", Value::string(j.job_id)},
                              {"argv", Value::array(std::move(argv))},
                              {"state", Value::string(jobStateName(j.state))},
                              {"spill", spillValue(j)}}));
  }
  return Value::array(std::move(out));
}

}  // namespace

void addJobCapabilities(capability::CapabilityTable& table,
                        const ExecutionCapabilityServices& services) {
  using capability::CeilingClass;
  auto door = std::make_shared<JobDoor>();
  door->port = services.jobs;
  door->handle = services.handle;
  door->spill = services.job_spill;
  if (door->port == nullptr && services.env != nullptr) {
    door->owned = std::make_shared<SingleEnvironmentJobs>(*services.env, services.handle);
    door->port = door->owned.get();
  }
  table.add("job.start", CeilingClass::kSpawn,
            [door](const CallContext& c) { return jobStart(*door, c, false); });
  table.add("job.start_for_session", CeilingClass::kSpawn,
            [door](const CallContext& c) { return jobStart(*door, c, true); });
  table.add("job.poll", CeilingClass::kNone,
            [door](const CallContext& c) { return jobPollOrWait(*door, c, false); });
  table.add("job.wait", CeilingClass::kNone,
            [door](const CallContext& c) { return jobPollOrWait(*door, c, true); });
  table.add("job.send", CeilingClass::kSend,
            [door](const CallContext& c) { return jobSend(*door, c, false); });
  table.add("job.send_last", CeilingClass::kSend,
            [door](const CallContext& c) { return jobSend(*door, c, true); });
  table.add("job.kill", CeilingClass::kNone,
            [door](const CallContext& c) { return jobKill(*door, c); });
  table.add("job.resize", CeilingClass::kNone,
            [door](const CallContext& c) { return jobResize(*door, c); });
  table.add("job.list", CeilingClass::kNone, [door](const CallContext&) { return jobList(*door); });
}

}  // namespace airlock::execution
