// The baseline real programs expect (sandbox/sandbox_baseline.h) on the linux
// mechanism: pseudo-terminals from a private devpts, netbase's tables, the
// image's CA store, the image PATH, and an /etc with nothing of the host's
// secrets. The checks are shared with gvisor (../baseline_checks.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <string_view>

#include "../baseline_checks.h"
#include "airlock/sandbox/linux/jail_plan.h"
#include "linux_test_support.h"

namespace airlock::testing {
namespace {

// The plan alone (no sandbox): the steps the baseline adds, in an order that
// works, and no bind of anything under /etc but the image's entries.
TEST(LinuxJailPlan, TheBaselineStepsAreNamedOrderedAndBindOnlyTheImage) {
  linux_jail::JailPlanInputs in;
  in.staging_root = "/stage";
  auto image =
      hostImage(std::string("sha256:") + std::string(64, '0'), {"/usr"}, defaultImageEtc());
  ASSERT_TRUE(image) << image.error().message();
  in.image = std::make_shared<const SandboxImage>(*image);
  in.limits = defaultLimits();
  auto plan = linux_jail::buildJailPlan(in);
  ASSERT_TRUE(plan) << plan.error().message();
  auto at = [&](std::string_view description) -> std::ptrdiff_t {
    for (std::size_t i = 0; i < plan->size(); ++i)
      if ((*plan)[i].description == description) return static_cast<std::ptrdiff_t>(i);
    ADD_FAILURE() << "no step \"" << description << "\"";
    return -1;
  };
  const auto dev = at("mount tmpfs at /dev");
  const auto pts_dir = at("create /dev/pts");
  const auto pts = at("mount a private devpts at /dev/pts");
  const auto ptmx = at("link /dev/ptmx");
  const auto pivot = at("pivot into the new root");
  EXPECT_LT(dev, pts_dir);
  EXPECT_LT(pts_dir, pts);
  EXPECT_LT(pts, pivot);
  EXPECT_LT(ptmx, pivot);
  ASSERT_GE(pts, 0);
  EXPECT_EQ((*plan)[static_cast<std::size_t>(pts)].data, kDevptsOptions);
  ASSERT_GE(ptmx, 0);
  EXPECT_EQ((*plan)[static_cast<std::size_t>(ptmx)].source, "pts/ptmx");
  if (::access("/etc/ssl/certs", F_OK) == 0) {
    EXPECT_LT(at("create /etc/ssl"), at("bind /etc/ssl/certs"));
  }
  const auto image_etc = defaultImageEtc();
  for (const auto& s : *plan) {
    if (s.kind != linux_jail::SetupStep::Kind::kBind || s.source.rfind("/etc", 0) != 0) continue;
    EXPECT_NE(std::find(image_etc.begin(), image_etc.end(), s.source), image_etc.end()) << s.source;
  }
}

class LinuxBaselineTest : public SandboxTest {
 protected:
  baseline::Runner runner() {
    return [this](const ExecutionCommand& c) { return run(c); };
  }
};

// A command, never init, is what the OOM killer takes at the memory limit:
// commands (and what they start) run with the largest oom_score_adj, so the
// sandbox stays usable after a MEMORY kill even where the service may not
// protect init (no CAP_SYS_RESOURCE) and init, a clone of the service, is
// the bigger task.
TEST_F(LinuxBaselineTest, CommandsAreFirstInLineForTheOomKiller) {
  baseline::expectPrints(
      runner(), shell("cat /proc/self/oom_score_adj; sh -c 'cat /proc/self/oom_score_adj'"),
      "1000\n1000\n");
}

TEST_F(LinuxBaselineTest, APtyFromAPrivateDevptsRoundTripsBytes) {
  baseline::expectAPrivatePty(runner());
}

TEST_F(LinuxBaselineTest, DevTtyIsTheControllingTerminalAndTheMasterSeesTheHangup) {
  baseline::expectPrints(runner(), baseline::python(baseline::kControllingTerminalScript),
                         baseline::kControllingTerminalExpected);
}

TEST_F(LinuxBaselineTest, APtySlaveIsTheOpenersWithMode0620AndGroupTty) {
  baseline::expectPrints(runner(), baseline::python(baseline::kPtyOwnerScript),
                         baseline::kPtyOwnerExpected);
}

TEST_F(LinuxBaselineTest, ServicesAndProtocolsResolve) {
  baseline::expectPrints(runner(), baseline::python(baseline::kNetdbScript),
                         baseline::kNetdbExpected);
}

TEST_F(LinuxBaselineTest, TheDefaultTlsContextLoadsTheImagesCertificates) {
  baseline::expectTheImagesCertificates(runner());
}

TEST_F(LinuxBaselineTest, EtcHoldsTheBaselineAndNoSecretOfTheHost) {
  baseline::expectTheBaselineEtc(runner());
}

TEST_F(LinuxBaselineTest, TheImagePathFindsTheImagesPython) {
  baseline::expectPrints(runner(), shell("command -v python3"), "/usr/bin/python3\n");
}

}  // namespace
}  // namespace airlock::testing
