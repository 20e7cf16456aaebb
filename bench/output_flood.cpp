// Output flood (red-team case B35): a command writes without end to
// stdout; the service must never buffer more than the output cap. Measures
// the service's peak RSS growth and the time to the OUTPUT_LIMIT kill for a
// writer of 10 GB, against a peer in the same run: plain fork/exec of the
// same writer with its pipe drained to the end (what a capture without a cap
// would have to read). Usage: bench_output_flood [cap_bytes]
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_support.h"

extern char** environ;

namespace {
using Clock = std::chrono::steady_clock;

long maxRssKiB() {
  struct rusage ru {};
  ::getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

// Drains a child's stdout to the end; returns bytes read.
long long drainPeer(const char* const* argv) {
  int p[2];
  if (::pipe(p) != 0) return -1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, p[1], 1);
  posix_spawn_file_actions_addclose(&fa, p[0]);
  pid_t pid;
  if (posix_spawn(&pid, argv[0], &fa, nullptr, const_cast<char* const*>(argv), environ) != 0)
    return -1;
  ::close(p[1]);
  std::vector<char> buf(1 << 16);
  long long total = 0;
  for (ssize_t n; (n = ::read(p[0], buf.data(), buf.size())) > 0;) total += n;
  ::close(p[0]);
  int status;
  ::waitpid(pid, &status, 0);
  return total;
}
}  // namespace

int main(int argc, char** argv) {
  using namespace airlock;
  const std::int64_t cap = argc > 1 ? std::atoll(argv[1]) : (1 << 20);
  auto bench_env = bench::makeBenchEnvironment();
  if (!bench_env) return 1;
  auto& env = bench_env->env;  // used as env-> below, like a Result
  const EnvironmentSpec& spec = bench_env->spec;
  auto h = env->provision(spec);
  if (!h) return 1;
  ExecutionCommand cmd;
  cmd.argv = {"head", "-c", "10G", "/dev/zero"};
  cmd.timeout_seconds = 600;
  cmd.maximum_output_bytes = cap;

  const long rss_before = maxRssKiB();
  auto t0 = Clock::now();
  auto r = env->execute(*h, cmd);
  const double airlock_s = std::chrono::duration<double>(Clock::now() - t0).count();
  const long rss_after = maxRssKiB();
  (void)env->destroy(*h);
  if (!r) {
    std::fprintf(stderr, "execute failed: %s\n", r.error().message().c_str());
    return 1;
  }

  const char* peer_argv[] = {"/usr/bin/head", "-c", "10G", "/dev/zero", nullptr};
  t0 = Clock::now();
  const long long peer_bytes = drainPeer(peer_argv);
  const double peer_s = std::chrono::duration<double>(Clock::now() - t0).count();

  std::printf("output flood: head -c 10G /dev/zero, cap %lld bytes\n", static_cast<long long>(cap));
  std::printf("  airlock: killed_by %s, captured %zu bytes, truncated %s, %.3f s\n",
              r->killed_by ? std::string(killReasonName(*r->killed_by)).c_str() : "none",
              r->stdout_data.size(), r->stdout_truncated ? "yes" : "no", airlock_s);
  std::printf("  airlock: service peak RSS growth %.2f MiB (peak %.1f MiB)\n",
              (rss_after - rss_before) / 1024.0, rss_after / 1024.0);
  std::printf("  peer (fork/exec, drain to EOF): %lld bytes in %.3f s\n", peer_bytes, peer_s);
  std::printf("ratio time-to-verdict airlock / peer drain: %.4fx\n", airlock_s / peer_s);
  return 0;
}
