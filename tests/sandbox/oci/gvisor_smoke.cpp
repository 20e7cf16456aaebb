#include <chrono>
#include <cstdio>

#include "gvisor_test_support.h"
using namespace airlock;
int main(int argc, char** argv) {
  testing::GvisorStateDir st;
  auto o = testing::gvisorOptions(st.path());
  auto t0 = std::chrono::steady_clock::now();
  auto env = gvisor::createGvisorEnvironment(o);
  if (!env) {
    printf("create: %s\n", env.error().message().c_str());
    return 1;
  }
  auto spec = testing::gvisorSpec(o);
  if (getenv("PIDS")) spec.limits.pids_max = atoi(getenv("PIDS"));
  if (getenv("MEM")) spec.limits.memory_bytes = atoll(getenv("MEM"));
  auto h = (*env)->provision(spec);
  auto t1 = std::chrono::steady_clock::now();
  if (!h) {
    printf("provision: %s\n", h.error().message().c_str());
    return 1;
  }
  printf("provision %lld ms\n",
         (long long)std::chrono::duration_cast<std::chrono::milliseconds>(t1 - t0).count());
  for (int i = 1; i < argc; ++i) {
    ExecutionCommand c;
    c.argv = {"sh", "-c", argv[i]};
    c.timeout_seconds = 20;
    c.maximum_output_bytes = 1 << 20;
    auto t2 = std::chrono::steady_clock::now();
    auto r = (*env)->execute(*h, c);
    auto t3 = std::chrono::steady_clock::now();
    if (!r) {
      printf("execute: %s\n", r.error().message().c_str());
      continue;
    }
    printf("[%lld ms] exit=%d killed=%d peak=%lld out=<%s> err=<%s> changes=%zu\n",
           (long long)std::chrono::duration_cast<std::chrono::milliseconds>(t3 - t2).count(),
           r->exit_code.value_or(-1), r->killed_by ? (int)*r->killed_by : -1,
           (long long)r->peak_memory_bytes.value_or(-1), r->stdout_data.substr(0, 300).c_str(),
           r->stderr_data.substr(0, 300).c_str(), r->files_changed.size());
  }
  auto t4 = std::chrono::steady_clock::now();
  auto d = (*env)->destroy(*h);
  auto t5 = std::chrono::steady_clock::now();
  printf("destroy %s %lld ms\n", d ? "ok" : d.error().message().c_str(),
         (long long)std::chrono::duration_cast<std::chrono::milliseconds>(t5 - t4).count());
}
