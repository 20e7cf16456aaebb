// Gate "every limit is enforced and reported" (spec 000, hard gates;
// gate.sandbox.limits_enforced): a spin loop, an allocator, a fork bomb, a
// disk filler, a file-count filler and an output flood are each killed with
// the matching kill reason, and each returns the output it printed first.
// The same table runs on the linux and the gvisor mechanisms.
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "../sandbox/linux/linux_test_support.h"
#include "../sandbox/oci/gvisor_test_support.h"

namespace airlock::testing {
namespace {

struct LimitCase {
  const char* name;
  std::function<void(ResourceLimits&)> limits;
  const char* script;
  std::int64_t timeout_seconds;
  std::int64_t max_output;
  KillReason expected;
};

void PrintTo(const LimitCase& c, std::ostream* os) {
  *os << c.name;
}

class GateLimitsEnforced : public ::testing::TestWithParam<LimitCase> {};

TEST_P(GateLimitsEnforced, KilledWithTheMatchingReasonAndPartialOutput) {
  if (auto why = linuxJailUnavailable()) GTEST_SKIP() << *why;
  const LimitCase& c = GetParam();
  TempStateDir state;
  auto options = testOptions(state.path());
  auto env = linux_jail::createLinuxEnvironment(options);
  ASSERT_TRUE(env) << env.error().message();
  auto spec = linuxSpec(options);
  c.limits(spec.limits);
  auto h = (*env)->provision(spec);
  ASSERT_TRUE(h) << h.error().message();
  auto cmd = shell(std::string("echo partial; ") + c.script, c.timeout_seconds);
  cmd.maximum_output_bytes = c.max_output;
  auto r = (*env)->execute(*h, cmd);
  ASSERT_TRUE((*env)->destroy(*h));
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->killed_by, c.expected) << "stderr: " << r->stderr_data.substr(0, 500);
  EXPECT_FALSE(r->exit_code.has_value());
  EXPECT_EQ(r->timed_out, c.expected == KillReason::kTimeout);
  EXPECT_EQ(r->stdout_data.rfind("partial\n", 0), 0u) << "partial output lost";
}

// Every limit case; the same table runs on each kernel-level mechanism.
const std::vector<LimitCase>& limitCases() {
  static const std::vector<LimitCase> cases = {
      LimitCase{"SpinLoop", [](ResourceLimits&) {}, "while :; do :; done", 2, 1 << 20,
                KillReason::kTimeout},
      LimitCase{"Allocator", [](ResourceLimits& l) { l.memory_bytes = 64 << 20; },
                "exec python3 -c 'b = bytearray(256 << 20); b[::4096] = b\"x\" * len(b[::4096])'",
                60, 1 << 20, KillReason::kMemory},
      // The shell that starts the bomb exits at once; the bomb keeps the
      // command alive (it holds stdout) until it meets pids.max.
      LimitCase{"ForkBomb", [](ResourceLimits& l) { l.pids_max = 32; }, "f(){ f | f & }; f", 60,
                1 << 20, KillReason::kPids},
      // The classic bash spelling (POSIX sh, dash included, refuses `:` as
      // a function name, so it goes through bash).
      LimitCase{"ForkBombBash", [](ResourceLimits& l) { l.pids_max = 32; },
                "bash -c ':(){ :|:& };:'", 60, 1 << 20, KillReason::kPids},
      LimitCase{"DiskFiller", [](ResourceLimits& l) { l.workspace_bytes = 8 << 20; },
                "yes > filler; sleep 30", 60, 1 << 20, KillReason::kDisk},
      LimitCase{"FileCountFiller", [](ResourceLimits& l) { l.inodes_max = 500; },
                "i=0; while touch f$i 2>/dev/null; do i=$((i+1)); done; sleep 30", 60, 1 << 20,
                KillReason::kDisk},
      LimitCase{"OutputFlood", [](ResourceLimits&) {}, "yes", 60, 1 << 20,
                KillReason::kOutputLimit}};
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Limits, GateLimitsEnforced, ::testing::ValuesIn(limitCases()),
                         [](const ::testing::TestParamInfo<LimitCase>& info) {
                           return std::string(info.param.name);
                         });

// The same gate on the gvisor mechanism (src/airlock/sandbox/oci): skipped
// with the reason where runsc, root or the shim is missing.
class GateLimitsEnforcedGvisor : public ::testing::TestWithParam<LimitCase> {};

TEST_P(GateLimitsEnforcedGvisor, KilledWithTheMatchingReasonAndPartialOutput) {
  if (auto why = gvisorUnavailableHere()) GTEST_SKIP() << *why;
  const LimitCase& c = GetParam();
  GvisorStateDir state;
  auto options = gvisorOptions(state.path());
  auto env = gvisor::createGvisorEnvironment(options);
  ASSERT_TRUE(env) << env.error().message();
  auto spec = gvisorSpec(options);
  c.limits(spec.limits);
  auto h = (*env)->provision(spec);
  ASSERT_TRUE(h) << h.error().message();
  auto cmd = shell(std::string("echo partial; ") + c.script, c.timeout_seconds);
  cmd.maximum_output_bytes = c.max_output;
  auto r = (*env)->execute(*h, cmd);
  ASSERT_TRUE((*env)->destroy(*h));
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->killed_by, c.expected) << "stderr: " << r->stderr_data.substr(0, 500);
  EXPECT_FALSE(r->exit_code.has_value());
  EXPECT_EQ(r->timed_out, c.expected == KillReason::kTimeout);
  EXPECT_EQ(r->stdout_data.rfind("partial\n", 0), 0u) << "partial output lost";
}

INSTANTIATE_TEST_SUITE_P(Limits, GateLimitsEnforcedGvisor, ::testing::ValuesIn(limitCases()),
                         [](const ::testing::TestParamInfo<LimitCase>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace airlock::testing
