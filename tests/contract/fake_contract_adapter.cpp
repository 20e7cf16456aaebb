#include "fake_contract_adapter.h"

#include "airlock/core/limits_defaults.h"
#include "airlock/sandbox/fake/fake_environment.h"

namespace airlock::contract {

using std::chrono::milliseconds;

Result<std::unique_ptr<ExecutionEnvironment>> FakeContractAdapter::make() {
  auto env = std::make_unique<fake::FakeEnvironment>();
  fake::ScriptedBehaviour echo;
  echo.echo_stdin_to_stdout = true;
  env->script(command(Scenario::kEchoStdin).argv, echo);

  fake::ScriptedBehaviour sleep;
  sleep.runs_for = milliseconds(60'000);
  env->script(command(Scenario::kSleep).argv, sleep);

  fake::ScriptedBehaviour write;
  write.writes = {{"out.txt", "hi\n"}, {"keep.txt", "changed\n"}};
  write.deletes = {"gone.txt"};
  env->script(command(Scenario::kWriteFiles).argv, write);

  fake::ScriptedBehaviour big;
  big.stdout_data = std::string(kBigOutputBytes, '0');
  env->script(command(Scenario::kPrintBig).argv, big);

  fake::ScriptedBehaviour exit_code;
  exit_code.exit_code = kScenarioExitCode;
  env->script(command(Scenario::kExitCode).argv, exit_code);
  fake::ScriptedBehaviour two_lines;
  two_lines.stdout_data = "first\nsecond\n";
  two_lines.runs_for = milliseconds(1000);
  env->script(command(Scenario::kStreamTwoLines).argv, two_lines);

  fake::ScriptedBehaviour until_cancelled;
  until_cancelled.stdout_data = "started\n";
  until_cancelled.runs_until_cancelled = true;
  env->script(command(Scenario::kRunUntilCancelled).argv, until_cancelled);

  fake::ScriptedBehaviour background;
  background.stdout_data = "started\n";
  background.background_holds_stdout = true;
  background.background_holds_stderr = true;
  env->script(command(Scenario::kBackgroundHoldsOutput).argv, background);

  // The fake runs no shell: the variable's value comes from the
  // environment the command runs with.
  env->setFallback(
      [print = command(Scenario::kPrintEnvVariable).argv](
          const ExecutionCommand& c,
          const fake::CommandVariables& variables) -> std::optional<fake::ScriptedBehaviour> {
        if (c.argv != print) return std::nullopt;
        fake::ScriptedBehaviour b;
        auto it = variables.find(kEnvVariable);
        b.stdout_data = (it == variables.end() ? std::string("unset") : it->second) + "\n";
        return b;
      });
  return std::unique_ptr<ExecutionEnvironment>(std::move(env));
}

EnvironmentSpec FakeContractAdapter::spec() {
  EnvironmentSpec spec;
  spec.tenant_id = "tenant-contract";
  spec.run_id = "run-contract";
  spec.lease_epoch = 7;
  spec.image_digest = fake::kFakeImageDigest;
  spec.limits = defaultLimits();
  return spec;
}

}  // namespace airlock::contract
