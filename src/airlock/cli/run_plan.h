// `airlock run`: from the flags as typed to a validated plan. Everything the
// user can get wrong is found here, before any sandbox exists, so that bad
// input leaves nothing behind (docs/cli.md).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/core/error.h"
#include "airlock/core/mechanism.h"
#include "airlock/core/types.h"

namespace airlock::cli {

// The flags of `airlock run` as typed; nullopt means "not given" (the
// configured default applies).
struct RunFlags {
  std::optional<std::string> memory;      // size: "512M"
  std::optional<std::string> cpus;        // "1", "0.5"
  std::optional<std::string> pids;        // whole number
  std::optional<std::string> disk;        // size of /workspace
  std::optional<std::string> inodes;      // whole number
  std::optional<std::string> timeout;     // duration: "30s", "500ms", "2m"
  std::optional<std::string> max_output;  // size: stdout+stderr cap
  std::optional<std::string> copy_in;     // host directory
  std::vector<std::string> env_names;     // tier-1 pass-through names
  std::vector<std::string> exports;       // --export: workspace paths kept as artifacts
  std::optional<std::string> state_dir;   // --state-dir: where the artifact store lives
  std::optional<std::string> code;        // --code FILE.py: code mode (docs/capabilities.md)
  std::optional<std::string> image;       // --image REF|DIGEST (cli/image_command.h)
  // Egress (docs/egress.md): --network is the call's yes, --egress-policy
  // the operator's allowlist; both are needed. --egress-log: decision lines.
  bool network = false;
  std::optional<std::string> egress_policy;
  std::optional<std::string> egress_log;
  std::string mechanism = "linux";
  bool json = false;
  bool verbose = false;
  bool read_stdin = false;
  std::vector<std::string> argv;
};

struct RunPlan {
  Mechanism mechanism = Mechanism::kLinux;
  EnvironmentSpec spec;      // image_digest is left for the chosen adapter
  ExecutionCommand command;  // stdin_data is left for the caller (--stdin)
  std::optional<std::string> copy_in;
  // Workspace paths exported as artifacts after the command, before the
  // sandbox is destroyed (cli/artifact_command.h); the store and the
  // adapter's state live under state_dir.
  std::vector<std::string> exports;
  std::string state_dir = "/run/airlock";
  // --image: what names the image (cli/image_command.h resolveImage); ""
  // is the host image, the embedded default.
  std::string image;
  // --code: the host path of the Python program run in code mode; the
  // command is then the guest runtime (capability/broker/code_run.h).
  std::optional<std::string> code_path;
  // Where the proxy's decision lines go when it runs (empty: stderr); with
  // no egress the file is still created, and stays empty.
  std::string egress_log;
  // --egress-policy without --network: the policy was checked, and the
  // command has no network (the caller says so on stderr).
  bool egress_policy_without_network = false;
  bool json = false;
  bool verbose = false;
  bool read_stdin = false;
};

// Returns a host environment variable's value, if set.
using HostLookup = std::function<std::optional<std::string>(std::string_view)>;

// Upper bound of --max-output: the whole output is held in memory.
inline constexpr std::int64_t kMaxOutputCeiling = std::int64_t{256} << 20;

// Validates every flag and the argv. Errors are ToolValidationError or
// ConfigurationError whose context is one line naming the flag or the
// problem and, where one exists, the fix.
Result<RunPlan> planRun(const RunFlags& flags, const HostLookup& host_env);

// A shell string where a vector belongs (["ls -la"]) is refused with
// shellStringProblem(argv, ArgvSpelling::kCommandLine), the message the HTTP
// API gives too (core/command_validation.h).

}  // namespace airlock::cli
