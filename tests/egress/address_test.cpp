// The address denylist (address.h): every block at both boundaries,
// and the neighbours just outside each one.
#include "airlock/egress/address.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "airlock/egress/classifier.h"
#include "egress_printers.h"

namespace airlock::egress {
namespace {

using C = AddressClass;

C cls(const char* text) {
  auto a = IpAddress::parse(text);
  if (!a) throw std::runtime_error(std::string("bad test address ") + text);
  return classifyAddress(*a);
}

struct Block {
  const char* name;
  const char* before;  // last address below the block
  C before_class;
  const char* first;
  const char* last;
  C cls;
  const char* after;  // first address above the block
  C after_class;
};

const Block kV4Blocks[] = {
    {"0.0.0.0/8", nullptr, C::kPublic, "0.0.0.0", "0.255.255.255", C::kUnspecified, "1.0.0.0",
     C::kPublic},
    {"10.0.0.0/8", "9.255.255.255", C::kPublic, "10.0.0.0", "10.255.255.255", C::kPrivate,
     "11.0.0.0", C::kPublic},
    {"100.64.0.0/10", "100.63.255.255", C::kPublic, "100.64.0.0", "100.127.255.255", C::kCgnat,
     "100.128.0.0", C::kPublic},
    {"127.0.0.0/8", "126.255.255.255", C::kPublic, "127.0.0.0", "127.255.255.255", C::kLoopback,
     "128.0.0.0", C::kPublic},
    {"169.254.0.0/16", "169.253.255.255", C::kPublic, "169.254.0.0", "169.254.255.255",
     C::kLinkLocal, "169.255.0.0", C::kPublic},
    {"172.16.0.0/12", "172.15.255.255", C::kPublic, "172.16.0.0", "172.31.255.255", C::kPrivate,
     "172.32.0.0", C::kPublic},
    {"192.0.0.0/24", "191.255.255.255", C::kPublic, "192.0.0.0", "192.0.0.255", C::kIetfProtocol,
     "192.0.1.0", C::kPublic},
    {"192.0.2.0/24", "192.0.1.255", C::kPublic, "192.0.2.0", "192.0.2.255", C::kDocumentation,
     "192.0.3.0", C::kPublic},
    {"192.31.196.0/24", "192.31.195.255", C::kPublic, "192.31.196.0", "192.31.196.255",
     C::kReserved, "192.31.197.0", C::kPublic},
    {"192.52.193.0/24", "192.52.192.255", C::kPublic, "192.52.193.0", "192.52.193.255",
     C::kReserved, "192.52.194.0", C::kPublic},
    {"192.88.99.0/24", "192.88.98.255", C::kPublic, "192.88.99.0", "192.88.99.255", C::kReserved,
     "192.88.100.0", C::kPublic},
    {"192.168.0.0/16", "192.167.255.255", C::kPublic, "192.168.0.0", "192.168.255.255", C::kPrivate,
     "192.169.0.0", C::kPublic},
    {"192.175.48.0/24", "192.175.47.255", C::kPublic, "192.175.48.0", "192.175.48.255",
     C::kReserved, "192.175.49.0", C::kPublic},
    {"198.18.0.0/15", "198.17.255.255", C::kPublic, "198.18.0.0", "198.19.255.255", C::kBenchmark,
     "198.20.0.0", C::kPublic},
    {"198.51.100.0/24", "198.51.99.255", C::kPublic, "198.51.100.0", "198.51.100.255",
     C::kDocumentation, "198.51.101.0", C::kPublic},
    {"203.0.113.0/24", "203.0.112.255", C::kPublic, "203.0.113.0", "203.0.113.255",
     C::kDocumentation, "203.0.114.0", C::kPublic},
    {"224.0.0.0/4", "223.255.255.255", C::kPublic, "224.0.0.0", "239.255.255.255", C::kMulticast,
     "240.0.0.0", C::kReserved},
    {"240.0.0.0/4", "239.255.255.255", C::kMulticast, "240.0.0.0", "255.255.255.254", C::kReserved,
     nullptr, C::kPublic},
    {"255.255.255.255/32", "255.255.255.254", C::kReserved, "255.255.255.255", "255.255.255.255",
     C::kBroadcast, nullptr, C::kPublic},
    {"168.63.129.16/32", "168.63.129.15", C::kPublic, "168.63.129.16", "168.63.129.16",
     C::kMetadata, "168.63.129.17", C::kPublic},
};

const Block kV6Blocks[] = {
    {"::/128", nullptr, C::kPublic, "::", "::", C::kUnspecified, "::1", C::kLoopback},
    {"::1/128", "::", C::kUnspecified, "::1", "::1", C::kLoopback, "::2", C::kIpv6NonGlobal},
    {"::ffff:0:0/96 (mapped 0.0.0.0 .. 255.255.255.255)", "::fffe:ffff:ffff", C::kIpv6NonGlobal,
     "::ffff:0.0.0.0", "::ffff:255.255.255.255", C::kUnspecified /* first */, "::1:0:0:0",
     C::kIpv6NonGlobal},
    {"64:ff9b::/96", "64:ff9a:ffff:ffff:ffff:ffff:ffff:ffff", C::kIpv6NonGlobal,
     "64:ff9b::", "64:ff9b::ffff:ffff", C::kIpv6Embedded, "64:ff9b::1:0:0", C::kIpv6NonGlobal},
    {"fc00::/7", "fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C::kIpv6NonGlobal,
     "fc00::", "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C::kPrivate, "fe00::", C::kIpv6NonGlobal},
    {"fe80::/10", "fe7f:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C::kIpv6NonGlobal, "fe80::",
     "febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C::kLinkLocal, "fec0::", C::kIpv6NonGlobal},
    {"ff00::/8", "feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C::kIpv6NonGlobal,
     "ff00::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C::kMulticast, nullptr, C::kPublic},
    {"2000::/3 (allowed)", "1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C::kIpv6NonGlobal,
     "2000::", "3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C::kPublic, "4000::", C::kIpv6NonGlobal},
    {"2001::/32 (Teredo)", "2000:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C::kPublic, "2001::",
     "2001:0:ffff:ffff:ffff:ffff:ffff:ffff", C::kIpv6Embedded, "2001:1::", C::kIetfProtocol},
    {"2001:2::/48", "2001:1:ffff:ffff:ffff:ffff:ffff:ffff", C::kIetfProtocol, "2001:2::",
     "2001:2:0:ffff:ffff:ffff:ffff:ffff", C::kBenchmark, "2001:2:1::", C::kIetfProtocol},
    {"2001::/23 (rest)", "2001:0:ffff:ffff:ffff:ffff:ffff:ffff", C::kIpv6Embedded, "2001:1::",
     "2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff", C::kIetfProtocol, "2001:200::", C::kPublic},
    {"2001:db8::/32", "2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", C::kPublic, "2001:db8::",
     "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", C::kDocumentation, "2001:db9::", C::kPublic},
    {"2002::/16", "2001:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C::kPublic,
     "2002::", "2002:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C::kIpv6Embedded, "2003::", C::kPublic},
    {"2620:4f:8000::/48", "2620:4f:7fff:ffff:ffff:ffff:ffff:ffff", C::kPublic, "2620:4f:8000::",
     "2620:4f:8000:ffff:ffff:ffff:ffff:ffff", C::kReserved, "2620:4f:8001::", C::kPublic},
    {"3fff::/20", "3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff", C::kPublic, "3fff::",
     "3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff", C::kDocumentation, "3fff:1000::", C::kPublic},
};

void checkBlock(const Block& b, bool mapped_first_differs = false) {
  SCOPED_TRACE(b.name);
  if (b.before) {
    EXPECT_EQ(cls(b.before), b.before_class) << b.before;
  }
  EXPECT_EQ(cls(b.first), b.cls) << b.first;
  if (!mapped_first_differs) {
    EXPECT_EQ(cls(b.last), b.cls) << b.last;
  }
  if (b.after) {
    EXPECT_EQ(cls(b.after), b.after_class) << b.after;
  }
}

TEST(AddressDenylist, EveryIpv4BlockAtBothBoundaries) {
  for (const auto& b : kV4Blocks) checkBlock(b);
}

TEST(AddressDenylist, EveryIpv6BlockAtBothBoundaries) {
  for (const auto& b : kV6Blocks) checkBlock(b, std::string(b.name).starts_with("::ffff"));
  // The mapped block's last address is judged as 255.255.255.255.
  EXPECT_EQ(cls("::ffff:255.255.255.255"), C::kBroadcast);
}

TEST(AddressDenylist, Ipv4MappedIsJudgedAsIpv4) {
  EXPECT_EQ(cls("::ffff:127.0.0.1"), C::kLoopback);
  EXPECT_EQ(cls("::ffff:169.254.169.254"), C::kLinkLocal);
  EXPECT_EQ(cls("::ffff:a9fe:a9fe"), C::kLinkLocal);
  EXPECT_EQ(cls("::ffff:10.1.2.3"), C::kPrivate);
  EXPECT_EQ(cls("::ffff:168.63.129.16"), C::kMetadata);
  EXPECT_EQ(cls("::ffff:93.184.215.14"), C::kPublic);
}

TEST(AddressDenylist, EmbeddedIpv4FormsOtherThanMappedAreDenied) {
  EXPECT_EQ(cls("::7f00:1"), C::kIpv6NonGlobal);                  // IPv4-compatible
  EXPECT_EQ(cls("::8.8.8.8"), C::kIpv6NonGlobal);                 // IPv4-compatible, public inside
  EXPECT_EQ(cls("::ffff:0:7f00:1"), C::kIpv6NonGlobal);           // IPv4-translated
  EXPECT_EQ(cls("64:ff9b::808:808"), C::kIpv6Embedded);           // NAT64 of a public address
  EXPECT_EQ(cls("64:ff9b:1:a9fe:a9:fe00::"), C::kIpv6NonGlobal);  // local-use NAT64
  EXPECT_EQ(cls("2002:808:808::1"), C::kIpv6Embedded);            // 6to4
  EXPECT_EQ(cls("2001:0:4136:e378:8000:63bf:3fff:fdd2"), C::kIpv6Embedded);  // Teredo
  EXPECT_EQ(cls("fec0::1"), C::kIpv6NonGlobal);                              // site-local
  EXPECT_EQ(cls("100::1"), C::kIpv6NonGlobal);                               // discard-only
  EXPECT_EQ(cls("5f00::1"), C::kIpv6NonGlobal);                              // SRv6 SIDs
}

TEST(AddressDenylist, PublicAddressesPass) {
  for (const char* a : {"93.184.215.14", "151.101.0.223", "1.1.1.1", "8.8.8.8", "172.32.0.1",
                        "2606:4700:4700::1111", "2a00:1450:4001::200e"})
    EXPECT_EQ(cls(a), C::kPublic) << a;
}

TEST(AddressDenylist, ClassNamesAreTheReasonCodeSuffixes) {
  EXPECT_EQ(addressClassName(C::kLinkLocal), "link_local");
  EXPECT_EQ(addressClassName(C::kIpv6NonGlobal), "ipv6_non_global");
  EXPECT_EQ(addressClassName(C::kDocumentation), "documentation");
  EXPECT_EQ(addressClassName(C::kSelf), "self");
}

TEST(IpAddress, ParseIsStrictAndRoundTrips) {
  for (const char* bad :
       {"", "127.1", "0x7f.0.0.1", "017700000001", "2130706433", "012.0.0.1", "127.0.0.1 ",
        " 127.0.0.1", "[::1]", "fe80::1%eth0", "1.2.3.4.5", "256.0.0.1"})
    EXPECT_FALSE(IpAddress::parse(bad).has_value()) << bad;
  EXPECT_FALSE(IpAddress::parse(std::string_view("1.2.3.4\0", 8)).has_value());
  for (const char* ok : {"1.2.3.4", "::1", "2606:4700:4700::1111", "::ffff:1.2.3.4"}) {
    auto a = IpAddress::parse(ok);
    ASSERT_TRUE(a.has_value()) << ok;
    EXPECT_EQ(IpAddress::parse(a->toString()), a) << ok;
  }
  EXPECT_EQ(IpAddress::parse("::ffff:1.2.3.4")->unmapped(), IpAddress::parse("1.2.3.4"));
  EXPECT_FALSE(IpAddress::parse("1.2.3.4")->unmapped().has_value());
}

TEST(IpAddress, SockaddrRoundTrip) {
  for (const char* text : {"93.184.215.14", "2606:4700:4700::1111"}) {
    const auto a = *IpAddress::parse(text);
    sockaddr_storage ss{};
    const socklen_t len = a.toSockaddr(443, ss);
    auto back = IpAddress::fromSockaddr(reinterpret_cast<sockaddr*>(&ss), len);
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(*back, a);
  }
  sockaddr_storage ss{};
  IpAddress::parse("1.2.3.4")->toSockaddr(1, ss);
  EXPECT_FALSE(IpAddress::fromSockaddr(reinterpret_cast<sockaddr*>(&ss), 4).has_value());
  ss.ss_family = AF_UNIX;
  EXPECT_FALSE(IpAddress::fromSockaddr(reinterpret_cast<sockaddr*>(&ss), sizeof ss).has_value());
}

RC_GTEST_PROP(AddressDenylistProperty, MappedAddressIsJudgedAsItsIpv4, (std::uint32_t v4)) {
  std::array<std::uint8_t, 16> b{};
  b[10] = b[11] = 0xff;
  b[12] = static_cast<std::uint8_t>(v4 >> 24);
  b[13] = static_cast<std::uint8_t>(v4 >> 16);
  b[14] = static_cast<std::uint8_t>(v4 >> 8);
  b[15] = static_cast<std::uint8_t>(v4);
  RC_ASSERT(classifyAddress(IpAddress::v6(b)) == classifyAddress(IpAddress::v4(v4)));
}

RC_GTEST_PROP(AddressDenylistProperty, NothingOutside2000Slash3IsPublic,
              (std::array<std::uint8_t, 16> b)) {
  RC_PRE((b[0] & 0xe0) != 0x20);
  const auto a = IpAddress::v6(b);
  RC_PRE(!a.unmapped().has_value());
  RC_ASSERT(classifyAddress(a) != AddressClass::kPublic);
}

RC_GTEST_PROP(AddressDenylistProperty, PrivateRangesAreNeverPublic, (std::uint32_t low)) {
  RC_ASSERT(classifyAddress(IpAddress::v4(0x0a000000u | (low & 0x00ffffffu))) == C::kPrivate);
  RC_ASSERT(classifyAddress(IpAddress::v4(0x7f000000u | (low & 0x00ffffffu))) == C::kLoopback);
  RC_ASSERT(classifyAddress(IpAddress::v4(0xa9fe0000u | (low & 0xffffu))) == C::kLinkLocal);
  RC_ASSERT(classifyAddress(IpAddress::v4(0xac100000u | (low & 0x000fffffu))) == C::kPrivate);
}

// --- AddressClassifier: self addresses and the test-only sink exemption.

TEST(AddressClassifier, OwnPublicAddressesAreDeniedAsSelf) {
  auto self = std::make_shared<FixedSelfAddresses>(
      std::vector<IpAddress>{*IpAddress::parse("93.184.215.14"), *IpAddress::parse("2a00:1450::1"),
                             *IpAddress::parse("127.0.0.1")});
  AddressClassifier c(self);
  EXPECT_EQ(c.classify(*IpAddress::parse("93.184.215.14")), C::kSelf);
  EXPECT_EQ(c.classify(*IpAddress::parse("::ffff:93.184.215.14")), C::kSelf);
  EXPECT_EQ(c.classify(*IpAddress::parse("2a00:1450::1")), C::kSelf);
  EXPECT_EQ(c.classify(*IpAddress::parse("127.0.0.1")), C::kLoopback);  // the block wins
  EXPECT_EQ(c.classify(*IpAddress::parse("93.184.215.15")), C::kPublic);
}

TEST(AddressClassifier, NoneOfThisHostsOwnAddressesIsDialable) {
  auto source = std::make_shared<InterfaceAddressSource>(std::chrono::milliseconds(0));
  const auto addrs = source->current();
  ASSERT_NE(addrs, nullptr);
  ASSERT_FALSE(addrs->empty()) << "getifaddrs found no address (not even loopback)";
  AddressClassifier c(source);
  for (const auto& a : *addrs) EXPECT_NE(c.classify(a), C::kPublic) << a.toString();
}

TEST(AddressClassifier, TestSinkExemptsExactlyTheListedAddress) {
  auto self = std::make_shared<FixedSelfAddresses>(std::vector<IpAddress>{});
  AddressClassifier production(self);
  AddressClassifier with_sink(self, testing::makeTestSinkToken(), {*IpAddress::parse("127.0.0.7")});
  EXPECT_EQ(production.classify(*IpAddress::parse("127.0.0.7")), C::kLoopback);
  EXPECT_EQ(with_sink.classify(*IpAddress::parse("127.0.0.7")), C::kPublic);
  EXPECT_EQ(with_sink.classify(*IpAddress::parse("::ffff:127.0.0.7")), C::kPublic);
  EXPECT_EQ(with_sink.classify(*IpAddress::parse("127.0.0.8")), C::kLoopback);
  EXPECT_EQ(with_sink.classify(*IpAddress::parse("169.254.169.254")), C::kLinkLocal);
}

}  // namespace
}  // namespace airlock::egress
