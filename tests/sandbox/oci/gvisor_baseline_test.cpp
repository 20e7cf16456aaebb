// The baseline real programs expect (sandbox/sandbox_baseline.h) on the
// gvisor mechanism, with the linux mechanism's checks (../baseline_checks.h):
// pseudo-terminals from the bundle's devpts, netbase's tables, the image's CA
// store, the image PATH, and an /etc with nothing of the host's secrets.
// Not here: /dev/tty of a controlling terminal, a master's EIO after the
// last slave closed, and the slave's mode and group, which this runsc does
// not provide (docs/gvisor.md, "Known differences").
#include <gtest/gtest.h>
#include <unistd.h>

#include "../baseline_checks.h"
#include "gvisor_fixture.h"

namespace airlock::testing {
namespace {

class GvisorBaselineTest : public GvisorFixture {
 protected:
  // The command's own timeout bounds the call.
  ExecutionResult run(const ExecutionCommand& c) {
    auto r = env_->execute(handle_, c);
    EXPECT_TRUE(r) << r.error().message();
    return r ? *r : ExecutionResult{};
  }
  baseline::Runner runner() {
    return [this](const ExecutionCommand& c) { return run(c); };
  }
};

TEST_F(GvisorBaselineTest, APtyFromTheSandboxsDevptsRoundTripsBytes) {
  baseline::expectAPrivatePty(runner());
}

TEST_F(GvisorBaselineTest, ServicesAndProtocolsResolve) {
  baseline::expectPrints(runner(), baseline::python(baseline::kNetdbScript),
                         baseline::kNetdbExpected);
}

TEST_F(GvisorBaselineTest, TheDefaultTlsContextLoadsTheImagesCertificates) {
  baseline::expectTheImagesCertificates(runner());
}

TEST_F(GvisorBaselineTest, EtcHoldsTheBaselineAndNoSecretOfTheHost) {
  baseline::expectTheBaselineEtc(runner());
}

TEST_F(GvisorBaselineTest, TheImagePathFindsTheImagesPython) {
  baseline::expectPrints(runner(), shell("command -v python3"), "/usr/bin/python3\n");
}

}  // namespace
}  // namespace airlock::testing
