// Code mode's single-shot boot shape, end to end (spec 001 "cap/runtime.run";
// docs/capabilities.md): a Python program runs once in a live sandbox, reaches the world only
// through the capability channel, and ends with one outcome frame. Used by `airlock run --code`,
// the service's code route and the tests; codeRunOptionsFor is the one composition of what a
// program's capabilities reach (net, schedules, job spill) that both front ends share.
//
// Part of the composition above both halves of the capability table (library
// airlock_capability_broker; capabilities.h says where each half lives).
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/artifacts/artifact_store.h"
#include "airlock/artifacts/metadata_repository.h"
#include "airlock/artifacts/retention.h"
#include "airlock/capability/broker/broker.h"
#include "airlock/capability/broker/capabilities.h"
#include "airlock/core/types.h"
#include "airlock/port/execution_environment.h"

namespace airlock::capability {

struct CodeRunOptions {
  std::string program;  // Python source, run by airlock_cap.boot
  // timeout_seconds, maximum_output_bytes and working_directory apply; argv
  // and stdin are replaced.
  ExecutionCommand limits;
  Policy policy = defaultCodeModePolicy();
  Ceilings ceilings;
  // net.fetch's policy and resolver (gateway_capabilities.h); the default
  // refuses every URL. `airlock run --code` passes productionNetServices()
  // of the sandbox's EnvironmentSpec.egress.
  gateway::NetServices net;
  // schedule.*'s durable store; a null store: schedule.* is refused "unavailable".
  schedule::ScheduleServices schedule;
  // Where jobs' whole output is spilled (execution_capabilities.h,
  // JobSpillServices); a null sink: no spill. `airlock run --code` passes a
  // sink over the state directory's artifact store (tenant "local", the
  // run's id).
  JobSpillServices job_spill;
  // The execution half of the table (proc, fs, job): the front end passes
  // execution::addExecutionCapabilities; empty: the program has none of them.
  AddExecutionCapabilities add_execution;
  // Where notes.* keeps the run's notes (gateway_capabilities.h); default:
  // in memory, for this program alone. fs.read of note:// follows the
  // policy's notes.get.
  gateway::NoteServices notes;
  // The environment's jobs (the service passes its execution node, so jobs
  // outlive the program); null: the program's table keeps its own, killed
  // when the program ends (`airlock run --code`).
  JobPort* jobs = nullptr;
  std::string execution_id;
  // Receives each audit line as it is written (they are also collected, up
  // to max_audit_lines: a program can make millions of refused calls, and
  // the result must not grow with them).
  std::function<void(std::string_view)> audit;
  std::size_t max_audit_lines = 10'000;
  const CancelToken* cancel = nullptr;
};

struct CodeRunResult {
  ExecutionResult execution;             // the interpreter's run (exit code, output, files_changed)
  OutcomeReport outcome;                 // the program's outcome frame, if it sent one
  std::vector<std::string> audit_lines;  // the first max_audit_lines
  std::uint64_t audit_lines_dropped = 0;  // audit lines past max_audit_lines
};

// Installs the guest library and the program into the sandbox's capability
// directory, opens a broker session with the sandbox's capabilities, runs
// `/usr/bin/python3 -B -m airlock_cap.boot /run/airlock/program/main.py` with
// AIRLOCK_CAP_SOCKET, AIRLOCK_CAP_TOKEN_FILE and PYTHONPATH set, and finishes
// the session (its token is revoked). Errors: those of execute(), and
// ExecutionUnavailable when the adapter has no capability directory.
Result<CodeRunResult> runCode(ExecutionEnvironment& env, const EnvironmentHandle& handle,
                              const CodeRunOptions& options);

// What a front end holds for code mode that outlives one program. Every
// member may be empty: no schedule store refuses schedule.* ("unavailable"),
// no artifact store keeps no job output.
struct CodeModeHost {
  std::shared_ptr<schedule::ScheduleStore> schedules;
  schedule::ScheduleCeilings schedule_ceilings;
  artifacts::ArtifactStore* artifact_store = nullptr;  // borrowed; outlives every run
  artifacts::RetentionSettings retention;
  std::int64_t max_artifact_bytes = artifacts::kDefaultMaxArtifactBytes;
  std::function<Timestamp()> clock;  // empty: the system clock
  // The execution half (proc, fs, job), from the composition root; empty:
  // programs get none of them.
  AddExecutionCapabilities add_execution;
  // Where the runs' notes live (borrowed; outlives every run): a program's
  // notes.* reads and writes its tenant's run's notes there, which expire
  // `retention` after their last put. Null: each program's notes are its
  // own, in memory.
  artifacts::ArtifactRepository* notes = nullptr;
};

// The options of one program in `handle`'s sandbox, everything but the
// program, its limits, policy and cancel: net.fetch decided by the
// sandbox's own egress policy (productionNetServices), schedule.* over
// host.schedules, notes.* over host.notes (the handle's tenant and run,
// written by its environment id), and each job's whole output spilled as artifacts of the
// handle's tenant and run (EXTERNAL_UNTRUSTED: sandbox bytes); the
// execution id is the environment's. Errors: those of
// productionNetServices; ToolValidationError for a tenant id the artifact
// store cannot key.
Result<CodeRunOptions> codeRunOptionsFor(const CodeModeHost& host, const EnvironmentHandle& handle,
                                         const EgressPolicy& egress);

// A wire value as JSON: bytes become {"base64": "..."} (the API's form for
// bytes, core/json.h), always, so a value stays bytes; a float that JSON
// cannot carry (NaN, infinity) becomes null.
nlohmann::json valueToJson(const wire::Value& value);

// {"completed": VALUE} or {"errored": {"message": ..., "details": ...}}, and
// "problem" when the report has one; {"missing": true} without an outcome.
nlohmann::json outcomeToJson(const OutcomeReport& report);

}  // namespace airlock::capability
