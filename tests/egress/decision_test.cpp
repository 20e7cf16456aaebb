// The decision function's sequence: name, one lookup, every address, dial
// exactly the checked addresses (spec 000, "What the proxy does on CONNECT").
#include "airlock/egress/decision.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <stdexcept>

#include "egress_printers.h"
#include "fake_dns.h"

namespace airlock::egress {
namespace {

const char* kPolicy =
    "egress:\n  mode: allowlist\n  destinations:\n"
    "    - host: \"*.example.com\"\n      ports: [443]\n"
    "    - host: example.net\n      ports: [443, 8443]\n";

class DecisionTest : public ::testing::Test {
 protected:
  std::shared_ptr<const Policy> policy = *loadEgressPolicy(kPolicy, "test");
  testing::FakeDns dns;
  GetaddrinfoResolver resolver{dns.backend()};
  AddressClassifier classifier{std::make_shared<FixedSelfAddresses>(
      std::vector<IpAddress>{*IpAddress::parse("203.0.114.9")})};

  Decision run(std::string_view target) {
    return decideAuthority(*policy, target, resolver, classifier);
  }
};

TEST_F(DecisionTest, RefusedNamesAreNeverResolved) {
  dns.setDefault({"93.184.215.14"});
  for (const char* t : {"example.com:443", "a.b.example.com:443", "evil.test:443", "example.net:80",
                        "a.example.com:8443", "127.0.0.1:443", "pypi.org@a.example.com:443",
                        "a.example.com", "[::1]:443"}) {
    const Decision d = run(t);
    EXPECT_FALSE(d.allowed()) << t;
    EXPECT_EQ(d.lookups, 0) << t;
    EXPECT_TRUE(d.resolved.empty()) << t;
  }
  EXPECT_EQ(dns.lookupCount(), 0u);
  const Decision deny_mode =
      decideAuthority(*Policy::denyAll(), "a.example.com:443", resolver, classifier);
  EXPECT_EQ(deny_mode.reason, Reason::kModeDeny);
  EXPECT_EQ(dns.lookupCount(), 0u);
}

TEST_F(DecisionTest, AllowedDialsExactlyTheCheckedAddressesInOrder) {
  dns.add("a.example.com.", {"2606:4700:4700::1111", "93.184.215.14"});
  const Decision d = run("A.Example.COM.:443");
  ASSERT_TRUE(d.allowed()) << d.reasonCode();
  EXPECT_EQ(d.reason, Reason::kAllowed);
  EXPECT_EQ(d.reasonCode(), "allowed");
  EXPECT_EQ(d.host, "a.example.com");
  EXPECT_EQ(d.port, 443);
  EXPECT_EQ(d.lookups, 1);
  ASSERT_EQ(d.dialAddresses().size(), 2u);
  EXPECT_EQ(d.dialAddresses()[0].toString(), "2606:4700:4700::1111");
  EXPECT_EQ(d.dialAddresses()[1].toString(), "93.184.215.14");
  EXPECT_EQ(dns.lookupCount(), 1u);
}

TEST_F(DecisionTest, OneBadAddressRefusesTheWholeAnswer) {
  dns.add("mixed.example.com.", {"93.184.215.14", "10.0.0.5", "::ffff:169.254.169.254", "1.1.1.1"});
  const Decision d = run("mixed.example.com:443");
  EXPECT_FALSE(d.allowed());
  EXPECT_EQ(d.reasonCode(), "resolved_denied:private");
  ASSERT_EQ(d.denied.size(), 2u);
  EXPECT_EQ(d.denied[0].address.toString(), "10.0.0.5");
  EXPECT_EQ(d.denied[1].address_class, AddressClass::kLinkLocal);
  EXPECT_EQ(d.resolved.size(), 4u);  // logged
  EXPECT_TRUE(d.dialAddresses().empty());
}

TEST_F(DecisionTest, ResolvesOncePerDecisionAndEachDecisionAfresh) {
  dns.addSequence("rebind.example.com.", {{"93.184.215.14"}, {"169.254.169.254"}});
  const Decision first = run("rebind.example.com:443");
  ASSERT_TRUE(first.allowed());
  EXPECT_EQ(first.dialAddresses().front().toString(), "93.184.215.14");
  EXPECT_EQ(dns.lookupCount(), 1u);
  const Decision second = run("rebind.example.com:443");
  EXPECT_EQ(second.reasonCode(), "resolved_denied:link_local");
  EXPECT_EQ(dns.lookupCount(), 2u);
}

TEST_F(DecisionTest, DnsFailuresFailClosed) {
  dns.fail("servfail.example.com.", EAI_AGAIN);
  EXPECT_EQ(run("servfail.example.com:443").reason, Reason::kDnsError);
  EXPECT_EQ(run("nxdomain.example.com:443").reason, Reason::kDnsNoAnswer);
}

TEST_F(DecisionTest, TheProxyHostsOwnAddressIsSelf) {
  dns.add("me.example.com.", {"203.0.114.9"});
  EXPECT_EQ(run("me.example.com:443").reasonCode(), "resolved_denied:self");
}

TEST(Decision, AThrowingResolverIsAnInternalErrorRefusal) {
  struct Throwing : Resolver {
    ResolveResult resolve(std::string_view) override { throw std::runtime_error("boom"); }
  } resolver;
  struct Empty : Resolver {
    ResolveResult resolve(std::string_view) override { return std::vector<IpAddress>{}; }
  } empty;
  auto policy = *loadEgressPolicy(kPolicy, "test");
  AddressClassifier classifier(std::make_shared<FixedSelfAddresses>(std::vector<IpAddress>{}));
  const Decision d = decideAuthority(*policy, "a.example.com:443", resolver, classifier);
  EXPECT_FALSE(d.allowed());
  EXPECT_EQ(d.reason, Reason::kInternalError);
  EXPECT_TRUE(d.dialAddresses().empty());
  EXPECT_EQ(decideAuthority(*policy, "a.example.com:443", empty, classifier).reason,
            Reason::kDnsNoAnswer);
}

TEST(Decision, TestSinkClassifierAllowsOnlyTheSink) {
  auto policy = *loadEgressPolicy(kPolicy, "test");
  testing::FakeDns dns;
  dns.add("sink.example.com.", {"127.0.0.7"});
  dns.add("other.example.com.", {"127.0.0.8"});
  GetaddrinfoResolver resolver(dns.backend());
  auto self = std::make_shared<FixedSelfAddresses>(std::vector<IpAddress>{});
  AddressClassifier test_classifier(self, testing::makeTestSinkToken(),
                                    {*IpAddress::parse("127.0.0.7")});
  AddressClassifier production(self);
  EXPECT_TRUE(
      decideAuthority(*policy, "sink.example.com:443", resolver, test_classifier).allowed());
  EXPECT_EQ(
      decideAuthority(*policy, "other.example.com:443", resolver, test_classifier).reasonCode(),
      "resolved_denied:loopback");
  EXPECT_EQ(decideAuthority(*policy, "sink.example.com:443", resolver, production).reasonCode(),
            "resolved_denied:loopback");
}

// --- properties: over any answer drawn from public and denied addresses.

const std::vector<std::string> kPublic = {"93.184.215.14", "151.101.0.223", "2606:4700:4700::1111",
                                          "172.32.0.1", "::ffff:8.8.8.8"};
const std::vector<std::string> kDenied = {
    "10.0.0.5",         "127.0.0.6",     "169.254.169.254",  "::1",
    "::ffff:127.0.0.1", "fe80::1",       "64:ff9b::808:808", "100.64.0.1",
    "0.0.0.0",          "168.63.129.16", "fc00::1"};

RC_GTEST_PROP(DecisionProperty, AllowedIffEveryAddressIsPublic, ()) {
  std::vector<std::string> pool = kPublic;
  pool.insert(pool.end(), kDenied.begin(), kDenied.end());
  const auto answer = *rc::gen::unique<std::vector<std::string>>(rc::gen::elementOf(pool));
  RC_PRE(!answer.empty());
  auto policy = *loadEgressPolicy(kPolicy, "test");
  testing::FakeDns dns;
  dns.add("x.example.com.", answer);
  GetaddrinfoResolver resolver(dns.backend());
  AddressClassifier classifier(std::make_shared<FixedSelfAddresses>(std::vector<IpAddress>{}));
  const Decision d = decideAuthority(*policy, "x.example.com:443", resolver, classifier);
  bool all_public = true;
  for (const auto& a : answer)
    all_public = all_public && std::find(kPublic.begin(), kPublic.end(), a) != kPublic.end();
  RC_ASSERT(dns.lookupCount() == 1u);
  RC_ASSERT(d.allowed() == all_public);
  if (all_public) {
    RC_ASSERT(d.dialAddresses().size() == answer.size());
    for (std::size_t i = 0; i < answer.size(); ++i)
      RC_ASSERT(d.dialAddresses()[i] == *IpAddress::parse(answer[i]));
  } else {
    RC_ASSERT(d.reason == Reason::kResolvedDenied);
    RC_ASSERT(d.dialAddresses().empty());
    RC_ASSERT(!d.denied.empty());
  }
}

}  // namespace
}  // namespace airlock::egress
