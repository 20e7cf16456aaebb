// The one capability table code mode serves a sandbox (spec 001, the
// capability modules; docs/capabilities.md "Capabilities"): the execution
// side's proc, fs and job (execution/capabilities/execution_capabilities.h)
// and the gateway side's notes, net and schedule
// (gateway/capabilities/gateway_capabilities.h), registered into one
// CapabilityTable. strand/peer/workflow/mcp go to a platform route when one
// is added to the table (CapabilityTable::addModuleRoute), else are refused
// by name.
//
// Where this sits: above both halves. The broker and the table types
// (broker.h, call_args.h, job_output_sink.h: library
// airlock_capability_broker_core) are below them; the halves link only that;
// this composition and code mode's run (code_run.h) are library
// airlock_capability_broker, which links both halves. So the arrows run one
// way: composition -> halves -> broker core.
#pragma once

#include <memory>

#include "airlock/capability/broker/broker.h"
#include "airlock/capability/schedule/schedule.h"
#include "airlock/execution/capabilities/execution_capabilities.h"
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
  execution::JobSpillServices job_spill;
};

// A table with every capability of both halves. Jobs and notes live as long
// as the table: destroying it kills every job still running.
std::shared_ptr<CapabilityTable> makeSandboxCapabilities(const SandboxServices& services);

// The policy that allows everything makeSandboxCapabilities serves, and the
// platform modules.
Policy defaultCodeModePolicy();

}  // namespace airlock::capability
