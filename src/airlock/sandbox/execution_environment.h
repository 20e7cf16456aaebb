// The ExecutionEnvironment port (spec 000, "The ExecutionEnvironment port";
// DESIGN.md 5.1) and the narrow workspace port beside it.
//
// Adapters: fake/ (scripted, in-memory), linux/ (shared-kernel jail) and
// oci/ (gvisor: runsc, the production mechanism).
// Every adapter passes tests/contract.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/core/error.h"
#include "airlock/core/types.h"
#include "airlock/sandbox/cancel_token.h"
#include "airlock/sys/unique_fd.h"

namespace airlock {

// One entry of a workspace listing.
struct WorkspaceEntry {
  std::string name;  // raw bytes of the name
  enum class Type { kFile, kDirectory, kSymlink, kOther } type = Type::kFile;
  std::int64_t size_bytes = 0;
  bool operator==(const WorkspaceEntry&) const = default;
};

// Who put a file where it is (spec 000, "Provenance, and why the handle
// answers it"). TOOL_WRITTEN: the handle's own write. SANDBOX_WRITTEN: a
// command created or modified it. UNKNOWN: anything else (copy-in, archive
// extraction, a path never seen, a record that was lost); it is the safe
// answer, the same as untrusted.
enum class WorkspaceProvenance { kUnknown, kToolWritten, kSandboxWritten };

constexpr const char* workspaceProvenanceName(WorkspaceProvenance p) {
  switch (p) {
    case WorkspaceProvenance::kToolWritten:
      return "tool_written";
    case WorkspaceProvenance::kSandboxWritten:
      return "sandbox_written";
    case WorkspaceProvenance::kUnknown:
      break;
  }
  return "unknown";
}

// Narrow file access to one sandbox's workspace (spec 000, "WorkspaceHandle").
// Paths are relative to /workspace and pass the containment rules; errors:
// WorkspaceEscape (path refused), NotFound, ExecutionRejected (handle gone).
// provenance() answers from an in-memory record held beside the volume
// (no syscalls, no existence check): a path it has no record for is UNKNOWN.
class WorkspaceHandle {
 public:
  virtual ~WorkspaceHandle() = default;
  virtual Result<std::string> read(const std::string& path) = 0;
  // Creates or replaces a regular file; creates missing parent directories.
  virtual Result<void> write(const std::string& path, std::string_view data) = 0;
  // Writes like write, but the path's provenance becomes UNKNOWN: for bytes
  // the platform did not produce (copy-in, archive extraction). Only write
  // records TOOL_WRITTEN.
  virtual Result<void> placeFile(const std::string& path, std::string_view data) = 0;
  virtual Result<void> mkdir(const std::string& path) = 0;
  virtual Result<std::vector<WorkspaceEntry>> listdir(const std::string& path) = 0;
  // The path passes the same lexical check as the other methods
  // (WorkspaceEscape when refused); ExecutionRejected when the handle is gone.
  virtual Result<WorkspaceProvenance> provenance(const std::string& path) = 0;
  // A new O_PATH directory fd of the workspace root, owned by the caller, for
  // execution-side readers that stream large files through the containment
  // function themselves (artifact export). Adapters whose workspace is not a
  // local directory (fake, remote) return ExecutionUnavailable; callers then
  // fall back to read().
  virtual Result<sys::UniqueFd> openRoot() {
    return fail(ErrorCode::kExecutionUnavailable, "this workspace is not a local directory");
  }
};

class ExecutionEnvironment {
 public:
  virtual ~ExecutionEnvironment() = default;

  // Creates a sandbox for spec. ExecutionRejected for an invalid spec (limit
  // above ceiling, unknown image digest); ExecutionUnavailable when the
  // mechanism cannot start one within the start budget.
  virtual Result<EnvironmentHandle> provision(const EnvironmentSpec& spec) = 0;

  // Runs one command to completion in the sandbox. Not parallel-safe against
  // one handle. A cancelled token ends the command with killed_by CANCELLED.
  // Errors: ToolValidationError (invalid command, checked first);
  // ExecutionRejected (unknown or destroyed handle); SandboxEscapeSuspected
  // (the handle's tenant, run or epoch differs from the sandbox's record; the
  // sandbox is destroyed, as the spec requires for this class);
  // ExecutionUnavailable (the sandbox's init died or a syscall failed).
  virtual Result<ExecutionResult> execute(const EnvironmentHandle& handle,
                                          const ExecutionCommand& command,
                                          const CancelToken* cancel = nullptr) = 0;

  // Receives output as a command produces it (the streaming variant of
  // execute). Called on the executing thread, in order, with at most the
  // bytes that also land in the result (the output cap applies to both);
  // it must not call back into the adapter.
  enum class OutputStream { kStdout, kStderr };
  using OutputSink = std::function<void(OutputStream stream, std::string_view bytes)>;

  // execute, with each chunk of output passed to `sink` as it is read, and
  // the complete result (the same as execute's) returned at the end. The
  // default runs execute and then passes the whole output at once, for
  // adapters whose commands cannot stream.
  virtual Result<ExecutionResult> executeStreaming(const EnvironmentHandle& handle,
                                                   const ExecutionCommand& command,
                                                   const CancelToken* cancel, const OutputSink& sink) {
    auto result = execute(handle, command, cancel);
    if (result && sink) {
      if (!result->stdout_data.empty()) sink(OutputStream::kStdout, result->stdout_data);
      if (!result->stderr_data.empty()) sink(OutputStream::kStderr, result->stderr_data);
    }
    return result;
  }

  // Destroys the sandbox and its workspace. Idempotent: a gone handle is OK.
  virtual Result<void> destroy(const EnvironmentHandle& handle) = 0;

  // The workspace port of a live sandbox. ExecutionRejected when gone.
  virtual Result<std::shared_ptr<WorkspaceHandle>> workspace(const EnvironmentHandle& handle) = 0;

  // The service is stopping: every running command ends with killed_by
  // SERVICE_SHUTDOWN (partial output returned), and provision/execute fail
  // with ExecutionUnavailable from now on. Callers then destroy what they
  // hold. Thread-safe and async-signal-safe in the linux adapter. The
  // default (an adapter whose commands complete instantly) only refuses.
  virtual void shutdown() noexcept {}
};

}  // namespace airlock
