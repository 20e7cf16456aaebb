// GetaddrinfoResolver through its Backend seam: the exact name and hints
// passed, error mapping, answer handling.
#include "airlock/egress/resolver.h"

#include <gtest/gtest.h>

#include "egress_printers.h"
#include "fake_dns.h"

namespace airlock::egress {
namespace {

TEST(GetaddrinfoResolver, ResolvesTheNameAsFullyQualified) {
  testing::FakeDns dns;
  dns.add("pypi.org.", {"151.101.0.223", "2a04:4e42::223"});
  GetaddrinfoResolver resolver(dns.backend());
  const auto r = resolver.resolve("pypi.org");
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].toString(), "151.101.0.223");
  EXPECT_EQ((*r)[1].toString(), "2a04:4e42::223");
  EXPECT_EQ(dns.queries(), (std::vector<std::string>{"pypi.org."}));
}

TEST(GetaddrinfoResolver, SearchDomainsNeverApply) {
  // resolv.conf "search cluster.local", ndots:5: a bare name would be tried
  // as svc.example.com.cluster.local first.
  testing::FakeDns dns;
  dns.setSearchDomain("cluster.local");
  dns.add("svc.example.com.cluster.local.", {"10.96.0.10"});
  GetaddrinfoResolver resolver(dns.backend());
  const auto r = resolver.resolve("svc.example.com");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().reason, Reason::kDnsNoAnswer);
  EXPECT_EQ(dns.queries(), (std::vector<std::string>{"svc.example.com."}));
}

TEST(GetaddrinfoResolver, PassesStreamHintsForBothFamilies) {
  addrinfo seen{};
  std::string name;
  GetaddrinfoResolver resolver(
      GetaddrinfoResolver::Backend{[&](const char* node, const addrinfo* hints, addrinfo** out) {
                                     name = node;
                                     seen = *hints;
                                     *out = nullptr;
                                     return EAI_NONAME;
                                   },
                                   [](addrinfo*) {}});
  (void)resolver.resolve("a.example.com");
  EXPECT_EQ(name, "a.example.com.");
  EXPECT_EQ(seen.ai_family, AF_UNSPEC);
  EXPECT_EQ(seen.ai_socktype, SOCK_STREAM);
  EXPECT_EQ(seen.ai_flags & AI_NUMERICHOST, 0);
}

TEST(GetaddrinfoResolver, MapsFailures) {
  testing::FakeDns dns;
  dns.fail("servfail.example.", EAI_AGAIN);
  dns.fail("broken.example.", EAI_FAIL);
  dns.fail("nodata.example.", EAI_NODATA);
  dns.add("empty.example.", {});
  GetaddrinfoResolver resolver(dns.backend());
  EXPECT_EQ(resolver.resolve("servfail.example").error().reason, Reason::kDnsError);
  EXPECT_EQ(resolver.resolve("broken.example").error().reason, Reason::kDnsError);
  EXPECT_EQ(resolver.resolve("nodata.example").error().reason, Reason::kDnsNoAnswer);
  EXPECT_EQ(resolver.resolve("missing.example").error().reason, Reason::kDnsNoAnswer);
  EXPECT_EQ(resolver.resolve("empty.example").error().reason, Reason::kDnsNoAnswer);
  EXPECT_FALSE(resolver.resolve("servfail.example").error().detail.empty());
}

TEST(GetaddrinfoResolver, DeduplicatesAndCapsTheAnswer) {
  testing::FakeDns dns;
  std::vector<std::string> many = {"93.184.215.14", "93.184.215.14"};
  for (int i = 0; i < 100; ++i) many.push_back("93.184.216." + std::to_string(i));
  dns.add("big.example.", many);
  GetaddrinfoResolver resolver(dns.backend());
  const auto r = resolver.resolve("big.example");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->size(), kMaxAddresses);
  EXPECT_EQ((*r)[0].toString(), "93.184.215.14");
  EXPECT_EQ((*r)[1].toString(), "93.184.216.0");
}

TEST(GetaddrinfoResolver, RefusesNonCanonicalInputWithoutALookup) {
  testing::FakeDns dns;
  GetaddrinfoResolver resolver(dns.backend());
  EXPECT_EQ(resolver.resolve("pypi.org.").error().reason, Reason::kInternalError);
  EXPECT_EQ(resolver.resolve("").error().reason, Reason::kInternalError);
  EXPECT_EQ(resolver.resolve(std::string_view("a\0b", 3)).error().reason, Reason::kInternalError);
  EXPECT_EQ(dns.lookupCount(), 0u);
}

TEST(GetaddrinfoResolver, SystemBackendAnswersOrFailsClosed) {
  // No network is assumed. glibc 2.36 compares /etc/hosts names literally,
  // so "localhost." is usually unknown; if a libc does resolve it, it must
  // be loopback. Either way nothing dialable comes back.
  GetaddrinfoResolver resolver;
  const auto r = resolver.resolve("localhost");
  if (r) {
    for (const auto& a : *r) EXPECT_EQ(classifyAddress(a), AddressClass::kLoopback) << a.toString();
  } else {
    EXPECT_TRUE(r.error().reason == Reason::kDnsNoAnswer || r.error().reason == Reason::kDnsError);
  }
}

}  // namespace
}  // namespace airlock::egress
