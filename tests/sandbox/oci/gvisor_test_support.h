// Shared set-up for tests that run the real gvisor mechanism: a private
// state directory per test (short, so the control socket's path fits), a
// spec with the tier-2 environment, a skip with the reason where runsc,
// root or the shim is missing, and what tests look at on the host after a
// sandbox is gone (mounts, processes).
#pragma once

#include <dirent.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>

#include "../shell_command.h"
#include "airlock/core/environment_tiers.h"
#include "airlock/core/limits_defaults.h"
#include "airlock/sandbox/oci/gvisor_environment.h"

namespace airlock::testing {

class GvisorStateDir {
 public:
  GvisorStateDir() {
    char tmpl[] = "/tmp/airlock-gv-XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~GvisorStateDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline gvisor::GvisorEnvironmentOptions gvisorOptions(const std::string& state_dir) {
  gvisor::GvisorEnvironmentOptions o;
  o.state_dir = state_dir;
  return o;
}

inline std::optional<std::string> gvisorUnavailableHere() {
  return gvisor::gvisorUnavailable(gvisorOptions("/tmp"));
}

inline EnvironmentSpec gvisorSpec(const gvisor::GvisorEnvironmentOptions& options,
                                  std::string tenant = "tenant-a") {
  EnvironmentSpec spec;
  spec.tenant_id = std::move(tenant);
  spec.run_id = "run-1";
  spec.lease_epoch = 1;
  spec.image_digest = gvisor::gvisorImageDigest(options).value();
  spec.limits = defaultLimits();
  auto built = buildEnvironment(
      std::vector<std::string>{}, [](std::string_view) { return std::optional<std::string>{}; },
      ".", std::nullopt);
  spec.environment = built.variables;
  return spec;
}

// Whether a mount of this process's namespace names `dir`.
inline bool mountedUnder(const std::string& dir) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.find(dir) != std::string::npos) return true;
  return false;
}

// Host processes whose command line names `dir` (runsc, its sentry, gofer),
// and `also` where given.
inline int processesNaming(const std::string& dir, const std::string& also = "") {
  int n = 0;
  if (DIR* d = ::opendir("/proc")) {
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
      std::ifstream in(std::string("/proc/") + e->d_name + "/cmdline");
      std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (cmdline.find(dir) != std::string::npos && cmdline.find(also) != std::string::npos) ++n;
    }
    ::closedir(d);
  }
  return n;
}

}  // namespace airlock::testing
