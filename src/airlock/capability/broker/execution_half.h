// The execution half of the capability table as the gateway sees it (spec
// 000 "Where the boundary is"; spec 001 "cap/proc", "cap/job"): what the
// half acts on, and the one function that registers it. The half itself
// (proc, fs, job) is execution/capabilities/execution_capabilities.h,
// library airlock_execution_capabilities; the gateway never includes or
// links it. The composition root (the cli's run and serve) hands
// execution::addExecutionCapabilities to the gateway as an
// AddExecutionCapabilities value, and the gateway composes a sandbox's table
// with it (capabilities.h, code_run.h). Plain data and a function type:
// library airlock_capability_broker_core.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "airlock/capability/broker/broker.h"
#include "airlock/capability/broker/job_output_sink.h"
#include "airlock/port/execution_environment.h"
#include "airlock/port/job_port.h"

namespace airlock::capability {

// Where each job's whole output goes (port/job_port.h says what is kept,
// where, and how much).
using JobSpillSettings = airlock::JobSpillSettings;
using JobSpillServices = airlock::JobSpillSettings;
using airlock::kDefaultSpillStreamBytes;

// What the capabilities act on. The table keeps the environment pointer:
// the environment must outlive the table (and the session holding it), and
// be set before any call is served (a table built without one serves only
// to list names).
struct ExecutionCapabilityServices {
  ExecutionEnvironment* env = nullptr;
  EnvironmentHandle handle;
  JobSpillServices job_spill;  // default: a null sink, no spill
  // The environment's job registry (the execution node's). Null: the table
  // keeps a registry of its own for `handle` (execution/job_engine.h), and
  // its jobs die with the table (`airlock run --code`, whose one program is
  // its environment's whole life).
  JobPort* jobs = nullptr;
};

// Registers the execution half (proc, fs, job) into a table, acting on
// `services`. Empty: the table has no proc, fs or job (their calls are
// refused by name).
using AddExecutionCapabilities =
    std::function<void(CapabilityTable& table, const ExecutionCapabilityServices& services)>;

}  // namespace airlock::capability
