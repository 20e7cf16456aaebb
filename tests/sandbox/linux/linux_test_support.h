// Shared set-up for tests that run the real linux mechanism: a private state
// directory per test, a spec with the tier-2 environment, and a skip with the
// reason when this machine cannot run the jail (not root, no user
// namespaces).
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "airlock/core/environment_tiers.h"
#include "airlock/core/limits_defaults.h"
#include "airlock/sandbox/linux/linux_environment.h"

namespace airlock::testing {

inline std::optional<std::string> linuxJailUnavailable() {
  if (::geteuid() != 0) return "the linux mechanism needs root";
  if (::access("/proc/self/ns/user", F_OK) != 0) return "no user namespaces on this kernel";
  return std::nullopt;
}

// A temporary state directory, removed with everything in it.
class TempStateDir {
 public:
  TempStateDir() {
    char tmpl[] = "/tmp/airlock-test-state-XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempStateDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline linux_jail::LinuxEnvironmentOptions testOptions(const std::string& state_dir) {
  linux_jail::LinuxEnvironmentOptions o;
  o.state_dir = state_dir;
  return o;
}

inline EnvironmentSpec linuxSpec(const linux_jail::LinuxEnvironmentOptions& options,
                                 std::string tenant = "tenant-a") {
  EnvironmentSpec spec;
  spec.tenant_id = std::move(tenant);
  spec.run_id = "run-1";
  spec.lease_epoch = 1;
  spec.image_digest = linux_jail::computeImageDigest(options).value();
  spec.limits = defaultLimits();
  auto built = buildEnvironment(
      std::vector<std::string>{}, [](std::string_view) { return std::optional<std::string>{}; },
      ".", std::nullopt);
  spec.environment = built.variables;
  return spec;
}

inline ExecutionCommand shell(std::string script, std::int64_t timeout_seconds = 60) {
  ExecutionCommand c;
  c.argv = {"sh", "-c", std::move(script)};
  c.timeout_seconds = timeout_seconds;
  c.maximum_output_bytes = 1 << 20;
  return c;
}

}  // namespace airlock::testing
