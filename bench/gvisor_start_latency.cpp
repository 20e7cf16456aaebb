// Start latency of the gvisor mechanism, in
// one interleaved run:
//   gvisor cold   provision + execute(/bin/true) + destroy through the adapter
//   gvisor warm   execute(/bin/true) in an already provisioned sandbox
//   runsc run     raw `runsc run` of /bin/true from the same kind of bundle
//                 (same rootfs and mounts; process /bin/true as uid 1000),
//                 until it exits, plus removing its state directory
//   runsc exec    raw `runsc exec` of /bin/true in a running sandbox: what
//                 each command would cost if execute used runsc exec
//                 instead of the shim's socket
// and, with --with-linux, the linux mechanism's cold and warm cases as a
// reference. Prints medians, p90s and ratios.
// Usage: bench_gvisor_start_latency [N] [--with-linux]
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "airlock/core/environment_tiers.h"
#include "airlock/core/limits_defaults.h"
#include "airlock/sandbox/linux/linux_environment.h"
#include "airlock/sandbox/oci/gvisor_environment.h"
#include "airlock/sandbox/oci/oci_bundle.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;
using namespace airlock;

struct Stats {
  double median_ms;
  double p90_ms;
};

std::vector<Stats> measureInterleaved(int n, const std::vector<std::function<bool()>>& cases) {
  std::vector<std::vector<double>> ms(cases.size());
  for (int i = 0; i < n + 3; ++i) {
    for (std::size_t c = 0; c < cases.size(); ++c) {
      auto t0 = Clock::now();
      if (!cases[c]()) {
        std::fprintf(stderr, "benchmark case %zu failed\n", c);
        std::exit(1);
      }
      if (i >= 3)
        ms[c].push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
  }
  std::vector<Stats> out;
  for (auto& v : ms) {
    std::sort(v.begin(), v.end());
    out.push_back({v[v.size() / 2], v[v.size() * 9 / 10]});
  }
  return out;
}

bool spawnAndWait(const std::vector<std::string>& args, bool quiet = true) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (quiet) {
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  }
  pid_t pid;
  const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return false;
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

EnvironmentSpec specFor(const std::string& digest) {
  EnvironmentSpec spec;
  spec.tenant_id = "bench";
  spec.run_id = "bench";
  spec.image_digest = digest;
  spec.limits = defaultLimits();
  spec.environment =
      buildEnvironment(
          std::vector<std::string>{}, [](std::string_view) { return std::optional<std::string>{}; },
          ".", std::nullopt)
          .variables;
  return spec;
}

ExecutionCommand trueCommand() {
  ExecutionCommand c;
  c.argv = {"/bin/true"};
  c.timeout_seconds = 30;
  c.maximum_output_bytes = 4096;
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  int n = 30;
  bool with_linux = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--with-linux") == 0)
      with_linux = true;
    else
      n = std::max(1, std::atoi(argv[i]));
  }
  const std::string state = "/run/airlock-bench-gvisor";
  gvisor::GvisorEnvironmentOptions options;
  options.state_dir = state;
  if (auto why = gvisor::gvisorUnavailable(options)) {
    std::fprintf(stderr, "gvisor mechanism unavailable: %s\n", why->c_str());
    return 1;
  }
  auto env = gvisor::createGvisorEnvironment(options);
  if (!env) {
    std::fprintf(stderr, "gvisor: %s\n", env.error().message().c_str());
    return 1;
  }
  const EnvironmentSpec spec = specFor(*gvisor::gvisorImageDigest(options));
  const ExecutionCommand cmd = trueCommand();

  // The raw peer's bundle: the adapter's rootfs, plain directories for the
  // workspace and /tmp, and /bin/true as the container's process.
  const std::string raw = state + "/raw";
  std::filesystem::create_directories(raw + "/ws");
  std::filesystem::create_directories(raw + "/tmp");
  std::filesystem::create_directories(raw + "/ctl");
  oci::BundleInputs in;
  in.rootfs_dir = state + "/rootfs/" + spec.image_digest.substr(7);
  in.image = std::make_shared<const SandboxImage>(
      hostImage(spec.image_digest, options.image_dirs, options.image_etc).value());
  in.workspace_dir = raw + "/ws";
  in.tmp_dir = raw + "/tmp";
  in.shim_path = gvisor::defaultShimPath();
  in.control_dir = raw + "/ctl";
  in.limits = spec.limits;
  auto config = oci::makeConfig(in);
  if (!config) {
    std::fprintf(stderr, "bundle: %s\n", config.error().message().c_str());
    return 1;
  }
  (*config)["process"]["args"] = nlohmann::json::array({"/bin/true"});
  (*config)["process"]["user"] = {{"uid", 1000}, {"gid", 1000}};
  std::ofstream(raw + "/config.json") << config->dump(1);
  const std::vector<std::string> runsc = {options.runsc_path, "--platform=" + options.platform,
                                          "--network=none", "--host-uds=open", "--ignore-cgroups"};
  int counter = 0;
  auto rawRun = [&]() -> bool {
    const std::string root = raw + "/root" + std::to_string(counter++);
    auto args = runsc;
    args.insert(args.begin() + 1, {"--root", root});
    for (const char* a : {"run", "--bundle"}) args.emplace_back(a);
    args.push_back(raw);
    args.push_back("bench-raw-" + std::to_string(counter));
    const bool ok = spawnAndWait(args);
    std::error_code ec;
    std::filesystem::remove_all(root, ec);
    return ok;
  };

  // A sandbox that stays up for raw `runsc exec` and for the warm case.
  auto warm = (*env)->provision(spec);
  if (!warm) {
    std::fprintf(stderr, "provision: %s\n", warm.error().message().c_str());
    return 1;
  }
  // runsc exec needs the container's runsc root, which is the adapter's
  // private one for this sandbox.
  const std::string warm_dir = state + "/sandboxes/" + warm->environment_id;
  auto execArgs = runsc;
  execArgs.insert(execArgs.begin() + 1, {"--root", warm_dir + "/runsc"});
  for (const char* a : {"exec", "--user", "1000:1000"}) execArgs.emplace_back(a);
  execArgs.push_back("airlock-gv-" + warm->environment_id);
  execArgs.push_back("/bin/true");

  std::vector<double> provision_ms, execute_ms, destroy_ms;
  std::vector<std::function<bool()>> cases = {
      [&] {
        auto t0 = Clock::now();
        auto h = (*env)->provision(spec);
        auto t1 = Clock::now();
        if (!h) return false;
        auto r = (*env)->execute(*h, cmd);
        auto t2 = Clock::now();
        bool ok = r && r->exit_code == 0;
        ok = (*env)->destroy(*h).has_value() && ok;
        auto t3 = Clock::now();
        provision_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        execute_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
        destroy_ms.push_back(std::chrono::duration<double, std::milli>(t3 - t2).count());
        return ok;
      },
      [&] {
        auto r = (*env)->execute(*warm, cmd);
        return r && r->exit_code == 0;
      },
      rawRun,
      [&] { return spawnAndWait(execArgs); },
  };

  std::unique_ptr<ExecutionEnvironment> linux_env;
  std::optional<EnvironmentHandle> linux_warm;
  EnvironmentSpec linux_spec;
  if (with_linux) {
    linux_jail::LinuxEnvironmentOptions lo;
    lo.state_dir = "/run/airlock-bench";
    auto le = linux_jail::createLinuxEnvironment(lo);
    if (!le) {
      std::fprintf(stderr, "linux: %s\n", le.error().message().c_str());
      return 1;
    }
    linux_env = std::move(*le);
    linux_spec = specFor(*airlock::computeImageDigest(lo));
    auto h = linux_env->provision(linux_spec);
    if (!h) return 1;
    linux_warm = *h;
    cases.push_back([&] {
      auto h2 = linux_env->provision(linux_spec);
      if (!h2) return false;
      auto r = linux_env->execute(*h2, cmd);
      bool ok = r && r->exit_code == 0;
      return linux_env->destroy(*h2).has_value() && ok;
    });
    cases.push_back([&] {
      auto r = linux_env->execute(*linux_warm, cmd);
      return r && r->exit_code == 0;
    });
  }

  const auto s = measureInterleaved(n, cases);
  (void)(*env)->destroy(*warm);
  if (linux_env) (void)linux_env->destroy(*linux_warm);
  std::error_code ec;
  std::filesystem::remove_all(raw, ec);

  auto phase = [](std::vector<double> v) {
    v.erase(v.begin(), v.begin() + std::min<std::size_t>(3, v.size()));  // warm-up rounds
    std::sort(v.begin(), v.end());
    return Stats{v[v.size() / 2], v[v.size() * 9 / 10]};
  };
  const char* names[] = {"gvisor cold: provision + execute + destroy",
                         "gvisor warm: execute in a ready sandbox",
                         "raw runsc run /bin/true",
                         "raw runsc exec /bin/true",
                         "linux cold",
                         "linux warm"};
  std::printf("| case | median ms | p90 ms |\n| --- | ---: | ---: |\n");
  for (std::size_t i = 0; i < s.size(); ++i)
    std::printf("| %s | %.2f | %.2f |\n", names[i], s[i].median_ms, s[i].p90_ms);
  const Stats p = phase(provision_ms), e = phase(execute_ms), d = phase(destroy_ms);
  std::printf(
      "\ncold phases, median / p90 ms: provision %.2f / %.2f, execute %.2f / %.2f, destroy %.2f / "
      "%.2f\n",
      p.median_ms, p.p90_ms, e.median_ms, e.p90_ms, d.median_ms, d.p90_ms);
  std::printf("\n| ratio | value |\n| --- | ---: |\n");
  std::printf("| gvisor cold / raw runsc run | %.2fx |\n", s[0].median_ms / s[2].median_ms);
  std::printf("| gvisor warm / raw runsc exec | %.2fx |\n", s[1].median_ms / s[3].median_ms);
  if (s.size() > 4) {
    std::printf("| gvisor cold / linux cold | %.2fx |\n", s[0].median_ms / s[4].median_ms);
    std::printf("| gvisor warm / linux warm | %.2fx |\n", s[1].median_ms / s[5].median_ms);
  }
  return 0;
}
