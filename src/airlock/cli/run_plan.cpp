#include "airlock/cli/run_plan.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

#include "airlock/cli/artifact_command.h"
#include "airlock/cli/image_command.h"
#include "airlock/core/command_validation.h"
#include "airlock/core/environment_tiers.h"
#include "airlock/core/ids.h"
#include "airlock/core/limits_defaults.h"
#include "airlock/core/units.h"
#include "airlock/egress/policy.h"

namespace airlock::cli {
namespace {

// Prefixes an error's context with the flag it came from.
tl::unexpected<Error> flagError(std::string_view flag, const Error& error) {
  Error out = error;
  out.context = std::string(flag) + ": " + error.context;
  return tl::unexpected<Error>(std::move(out));
}

Result<std::int64_t> parseSizeFlag(std::string_view flag, const std::string& text) {
  auto size = parseSize(text);
  if (!size) return flagError(flag, size.error());
  return *size;
}

Result<std::int64_t> parseCount(std::string_view flag, const std::string& text) {
  std::int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    return fail(ErrorCode::kToolValidationError,
                std::string(flag) + ": expected a whole number, got \"" + text + "\"");
  }
  return value;
}

// The command (argv, or --code's program) and --mechanism.
Result<void> planCommandLine(const RunFlags& flags, RunPlan& plan) {
  const bool code_mode = flags.code.has_value();
  if (code_mode) {
    if (flags.code->empty())
      return fail(ErrorCode::kToolValidationError, "--code: the file name is empty");
    if (!flags.argv.empty())
      return fail(ErrorCode::kToolValidationError,
                  "--code runs FILE.py in code mode: give no command after -- (the program is the "
                  "command)");
    plan.code_path = *flags.code;
  }
  if (!code_mode && flags.argv.empty()) {
    return fail(ErrorCode::kToolValidationError,
                "no command given: write it after --, as in airlock run -- python3 script.py");
  }
  if (auto problem = shellStringProblem(flags.argv, ArgvSpelling::kCommandLine)) {
    return fail(ErrorCode::kToolValidationError, *problem);
  }

  if (auto m = mechanismNamed(flags.mechanism)) {
    plan.mechanism = *m;
  } else {
    return fail(ErrorCode::kToolValidationError,
                "--mechanism: \"" + flags.mechanism + "\" is not one of " + mechanismNameList());
  }
  return {};
}

// The limit flags of run and mcp (--memory, --cpus, --pids, --disk,
// --inodes, --timeout, --max-output) over the defaults, checked against the
// ceilings, errors naming the flag as typed.
struct PlannedLimits {
  ResourceLimits limits;
  std::int64_t timeout_seconds = 0;
  std::int64_t max_output = 0;
};

Result<PlannedLimits> parseLimitFlags(const RunFlags& flags) {
  ResourceLimits limits = defaultLimits();
  if (flags.memory) {
    auto v = parseSizeFlag("--memory", *flags.memory);
    if (!v) return tl::unexpected(v.error());
    limits.memory_bytes = *v;
  }
  if (flags.cpus) {
    auto v = parseCpus(*flags.cpus);
    if (!v) return flagError("--cpus", v.error());
    limits.cpu_millicores = *v;
  }
  if (flags.pids) {
    auto v = parseCount("--pids", *flags.pids);
    if (!v) return tl::unexpected(v.error());
    limits.pids_max = *v;
  }
  if (flags.disk) {
    auto v = parseSizeFlag("--disk", *flags.disk);
    if (!v) return tl::unexpected(v.error());
    limits.workspace_bytes = *v;
  }
  if (flags.inodes) {
    auto v = parseCount("--inodes", *flags.inodes);
    if (!v) return tl::unexpected(v.error());
    limits.inodes_max = *v;
  }
  std::int64_t timeout_seconds = limits.wall_clock_seconds;
  if (flags.timeout) {
    auto v = parseDuration(*flags.timeout);
    if (!v) return flagError("--timeout", v.error());
    if (v->count() <= 0) {
      return fail(ErrorCode::kToolValidationError, "--timeout: must be more than 0");
    }
    // Whole seconds, rounded up: a 500ms timeout is a 1 s timeout.
    timeout_seconds = (v->count() + 999) / 1000;
    limits.wall_clock_seconds = timeout_seconds;
  }
  if (auto ok = checkLimits(limits, defaultCeilings()); !ok) {
    // Name the flag the user typed, not the spec's field.
    Error error = ok.error();
    for (auto [field, flag] : {std::pair{"limits.cpu_millicores", "--cpus (millicores)"},
                               {"limits.memory_bytes", "--memory"},
                               {"limits.pids_max", "--pids"},
                               {"limits.workspace_bytes", "--disk"},
                               {"limits.inodes_max", "--inodes"},
                               {"limits.wall_clock_seconds", "--timeout (seconds)"}}) {
      if (auto at = error.context.find(field); at != std::string::npos)
        error.context.replace(at, std::string_view(field).size(), flag);
    }
    error.code = ErrorCode::kToolValidationError;
    return tl::unexpected(std::move(error));
  }

  std::int64_t max_output = kDefaultMaximumOutputBytes;
  if (flags.max_output) {
    auto v = parseSizeFlag("--max-output", *flags.max_output);
    if (!v) return tl::unexpected(v.error());
    if (*v <= 0 || *v > kMaxOutputCeiling) {
      return fail(ErrorCode::kToolValidationError,
                  "--max-output: must be between 1 byte and " + formatSize(kMaxOutputCeiling));
    }
    max_output = *v;
  }

  return PlannedLimits{limits, timeout_seconds, max_output};
}

// --env: the tier-1 pass-through names, with their values from host_env.
Result<BuiltEnvironment> planEnvironment(const RunFlags& flags, const HostLookup& host_env) {
  // Tier-1 pass-through: names only; values come from this environment.
  for (const auto& name : flags.env_names) {
    if (auto eq = name.find('='); eq != std::string::npos) {
      const std::string bare = name.substr(0, eq);
      return fail(ErrorCode::kConfigurationError,
                  "--env " + name +
                      ": --env takes a NAME whose value is copied from your "
                      "environment; set it there instead: " +
                      name + " airlock run --env " + bare + " ...");
    }
  }
  auto tier1 = validateTier1Names(flags.env_names);
  if (!tier1) return flagError("--env", tier1.error());
  BuiltEnvironment built = buildEnvironment(tier1, host_env, ".", std::nullopt);
  if (built.tier1_error) return flagError("--env", *built.tier1_error);

  return built;
}

// --copy-in, --export, --state-dir and --image.
Result<void> planFiles(const RunFlags& flags, RunPlan& plan) {
  if (flags.copy_in) {
    struct stat st {};
    if (::stat(flags.copy_in->c_str(), &st) != 0) {
      return fail(ErrorCode::kToolValidationError,
                  "--copy-in: " + *flags.copy_in + ": " + std::strerror(errno));
    }
    // A directory is copied; a regular file must be a tar or zip archive
    // (checked when it is read: libarchive decides).
    if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
      return fail(
          ErrorCode::kToolValidationError,
          "--copy-in: " + *flags.copy_in + ": neither a directory nor a tar or zip archive");
    }
    plan.copy_in = *flags.copy_in;
  }

  // Refused now, with the text the export would give after the run.
  for (const auto& path : flags.exports) {
    if (path.empty()) return fail(ErrorCode::kToolValidationError, "--export: the path is empty");
    if (auto checked = checkExportPath(path); !checked) return tl::unexpected(checked.error());
  }
  plan.exports = flags.exports;
  if (flags.state_dir) {
    if (flags.state_dir->empty())
      return fail(ErrorCode::kToolValidationError, "--state-dir: the directory is empty");
    plan.state_dir = *flags.state_dir;
  }
  if (flags.image) {
    if (flags.image->empty())
      return fail(ErrorCode::kToolValidationError,
                  "--image: the name is empty (an image reference, a digest, or host)");
    if (*flags.image != kHostImageName) plan.image = *flags.image;
    if (!plan.image.empty() && plan.mechanism == Mechanism::kFake)
      return fail(ErrorCode::kToolValidationError,
                  "--image: the fake mechanism runs no images; use --mechanism linux or gvisor");
  }
  return {};
}

// --egress-policy, --network and --egress-log.
Result<void> planEgress(const RunFlags& flags, RunPlan& plan) {
  // Egress needs two yeses (spec 000): this call's --network and the
  // operator's allowlist. Either alone means no network.
  plan.spec.egress = EgressPolicy{};  // deny: no network
  std::shared_ptr<const egress::Policy> policy;
  if (flags.egress_policy) {
    auto loaded = egress::loadEgressPolicyFile(*flags.egress_policy);
    if (!loaded) {
      Error error = loaded.error();
      error.context = "--egress-policy: " + error.context;
      return tl::unexpected(std::move(error));
    }
    policy = std::move(*loaded);
  }
  if (flags.network) {
    if (!policy)
      return fail(ErrorCode::kToolValidationError,
                  "--network: needs --egress-policy FILE, the allowlist of destinations "
                  "(see docs/egress.md); without one there is no network to enable");
    if (!policy->permitsAnything())
      return fail(ErrorCode::kToolValidationError,
                  "--network: the egress policy " + *flags.egress_policy +
                      " allows no destination (it needs mode: allowlist and at least one "
                      "destination)");
    plan.spec.egress = policy->toValue();
  }
  plan.egress_policy_without_network = policy && !flags.network;
  if (flags.egress_log) {
    if (flags.egress_log->empty())
      return fail(ErrorCode::kToolValidationError, "--egress-log: the path is empty");
    plan.egress_log = *flags.egress_log;
  }
  return {};
}

}  // namespace

Result<RunPlan> planRun(const RunFlags& flags, const HostLookup& host_env) {
  RunPlan plan;
  plan.json = flags.json;
  plan.verbose = flags.verbose;
  plan.read_stdin = flags.read_stdin;
  // The command first: it is the most likely mistake and the cheapest check.
  if (auto planned = planCommandLine(flags, plan); !planned) return tl::unexpected(planned.error());
  auto limits = parseLimitFlags(flags);
  if (!limits) return tl::unexpected(limits.error());
  auto built = planEnvironment(flags, host_env);
  if (!built) return tl::unexpected(built.error());
  if (auto planned = planFiles(flags, plan); !planned) return tl::unexpected(planned.error());

  const bool code_mode = plan.code_path.has_value();
  plan.command.argv = code_mode ? std::vector<std::string>{"/usr/bin/python3"} : flags.argv;
  plan.command.working_directory = ".";
  plan.command.timeout_seconds = limits->timeout_seconds;
  plan.command.maximum_output_bytes = limits->max_output;
  if (auto valid = validateCommand(plan.command); !valid) return tl::unexpected(valid.error());

  const Timestamp now =
      std::chrono::time_point_cast<std::chrono::milliseconds>(std::chrono::system_clock::now());
  plan.spec.tenant_id = "local";
  plan.spec.run_id = newUuidV7(now);
  plan.spec.lease_epoch = 1;
  plan.spec.limits = limits->limits;
  if (auto planned = planEgress(flags, plan); !planned) return tl::unexpected(planned.error());
  plan.spec.environment = std::move(built->variables);
  return plan;
}

}  // namespace airlock::cli
