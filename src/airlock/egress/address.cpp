#include "airlock/egress/address.h"

#include <arpa/inet.h>

#include <cstring>
#include <span>

namespace airlock::egress {

IpAddress IpAddress::v4(std::uint32_t host_order) noexcept {
  IpAddress a;
  a.family_ = Family::kV4;
  a.v4_ = host_order;
  return a;
}

IpAddress IpAddress::v6(const std::array<std::uint8_t, 16>& bytes) noexcept {
  IpAddress a;
  a.family_ = Family::kV6;
  a.v6_ = bytes;
  return a;
}

std::optional<IpAddress> IpAddress::parse(std::string_view text) {
  if (text.empty() || text.size() >= INET6_ADDRSTRLEN) return std::nullopt;
  char buf[INET6_ADDRSTRLEN] = {};
  std::memcpy(buf, text.data(), text.size());
  if (std::memchr(buf, '\0', text.size()) != nullptr) return std::nullopt;
  in_addr a4{};
  if (::inet_pton(AF_INET, buf, &a4) == 1) return v4(ntohl(a4.s_addr));
  in6_addr a6{};
  if (::inet_pton(AF_INET6, buf, &a6) == 1) {
    std::array<std::uint8_t, 16> bytes{};
    std::memcpy(bytes.data(), a6.s6_addr, 16);
    return v6(bytes);
  }
  return std::nullopt;
}

std::optional<IpAddress> IpAddress::fromSockaddr(const sockaddr* sa, socklen_t len) noexcept {
  if (sa == nullptr) return std::nullopt;
  if (sa->sa_family == AF_INET && len >= static_cast<socklen_t>(sizeof(sockaddr_in))) {
    sockaddr_in in{};
    std::memcpy(&in, sa, sizeof in);
    return v4(ntohl(in.sin_addr.s_addr));
  }
  if (sa->sa_family == AF_INET6 && len >= static_cast<socklen_t>(sizeof(sockaddr_in6))) {
    sockaddr_in6 in6{};
    std::memcpy(&in6, sa, sizeof in6);
    std::array<std::uint8_t, 16> bytes{};
    std::memcpy(bytes.data(), in6.sin6_addr.s6_addr, 16);
    return v6(bytes);
  }
  return std::nullopt;
}

std::optional<IpAddress> IpAddress::unmapped() const noexcept {
  if (isV4()) return std::nullopt;
  for (int i = 0; i < 10; ++i)
    if (v6_[i] != 0) return std::nullopt;
  if (v6_[10] != 0xff || v6_[11] != 0xff) return std::nullopt;
  return v4((std::uint32_t{v6_[12]} << 24) | (std::uint32_t{v6_[13]} << 16) |
            (std::uint32_t{v6_[14]} << 8) | std::uint32_t{v6_[15]});
}

std::string IpAddress::toString() const {
  char buf[INET6_ADDRSTRLEN] = {};
  if (isV4()) {
    in_addr a{htonl(v4_)};
    ::inet_ntop(AF_INET, &a, buf, sizeof buf);
  } else {
    in6_addr a{};
    std::memcpy(a.s6_addr, v6_.data(), 16);
    ::inet_ntop(AF_INET6, &a, buf, sizeof buf);
  }
  return buf;
}

socklen_t IpAddress::toSockaddr(std::uint16_t port, sockaddr_storage& out) const noexcept {
  std::memset(&out, 0, sizeof out);
  if (isV4()) {
    sockaddr_in in{};
    in.sin_family = AF_INET;
    in.sin_port = htons(port);
    in.sin_addr.s_addr = htonl(v4_);
    std::memcpy(&out, &in, sizeof in);
    return sizeof in;
  }
  sockaddr_in6 in6{};
  in6.sin6_family = AF_INET6;
  in6.sin6_port = htons(port);
  std::memcpy(in6.sin6_addr.s6_addr, v6_.data(), 16);
  std::memcpy(&out, &in6, sizeof in6);
  return sizeof in6;
}

std::string_view addressClassName(AddressClass c) noexcept {
  switch (c) {
    case AddressClass::kPublic:
      return "public";
    case AddressClass::kUnspecified:
      return "unspecified";
    case AddressClass::kLoopback:
      return "loopback";
    case AddressClass::kPrivate:
      return "private";
    case AddressClass::kCgnat:
      return "cgnat";
    case AddressClass::kLinkLocal:
      return "link_local";
    case AddressClass::kMetadata:
      return "metadata";
    case AddressClass::kIetfProtocol:
      return "ietf_protocol";
    case AddressClass::kDocumentation:
      return "documentation";
    case AddressClass::kBenchmark:
      return "benchmark";
    case AddressClass::kMulticast:
      return "multicast";
    case AddressClass::kBroadcast:
      return "broadcast";
    case AddressClass::kReserved:
      return "reserved";
    case AddressClass::kIpv6Embedded:
      return "ipv6_embedded";
    case AddressClass::kIpv6NonGlobal:
      return "ipv6_non_global";
    case AddressClass::kSelf:
      return "self";
  }
  return "reserved";
}

namespace {

struct V4Block {
  std::uint32_t prefix;
  int length;
  AddressClass cls;
};

constexpr std::uint32_t ip4(std::uint32_t a, std::uint32_t b, std::uint32_t c, std::uint32_t d) {
  return (a << 24) | (b << 16) | (c << 8) | d;
}

// Most specific first: the first matching block names the class.
constexpr V4Block kIpv4Denylist[] = {
    {ip4(255, 255, 255, 255), 32, AddressClass::kBroadcast},
    {ip4(168, 63, 129, 16), 32, AddressClass::kMetadata},  // Azure WireServer
    {ip4(0, 0, 0, 0), 8, AddressClass::kUnspecified},      // "this network"
    {ip4(10, 0, 0, 0), 8, AddressClass::kPrivate},
    {ip4(100, 64, 0, 0), 10, AddressClass::kCgnat},
    {ip4(127, 0, 0, 0), 8, AddressClass::kLoopback},
    {ip4(169, 254, 0, 0), 16, AddressClass::kLinkLocal},
    {ip4(172, 16, 0, 0), 12, AddressClass::kPrivate},
    {ip4(192, 0, 0, 0), 24, AddressClass::kIetfProtocol},
    {ip4(192, 0, 2, 0), 24, AddressClass::kDocumentation},  // TEST-NET-1
    {ip4(192, 31, 196, 0), 24, AddressClass::kReserved},    // AS112-v4
    {ip4(192, 52, 193, 0), 24, AddressClass::kReserved},    // AMT
    {ip4(192, 88, 99, 0), 24, AddressClass::kReserved},     // deprecated 6to4 relay
    {ip4(192, 168, 0, 0), 16, AddressClass::kPrivate},
    {ip4(192, 175, 48, 0), 24, AddressClass::kReserved},  // AS112 direct delegation
    {ip4(198, 18, 0, 0), 15, AddressClass::kBenchmark},
    {ip4(198, 51, 100, 0), 24, AddressClass::kDocumentation},  // TEST-NET-2
    {ip4(203, 0, 113, 0), 24, AddressClass::kDocumentation},   // TEST-NET-3
    {ip4(224, 0, 0, 0), 4, AddressClass::kMulticast},
    {ip4(240, 0, 0, 0), 4, AddressClass::kReserved},
};

AddressClass classifyV4(std::uint32_t a) noexcept {
  for (const auto& b : kIpv4Denylist) {
    const std::uint32_t mask = b.length == 0 ? 0 : ~std::uint32_t{0} << (32 - b.length);
    if ((a & mask) == b.prefix) return b.cls;
  }
  return AddressClass::kPublic;
}

struct V6Block {
  std::array<std::uint8_t, 16> prefix;
  int length;
  AddressClass cls;
};

bool inPrefix(const std::array<std::uint8_t, 16>& a, const std::array<std::uint8_t, 16>& p,
              int length) noexcept {
  int full = length / 8;
  for (int i = 0; i < full; ++i)
    if (a[i] != p[i]) return false;
  int rest = length % 8;
  if (rest == 0) return true;
  const std::uint8_t mask = static_cast<std::uint8_t>(0xff << (8 - rest));
  return (a[full] & mask) == (p[full] & mask);
}

using B = std::array<std::uint8_t, 16>;

// Blocks outside 2000::/3 that have a more telling class than
// ipv6_non_global; checked in order, before the 2000::/3 rule.
const V6Block kIpv6Outside[] = {
    {B{}, 128, AddressClass::kUnspecified},                                             // ::/128
    {B{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, 128, AddressClass::kLoopback},  // ::1
    {B{0x00, 0x64, 0xff, 0x9b}, 96, AddressClass::kIpv6Embedded},  // 64:ff9b::/96 NAT64
    {B{0xfc}, 7, AddressClass::kPrivate},                          // fc00::/7 ULA
    {B{0xfe, 0x80}, 10, AddressClass::kLinkLocal},                 // fe80::/10
    {B{0xff}, 8, AddressClass::kMulticast},                        // ff00::/8
};

// Denied blocks inside 2000::/3; more specific first.
const V6Block kIpv6InsideGlobal[] = {
    {B{0x20, 0x01, 0x00, 0x00}, 32, AddressClass::kIpv6Embedded},           // Teredo 2001::/32
    {B{0x20, 0x01, 0x00, 0x02, 0x00, 0x00}, 48, AddressClass::kBenchmark},  // 2001:2::/48
    {B{0x20, 0x01}, 23, AddressClass::kIetfProtocol},                       // 2001::/23
    {B{0x20, 0x01, 0x0d, 0xb8}, 32, AddressClass::kDocumentation},          // 2001:db8::/32
    {B{0x20, 0x02}, 16, AddressClass::kIpv6Embedded},                       // 6to4 2002::/16
    {B{0x26, 0x20, 0x00, 0x4f, 0x80, 0x00}, 48, AddressClass::kReserved},   // AS112-v6
    {B{0x3f, 0xff}, 20, AddressClass::kDocumentation},                      // 3fff::/20
};

}  // namespace

AddressClass classifyAddress(const IpAddress& address) noexcept {
  if (address.isV4()) return classifyV4(address.v4Value());
  if (auto inner = address.unmapped()) return classifyV4(inner->v4Value());
  const auto& bytes = address.v6Bytes();
  if ((bytes[0] & 0xe0) != 0x20) {  // outside 2000::/3
    for (const auto& b : kIpv6Outside)
      if (inPrefix(bytes, b.prefix, b.length)) return b.cls;
    return AddressClass::kIpv6NonGlobal;
  }
  for (const auto& b : kIpv6InsideGlobal)
    if (inPrefix(bytes, b.prefix, b.length)) return b.cls;
  return AddressClass::kPublic;
}

}  // namespace airlock::egress
