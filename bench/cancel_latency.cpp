// Cancel latency: the time from a cancel (ExecutionEnvironment::cancel by
// execution id, what POST .../executions/{execution_id}/cancel calls) to the
// command's result (killed_by CANCELLED, the sandbox free for the next
// command), against a peer in the same run: the time from a command's own
// exit to its result. Both run `sh -c 'echo started; exec sleep S'` in one
// provisioned sandbox, interleaved round-robin:
//   cancel  S = 600; the cancel is sent as soon as "started" reaches the
//           output sink; measured from just before cancel() to the return
//           of executeStreaming.
//   exit    S = 0.05; measured from the moment sleep exits on its own
//           ("started" reaching the sink + 50 ms) to the return of
//           executeStreaming.
// Both include what every command's end costs (the kill of what is left,
// the workspace scan); the difference is what a cancel adds. Prints p50 and
// p95 of each and their ratios. Spec 000 "Timeouts compose by minimum"
// (cancellation); target: cancel p50 under 100 ms.
// Usage: bench_cancel_latency [rounds=100] [--gvisor]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "airlock/core/environment_tiers.h"
#include "airlock/core/limits_defaults.h"
#include "airlock/sandbox/oci/gvisor_environment.h"
#include "bench_support.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace airlock;

constexpr auto kPeerSleep = std::chrono::milliseconds(50);

// One command, executed on a thread of its own; `started` is set when its
// "started" line reaches the sink.
struct Round {
  Clock::time_point started;
  Clock::time_point finished;
  Result<ExecutionResult> result;
};

ExecutionCommand sleeper(const std::string& seconds, const std::string& execution_id) {
  ExecutionCommand c;
  c.argv = {"sh", "-c", "echo started; exec sleep " + seconds};
  c.timeout_seconds = 900;
  c.maximum_output_bytes = 4096;
  c.execution_id = execution_id;
  return c;
}

// Runs `command`; once it has said "started", `on_started` runs on this
// thread (the cancel case sends its cancel there). Returns the round's
// times, or nullopt on a failed round (printed).
std::optional<Round> runRound(ExecutionEnvironment& env, const EnvironmentHandle& handle,
                              const ExecutionCommand& command,
                              const std::function<void()>& on_started) {
  std::promise<Clock::time_point> said;
  bool told = false;
  Round round;
  std::thread executing([&] {
    round.result = env.executeStreaming(
        handle, command, nullptr, [&](ExecutionEnvironment::OutputStream, std::string_view bytes) {
          if (!told && bytes.find("started") != std::string_view::npos) {
            told = true;
            said.set_value(Clock::now());
          }
        });
    round.finished = Clock::now();
    if (!told) said.set_value(Clock::time_point{});
  });
  round.started = said.get_future().get();
  if (round.started != Clock::time_point{} && on_started) on_started();
  executing.join();
  if (!round.result || round.started == Clock::time_point{}) {
    std::fprintf(stderr, "round failed: %s\n",
                 round.result ? "no \"started\" line" : round.result.error().message().c_str());
    return std::nullopt;
  }
  return round;
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

double ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// The two cases, interleaved, `rounds` times after 3 warm-up rounds.
bool measure(ExecutionEnvironment& env, const EnvironmentHandle& handle, int rounds,
             const char* mechanism) {
  std::vector<double> cancel_ms, exit_ms;
  for (int i = 0; i < rounds + 3; ++i) {
    const std::string id = "cancel-" + std::to_string(i);
    Clock::time_point sent;
    auto cancelled = runRound(env, handle, sleeper("600", id), [&] {
      sent = Clock::now();
      if (auto r = env.cancel(handle, id); !r)
        std::fprintf(stderr, "cancel: %s\n", r.error().message().c_str());
    });
    if (!cancelled) return false;
    if (cancelled->result->killed_by != KillReason::kCancelled) {
      std::fprintf(stderr, "the cancelled command was not CANCELLED\n");
      return false;
    }
    auto exited = runRound(env, handle, sleeper("0.05", ""), {});
    if (!exited) return false;
    if (exited->result->exit_code != 0) {
      std::fprintf(stderr, "the peer did not exit 0\n");
      return false;
    }
    if (i < 3) continue;
    cancel_ms.push_back(ms(cancelled->finished - sent));
    exit_ms.push_back(ms(exited->finished - (exited->started + kPeerSleep)));
  }
  const double c50 = percentile(cancel_ms, 0.5), c95 = percentile(cancel_ms, 0.95);
  const double e50 = percentile(exit_ms, 0.5), e95 = percentile(exit_ms, 0.95);
  std::printf("%s, %d rounds\n", mechanism, rounds);
  std::printf("  cancel -> result (CANCELLED)   p50 %7.2f ms  p95 %7.2f ms\n", c50, c95);
  std::printf("  own exit -> result (exit 0)    p50 %7.2f ms  p95 %7.2f ms\n", e50, e95);
  std::printf("  ratio cancel / own exit        p50 %6.2fx    p95 %6.2fx\n", c50 / e50, c95 / e95);
  std::printf("  target: cancel p50 under 100 ms: %s\n", c50 < 100 ? "met" : "NOT met");
  return true;
}

int runLinux(int rounds) {
  auto bench_env = bench::makeBenchEnvironment();
  if (!bench_env) return 1;
  auto handle = bench_env->env->provision(bench_env->spec);
  if (!handle) {
    std::fprintf(stderr, "provision: %s\n", handle.error().message().c_str());
    return 1;
  }
  const bool ok = measure(*bench_env->env, *handle, rounds, "linux");
  (void)bench_env->env->destroy(*handle);
  return ok ? 0 : 1;
}

int runGvisor(int rounds) {
  gvisor::GvisorEnvironmentOptions options;
  options.state_dir = "/run/airlock-bench-gvisor";
  if (auto why = gvisor::gvisorUnavailable(options)) {
    std::fprintf(stderr, "gvisor mechanism unavailable: %s\n", why->c_str());
    return 1;
  }
  auto env = gvisor::createGvisorEnvironment(options);
  if (!env) {
    std::fprintf(stderr, "gvisor: %s\n", env.error().message().c_str());
    return 1;
  }
  EnvironmentSpec spec;
  spec.tenant_id = "bench";
  spec.run_id = "bench";
  spec.image_digest = *gvisor::gvisorImageDigest(options);
  spec.limits = defaultLimits();
  spec.environment =
      buildEnvironment(
          std::vector<std::string>{}, [](std::string_view) { return std::optional<std::string>{}; },
          ".", std::nullopt)
          .variables;
  auto handle = (*env)->provision(spec);
  if (!handle) {
    std::fprintf(stderr, "provision: %s\n", handle.error().message().c_str());
    return 1;
  }
  const bool ok = measure(**env, *handle, rounds, "gvisor");
  (void)(*env)->destroy(*handle);
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 100;
  bool gvisor = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--gvisor") == 0)
      gvisor = true;
    else
      rounds = std::max(1, std::atoi(argv[i]));
  }
  return gvisor ? runGvisor(rounds) : runLinux(rounds);
}
