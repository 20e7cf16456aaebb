// proc.run, and the argument parser it shares with job.start.
#include <sys/wait.h>

#include <algorithm>

#include "airlock/capability/broker/call_args.h"
#include "airlock/core/encoding.h"
#include "airlock/core/environment_tiers.h"
#include "airlock/execution/capabilities/capability_modules.h"

namespace airlock::execution {

using namespace capability::handler_terms;

namespace {

// The "exit_code" and "signal" of a result, from the wait status.
void addExitFields(Map& result, std::optional<int> status, bool timed_out) {
  if (status && WIFEXITED(*status) && !timed_out) {
    result.emplace_back("exit_code", Value::integer(WEXITSTATUS(*status)));
    result.emplace_back("signal", Value::nil());
  } else if (status && WIFSIGNALED(*status)) {
    result.emplace_back("exit_code",
                        timed_out ? Value::nil() : Value::integer(128 + WTERMSIG(*status)));
    result.emplace_back("signal", Value::integer(WTERMSIG(*status)));
  } else {
    result.emplace_back("exit_code", Value::nil());
    result.emplace_back("signal", Value::nil());
  }
}

capability::wire::Answer procRun(const ExecutionCapabilityServices& s, const CallContext& ctx) {
  auto req = parseProcRequest(ctx.args, true);
  if (!req) return req.error();
  req->command.with_stdin = req->stdin_data.has_value();
  const auto started = BrokerClock::now();
  auto proc = s.env->startSideProcess(s.handle, req->command);
  if (!proc) return refusalFor(proc.error());
  SideProcess& p = **proc;
  auto deadline = ctx.deadline;
  bool timeout_first = false;
  if (req->timeout.count() > 0 && started + req->timeout < deadline) {
    deadline = started + req->timeout;
    timeout_first = true;
  }
  struct Stream {
    std::string data;
    bool truncated = false;
  } out, err;
  SidePumpHooks hooks;
  if (req->stdin_data) hooks.stdin_data = *req->stdin_data;
  hooks.output = [&](bool is_stdout, std::string_view chunk) {
    Stream& stream = is_stdout ? out : err;
    const std::size_t room = kProcRunStreamCap - std::min(kProcRunStreamCap, stream.data.size());
    const std::size_t take = std::min(room, chunk.size());
    stream.data.append(chunk.substr(0, take));
    if (take < chunk.size()) stream.truncated = true;
  };
  hooks.stop_fd = ctx.cancel.pollFd();
  hooks.deadline = deadline;
  // The call's own timeout is a result (timed_out); the caller's deadline is a refusal.
  hooks.continue_after_deadline = timeout_first;
  const SidePumpOutcome pumped = p.pump(hooks);
  if (pumped.end == SidePumpEnd::kStopped)
    return Refusal{"cancelled", "cancelled"};  // the broker answers for it
  if (pumped.end == SidePumpEnd::kDeadline && !timeout_first)
    return Refusal{"deadline_exceeded", "the call's deadline passed"};
  const bool timed_out = pumped.end == SidePumpEnd::kDeadline;
  Map result;
  addExitFields(result, pumped.wait_status, timed_out);
  result.emplace_back("stdout", textOrBytes(std::move(out.data)));
  result.emplace_back("stderr", textOrBytes(std::move(err.data)));
  result.emplace_back("timed_out", Value::boolean(timed_out));
  result.emplace_back("stdout_truncated", Value::boolean(out.truncated));
  result.emplace_back("stderr_truncated", Value::boolean(err.truncated));
  result.emplace_back("duration_ms",
                      Value::integer(std::chrono::duration_cast<std::chrono::milliseconds>(
                                         BrokerClock::now() - started)
                                         .count()));
  return Value::map(std::move(result));
}

// args.argv into `command`: a non-empty list of strings without NUL, at
// most 4096 of them and 64 KiB together, the first naming a program.
std::optional<Refusal> parseArgv(const Value& args, SideCommand& command) {
  const Value* argv = args.find("argv");
  if (argv == nullptr || argv->asArray() == nullptr || argv->asArray()->empty())
    return badRequest("args.argv must be a non-empty list of strings");
  if (argv->asArray()->size() > 4096) return badRequest("args.argv has more than 4096 items");
  std::size_t total = 0;
  for (const auto& a : *argv->asArray()) {
    const std::string* s = a.asString();
    if (s == nullptr) return badRequest("args.argv must be a non-empty list of strings");
    if (s->find('\0') != std::string::npos)
      return badRequest("args.argv must not contain NUL bytes");
    total += s->size() + 1;
    command.argv.push_back(*s);
  }
  if (total > 65536) return badRequest("args.argv is larger than 64 KiB");
  if (command.argv[0].empty()) return badRequest("args.argv[0] must name a program");
  return std::nullopt;
}

// args.env into `command`: valid names, none reserved (tiers 0 and 2),
// string values without NUL.
std::optional<Refusal> parseEnv(const Value& args, SideCommand& command) {
  const Value* env = args.find("env");
  if (env == nullptr || env->isNil()) return std::nullopt;
  if (env->asMap() == nullptr) return badRequest("args.env must be a map of strings");
  for (const auto& [k, v] : *env->asMap()) {
    const std::string* s = v.asString();
    if (s == nullptr)
      return badRequest("args.env value of " + quoteForMessage(k) + " must be a string");
    if (auto ok = checkAddedVariable("args.env", k, *s); !ok) return badRequest(ok.error().context);
    command.env_additions[k] = *s;
  }
  return std::nullopt;
}

}  // namespace

tl::expected<ProcRequest, Refusal> parseProcRequest(const Value& args, bool allow_stdin) {
  if (args.asMap() == nullptr) return tl::unexpected(badRequest("args must be a map"));
  ProcRequest req;
  if (auto refused = parseArgv(args, req.command)) return tl::unexpected(std::move(*refused));
  auto cwd = capability::optionalString(args, "cwd", ".");
  if (!cwd) return tl::unexpected(cwd.error());
  req.command.working_directory = cwd->empty() ? "." : *cwd;
  if (auto refused = parseEnv(args, req.command)) return tl::unexpected(std::move(*refused));
  auto in = capability::optionalData(args, "stdin");
  if (!in) return tl::unexpected(in.error());
  if (*in && !allow_stdin)
    return tl::unexpected(badRequest("args.stdin is not taken here (use job.send)"));
  req.stdin_data = std::move(*in);
  auto timeout = capability::optionalUint(args, "timeout_ms", 0);
  if (!timeout) return tl::unexpected(timeout.error());
  req.timeout = std::chrono::milliseconds(std::min<std::uint64_t>(*timeout, 24ull * 3600 * 1000));
  return req;
}

void addProcCapabilities(capability::CapabilityTable& table,
                         const ExecutionCapabilityServices& services) {
  table.add("proc.run", capability::CeilingClass::kSpawn,
            [s = services](const CallContext& c) { return procRun(s, c); });
}

}  // namespace airlock::execution
