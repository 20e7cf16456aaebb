#include "airlock/core/error.h"

#include <cstring>

namespace airlock {

std::string_view errorCodeName(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::kExecutionUnavailable:
      return "execution_unavailable";
    case ErrorCode::kExecutionRejected:
      return "execution_rejected";
    case ErrorCode::kSandboxEscapeSuspected:
      return "sandbox_escape_suspected";
    case ErrorCode::kWorkspaceEscape:
      return "workspace_escape";
    case ErrorCode::kToolValidationError:
      return "tool_validation_error";
    case ErrorCode::kArtifactIntegrityError:
      return "artifact_integrity_error";
    case ErrorCode::kNotFound:
      return "not_found";
    case ErrorCode::kConfigurationError:
      return "configuration_error";
    case ErrorCode::kEnvironmentBusy:
      return "environment_busy";
    case ErrorCode::kEnvironmentGone:
      return "environment_gone";
  }
  // An out-of-range value is a programming error; still give a stable name.
  return "unknown_error";
}

std::string Error::message() const {
  if (sys_errno == 0) return context;
  // GNU strerror_r returns a pointer that may or may not be `buffer`.
  char buffer[256];
  const char* text = strerror_r(sys_errno, buffer, sizeof buffer);
  std::string out = context;
  if (!out.empty()) out += ": ";
  out += text;
  return out;
}

tl::unexpected<Error> failErrno(ErrorCode code, std::string context, int err) {
  return tl::unexpected<Error>(Error{code, err, std::move(context)});
}

}  // namespace airlock
