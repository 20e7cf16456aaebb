// Code mode over HTTP (api.h: /v1/environments/{environment_id}/code and the schedule
// routes; docs/serve.md "Code mode"): a Python program runs once in a live
// environment through capability::runCode, with the capabilities the request
// narrows to, net.fetch decided by the environment's own egress policy, and
// schedule.* kept in the service's schedule store. The fire outbox is read
// and acknowledged by the embedding platform.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <span>

#include "airlock/artifacts/artifact_writer.h"
#include "airlock/capability/broker/code_run.h"
#include "airlock/core/encoding.h"
#include "airlock/core/json.h"
#include "airlock/gateway/api/api.h"
#include "airlock/gateway/api/body.h"

namespace airlock::gateway {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// The largest program the route accepts (the CLI's --code cap).
constexpr std::size_t kMaxProgramBytes = std::size_t{16} << 20;
constexpr std::size_t kMaxFiresPerPass = 256;
constexpr std::int64_t kMaxFiresPerPage = 1000;

// What a sandbox's capability table serves, and the modules the embedding
// platform routes (strand, peer, workflow, mcp: any name under them).
struct KnownCapabilities {
  std::vector<std::string> names;    // "fs.read", ...
  std::vector<std::string> modules;  // "fs", ..., "strand", ...
  std::set<std::string> platform_modules;
};

// From the names a program's table serves (Api::capability_names_).
KnownCapabilities knownCapabilities(const std::vector<std::string>& names) {
  KnownCapabilities k;
  k.names = names;
  std::set<std::string> modules;
  for (const auto& n : k.names) modules.insert(n.substr(0, n.find('.')));
  for (const auto& wildcard : capability::defaultCodeModePolicy().allowed) {
    std::string module = wildcard.substr(0, wildcard.find('.'));
    if (!modules.contains(module)) k.platform_modules.insert(module);
    modules.insert(std::move(module));
  }
  k.modules.assign(modules.begin(), modules.end());
  return k;
}

// Why `name` (shaped: "*", "module.*" or "module.name") names nothing this
// service serves, with the closest known one; nullopt when it is known.
std::optional<std::string> unknownCapability(const std::string& name,
                                             const KnownCapabilities& known) {
  if (name == "*") return std::nullopt;
  const std::string module = name.substr(0, name.find('.'));
  auto suggest = [](const std::string& what, const std::vector<std::string>& candidates) {
    std::vector<std::string_view> views(candidates.begin(), candidates.end());
    auto near = service::closestKey(what, std::span<const std::string_view>(views));
    return near ? " (did you mean " + quoteForMessage(*near) + "?)" : std::string();
  };
  if (std::find(known.modules.begin(), known.modules.end(), module) == known.modules.end())
    return "capabilities: " + quoteForMessage(name) + " names no capability module" +
           suggest(module, known.modules);
  if (name.ends_with(".*") || known.platform_modules.contains(module)) return std::nullopt;
  if (std::find(known.names.begin(), known.names.end(), name) != known.names.end())
    return std::nullopt;
  return "capabilities: " + quoteForMessage(name) + " is not a capability" +
         suggest(name, known.names);
}

// "capabilities": a list narrowing what the program may call. Each entry is
// an exact name ("proc.run"), a module wildcard ("fs.*") or "*"; absent
// means every capability the sandbox serves (defaultCodeModePolicy).
Result<capability::Policy> policyFrom(const json& object, const KnownCapabilities& known) {
  auto it = object.find("capabilities");
  if (it == object.end() || it->is_null()) return capability::defaultCodeModePolicy();
  if (!it->is_array())
    return tl::unexpected(badRequest("capabilities must be an array of capability names"));
  capability::Policy policy;
  for (const auto& entry : *it) {
    if (!entry.is_string())
      return tl::unexpected(badRequest("capabilities must be an array of capability names"));
    const std::string name = entry.get<std::string>();
    // "*", or dot-separated segments of [a-z0-9_] with at least two
    // segments, the last of which may be "*" ("fs.*").
    bool shaped = name == "*";
    if (!shaped && name.size() <= 64) {
      std::size_t segments = 0;
      bool ok = true;
      for (std::size_t at = 0; ok && at <= name.size();) {
        std::size_t dot = name.find('.', at);
        if (dot == std::string::npos) dot = name.size();
        const std::string_view segment(name.data() + at, dot - at);
        const bool last = dot == name.size();
        ok = !segment.empty() &&
             ((last && segment == "*") ||
              segment.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") ==
                  std::string_view::npos);
        ++segments;
        at = dot + 1;
      }
      shaped = ok && segments >= 2;
    }
    if (!shaped)
      return tl::unexpected(
          badRequest("capabilities: " + quoteForMessage(name) +
                     " is not a capability name (\"proc.run\"), a module wildcard "
                     "(\"fs.*\") or \"*\""));
    if (auto unknown = unknownCapability(name, known)) return tl::unexpected(badRequest(*unknown));
    policy.allowed.insert(name);
  }
  return policy;
}

json scheduleToJson(const capability::schedule::ScheduleRecord& r) {
  json j = {{"name", r.name},
            {"target", r.target},
            {"timing", std::string(capability::schedule::timingName(r.kind))},
            {"when", r.when()},
            {"wake", r.wake},
            {"body", bytesToJson(r.body)},
            {"created_at_s", r.created_at_s},
            {"fires", r.fires},
            {"max_fires", r.max_fires},
            {"expires_at_s", r.expires_at_s}};
  j["next_fire_s"] = r.next_fire_s ? json(*r.next_fire_s) : json(nullptr);
  return j;
}

json fireToJson(const capability::schedule::Fire& f) {
  return {{"sequence", f.sequence},
          {"creator", f.creator},
          {"name", f.name},
          {"target", f.target},
          {"wake", f.wake},
          {"body", bytesToJson(f.body)},
          {"occurrence_s", f.occurrence_s},
          {"fired_at_s", f.fired_at_s},
          {"fire_number", f.fire_number}};
}

HttpResponse noSchedules() {
  return errorResponse(503, "execution_unavailable", "this service has no schedule store");
}

std::int64_t unixSeconds(Timestamp t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

}  // namespace

void Api::attachExecutionCapabilities(capability::AddExecutionCapabilities add) {
  // A table that serves nothing (no environment), built once to list names.
  capability::SandboxServices names_only;
  names_only.add_execution = add;
  capability_names_ = capability::makeSandboxCapabilities(names_only)->names();
  add_execution_ = std::move(add);
}

void Api::attachSchedules(std::shared_ptr<capability::schedule::ScheduleStore> store,
                          capability::schedule::ScheduleCeilings ceilings) {
  schedules_ = std::move(store);
  schedule_ceilings_ = ceilings;
}

Result<std::size_t> Api::fireSchedules() {
  if (!schedules_) return std::size_t{0};
  auto fired = schedules_->fireDue(unixSeconds(clock_()), kMaxFiresPerPass);
  if (!fired) return tl::unexpected(fired.error());
  if (!fired->empty()) metrics_.scheduleFired(static_cast<double>(fired->size()));
  return fired->size();
}

capability::CodeModeHost Api::codeModeHost() const {
  capability::CodeModeHost host;
  host.add_execution = add_execution_;
  host.schedules = schedules_;
  host.schedule_ceilings = schedule_ceilings_;
  host.clock = clock_;
  if (artifacts_) {
    host.artifact_store = artifacts_->store;
    host.retention = artifacts_->retention;
    host.max_artifact_bytes = artifacts_->max_bytes;
    host.notes = artifacts_->repository;
  }
  return host;
}

HttpResponse Api::runCode(const RouteCall& call) {
  const std::string& id = call.param("environment_id");
  const HttpRequest& request = call.request;
  auto live = node_.find(id);
  if (!live)
    return errorResponse(
        Error{ErrorCode::kNotFound, 0, "no live environment " + quoteForMessage(id)});
  auto object = parseBody(request.body);
  if (!object) return errorResponse(object.error());
  if (auto refused = refuseUnknownKeys(*object, {"program", "capabilities", "timeout_seconds",
                                                 "maximum_output_bytes", "working_directory"}))
    return *refused;
  auto program = object->find("program");
  if (program == object->end() || !program->is_string() ||
      program->get_ref<const std::string&>().empty())
    return errorResponse(
        badRequest("program is required and must be a non-empty string of Python source"));
  if (program->get_ref<const std::string&>().size() > kMaxProgramBytes)
    return errorResponse(
        badRequest("program is larger than " + std::to_string(kMaxProgramBytes) + " bytes"));
  auto policy = policyFrom(*object, knownCapabilities(capability_names_));
  if (!policy) return errorResponse(policy.error());
  // The command's limits come from the execute route's rules; argv is the
  // interpreter's (runCode replaces it) and stdin is the channel's.
  ExecutionCommand command;
  if (auto limits = limitsInto(*object, command); !limits) return errorResponse(limits.error());

  auto options = capability::codeRunOptionsFor(codeModeHost(), live->handle, live->egress);
  if (!options) return errorResponse(options.error());
  options->program = program->get<std::string>();
  options->limits = std::move(command);
  options->policy = std::move(*policy);
  // Jobs are the environment's: they outlive this program.
  options->jobs = &node_;

  // Nothing else may run: a second program would replace the first's
  // program file and broker socket in /run/airlock, and a running command
  // could read this program's source as it is written.
  const auto started = Clock::now();
  Result<capability::CodeRunResult> ran;
  {
    auto claim = node_.claim(id, RunKind::kProgram);
    if (!claim) return errorResponse(claim.error());
    ran = capability::runCode(node_, live->handle, *options);
  }
  Result<ExecutionResult> execution =
      ran ? Result<ExecutionResult>(ran->execution) : tl::unexpected(ran.error());
  json result_json;
  HttpResponse finished = finishExecute(id, Clock::now() - started, execution, &result_json);
  if (!ran || finished.status != 200) return finished;
  json audit = json::array();
  for (const auto& line : ran->audit_lines) audit.push_back(json::parse(line, nullptr, false));
  return jsonResponse(200, json{{"result", std::move(result_json)},
                                {"outcome", capability::outcomeToJson(ran->outcome)},
                                {"audit", std::move(audit)},
                                {"audit_dropped", ran->audit_lines_dropped}});
}

HttpResponse Api::scheduleCall(const RouteCall& call) {
  const std::string& id = call.param("environment_id");
  const std::string& name = call.param("name");
  const std::string& method = call.request.method;
  if (!schedules_) return noSchedules();
  // Schedules outlive the environment that created them: the creator's id
  // is the key, live or not.
  if (method == "GET") {
    auto listed = schedules_->list(id);
    if (!listed) return errorResponse(listed.error());
    json out = json::array();
    for (const auto& r : *listed) out.push_back(scheduleToJson(r));
    return jsonResponse(200, json{{"schedules", std::move(out)}});
  }
  auto removed = schedules_->cancel(id, name);
  if (!removed) return errorResponse(removed.error());
  if (!*removed)
    return errorResponse(
        Error{ErrorCode::kNotFound, 0,
              "environment " + quoteForMessage(id) + " has no schedule " + quoteForMessage(name)});
  HttpResponse r;
  r.status = 204;
  r.content_type.clear();
  return r;
}

HttpResponse Api::pendingFires(const RouteCall& call) {
  if (!schedules_) return noSchedules();
  auto number = [&](const char* name, std::int64_t fallback, std::int64_t lo,
                    std::int64_t hi) -> Result<std::int64_t> {
    auto text = call.queryValue(name);
    if (!text) return fallback;
    std::int64_t v = 0;
    auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), v);
    if (ec != std::errc{} || end != text->data() + text->size() || v < lo || v > hi)
      return tl::unexpected(badRequest(std::string(name) + " must be a whole number from " +
                                       std::to_string(lo) + " to " + std::to_string(hi)));
    return v;
  };
  auto after = number("after", 0, 0, std::numeric_limits<std::int64_t>::max());
  if (!after) return errorResponse(after.error());
  auto limit = number("limit", 100, 1, kMaxFiresPerPage);
  if (!limit) return errorResponse(limit.error());
  auto fires = schedules_->pendingFires(*after, static_cast<std::size_t>(*limit));
  if (!fires) return errorResponse(fires.error());
  json out = json::array();
  for (const auto& f : *fires) out.push_back(fireToJson(f));
  return jsonResponse(200, json{{"fires", std::move(out)}});
}

HttpResponse Api::acknowledgeFires(const RouteCall& call) {
  if (!schedules_) return noSchedules();
  auto object = parseBody(call.request.body);
  if (!object) return errorResponse(object.error());
  if (auto refused = refuseUnknownKeys(*object, {"through"})) return *refused;
  constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  auto through = countField(*object, {"through", "", kMax}, std::nullopt);
  if (!through) return errorResponse(through.error());
  auto n = schedules_->acknowledgeFires(static_cast<std::int64_t>(*through));
  if (!n) return errorResponse(n.error());
  return jsonResponse(200, json{{"acknowledged", *n}});
}

namespace {

// A run's note as the API answers it: the value as the JSON it holds.
json noteToJson(const artifacts::RunNote& note) {
  json value = json::parse(note.value_json, nullptr, false);
  return json{{"key", note.key},
              {"value", value.is_discarded() ? json(nullptr) : std::move(value)},
              {"written_by", note.written_by},
              {"updated_at", formatTimestamp(note.updated_at)},
              {"expires_at", formatTimestamp(note.expires_at)}};
}

HttpResponse noNotes() {
  return errorResponse(503, "execution_unavailable",
                       "no metadata repository is configured (notes live beside the artifacts)");
}

}  // namespace

HttpResponse Api::listNotes(const RouteCall& call) {
  if (!artifacts_ || artifacts_->repository == nullptr) return noNotes();
  if (auto ok = platformIdentifier(json{{"run_id", call.param("run_id")}}, "run_id"); !ok)
    return errorResponse(ok.error());
  const std::string prefix = call.queryValue("prefix").value_or("");
  auto notes = artifacts_->repository->listNotes(*call.tenant, call.param("run_id"), prefix,
                                                 gateway::kNotesListMax);
  if (!notes) return errorResponse(notes.error());
  json out = json::array();
  for (const auto& note : *notes) out.push_back(noteToJson(note));
  return jsonResponse(200, json{{"notes", std::move(out)}});
}

HttpResponse Api::getNote(const RouteCall& call) {
  if (!artifacts_ || artifacts_->repository == nullptr) return noNotes();
  if (auto ok = platformIdentifier(json{{"run_id", call.param("run_id")}}, "run_id"); !ok)
    return errorResponse(ok.error());
  const std::string& key = call.param("key");
  auto note = artifacts_->repository->findNote(*call.tenant, call.param("run_id"), key);
  if (!note) return errorResponse(note.error());
  if (!*note) return unknownNote(call.param("run_id"), key);
  return jsonResponse(200, noteToJson(**note));
}

}  // namespace airlock::gateway
