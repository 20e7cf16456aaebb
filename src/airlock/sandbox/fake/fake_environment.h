// The `fake` mechanism (spec 000: "fake is a fourth SandboxMechanism value
// and a production adapter, not a test double"). It executes nothing: it
// records commands, returns scripted behaviour, and models each workspace as
// a map from path to bytes. Port semantics (timeout rule, output cap and
// truncation, files_changed from a snapshot diff, handle and tenant checks)
// are computed by the adapter exactly as a real mechanism would.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "airlock/core/limits_defaults.h"
#include "airlock/sandbox/execution_environment.h"

namespace airlock::fake {

inline constexpr const char* kFakeImageDigest =
    "sha256:0000000000000000000000000000000000000000000000000000000000000000";

// What a scripted command "does" when run.
struct ScriptedBehaviour {
  std::string stdout_data;
  std::string stderr_data;
  bool echo_stdin_to_stdout = false;      // like `cat`
  int exit_code = 0;
  std::chrono::milliseconds runs_for{0};  // simulated duration; > timeout => TIMEOUT
  std::map<std::string, std::string> writes;  // path -> bytes (create or modify)
  std::vector<std::string> deletes;
};

struct FakeOptions {
  std::chrono::seconds service_hard_cap{1800};
  LimitCeilings ceilings = defaultCeilings();
  std::int64_t files_changed_listing = kDefaultFilesChangedListing;
};

class FakeEnvironment : public ExecutionEnvironment {
 public:
  explicit FakeEnvironment(FakeOptions options = {});
  ~FakeEnvironment() override;

  // Behaviour for an exact argv. Unscripted commands exit 127 with a message
  // on stderr, like a shell that cannot find the program.
  void script(std::vector<std::string> argv, ScriptedBehaviour behaviour);
  // Every command executed, in order.
  const std::vector<ExecutionCommand>& history() const;

  Result<EnvironmentHandle> provision(const EnvironmentSpec& spec) override;
  Result<ExecutionResult> execute(const EnvironmentHandle& handle, const ExecutionCommand& command,
                                  const CancelToken* cancel = nullptr) override;
  Result<void> destroy(const EnvironmentHandle& handle) override;
  Result<std::shared_ptr<WorkspaceHandle>> workspace(const EnvironmentHandle& handle) override;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace airlock::fake
