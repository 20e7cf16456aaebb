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
};

TEST_F(GvisorBaselineTest, APtyFromTheSandboxsDevptsRoundTripsBytes) {
  auto r = run(baseline::python(baseline::kPtyScript));
  EXPECT_EQ(r.exit_code, 0) << r.stderr_data;
  EXPECT_EQ(r.stdout_data, baseline::kPtyExpected) << r.stderr_data;
}

TEST_F(GvisorBaselineTest, ServicesAndProtocolsResolve) {
  auto r = run(baseline::python(baseline::kNetdbScript));
  EXPECT_EQ(r.exit_code, 0) << r.stderr_data;
  EXPECT_EQ(r.stdout_data, baseline::kNetdbExpected) << r.stderr_data;
}

TEST_F(GvisorBaselineTest, TheDefaultTlsContextLoadsTheImagesCertificates) {
  const std::string host = baseline::hostCertStoreStats();
  ASSERT_NE(host.find("'x509_ca': "), std::string::npos) << "host python: " << host;
  ASSERT_EQ(host.find("'x509_ca': 0}"), std::string::npos) << "the host has no CA store: " << host;
  auto r = run(baseline::python(baseline::kCaScript));
  EXPECT_EQ(r.exit_code, 0) << r.stderr_data;
  EXPECT_EQ(r.stdout_data, host) << r.stderr_data;
}

TEST_F(GvisorBaselineTest, EtcHoldsTheBaselineAndNoSecretOfTheHost) {
  ASSERT_EQ(::access("/etc/shadow", F_OK), 0) << "the host has no /etc/shadow to keep out";
  auto r = run(baseline::python(baseline::kEtcScript));
  EXPECT_EQ(r.exit_code, 0) << r.stderr_data;
  EXPECT_EQ(r.stdout_data, baseline::etcExpected()) << r.stderr_data;
}

TEST_F(GvisorBaselineTest, TheImagePathFindsTheImagesPython) {
  auto r = run(shell("command -v python3"));
  EXPECT_EQ(r.exit_code, 0) << r.stderr_data;
  EXPECT_EQ(r.stdout_data, "/usr/bin/python3\n");
}

}  // namespace
}  // namespace airlock::testing
