// Shared set-up for the linux-mechanism benchmarks: the adapter on its own
// state directory and a spec with default limits and the tier-2 environment.
#pragma once

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/core/environment_tiers.h"
#include "airlock/core/limits_defaults.h"
#include "airlock/sandbox/linux/linux_environment.h"

namespace airlock::bench {

struct BenchEnvironment {
  linux_jail::LinuxEnvironmentOptions options;
  std::unique_ptr<ExecutionEnvironment> env;
  EnvironmentSpec spec;
};

// nullopt (after printing why) when the linux mechanism cannot run here.
inline std::optional<BenchEnvironment> makeBenchEnvironment() {
  BenchEnvironment b;
  b.options.state_dir = "/run/airlock-bench";
  auto env = linux_jail::createLinuxEnvironment(b.options);
  if (!env) {
    std::fprintf(stderr, "linux mechanism unavailable: %s\n", env.error().message().c_str());
    return std::nullopt;
  }
  b.env = std::move(*env);
  b.spec.tenant_id = "bench";
  b.spec.run_id = "bench";
  b.spec.image_digest = *airlock::computeImageDigest(b.options);
  b.spec.limits = defaultLimits();
  b.spec.environment =
      buildEnvironment(
          std::vector<std::string>{}, [](std::string_view) { return std::optional<std::string>{}; },
          ".", std::nullopt)
          .variables;
  return b;
}

}  // namespace airlock::bench
