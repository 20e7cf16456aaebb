#include "airlock/capability/broker/code_run.h"

#include <nlohmann/json.hpp>

#include "airlock/artifacts/retention.h"
#include "airlock/capability/broker/guest_files.h"
#include "airlock/core/encoding.h"
#include "airlock/core/environment_tiers.h"
#include "airlock/core/thread_annotations.h"
#include "airlock/gateway/capabilities/job_output_artifacts.h"

namespace airlock::capability {

nlohmann::json valueToJson(const wire::Value& v) {
  using T = wire::Value::Type;
  switch (v.type()) {
    case T::kNil:
      return nullptr;
    case T::kBool:
      return *v.asBool();
    case T::kInteger:
      if (auto u = v.asUnsigned()) return *u;
      return *v.asSigned();
    case T::kFloat: {
      double d = *v.asFloat();
      if (d != d || d - d != 0) return nullptr;
      return d;
    }
    case T::kString:
      return *v.asString();
    case T::kBytes:
      return nlohmann::json{{"base64", base64Encode(*v.asBytes())}};
    case T::kArray: {
      auto a = nlohmann::json::array();
      for (const auto& e : *v.asArray()) a.push_back(valueToJson(e));
      return a;
    }
    case T::kMap: {
      auto o = nlohmann::json::object();
      for (const auto& [k, e] : *v.asMap()) o[k] = valueToJson(e);
      return o;
    }
  }
  return nullptr;
}

nlohmann::json outcomeToJson(const OutcomeReport& report) {
  nlohmann::json j = nlohmann::json::object();
  if (!report.outcome) {
    j["missing"] = true;
  } else if (auto* c = std::get_if<wire::Completed>(&report.outcome->result)) {
    j["completed"] = valueToJson(c->value);
  } else {
    const auto& e = std::get<wire::Errored>(report.outcome->result);
    j["errored"] = {{"message", e.message}, {"details", valueToJson(e.details)}};
  }
  if (!report.problem.empty()) j["problem"] = report.problem;
  return j;
}

Result<CodeRunResult> runCode(ExecutionEnvironment& env, const EnvironmentHandle& handle,
                              const CodeRunOptions& options) {
  auto channel = env.openCapabilityChannel(handle);
  if (!channel) return tl::unexpected(channel.error());
  if (auto r = installGuestFiles(**channel); !r) return tl::unexpected(r.error());
  if (auto r = (*channel)->writeFile("program/main.py", options.program, 0644,
                                     CapabilityFileOwner::kService);
      !r)
    return tl::unexpected(r.error());

  // Written by the session's threads until it is reset.
  struct AuditLog {
    Mutex mu;
    std::vector<std::string> lines GUARDED_BY(mu);
    std::uint64_t dropped GUARDED_BY(mu) = 0;
  };
  auto log = std::make_shared<AuditLog>();
  SessionOptions so;
  so.execution_id = options.execution_id;
  so.shape = BootShape::kRun;
  so.policy = options.policy;
  so.ceilings = options.ceilings;
  auto sink = options.audit;
  so.audit = [log, sink, max = options.max_audit_lines](std::string_view line) {
    {
      MutexLock lk(log->mu);
      if (log->lines.size() < max)
        log->lines.emplace_back(line);
      else
        ++log->dropped;
    }
    if (sink) sink(line);
  };
  SandboxServices services{&env, handle};
  services.net = options.net;
  services.schedule = options.schedule;
  services.job_spill = options.job_spill;
  services.add_execution = options.add_execution;
  services.notes = options.notes;
  services.note_reads = options.policy.allows("notes.get");
  services.jobs = options.jobs;
  auto table = makeSandboxCapabilities(services);
  auto session = BrokerSession::open(std::move(*channel), std::move(so), std::move(table));
  if (!session) return tl::unexpected(session.error());

  ExecutionCommand command = options.limits;
  command.argv = {"/usr/bin/env", "AIRLOCK_CAP_SOCKET=" + std::string(kSocketInSandbox),
                  "AIRLOCK_CAP_TOKEN_FILE=" + std::string(kTokenFileInSandbox),
                  "PYTHONPATH=" + std::string(kGuestPythonPath),
                  // `cap` on PATH for the program's shell commands (guest/bin/cap).
                  "PATH=/run/airlock/bin:" + std::string(kImagePath), "/usr/bin/python3", "-B",
                  "-m", "airlock_cap.boot", "/run/airlock/program/main.py"};
  command.stdin_data.reset();
  auto executed = env.execute(handle, command, options.cancel);
  // Every process of the program is gone now (the command's end kills them),
  // so every connection reaches end-of-file: let the broker read what was
  // sent before it, then revoke the token.
  (*session)->waitForConnectionsClosed(std::chrono::seconds(2));
  (*session)->finish();
  if (!executed) return tl::unexpected(executed.error());
  CodeRunResult result;
  result.execution = std::move(*executed);
  result.outcome = (*session)->outcome();
  session->reset();
  MutexLock lk(log->mu);
  result.audit_lines = std::move(log->lines);
  result.audit_lines_dropped = log->dropped;
  return result;
}

Result<CodeRunOptions> codeRunOptionsFor(const CodeModeHost& host, const EnvironmentHandle& handle,
                                         const EgressPolicy& egress) {
  CodeRunOptions options;
  options.execution_id = handle.environment_id;
  options.add_execution = host.add_execution;
  auto net = gateway::productionNetServices(egress);
  if (!net) return tl::unexpected(net.error());
  options.net = std::move(*net);
  options.schedule.store = host.schedules;
  options.notes = gateway::NoteServices{
      host.notes, handle.tenant_id, handle.run_id, handle.environment_id, host.retention.retention,
      host.clock};
  options.schedule.ceilings = host.schedule_ceilings;
  if (host.clock)
    options.schedule.now_s = [clock = host.clock] {
      return std::chrono::duration_cast<std::chrono::seconds>(clock().time_since_epoch()).count();
    };
  if (host.artifact_store != nullptr) {
    auto tenant = artifacts::TenantId::parse(handle.tenant_id);
    if (!tenant) return tl::unexpected(tenant.error());
    artifacts::ArtifactWriterScope scope{*tenant, handle.run_id,
                                         artifacts::ArtifactOrigin::kToolOutput,
                                         artifacts::TrustLevel::kExternalUntrusted};
    options.job_spill.sink = gateway::artifactJobOutputSink(artifacts::makeArtifactWriter(
        *host.artifact_store, std::move(scope), host.retention, host.clock));
    options.job_spill.max_stream_bytes = static_cast<std::uint64_t>(host.max_artifact_bytes);
  }
  return options;
}

}  // namespace airlock::capability
