// The ExecutionEnvironment contract suite (spec 000, "One contract suite,
// four adapters"): one set of assertions about the port's semantics, run
// unchanged against every adapter. It asserts nothing about isolation; that
// is what the gates are for.
//
// To run it against an adapter, implement ContractAdapter and instantiate:
//
//   AIRLOCK_INSTANTIATE_CONTRACT_SUITE(Linux, [] { return std::make_unique<LinuxAdapter>(); });
//
// inside namespace airlock::contract, in a test executable linked with
// airlock_contract_suite and gtest_main.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include "airlock/core/types.h"
#include "airlock/port/execution_environment.h"

namespace airlock::contract {

// What the command of a scenario must do. The suite seeds the workspace and
// checks the result; the adapter only supplies a command that does this.
enum class Scenario {
  // Copies stdin to stdout and exits 0 (`cat`).
  kEchoStdin,
  // Runs for a minute; the suite expects the 1 s timeout to kill it.
  kSleep,
  // In /workspace: creates out.txt containing "hi\n", replaces the content
  // of the existing keep.txt with "changed\n", deletes the existing gone.txt,
  // exits 0. The suite seeds keep.txt and gone.txt first.
  kWriteFiles,
  // Writes kBigOutputBytes bytes to stdout (with a kBigOutputCap cap).
  kPrintBig,
  // Exits with status 3 and no output.
  kExitCode,
  // Prints "first\n", waits a second, prints "second\n", exits 0.
  kStreamTwoLines,
  // Prints "started\n", then runs until it is killed (its timeout is 30 s;
  // the suite cancels it, or destroys or shuts down under it, first).
  kRunUntilCancelled,
  // Starts a process in the background that runs for a minute with the
  // command's stdout and stderr, prints "started\n" and exits 0 at once
  // (its timeout is 30 s): `sh -c 'sleep 60 & echo started'`.
  kBackgroundHoldsOutput,
  // Prints the value of kEnvVariable and a newline, or "unset\n" when the
  // command's environment has no such variable:
  // `sh -c 'echo "${CONTRACT_GREETING-unset}"'`.
  kPrintEnvVariable,
};

// The variable kPrintEnvVariable prints.
inline constexpr const char* kEnvVariable = "CONTRACT_GREETING";

inline constexpr std::int64_t kBigOutputBytes = 100000;
inline constexpr std::int64_t kBigOutputCap = 1000;
inline constexpr int kScenarioExitCode = 3;

// The POSIX-shell command for a scenario, with the suite's timeout, stdin
// and output cap: ["cat"], ["sleep","60"], ["sh","-c",...]. An adapter that
// runs real programs returns these; the fake scripts the same argv.
ExecutionCommand defaultCommand(Scenario scenario);

// The stdin the kEchoStdin scenario is given.
inline constexpr const char* kEchoStdinText = "stdin reaches the process\n";

class ContractAdapter {
 public:
  virtual ~ContractAdapter() = default;
  // A fresh adapter instance; called once per test.
  virtual Result<std::unique_ptr<ExecutionEnvironment>> make() = 0;
  // A valid spec for this adapter (digest it knows, limits under its
  // ceilings, a tenant and run the suite may alter).
  virtual EnvironmentSpec spec() = 0;
  // The command for a scenario; defaultCommand(scenario) unless the
  // adapter runs something else.
  virtual ExecutionCommand command(Scenario scenario) { return defaultCommand(scenario); }
  // Set when this machine cannot run the adapter (the tests are skipped
  // with the reason). Default: runnable.
  virtual std::optional<std::string> skipReason() { return std::nullopt; }
};

struct ContractParam {
  std::string name;  // used in test names: letters and digits only
  std::function<std::unique_ptr<ContractAdapter>()> factory;
};

// Test output names the adapter instead of dumping the struct's bytes.
void PrintTo(const ContractParam& param, std::ostream* os);

// Test-name generator; referencing it also pulls the suite's tests out of
// the static library, which is why the macro below uses it.
std::string paramName(const ::testing::TestParamInfo<ContractParam>& info);

class ExecutionEnvironmentContract : public ::testing::TestWithParam<ContractParam> {
 protected:
  void SetUp() override;
  void TearDown() override;

  // Provisions adapter_->spec() (or the given spec) and remembers the handle
  // for TearDown. Fails the test on error.
  EnvironmentHandle provisionOrFail();
  EnvironmentHandle provisionOrFail(const EnvironmentSpec& spec);

  std::unique_ptr<ContractAdapter> adapter_;
  std::unique_ptr<ExecutionEnvironment> env_;
  std::vector<EnvironmentHandle> provisioned_;
};

}  // namespace airlock::contract

// Use inside namespace airlock::contract (gtest pastes the suite name into
// identifiers, so it cannot be qualified).
#define AIRLOCK_INSTANTIATE_CONTRACT_SUITE(prefix, factory)                      \
  INSTANTIATE_TEST_SUITE_P(                                                      \
      prefix, ExecutionEnvironmentContract,                                      \
      ::testing::Values(::airlock::contract::ContractParam{#prefix, (factory)}), \
      ::airlock::contract::paramName)
