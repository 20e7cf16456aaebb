// Start latency of a sandbox: provision + execute(/bin/true) +
// destroy with the linux mechanism, against bubblewrap running /bin/true
// with every namespace unshared, and against plain fork/exec, in the same
// run. Prints medians, p90s and ratios. Usage: bench_start_latency [N]
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "bench_support.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

struct Stats {
  double median_ms;
  double p90_ms;
};

// Runs the cases round-robin (so drift in machine load hits all of them
// alike), 3 warm-up rounds, then n measured rounds.
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

bool spawnAndWait(std::vector<const char*> argv) {
  argv.push_back(nullptr);
  pid_t pid;
  if (posix_spawn(&pid, argv[0], nullptr, nullptr, const_cast<char**>(argv.data()), environ) != 0)
    return false;
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace airlock;
  const int n = argc > 1 ? std::atoi(argv[1]) : 200;
  auto bench_env = bench::makeBenchEnvironment();
  if (!bench_env) return 1;
  auto& env = bench_env->env;  // used as env-> below, like a Result
  const EnvironmentSpec& spec = bench_env->spec;
  ExecutionCommand cmd;
  cmd.argv = {"/bin/true"};
  cmd.timeout_seconds = 10;
  cmd.maximum_output_bytes = 1 << 16;

  auto provisioned = env->provision(spec);
  if (!provisioned) return 1;
  const bool have_bwrap = ::access("/usr/bin/bwrap", X_OK) == 0;
  // Phase times of the cold case, for "where the time goes".
  std::vector<double> t_provision, t_execute, t_destroy;
  auto since = [](Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  };
  std::vector<std::function<bool()>> cases = {
      [&] {
        auto t0 = Clock::now();
        auto h = env->provision(spec);
        if (!h) return false;
        t_provision.push_back(since(t0));
        t0 = Clock::now();
        auto r = env->execute(*h, cmd);
        t_execute.push_back(since(t0));
        bool ok = r && r->exit_code == 0;
        t0 = Clock::now();
        ok = env->destroy(*h).has_value() && ok;
        t_destroy.push_back(since(t0));
        return ok;
      },
      [&] {
        auto r = env->execute(*provisioned, cmd);
        return r && r->exit_code == 0;
      },
      [] { return spawnAndWait({"/bin/true"}); },
  };
  if (have_bwrap) {
    cases.push_back([] {
      return spawnAndWait({"/usr/bin/bwrap", "--unshare-all", "--die-with-parent",
                           "--ro-bind",      "/usr",          "/usr",
                           "--symlink",      "usr/bin",       "/bin",
                           "--symlink",      "usr/lib",       "/lib",
                           "--symlink",      "usr/lib64",     "/lib64",
                           "--proc",         "/proc",         "--dev",
                           "/dev",           "--tmpfs",       "/tmp",
                           "/bin/true"});
    });
  }
  auto stats = measureInterleaved(n, cases);
  (void)env->destroy(*provisioned);
  const Stats cold = stats[0], warm = stats[1], forkexec = stats[2];
  const Stats bwrap = have_bwrap ? stats[3] : Stats{0, 0};

  std::printf("start latency, %d runs each (median / p90, ms)\n", n);
  std::printf("  %-52s %7.2f / %7.2f\n", "airlock linux: provision+execute+destroy /bin/true",
              cold.median_ms, cold.p90_ms);
  std::printf("  %-52s %7.2f / %7.2f\n", "airlock linux: execute /bin/true in a ready sandbox",
              warm.median_ms, warm.p90_ms);
  if (have_bwrap)
    std::printf("  %-52s %7.2f / %7.2f\n", "bwrap --unshare-all /bin/true", bwrap.median_ms,
                bwrap.p90_ms);
  std::printf("  %-52s %7.2f / %7.2f\n", "fork/exec /bin/true", forkexec.median_ms,
              forkexec.p90_ms);
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  auto p90 = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() * 9 / 10];
  };
  std::printf(
      "  cold phases (median / p90 ms): provision %.2f / %.2f, execute %.2f / %.2f, destroy %.2f / "
      "%.2f\n",
      median(t_provision), p90(t_provision), median(t_execute), p90(t_execute), median(t_destroy),
      p90(t_destroy));
  if (have_bwrap)
    std::printf("ratio airlock cold / bwrap:      %.2fx (target <= 2x)\n",
                cold.median_ms / bwrap.median_ms);
  std::printf("ratio airlock cold / fork-exec:  %.2fx\n", cold.median_ms / forkexec.median_ms);
  std::printf("ratio airlock warm / fork-exec:  %.2fx\n", warm.median_ms / forkexec.median_ms);
  return 0;
}
