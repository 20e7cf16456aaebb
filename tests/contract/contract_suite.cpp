#include "contract_suite.h"

#include <gmock/gmock.h>
#include <poll.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <utility>
#include <vector>

#include "airlock/core/ids.h"
#include "airlock/sys/io.h"

namespace airlock::contract {
namespace {

using ::testing::Optional;

constexpr const char* kOutSha256 =
    "98ea6e4f216f2fb4b69fff9b3a44842c38686ca685f3f55dc48c5d3fb1107be4";  // "hi\n"
constexpr const char* kChangedSha256 =
    "7f8b1dfc466b6249f06cbe55c9174df2578e7754da793fded244ef5cba2a38f1";  // "changed\n"

const FileChange* findChange(const ExecutionResult& result, const std::string& path) {
  auto it = std::find_if(result.files_changed.begin(), result.files_changed.end(),
                         [&](const FileChange& c) { return c.path == path; });
  return it == result.files_changed.end() ? nullptr : &*it;
}

// Checks that result failed with `code`, printing code names and the
// adapter's message on failure.
template <class T>
::testing::AssertionResult failedWith(const Result<T>& result, ErrorCode code) {
  if (result.has_value()) {
    return ::testing::AssertionFailure() << "succeeded; expected " << errorCodeName(code);
  }
  if (result.error().code != code) {
    return ::testing::AssertionFailure()
           << "failed with " << errorCodeName(result.error().code) << " ("
           << result.error().message() << "); expected " << errorCodeName(code);
  }
  return ::testing::AssertionSuccess();
}

template <class T>
::testing::AssertionResult succeeded(const Result<T>& result) {
  if (result.has_value()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << errorCodeName(result.error().code) << ": " << result.error().message();
}

}  // namespace

void PrintTo(const ContractParam& param, std::ostream* os) {
  *os << param.name;
}

ExecutionCommand defaultCommand(Scenario scenario) {
  ExecutionCommand command;
  command.working_directory = ".";
  command.timeout_seconds = 30;
  command.maximum_output_bytes = 1 << 20;
  switch (scenario) {
    case Scenario::kEchoStdin:
      command.argv = {"cat"};
      command.stdin_data = kEchoStdinText;
      break;
    case Scenario::kSleep:
      command.argv = {"sleep", "60"};
      command.timeout_seconds = 1;
      break;
    case Scenario::kWriteFiles:
      command.argv = {"sh", "-c",
                      "printf 'hi\\n' > out.txt && printf 'changed\\n' > keep.txt && rm gone.txt"};
      break;
    case Scenario::kPrintBig:
      // printf is a shell builtin: nothing but the shell is needed.
      command.argv = {"sh", "-c",
                      "i=0; while [ $i -lt 100 ]; do printf '%01000d' 0; i=$((i+1)); done"};
      command.maximum_output_bytes = kBigOutputCap;
      break;
    case Scenario::kExitCode:
      command.argv = {"sh", "-c", "exit 3"};
      break;
    case Scenario::kStreamTwoLines:
      command.argv = {"sh", "-c", "echo first; sleep 1; echo second"};
      break;
    case Scenario::kRunUntilCancelled:
      command.argv = {"sh", "-c", "echo started; exec sleep 60"};
      break;
    case Scenario::kBackgroundHoldsOutput:
      command.argv = {"sh", "-c", "sleep 60 & echo started"};
      break;
    case Scenario::kPrintEnvVariable:
      command.argv = {"sh", "-c", std::string("echo \"${") + kEnvVariable + "-unset}\""};
      break;
  }
  return command;
}

std::string paramName(const ::testing::TestParamInfo<ContractParam>& info) {
  return info.param.name;
}

void ExecutionEnvironmentContract::SetUp() {
  adapter_ = GetParam().factory();
  ASSERT_NE(adapter_, nullptr);
  if (auto reason = adapter_->skipReason()) GTEST_SKIP() << *reason;
  auto env = adapter_->make();
  ASSERT_TRUE(succeeded(env));
  env_ = std::move(*env);
  ASSERT_NE(env_, nullptr);
}

void ExecutionEnvironmentContract::TearDown() {
  if (env_ == nullptr) return;
  for (const auto& handle : provisioned_) {
    auto destroyed = env_->destroy(handle);
    EXPECT_TRUE(succeeded(destroyed));
  }
}

EnvironmentHandle ExecutionEnvironmentContract::provisionOrFail() {
  return provisionOrFail(adapter_->spec());
}

EnvironmentHandle ExecutionEnvironmentContract::provisionOrFail(const EnvironmentSpec& spec) {
  auto handle = env_->provision(spec);
  EXPECT_TRUE(succeeded(handle));
  if (!handle) return {};
  provisioned_.push_back(*handle);
  return *handle;
}

// --- provision -------------------------------------------------------------

TEST_P(ExecutionEnvironmentContract, ProvisionReturnsAnOpaqueHandleForTheSpec) {
  const EnvironmentSpec spec = adapter_->spec();
  const EnvironmentHandle handle = provisionOrFail(spec);
  ASSERT_FALSE(HasFailure());
  EXPECT_TRUE(isUuid(handle.environment_id)) << handle.environment_id;
  EXPECT_EQ(handle.tenant_id, spec.tenant_id);
  EXPECT_EQ(handle.run_id, spec.run_id);
  EXPECT_EQ(handle.lease_epoch, spec.lease_epoch);
  EXPECT_LT(handle.created_at, handle.expires_at);
}

TEST_P(ExecutionEnvironmentContract, TwoProvisionsGetDistinctIds) {
  const EnvironmentHandle a = provisionOrFail();
  const EnvironmentHandle b = provisionOrFail();
  ASSERT_FALSE(HasFailure());
  EXPECT_NE(a.environment_id, b.environment_id);
}

TEST_P(ExecutionEnvironmentContract, UnknownImageDigestIsRejected) {
  EnvironmentSpec spec = adapter_->spec();
  spec.image_digest = "sha256:" + std::string(64, 'f');
  auto handle = env_->provision(spec);
  if (handle) provisioned_.push_back(*handle);
  EXPECT_TRUE(failedWith(handle, ErrorCode::kExecutionRejected));
}

TEST_P(ExecutionEnvironmentContract, LimitAboveCeilingIsRejected) {
  EnvironmentSpec spec = adapter_->spec();
  spec.limits.pids_max = 1'000'000'000;
  auto handle = env_->provision(spec);
  if (handle) provisioned_.push_back(*handle);
  EXPECT_TRUE(failedWith(handle, ErrorCode::kExecutionRejected));
}

// --- extend ----------------------------------------------------------------

TEST_P(ExecutionEnvironmentContract, ExtendMovesExpiresAtLaterNeverEarlier) {
  const EnvironmentHandle handle = provisionOrFail();
  ASSERT_FALSE(HasFailure());
  const Timestamp later = handle.expires_at + std::chrono::minutes(5);
  auto extended = env_->extend(handle, later);
  ASSERT_TRUE(succeeded(extended));
  EXPECT_EQ(extended->expires_at, later);
  EXPECT_EQ(extended->environment_id, handle.environment_id);
  EXPECT_EQ(extended->created_at, handle.created_at);
  auto earlier = env_->extend(handle, handle.expires_at);
  ASSERT_TRUE(succeeded(earlier));
  EXPECT_EQ(earlier->expires_at, later) << "an earlier time changes nothing";
  auto ran = env_->execute(handle, adapter_->command(Scenario::kExitCode));
  EXPECT_TRUE(succeeded(ran)) << "the handle the caller holds still works";
  EnvironmentHandle foreign = handle;
  foreign.tenant_id = "another-tenant";
  EXPECT_TRUE(failedWith(env_->extend(foreign, later + std::chrono::minutes(1)),
                         ErrorCode::kExecutionRejected));
  ASSERT_TRUE(succeeded(env_->destroy(handle)));
  EXPECT_TRUE(failedWith(env_->extend(handle, later), ErrorCode::kEnvironmentGone));
}

// --- destroy ---------------------------------------------------------------

TEST_P(ExecutionEnvironmentContract, DestroyIsIdempotent) {
  const EnvironmentHandle handle = provisionOrFail();
  ASSERT_FALSE(HasFailure());
  auto first = env_->destroy(handle);
  EXPECT_TRUE(succeeded(first));
  auto second = env_->destroy(handle);
  EXPECT_TRUE(succeeded(second));
}

TEST_P(ExecutionEnvironmentContract, DestroyOfAHandleNeverProvisionedIsOk) {
  EnvironmentHandle handle = provisionOrFail();
  ASSERT_FALSE(HasFailure());
  handle.environment_id = newUuidV7(handle.created_at);
  auto destroyed = env_->destroy(handle);
  EXPECT_TRUE(succeeded(destroyed));
}

TEST_P(ExecutionEnvironmentContract, ExecuteAgainstADestroyedHandleIsGone) {
  const EnvironmentHandle handle = provisionOrFail();
  ASSERT_FALSE(HasFailure());
  ASSERT_TRUE(succeeded(env_->destroy(handle)));
  auto result = env_->execute(handle, adapter_->command(Scenario::kExitCode));
  EXPECT_TRUE(failedWith(result, ErrorCode::kEnvironmentGone));
}

TEST_P(ExecutionEnvironmentContract, WorkspaceOfADestroyedHandleIsRejected) {
  const EnvironmentHandle handle = provisionOrFail();
  ASSERT_FALSE(HasFailure());
  auto ws = env_->workspace(handle);
  ASSERT_TRUE(succeeded(ws));
  ASSERT_TRUE(succeeded(env_->destroy(handle)));
  auto again = env_->workspace(handle);
  EXPECT_TRUE(failedWith(again, ErrorCode::kEnvironmentGone));
  // A workspace handle taken before destroy does not outlive the sandbox.
  auto write = (*ws)->write("late.txt", "x");
  EXPECT_TRUE(failedWith(write, ErrorCode::kExecutionRejected));
}

// --- handle checks ---------------------------------------------------------

TEST_P(ExecutionEnvironmentContract, ExecuteWithAnUnknownHandleIsGone) {
  EnvironmentHandle handle = provisionOrFail();
  ASSERT_FALSE(HasFailure());
  handle.environment_id = newUuidV7(handle.created_at);
  auto result = env_->execute(handle, adapter_->command(Scenario::kExitCode));
  EXPECT_TRUE(failedWith(result, ErrorCode::kEnvironmentGone));
}

TEST_P(ExecutionEnvironmentContract, AHandleOfAnotherTenantIsSuspectedAndDestroysTheSandbox) {
  const EnvironmentHandle handle = provisionOrFail();
  ASSERT_FALSE(HasFailure());
  EnvironmentHandle foreign = handle;
  foreign.tenant_id = handle.tenant_id + "-other";
  auto result = env_->execute(foreign, adapter_->command(Scenario::kExitCode));
  EXPECT_TRUE(failedWith(result, ErrorCode::kSandboxEscapeSuspected));
  // The spec: for this class the sandbox is destroyed.
  auto after = env_->execute(handle, adapter_->command(Scenario::kExitCode));
  EXPECT_TRUE(failedWith(after, ErrorCode::kEnvironmentGone));
}

TEST_P(ExecutionEnvironmentContract, AHandleOfAnotherRunIsSuspected) {
  EnvironmentHandle handle = provisionOrFail();
  ASSERT_FALSE(HasFailure());
  handle.run_id += "-other";
  auto result = env_->execute(handle, adapter_->command(Scenario::kExitCode));
  EXPECT_TRUE(failedWith(result, ErrorCode::kSandboxEscapeSuspected));
}

TEST_P(ExecutionEnvironmentContract, AHandleWithAStaleLeaseEpochIsSuspected) {
  EnvironmentHandle handle = provisionOrFail();
  ASSERT_FALSE(HasFailure());
  handle.lease_epoch += 1;
  auto result = env_->execute(handle, adapter_->command(Scenario::kExitCode));
  EXPECT_TRUE(failedWith(result, ErrorCode::kSandboxEscapeSuspected));
}

TEST_P(ExecutionEnvironmentContract, AnInvalidCommandIsAToolValidationError) {
  const EnvironmentHandle handle = provisionOrFail();
  ASSERT_FALSE(HasFailure());
  ExecutionCommand command = adapter_->command(Scenario::kExitCode);
  command.argv.clear();
  auto result = env_->execute(handle, command);
  EXPECT_TRUE(failedWith(result, ErrorCode::kToolValidationError));
}

// --- execute ---------------------------------------------------------------

TEST_P(ExecutionEnvironmentContract, ExitCodePassesThrough) {
  const EnvironmentHandle handle = provisionOrFail();
  ASSERT_FALSE(HasFailure());
  auto result = env_->execute(handle, adapter_->command(Scenario::kExitCode));
  ASSERT_TRUE(succeeded(result));
  EXPECT_THAT(result->exit_code, Optional(kScenarioExitCode));
  EXPECT_FALSE(result->killed_by.has_value());
  EXPECT_FALSE(result->timed_out);
  EXPECT_TRUE(result->files_changed.empty());
}

TEST_P(ExecutionEnvironmentContract, StdinReachesTheProcess) {
  const EnvironmentHandle handle = provisionOrFail();
  ASSERT_FALSE(HasFailure());
  auto result = env_->execute(handle, adapter_->command(Scenario::kEchoStdin));
  ASSERT_TRUE(succeeded(result));
  EXPECT_THAT(result->exit_code, Optional(0));
  EXPECT_EQ(result->stdout_data, kEchoStdinText);
  EXPECT_FALSE(result->stdout_truncated);
}

TEST_P(ExecutionEnvironmentContract, ATimeoutSetsTimedOutAndKilledByWithNoExitCode) {
  const EnvironmentHandle handle = provisionOrFail();
  ASSERT_FALSE(HasFailure());
  const ExecutionCommand command = adapter_->command(Scenario::kSleep);
  auto result = env_->execute(handle, command);
  ASSERT_TRUE(succeeded(result));
  EXPECT_TRUE(result->timed_out);
  EXPECT_EQ(result->killed_by, KillReason::kTimeout);
  EXPECT_EQ(result->exit_code, std::nullopt);
  // Killed at its timeout, not after running its minute.
  EXPECT_GE(result->duration_ms, command.timeout_seconds * 1000 - 100);
  EXPECT_LT(result->duration_ms, 30'000);
}

// The main process exits 0 at once while the process it left in the
// background holds stdout and stderr open: the command ends after the
// output grace, not at its timeout, with the main process's exit code (not
// a kill reason), its output, and both streams named as held open; what
// was left is killed, so the sandbox takes the next command.
TEST_P(ExecutionEnvironmentContract, OutputHeldOpenAfterTheMainExitEndsWithItsExitCode) {
  const EnvironmentHandle handle = provisionOrFail();
  ASSERT_FALSE(HasFailure());
  const ExecutionCommand command = adapter_->command(Scenario::kBackgroundHoldsOutput);
  auto result = env_->execute(handle, command);
  ASSERT_TRUE(succeeded(result));
  EXPECT_EQ(result->killed_by, std::nullopt);
  EXPECT_FALSE(result->timed_out);
  EXPECT_THAT(result->exit_code, Optional(0));
  EXPECT_EQ(result->stdout_data, "started\n");
  EXPECT_EQ(result->output_held_open, (std::vector<std::string>{"stdout", "stderr"}));
  EXPECT_LT(result->duration_ms, command.timeout_seconds * 1000);
  auto next = env_->execute(handle, adapter_->command(Scenario::kExitCode));
  ASSERT_TRUE(succeeded(next));
  EXPECT_THAT(next->exit_code, Optional(kScenarioExitCode));
  EXPECT_TRUE(next->output_held_open.empty());
}

// A command's env_additions are seen by that command, over the sandbox's
// environment, and not by the next command, which sees the sandbox's value
// again (or none).
TEST_P(ExecutionEnvironmentContract, EnvAdditionsReachOnlyTheirCommand) {
  const EnvironmentHandle plain = provisionOrFail();
  EnvironmentSpec spec = adapter_->spec();
  spec.environment[kEnvVariable] = "from the sandbox";
  const EnvironmentHandle set = provisionOrFail(spec);
  ASSERT_FALSE(HasFailure());
  for (const auto& [handle, before] : {std::pair{plain, std::string("unset\n")},
                                       std::pair{set, std::string("from the sandbox\n")}}) {
    ExecutionCommand with = adapter_->command(Scenario::kPrintEnvVariable);
    with.env_additions = {{kEnvVariable, "from the command"}};
    auto seen = env_->execute(handle, with);
    ASSERT_TRUE(succeeded(seen));
    EXPECT_THAT(seen->exit_code, Optional(0));
    EXPECT_EQ(seen->stdout_data, "from the command\n");
    auto next = env_->execute(handle, adapter_->command(Scenario::kPrintEnvVariable));
    ASSERT_TRUE(succeeded(next));
    EXPECT_EQ(next->stdout_data, before) << "the addition outlived its command";
  }
}

// An addition the tier rules refuse (a credential name, a name Airlock sets
// itself, an invalid name, a NUL in the value) is a ToolValidationError
// naming it, before anything runs.
TEST_P(ExecutionEnvironmentContract, ARefusedEnvAdditionIsAToolValidationErrorNamingIt) {
  const EnvironmentHandle handle = provisionOrFail();
  ASSERT_FALSE(HasFailure());
  for (const auto& [name, value] :
       std::vector<std::pair<std::string, std::string>>{{"GITHUB_TOKEN", "x"},
                                                        {"PATH", "/tmp"},
                                                        {"1BAD", "x"},
                                                        {"OK_NAME", std::string("a\0b", 3)}}) {
    ExecutionCommand command = adapter_->command(Scenario::kPrintEnvVariable);
    command.env_additions = {{name, value}};
    auto result = env_->execute(handle, command);
    EXPECT_TRUE(failedWith(result, ErrorCode::kToolValidationError)) << name;
    if (!result) {
      EXPECT_NE(result.error().message().find(name), std::string::npos) << name;
    }
  }
}

TEST_P(ExecutionEnvironmentContract, ACancelledTokenEndsTheCommandAsCancelled) {
  const EnvironmentHandle handle = provisionOrFail();
  ASSERT_FALSE(HasFailure());
  auto token = CancelToken::create();
  ASSERT_TRUE(succeeded(token));
  token->cancel();
  ExecutionCommand command = adapter_->command(Scenario::kSleep);
  command.timeout_seconds = 30;
  auto result = env_->execute(handle, command, &*token);
  ASSERT_TRUE(succeeded(result));
  EXPECT_EQ(result->killed_by, KillReason::kCancelled);
  EXPECT_EQ(result->exit_code, std::nullopt);
  EXPECT_FALSE(result->timed_out);
}

TEST_P(ExecutionEnvironmentContract, OutputAboveTheCapIsTruncatedAndKilled) {
  const EnvironmentHandle handle = provisionOrFail();
  ASSERT_FALSE(HasFailure());
  const ExecutionCommand command = adapter_->command(Scenario::kPrintBig);
  ASSERT_LT(command.maximum_output_bytes, kBigOutputBytes);
  auto result = env_->execute(handle, command);
  ASSERT_TRUE(succeeded(result));
  EXPECT_TRUE(result->stdout_truncated);
  EXPECT_EQ(result->killed_by, KillReason::kOutputLimit);
  EXPECT_EQ(result->exit_code, std::nullopt);
  EXPECT_FALSE(result->timed_out);
  EXPECT_LE(static_cast<std::int64_t>(result->stdout_data.size() + result->stderr_data.size()),
            command.maximum_output_bytes);
}

TEST_P(ExecutionEnvironmentContract, FilesChangedReportsCreatedModifiedAndDeleted) {
  const EnvironmentHandle handle = provisionOrFail();
  ASSERT_FALSE(HasFailure());
  auto ws = env_->workspace(handle);
  ASSERT_TRUE(succeeded(ws));
  ASSERT_TRUE(succeeded((*ws)->write("keep.txt", "keep\n")));
  ASSERT_TRUE(succeeded((*ws)->write("gone.txt", "gone\n")));

  auto result = env_->execute(handle, adapter_->command(Scenario::kWriteFiles));
  ASSERT_TRUE(succeeded(result));
  EXPECT_THAT(result->exit_code, Optional(0)) << result->stderr_data;
  EXPECT_FALSE(result->files_changed_truncated);
  EXPECT_EQ(result->files_changed.size(), 3u);

  const FileChange* out = findChange(*result, "out.txt");
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(out->change, ChangeKind::kCreated);
  EXPECT_EQ(out->size_bytes, 3);
  EXPECT_THAT(out->sha256, Optional(std::string(kOutSha256)));

  const FileChange* keep = findChange(*result, "keep.txt");
  ASSERT_NE(keep, nullptr);
  EXPECT_EQ(keep->change, ChangeKind::kModified);
  EXPECT_EQ(keep->size_bytes, 8);
  EXPECT_THAT(keep->sha256, Optional(std::string(kChangedSha256)));

  const FileChange* gone = findChange(*result, "gone.txt");
  ASSERT_NE(gone, nullptr);
  EXPECT_EQ(gone->change, ChangeKind::kDeleted);
  EXPECT_EQ(gone->sha256, std::nullopt);

  // The workspace port sees what the command left.
  auto read = (*ws)->read("out.txt");
  ASSERT_TRUE(succeeded(read));
  EXPECT_EQ(*read, "hi\n");
  auto deleted = (*ws)->read("gone.txt");
  EXPECT_TRUE(failedWith(deleted, ErrorCode::kNotFound));
}

TEST_P(ExecutionEnvironmentContract, ASecondRunListsOnlyItsOwnChanges) {
  const EnvironmentHandle handle = provisionOrFail();
  ASSERT_FALSE(HasFailure());
  auto ws = env_->workspace(handle);
  ASSERT_TRUE(succeeded(ws));
  ASSERT_TRUE(succeeded((*ws)->write("keep.txt", "keep\n")));
  ASSERT_TRUE(succeeded((*ws)->write("gone.txt", "gone\n")));
  auto first = env_->execute(handle, adapter_->command(Scenario::kWriteFiles));
  ASSERT_TRUE(succeeded(first));

  auto second = env_->execute(handle, adapter_->command(Scenario::kExitCode));
  ASSERT_TRUE(succeeded(second));
  EXPECT_TRUE(second->files_changed.empty());
}

TEST_P(ExecutionEnvironmentContract, WorkspacesOfTwoSandboxesAreSeparate) {
  const EnvironmentHandle a = provisionOrFail();
  const EnvironmentHandle b = provisionOrFail();
  ASSERT_FALSE(HasFailure());
  auto wa = env_->workspace(a);
  auto wb = env_->workspace(b);
  ASSERT_TRUE(succeeded(wa));
  ASSERT_TRUE(succeeded(wb));
  ASSERT_TRUE(succeeded((*wa)->write("only-in-a.txt", "a")));
  auto read = (*wb)->read("only-in-a.txt");
  EXPECT_TRUE(failedWith(read, ErrorCode::kNotFound));
}

TEST_P(ExecutionEnvironmentContract, WorkspaceRefusesAnEscapingPath) {
  const EnvironmentHandle handle = provisionOrFail();
  ASSERT_FALSE(HasFailure());
  auto ws = env_->workspace(handle);
  ASSERT_TRUE(succeeded(ws));
  auto write = (*ws)->write("../escape.txt", "x");
  EXPECT_TRUE(failedWith(write, ErrorCode::kWorkspaceEscape));
  auto read = (*ws)->read("/etc/passwd");
  EXPECT_TRUE(failedWith(read, ErrorCode::kWorkspaceEscape));
}

// --- workspace remove, rename, stat -----------------------------------------

TEST_P(ExecutionEnvironmentContract, WorkspaceStatReportsTypeSizeModeAndMtime) {
  const EnvironmentHandle handle = provisionOrFail();
  ASSERT_FALSE(HasFailure());
  auto ws = env_->workspace(handle);
  ASSERT_TRUE(succeeded(ws));
  const auto before = std::chrono::system_clock::now() - std::chrono::minutes(1);
  ASSERT_TRUE(succeeded((*ws)->write("d/f.txt", "12345")));
  auto file = (*ws)->stat("d/f.txt");
  ASSERT_TRUE(succeeded(file));
  EXPECT_EQ(file->type, WorkspaceEntry::Type::kFile);
  EXPECT_EQ(file->size_bytes, 5);
  EXPECT_EQ(file->mode, 0644u);
  const auto mtime = std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::nanoseconds(file->mtime_ns)));
  EXPECT_GT(mtime, before);
  EXPECT_LT(mtime, std::chrono::system_clock::now() + std::chrono::minutes(1));
  auto dir = (*ws)->stat("d");
  ASSERT_TRUE(succeeded(dir));
  EXPECT_EQ(dir->type, WorkspaceEntry::Type::kDirectory);
  EXPECT_EQ(dir->size_bytes, 0);
  auto root = (*ws)->stat(".");
  ASSERT_TRUE(succeeded(root));
  EXPECT_EQ(root->type, WorkspaceEntry::Type::kDirectory);
  EXPECT_TRUE(failedWith((*ws)->stat("d/missing"), ErrorCode::kNotFound));
  EXPECT_TRUE(failedWith((*ws)->stat("../x"), ErrorCode::kWorkspaceEscape));
}

TEST_P(ExecutionEnvironmentContract, WorkspaceRemoveTakesFilesAndDirectoriesButNeverTheRoot) {
  const EnvironmentHandle handle = provisionOrFail();
  ASSERT_FALSE(HasFailure());
  auto ws = env_->workspace(handle);
  ASSERT_TRUE(succeeded(ws));
  ASSERT_TRUE(succeeded((*ws)->write("f.txt", "f")));
  ASSERT_TRUE(succeeded((*ws)->write("tree/a/b.txt", "b")));
  ASSERT_TRUE(succeeded((*ws)->mkdir("empty")));

  ASSERT_TRUE(succeeded((*ws)->remove("f.txt", false)));
  EXPECT_TRUE(failedWith((*ws)->stat("f.txt"), ErrorCode::kNotFound));
  EXPECT_TRUE(failedWith((*ws)->remove("f.txt", false), ErrorCode::kNotFound));
  EXPECT_TRUE(succeeded((*ws)->remove("empty", false)));
  // A directory with entries needs recursive, and then goes whole.
  EXPECT_TRUE(failedWith((*ws)->remove("tree", false), ErrorCode::kExecutionRejected));
  EXPECT_TRUE(succeeded((*ws)->stat("tree/a/b.txt")));
  ASSERT_TRUE(succeeded((*ws)->remove("tree", true)));
  EXPECT_TRUE(failedWith((*ws)->stat("tree"), ErrorCode::kNotFound));
  EXPECT_TRUE(failedWith((*ws)->remove(".", true), ErrorCode::kToolValidationError));
  EXPECT_TRUE(failedWith((*ws)->remove("../x", true), ErrorCode::kWorkspaceEscape));
  auto left = (*ws)->listdir(".");
  ASSERT_TRUE(succeeded(left));
  EXPECT_TRUE(left->empty());
}

TEST_P(ExecutionEnvironmentContract, WorkspaceRenameMovesAndRefusesAnExistingTargetUnlessAsked) {
  const EnvironmentHandle handle = provisionOrFail();
  ASSERT_FALSE(HasFailure());
  auto ws = env_->workspace(handle);
  ASSERT_TRUE(succeeded(ws));
  ASSERT_TRUE(succeeded((*ws)->write("a.txt", "a")));
  ASSERT_TRUE(succeeded((*ws)->write("b.txt", "b")));
  ASSERT_TRUE(succeeded((*ws)->write("dir/inner.txt", "inner")));

  EXPECT_TRUE(failedWith((*ws)->rename("a.txt", "b.txt", false), ErrorCode::kExecutionRejected));
  EXPECT_EQ((*ws)->read("b.txt").value_or(""), "b");
  ASSERT_TRUE(succeeded((*ws)->rename("a.txt", "b.txt", true)));
  EXPECT_EQ((*ws)->read("b.txt").value_or(""), "a");
  EXPECT_TRUE(failedWith((*ws)->read("a.txt"), ErrorCode::kNotFound));

  ASSERT_TRUE(succeeded((*ws)->rename("dir", "moved", false)));
  EXPECT_EQ((*ws)->read("moved/inner.txt").value_or(""), "inner");
  EXPECT_TRUE(failedWith((*ws)->stat("dir"), ErrorCode::kNotFound));

  EXPECT_TRUE(failedWith((*ws)->rename("missing", "x", false), ErrorCode::kNotFound));
  EXPECT_TRUE(failedWith((*ws)->rename("b.txt", "no/such/dir/b", false), ErrorCode::kNotFound));
  EXPECT_TRUE(
      failedWith((*ws)->rename("moved", "moved/sub", false), ErrorCode::kToolValidationError));
  EXPECT_TRUE(failedWith((*ws)->rename("b.txt", "moved", true), ErrorCode::kToolValidationError));
  EXPECT_TRUE(failedWith((*ws)->rename(".", "x", false), ErrorCode::kToolValidationError));
  EXPECT_TRUE(failedWith((*ws)->rename("b.txt", "../b.txt", false), ErrorCode::kWorkspaceEscape));
  EXPECT_TRUE(failedWith((*ws)->rename("/etc/passwd", "p", false), ErrorCode::kWorkspaceEscape));
}

TEST_P(ExecutionEnvironmentContract, WorkspaceProvenanceFollowsARenameAndLeavesWithARemove) {
  const EnvironmentHandle handle = provisionOrFail();
  ASSERT_FALSE(HasFailure());
  auto ws = env_->workspace(handle);
  ASSERT_TRUE(succeeded(ws));
  ASSERT_TRUE(succeeded((*ws)->write("notes.txt", "mine")));
  ASSERT_TRUE(succeeded((*ws)->write("d/deep.txt", "mine too")));
  ASSERT_TRUE(succeeded((*ws)->placeFile("placed.txt", "not mine")));
  ASSERT_TRUE(succeeded((*ws)->write("over.txt", "tool")));

  ASSERT_TRUE(succeeded((*ws)->rename("notes.txt", "renamed.txt", false)));
  EXPECT_EQ((*ws)->provenance("renamed.txt").value_or(WorkspaceProvenance::kUnknown),
            WorkspaceProvenance::kToolWritten);
  EXPECT_EQ((*ws)->provenance("notes.txt").value_or(WorkspaceProvenance::kToolWritten),
            WorkspaceProvenance::kUnknown);
  ASSERT_TRUE(succeeded((*ws)->rename("d", "e", false)));
  EXPECT_EQ((*ws)->provenance("e/deep.txt").value_or(WorkspaceProvenance::kUnknown),
            WorkspaceProvenance::kToolWritten);
  // Replacing a tool-written file with an unknown one leaves it UNKNOWN.
  ASSERT_TRUE(succeeded((*ws)->rename("placed.txt", "over.txt", true)));
  EXPECT_EQ((*ws)->provenance("over.txt").value_or(WorkspaceProvenance::kToolWritten),
            WorkspaceProvenance::kUnknown);

  ASSERT_TRUE(succeeded((*ws)->remove("renamed.txt", false)));
  ASSERT_TRUE(succeeded((*ws)->remove("e", true)));
  // Written again by someone else, a removed path does not inherit the record.
  ASSERT_TRUE(succeeded((*ws)->placeFile("renamed.txt", "other")));
  EXPECT_EQ((*ws)->provenance("renamed.txt").value_or(WorkspaceProvenance::kToolWritten),
            WorkspaceProvenance::kUnknown);
  EXPECT_EQ((*ws)->provenance("e/deep.txt").value_or(WorkspaceProvenance::kToolWritten),
            WorkspaceProvenance::kUnknown);
}

TEST_P(ExecutionEnvironmentContract, WorkspaceOperationsAfterDestroyAreRejected) {
  const EnvironmentHandle handle = provisionOrFail();
  ASSERT_FALSE(HasFailure());
  auto ws = env_->workspace(handle);
  ASSERT_TRUE(succeeded(ws));
  ASSERT_TRUE(succeeded((*ws)->write("f", "x")));
  ASSERT_TRUE(succeeded(env_->destroy(handle)));
  EXPECT_TRUE(failedWith((*ws)->stat("f"), ErrorCode::kExecutionRejected));
  EXPECT_TRUE(failedWith((*ws)->remove("f", false), ErrorCode::kExecutionRejected));
  EXPECT_TRUE(failedWith((*ws)->rename("f", "g", false), ErrorCode::kExecutionRejected));
}

// --- streaming, and commands ended from outside ------------------------------

namespace {

using OutputStream = ExecutionEnvironment::OutputStream;

// A command of kRunUntilCancelled running on a thread of its own, streamed:
// started() is ready once its "started\n" has reached the sink. The
// destructor cancels it and waits for it, whatever the test did.
class BackgroundCommand {
 public:
  BackgroundCommand(ExecutionEnvironment& env, const EnvironmentHandle& handle,
                    const ExecutionCommand& command)
      : token_(CancelToken::create()) {
    if (!token_) return;
    thread_ = std::thread([this, &env, handle, command] {
      result_ = env.executeStreaming(
          handle, command, &*token_, [this](OutputStream stream, std::string_view bytes) {
            if (stream == OutputStream::kStdout) seen_.append(bytes);
            if (!signalled_ && seen_.find("started\n") != std::string::npos) {
              signalled_ = true;
              started_.set_value();
            }
          });
    });
  }
  // Cancels it if it still runs (a test that failed early) and waits.
  ~BackgroundCommand() {
    if (!thread_.joinable()) return;
    token_->cancel();
    thread_.join();
  }
  bool waitStarted() {
    return thread_.joinable() &&
           started_future_.wait_for(std::chrono::seconds(60)) == std::future_status::ready;
  }
  void cancel() { token_->cancel(); }
  // Waits for the command's end, without cancelling it; its result.
  const Result<ExecutionResult>& join() {
    if (thread_.joinable()) thread_.join();
    return result_;
  }

 private:
  Result<CancelToken> token_;
  std::thread thread_;
  std::string seen_;
  bool signalled_ = false;
  std::promise<void> started_;
  std::future<void> started_future_ = started_.get_future();
  Result<ExecutionResult> result_ = fail(ErrorCode::kExecutionUnavailable, "did not run");
};

}  // namespace

TEST_P(ExecutionEnvironmentContract, TheFirstStreamedChunkArrivesBeforeTheCommandExits) {
  const EnvironmentHandle handle = provisionOrFail();
  ASSERT_FALSE(HasFailure());
  std::string seen;
  std::optional<std::chrono::milliseconds> first_at;
  const auto called = std::chrono::steady_clock::now();
  auto result =
      env_->executeStreaming(handle, adapter_->command(Scenario::kStreamTwoLines), nullptr,
                             [&](OutputStream stream, std::string_view bytes) {
                               if (stream == OutputStream::kStdout) seen.append(bytes);
                               if (!first_at && seen.find("first\n") != std::string::npos)
                                 first_at = std::chrono::duration_cast<std::chrono::milliseconds>(
                                     std::chrono::steady_clock::now() - called);
                             });
  ASSERT_TRUE(succeeded(result));
  EXPECT_THAT(result->exit_code, Optional(0));
  EXPECT_EQ(result->stdout_data, "first\nsecond\n");
  EXPECT_EQ(seen, result->stdout_data);  // the sink saw every byte, once
  ASSERT_TRUE(first_at.has_value());
  // The command waits a second between its lines. A chunk passed on as it
  // is read arrives a second before the command ends; one held back until
  // the exit arrives at its end (duration_ms).
  EXPECT_LT(first_at->count(), result->duration_ms - 500)
      << "\"first\" reached the sink " << first_at->count()
      << " ms after the call; the command ran " << result->duration_ms << " ms";
}

TEST_P(ExecutionEnvironmentContract, ACancelMidCommandEndsItAsCancelledWithItsPartialOutput) {
  const EnvironmentHandle handle = provisionOrFail();
  ASSERT_FALSE(HasFailure());
  auto token = CancelToken::create();
  ASSERT_TRUE(succeeded(token));
  std::string seen;
  const ExecutionCommand command = adapter_->command(Scenario::kRunUntilCancelled);
  auto result = env_->executeStreaming(handle, command, &*token,
                                       [&](OutputStream stream, std::string_view bytes) {
                                         if (stream == OutputStream::kStdout) seen.append(bytes);
                                         if (seen.find("started\n") != std::string::npos)
                                           token->cancel();  // non-blocking, as a sink must be
                                       });
  ASSERT_TRUE(succeeded(result));
  EXPECT_EQ(result->killed_by, KillReason::kCancelled);
  EXPECT_EQ(result->exit_code, std::nullopt);
  EXPECT_FALSE(result->timed_out);
  EXPECT_EQ(result->stdout_data, "started\n");
  EXPECT_LT(result->duration_ms, command.timeout_seconds * 1000);
}

TEST_P(ExecutionEnvironmentContract, ADestroyUnderARunningCommandEndsItAsCancelled) {
  const EnvironmentHandle handle = provisionOrFail();
  ASSERT_FALSE(HasFailure());
  BackgroundCommand running(*env_, handle, adapter_->command(Scenario::kRunUntilCancelled));
  ASSERT_TRUE(running.waitStarted());
  ASSERT_TRUE(succeeded(env_->destroy(handle)));  // completes while the command runs
  const auto& result = running.join();
  ASSERT_TRUE(succeeded(result));
  EXPECT_EQ(result->killed_by, KillReason::kCancelled);
  EXPECT_EQ(result->exit_code, std::nullopt);
  EXPECT_EQ(result->stdout_data, "started\n");
}

TEST_P(ExecutionEnvironmentContract, AShutdownUnderARunningCommandEndsItAsServiceShutdown) {
  const EnvironmentHandle handle = provisionOrFail();
  ASSERT_FALSE(HasFailure());
  BackgroundCommand running(*env_, handle, adapter_->command(Scenario::kRunUntilCancelled));
  ASSERT_TRUE(running.waitStarted());
  env_->shutdown();
  const auto& result = running.join();
  ASSERT_TRUE(succeeded(result));
  EXPECT_EQ(result->killed_by, KillReason::kServiceShutdown);
  EXPECT_EQ(result->stdout_data, "started\n");
}

TEST_P(ExecutionEnvironmentContract, ExecuteOnABusyAndOnADestroyedEnvironmentFailDistinctly) {
  const EnvironmentHandle handle = provisionOrFail();
  ASSERT_FALSE(HasFailure());
  {
    BackgroundCommand running(*env_, handle, adapter_->command(Scenario::kRunUntilCancelled));
    ASSERT_TRUE(running.waitStarted());
    auto busy = env_->execute(handle, adapter_->command(Scenario::kExitCode));
    EXPECT_TRUE(failedWith(busy, ErrorCode::kEnvironmentBusy));
    running.cancel();
    const auto& first = running.join();
    ASSERT_TRUE(succeeded(first));
    EXPECT_EQ(first->killed_by, KillReason::kCancelled);
  }
  ASSERT_TRUE(succeeded(env_->destroy(handle)));
  auto gone = env_->execute(handle, adapter_->command(Scenario::kExitCode));
  EXPECT_TRUE(failedWith(gone, ErrorCode::kEnvironmentGone));
}

TEST_P(ExecutionEnvironmentContract, ACancelByExecutionIdEndsTheRunningCommandAsCancelled) {
  const EnvironmentHandle handle = provisionOrFail();
  ASSERT_FALSE(HasFailure());
  ExecutionCommand command = adapter_->command(Scenario::kRunUntilCancelled);
  command.execution_id = "contract-exec:1";
  {
    BackgroundCommand running(*env_, handle, command);
    ASSERT_TRUE(running.waitStarted());
    EXPECT_TRUE(failedWith(env_->cancel(handle, "another-id"), ErrorCode::kNotFound));
    EXPECT_TRUE(failedWith(env_->cancel(handle, ""), ErrorCode::kToolValidationError));
    EXPECT_TRUE(failedWith(env_->cancel(handle, "no spaces"), ErrorCode::kToolValidationError));
    EnvironmentHandle foreign = handle;
    foreign.tenant_id = "another-tenant";
    EXPECT_TRUE(
        failedWith(env_->cancel(foreign, command.execution_id), ErrorCode::kExecutionRejected));
    ASSERT_TRUE(succeeded(env_->cancel(handle, command.execution_id)));
    const auto& ended = running.join();
    ASSERT_TRUE(succeeded(ended));
    EXPECT_EQ(ended->killed_by, KillReason::kCancelled);
    EXPECT_EQ(ended->stdout_data, "started\n") << "with the output it had written";
  }
  EXPECT_TRUE(failedWith(env_->cancel(handle, command.execution_id), ErrorCode::kNotFound))
      << "a command that is over is not running";
  EXPECT_TRUE(succeeded(env_->execute(handle, adapter_->command(Scenario::kExitCode))))
      << "the environment takes the next command";
  ASSERT_TRUE(succeeded(env_->destroy(handle)));
  EXPECT_TRUE(failedWith(env_->cancel(handle, command.execution_id), ErrorCode::kEnvironmentGone));
}

TEST_P(ExecutionEnvironmentContract, AnInvalidExecutionIdIsRefusedBeforeTheCommandRuns) {
  const EnvironmentHandle handle = provisionOrFail();
  ASSERT_FALSE(HasFailure());
  ExecutionCommand command = adapter_->command(Scenario::kExitCode);
  command.execution_id = std::string(129, 'a');
  EXPECT_TRUE(failedWith(env_->execute(handle, command), ErrorCode::kToolValidationError));
  command.execution_id = "semi;colon";
  EXPECT_TRUE(failedWith(env_->execute(handle, command), ErrorCode::kToolValidationError));
  ASSERT_TRUE(succeeded(env_->destroy(handle)));
}

TEST_P(ExecutionEnvironmentContract, ASideProcessOutputArrivesBeforeItExits) {
  const EnvironmentHandle handle = provisionOrFail();
  ASSERT_FALSE(HasFailure());
  SideCommand side;
  side.argv = adapter_->command(Scenario::kStreamTwoLines).argv;
  auto started = env_->startSideProcess(handle, side);
  if (!started && started.error().code == ErrorCode::kExecutionUnavailable &&
      started.error().context.find("cannot start side processes") != std::string::npos)
    GTEST_SKIP() << "this adapter has no side processes: " << started.error().context;
  ASSERT_TRUE(succeeded(started));
  SideProcess& process = **started;
  std::string seen;
  std::optional<bool> running_at_first;  // whether it still ran when "first" arrived
  SidePumpHooks hooks;
  hooks.output = [&](bool is_stdout, std::string_view chunk) {
    if (!is_stdout) return;
    seen.append(chunk);
    if (!running_at_first && seen.find("first\n") != std::string::npos)
      running_at_first = !process.exitStatus().has_value();
  };
  hooks.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  const SidePumpOutcome pumped = process.pump(hooks);
  EXPECT_EQ(pumped.end, SidePumpEnd::kFinished);
  EXPECT_EQ(seen, "first\nsecond\n");
  ASSERT_TRUE(running_at_first.has_value());
  // The process waits a second after its first line: streamed as it is
  // written, the line arrives while the process still runs.
  EXPECT_TRUE(*running_at_first);
  EXPECT_EQ(pumped.wait_status, std::optional<int>(0));
}

}  // namespace airlock::contract
