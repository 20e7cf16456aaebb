#include "airlock/core/error.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <set>
#include <string>

namespace airlock {
namespace {

TEST(ErrorCodeName, EveryCodeHasItsStableSnakeCaseName) {
  EXPECT_EQ(errorCodeName(ErrorCode::kExecutionUnavailable), "execution_unavailable");
  EXPECT_EQ(errorCodeName(ErrorCode::kExecutionRejected), "execution_rejected");
  EXPECT_EQ(errorCodeName(ErrorCode::kSandboxEscapeSuspected), "sandbox_escape_suspected");
  EXPECT_EQ(errorCodeName(ErrorCode::kWorkspaceEscape), "workspace_escape");
  EXPECT_EQ(errorCodeName(ErrorCode::kToolValidationError), "tool_validation_error");
  EXPECT_EQ(errorCodeName(ErrorCode::kArtifactIntegrityError), "artifact_integrity_error");
  EXPECT_EQ(errorCodeName(ErrorCode::kNotFound), "not_found");
  EXPECT_EQ(errorCodeName(ErrorCode::kConfigurationError), "configuration_error");
}

TEST(ErrorMessage, WithoutErrnoIsTheContext) {
  const Error e{ErrorCode::kNotFound, 0, "artifact 123 does not exist"};
  EXPECT_EQ(e.message(), "artifact 123 does not exist");
}

TEST(ErrorMessage, WithErrnoAppendsTheSystemText) {
  const Error e{ErrorCode::kExecutionUnavailable, ENOENT, "open cgroup"};
  EXPECT_EQ(e.message(), "open cgroup: No such file or directory");
}

TEST(ErrorMessage, WithErrnoAndNoContextIsTheSystemText) {
  const Error e{ErrorCode::kExecutionUnavailable, EACCES, ""};
  EXPECT_EQ(e.message(), "Permission denied");
}

TEST(Fail, BuildsAnErrorWithoutErrno) {
  Result<int> r = fail(ErrorCode::kConfigurationError, "bad setting");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kConfigurationError);
  EXPECT_EQ(r.error().sys_errno, 0);
  EXPECT_EQ(r.error().context, "bad setting");
}

TEST(FailErrno, CapturesTheErrnoItIsGiven) {
  Result<void> r = failErrno(ErrorCode::kExecutionUnavailable, "clone3", EPERM);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kExecutionUnavailable);
  EXPECT_EQ(r.error().sys_errno, EPERM);
  EXPECT_EQ(r.error().message(), "clone3: Operation not permitted");
}

}  // namespace
}  // namespace airlock
