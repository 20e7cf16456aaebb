// Red-team cases B49-B51 (egress), the parts that the
// decision function owns. The sandbox-side parts (raw sockets, UDP, DNS from
// inside a sandbox) belong to the gates gate_network_denied and
// gate_egress_allowlisted; proxy logging to tests/egress/proxy_test.cpp.
#include <gtest/gtest.h>

#include "airlock/egress/decision.h"
#include "airlock/egress/request_head.h"
#include "egress_printers.h"
#include "fake_dns.h"

namespace airlock::egress {
namespace {

struct Harness {
  explicit Harness(const char* yaml, std::vector<IpAddress> self = {})
      : policy(*loadEgressPolicy(yaml, "red-team")),
        classifier(std::make_shared<FixedSelfAddresses>(std::move(self))) {}
  std::shared_ptr<const Policy> policy;
  testing::FakeDns dns;
  GetaddrinfoResolver resolver{dns.backend()};
  AddressClassifier classifier;
  Decision connect(std::string_view target) {
    return decideRequest(*policy, "CONNECT " + std::string(target) + " HTTP/1.1\r\n\r\n", resolver,
                         classifier);
  }
};

// B49: SSRF to loopback, private and metadata addresses. Every spelling is
// refused, and the decision is made on the resolved address.
TEST(BugLog, B49_SsrfToLoopbackPrivateAndMetadataIsRefused) {
  Harness h(
      "egress:\n  mode: allowlist\n  destinations:\n"
      "    - host: \"*.attacker.example\"\n      ports: [443, 80, 8080]\n",
      {*IpAddress::parse("198.51.99.7")});  // stands for the proxy host's public address
  for (const char* literal :
       {"127.0.0.1:8080", "127.0.0.1:443", "[::1]:443", "0.0.0.0:443", "169.254.169.254:80",
        "[::ffff:127.0.0.1]:443", "127.1:443", "2130706433:443", "0x7f000001:443",
        "[::ffff:a9fe:a9fe]:80", "172.17.0.1:443" /* docker bridge gateway */}) {
    const Decision d = h.connect(literal);
    EXPECT_FALSE(d.allowed()) << literal;
    EXPECT_EQ(d.reason, Reason::kIpLiteral) << literal;
  }
  EXPECT_EQ(h.connect("metadata.google.internal:80").reason, Reason::kHostNotAllowed);
  EXPECT_EQ(h.dns.lookupCount(), 0u);

  h.dns.add("a.attacker.example.", {"10.0.0.5"});
  EXPECT_EQ(h.connect("a.attacker.example:443").reasonCode(), "resolved_denied:private");
  h.dns.add("m.attacker.example.", {"169.254.169.254"});
  EXPECT_EQ(h.connect("m.attacker.example:80").reasonCode(), "resolved_denied:link_local");
  h.dns.add("d.attacker.example.", {"172.17.0.1"});
  EXPECT_EQ(h.connect("d.attacker.example:443").reasonCode(), "resolved_denied:private");
  h.dns.add("s.attacker.example.", {"198.51.99.7"});
  EXPECT_EQ(h.connect("s.attacker.example:443").reasonCode(), "resolved_denied:self");
  h.dns.add("v6.attacker.example.", {"::ffff:127.0.0.1"});
  EXPECT_EQ(h.connect("v6.attacker.example:443").reasonCode(), "resolved_denied:loopback");

  // Rebinding: public for the first lookup, private for the next. Each
  // connection resolves once and dials only what it checked.
  h.dns.addSequence("r.attacker.example.", {{"93.184.215.14"}, {"10.0.0.5"}});
  const Decision first = h.connect("r.attacker.example:443");
  ASSERT_TRUE(first.allowed());
  ASSERT_EQ(first.dialAddresses().size(), 1u);
  EXPECT_EQ(first.dialAddresses()[0].toString(), "93.184.215.14");
  EXPECT_EQ(h.connect("r.attacker.example:443").reasonCode(), "resolved_denied:private");
}

// B50: DNS exfiltration past the allowlist. The proxy never resolves a name
// the policy refuses, whatever the request form.
TEST(BugLog, B50_NamesOffTheAllowlistAreNeverResolved) {
  Harness h(
      "egress:\n  mode: allowlist\n  destinations:\n    - host: pypi.org\n      ports: [443]\n");
  h.dns.setDefault({"93.184.215.14"});
  const std::string canary = "mfrggzdfmztwq2lknnwg23tpobyxe43u";  // base32 of a planted canary
  for (const std::string& target : std::vector<std::string>{
           canary + ".exfil.test:443", canary + ".exfil.test:80", "data.exfil.test:443",
           canary + ".pypi.org:443", "pypi.org." + canary + ":443"})
    EXPECT_EQ(h.connect(target).reason, Reason::kHostNotAllowed) << target;
  for (const std::string& head : std::vector<std::string>{
           "GET http://" + canary + ".exfil.test/ HTTP/1.1\r\n\r\n",
           "GET /x HTTP/1.1\r\nHost: " + canary + ".exfil.test\r\n\r\n",
           "CONNECT pypi.org:443 HTTP/1.1\r\nHost: " + canary + ".exfil.test\r\n\r\n"}) {
    const Decision d = decideRequest(*h.policy, head, h.resolver, h.classifier);
    EXPECT_FALSE(d.allowed()) << head;
  }
  EXPECT_EQ(h.connect("1.1.1.1:443").reason, Reason::kIpLiteral);  // DoH by address
  EXPECT_EQ(h.connect("1.1.1.1:53").reason, Reason::kIpLiteral);
  EXPECT_EQ(h.dns.lookupCount(), 0u) << "a refused name reached the resolver";
  for (const auto& q : h.dns.queries()) EXPECT_EQ(q.find(canary), std::string::npos);
}

// B51: the allowlist is enforced as deny-by-default after normalisation.
TEST(BugLog, B51_AllowlistEnforcedAfterNormalisation) {
  Harness h(
      "egress:\n  mode: allowlist\n  destinations:\n"
      "    - host: github.com\n      ports: [443]\n"
      "    - host: \"*.githubusercontent.com\"\n      ports: [443]\n");
  h.dns.setDefault({"140.82.112.3"});
  for (const char* refused : {"example.com:443", "github.com.evil.test:443", "evilgithub.com:443",
                              "raw.githubusercontent.com.evil.test:443",
                              "githubusercontent.com:443", "a.raw.githubusercontent.com:443"})
    EXPECT_EQ(h.connect(refused).reason, Reason::kHostNotAllowed) << refused;
  EXPECT_EQ(h.connect("github.com:80").reason, Reason::kPortNotAllowed);
  EXPECT_EQ(h.connect("140.82.112.3:443").reason, Reason::kIpLiteral);
  EXPECT_EQ(h.connect("[2606:50c0:8000::154]:443").reason, Reason::kIpLiteral);
  EXPECT_EQ(h.dns.lookupCount(), 0u);

  const Decision upper = h.connect("GITHUB.COM.:443");
  EXPECT_TRUE(upper.allowed()) << upper.reasonCode();
  EXPECT_EQ(upper.host, "github.com");
  EXPECT_TRUE(h.connect("raw.githubusercontent.com:443").allowed());

  // A Host header naming another host is refused, not routed on.
  const Decision host =
      decideRequest(*h.policy, "CONNECT github.com:443 HTTP/1.1\r\nHost: evil.test\r\n\r\n",
                    h.resolver, h.classifier);
  EXPECT_EQ(host.reason, Reason::kHostHeaderMismatch);
  // An http request whose Host names evil.test is refused before any policy.
  EXPECT_EQ(decideRequest(*h.policy, "GET / HTTP/1.1\r\nHost: evil.test\r\n\r\n", h.resolver,
                          h.classifier)
                .reason,
            Reason::kOriginFormNotSupported);
  // SNI inside an allowed tunnel is not inspected: the tunnel is opaque and
  // can only reach the checked address of the allowed name (documented in
  // docs/egress.md); no test asserts a refusal the design does not make.
}

}  // namespace
}  // namespace airlock::egress
