// The capabilities a sandbox's broker serves itself (spec 001 "cap/proc",
// "cap/job", "Durable code-mode notes"; DESIGN.md 5.7; docs/capabilities.md
// has every capability's arguments, result and refusal codes).
//
//   proc.run    one command to completion, as a side process in the sandbox
//   fs.read / fs.write / fs.list   through the workspace port (containment)
//   notes.put / notes.get / notes.list   a JSON blackboard per execution
//   job.start / job.poll / job.wait / job.send / job.send_last / job.kill /
//   job.list    background side processes with cursors over a bounded tail
// net.* and schedule.* are refused by name ("unavailable") until they are
// built; strand/peer/workflow/mcp go to a platform route when one is added
// to the table (CapabilityTable::addModuleRoute), else are refused by name.
//
// Every argument parser here is total over any wire Value: a wrong shape is
// the refusal "bad_request" naming the field, never an exception.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "airlock/capability/broker/broker.h"
#include "airlock/core/types.h"
#include "airlock/sandbox/execution_environment.h"

namespace airlock::capability {

// Per-stream caps of a proc.run result (stdout and stderr each); the rest is
// dropped and the result says "stdout_truncated" / "stderr_truncated".
inline constexpr std::size_t kProcRunStreamCap = std::size_t{4} << 20;
// The rolling tail a job keeps per stream.
inline constexpr std::size_t kJobTailBytes = std::size_t{64} << 10;
// The largest file fs.read returns and fs.write accepts.
inline constexpr std::size_t kFsMaxBytes = std::size_t{8} << 20;
// Notes: key length, encoded value size, and keys per execution.
inline constexpr std::size_t kNoteKeyMaxBytes = 256;
inline constexpr std::size_t kNoteValueMaxBytes = std::size_t{64} << 10;

// proc.run's and job.start's arguments:
//   {argv: [str, ...] (non-empty), cwd: str (optional, relative to
//    /workspace), env: {str: str} (optional, added to the sandbox's),
//    stdin: str | bin (optional; proc.run only), timeout_ms: uint (optional;
//    0 or absent: the call's deadline alone)}
struct ProcRequest {
  SideCommand command;
  std::optional<std::string> stdin_data;
  std::chrono::milliseconds timeout{0};
};
// The parsed request, or the refusal ("bad_request") naming the field.
tl::expected<ProcRequest, wire::Refusal> parseProcRequest(const wire::Value& args, bool allow_stdin);

// What the capabilities act on. The table keeps the environment pointer:
// the environment must outlive the table (and the session holding it).
struct SandboxServices {
  ExecutionEnvironment* env = nullptr;
  EnvironmentHandle handle;
};

// A table with every capability above. Jobs and notes live as long as the
// table: destroying it kills every job still running.
std::shared_ptr<CapabilityTable> makeSandboxCapabilities(const SandboxServices& services);

// The policy that allows everything makeSandboxCapabilities serves.
Policy defaultCodeModePolicy();

}  // namespace airlock::capability
