// The one capability table code mode serves a sandbox (spec 001, the
// capability modules; docs/capabilities.md "Capabilities"): the execution
// side's proc, fs and job (execution/capabilities/execution_capabilities.h)
// and the gateway side's notes, net and schedule
// (gateway/capabilities/gateway_capabilities.h), registered into one
// CapabilityTable. strand/peer/workflow/mcp go to a platform route when one
// is added to the table (CapabilityTable::addModuleRoute), else are refused
// by name.
//
// Where this sits: on the gateway side, above the gateway half. The broker
// and the table types (broker.h, call_args.h, job_output_sink.h,
// execution_half.h: library airlock_capability_broker_core) are below both
// halves; the halves link only that. This composition and code mode's run
// (code_run.h) are library airlock_capability_broker, which links the
// gateway half and receives the execution half as a function
// (AddExecutionCapabilities) from the composition root, so nothing the
// gateway links includes execution/.
#pragma once

#include <memory>
#include <string_view>

#include "airlock/capability/broker/broker.h"
#include "airlock/capability/broker/execution_half.h"
#include "airlock/capability/schedule/schedule.h"
#include "airlock/gateway/capabilities/gateway_capabilities.h"
#include "airlock/port/execution_environment.h"

namespace airlock::capability {

// What the capabilities act on. The table keeps the environment pointer:
// the environment must outlive the table (and the session holding it).
struct SandboxServices {
  ExecutionEnvironment* env = nullptr;
  EnvironmentHandle handle;  // handle.environment_id is schedule.*'s creator
  gateway::NetServices net;  // default: every URL refused (mode_deny)
  // Where schedule.* keeps its schedules; a null store: schedule.* is
  // refused "unavailable" (no metadata database).
  schedule::ScheduleServices schedule;
  // Where jobs' whole output is spilled; default: a null sink, no spill.
  JobSpillServices job_spill;
  // The execution half (proc, fs, job), from the composition root
  // (execution::addExecutionCapabilities); empty: the table lacks them.
  AddExecutionCapabilities add_execution;
  // Where notes.* keeps the run's notes; default: in memory, for the table.
  gateway::NoteServices notes;
  // fs.read("note://KEY") reads the note KEY (spec 001, "Durable code-mode
  // notes"): notes.get's value as JSON text (bytes). false: such a path is
  // refused "denied" (a program whose policy does not allow notes.get).
  bool note_reads = true;
  // The environment's jobs (the execution node's registry; job_port.h).
  // Null: the table keeps its own, and destroying it kills them.
  JobPort* jobs = nullptr;
};

// The note:// paths of fs.*: the scheme, and the refusal of a write or a
// listing there ("read_only").
inline constexpr std::string_view kNoteScheme = "note://";

// A table with every capability of both halves. In-memory notes live as
// long as the table; jobs as long as `jobs` keeps them (with none, as long
// as the table: destroying it kills every job still running).
// fs.read, fs.write and fs.list (when the table has them) first look for a
// note:// path: fs.read of one reads the note (note_reads), fs.write and
// fs.list of one are refused "read_only"; a note:// path never reaches the
// workspace, and nothing mounts it for a shell process.
std::shared_ptr<CapabilityTable> makeSandboxCapabilities(const SandboxServices& services);

// The policy that allows everything makeSandboxCapabilities serves, and the
// platform modules.
Policy defaultCodeModePolicy();

}  // namespace airlock::capability
