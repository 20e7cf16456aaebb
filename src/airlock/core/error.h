// Error taxonomy and the Result type used at every module boundary.
//
// Spec 000, "The three methods and what may fail" and "WorkspaceHandle": the
// failure kinds that cross the ExecutionEnvironment port are codes here, mapped
// once to CLI exit codes (cli/exit_codes.h) and later to HTTP statuses.
// Exceptions are reserved for programming errors; untrusted input never throws.
#pragma once

#include <string>
#include <string_view>
#include <tl/expected.hpp>

namespace airlock {

enum class ErrorCode {
  // Service unreachable, out of capacity, shutting down, or a kernel facility
  // failed during provision. Retriable.
  kExecutionUnavailable,
  // The specification or command is invalid (limit above ceiling, unknown
  // image, destroyed or foreign handle). Not retriable: a caller bug.
  kExecutionRejected,
  // An invariant the service checks was violated (tenant mismatch, workspace
  // device changed, process surviving destroy). Raises an operational alert.
  kSandboxEscapeSuspected,
  // resolve() refused a path (spec: WorkspaceHandle containment rules).
  kWorkspaceEscape,
  // A tool or CLI argument is malformed (argv as a string, NUL byte, bad unit).
  kToolValidationError,
  // Exported bytes do not match their expected SHA-256 (spec: ArtifactStore).
  kArtifactIntegrityError,
  // A named object does not exist (file in a workspace, artifact).
  kNotFound,
  // A configuration value is invalid (settings, tier-1 names).
  kConfigurationError,
  // The environment is live but a command is running in it (one at a time
  // per environment). Retriable once that command ends.
  kEnvironmentBusy,
  // The environment is gone: destroyed, expired, reaped, or never provisioned
  // by this service. Not retriable; provision a new one.
  kEnvironmentGone,
};

// Stable lower_snake_case name of a code, for JSON and logs.
std::string_view errorCodeName(ErrorCode code) noexcept;

struct Error {
  ErrorCode code;
  // errno captured where a syscall failed, 0 otherwise.
  int sys_errno = 0;
  // What failed, in words a user can act on. Never contains a secret or a
  // host path of a workspace (spec gate: no host path crosses the port).
  std::string context;

  // "context: strerror(sys_errno)" or just the context.
  std::string message() const;
};

template <class T>
using Result = tl::expected<T, Error>;

inline tl::unexpected<Error> fail(ErrorCode code, std::string context) {
  return tl::unexpected<Error>(Error{code, 0, std::move(context)});
}

// For a failed syscall: captures errno at the call site.
tl::unexpected<Error> failErrno(ErrorCode code, std::string context, int err);

}  // namespace airlock
