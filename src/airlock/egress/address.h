// IP address values and the non-configurable address denylist (spec 000,
// "What the proxy does on CONNECT", the address denylist).
//
// classifyAddress() is the single classification function both enforcement
// points use (the sandbox proxy and the platform's outbound guard). It is
// not configurable: there is no allow-range and no way to remove a block.
//
// IPv4: denied if inside any block of kIpv4Denylist (address.cpp), which is
// the spec's list plus the IANA special-purpose address blocks.
// IPv6: ::ffff:0:0/96 (IPv4-mapped) is unwrapped first and judged as IPv4.
// Otherwise only 2000::/3 is allowed, minus 2001::/23, 2001:db8::/32,
// 2002::/16, 2620:4f:8000::/48 and 3fff::/20; everything outside 2000::/3 is
// denied (loopback, unspecified, ULA, link-local, site-local, multicast,
// IPv4-compatible, NAT64 and any future allocation).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace airlock::egress {

// An IPv4 or IPv6 address by value. IPv4 is stored in host order; IPv6 as
// 16 network-order bytes. No zone/scope id: a zone is never meaningful for
// an egress destination and the authority parser refuses '%'.
class IpAddress {
 public:
  enum class Family : std::uint8_t { kV4, kV6 };

  static IpAddress v4(std::uint32_t host_order) noexcept;
  static IpAddress v6(const std::array<std::uint8_t, 16>& bytes) noexcept;
  // Strict textual form only (inet_pton): dotted quad without leading zeros,
  // or an IPv6 text without brackets or zone. For tests, fakes and
  // configuration of test sinks; never used to parse a request host.
  static std::optional<IpAddress> parse(std::string_view text);
  // From a sockaddr_in/sockaddr_in6 (the resolver's answers); nullopt for
  // any other family or a short length.
  static std::optional<IpAddress> fromSockaddr(const sockaddr* sa, socklen_t len) noexcept;

  Family family() const noexcept { return family_; }
  bool isV4() const noexcept { return family_ == Family::kV4; }
  // Valid only when isV4().
  std::uint32_t v4Value() const noexcept { return v4_; }
  // Valid only when !isV4().
  const std::array<std::uint8_t, 16>& v6Bytes() const noexcept { return v6_; }

  // The IPv4 address inside ::ffff:a.b.c.d, if this is IPv4-mapped.
  std::optional<IpAddress> unmapped() const noexcept;

  // "93.184.215.14", "2606:4700:4700::1111" (inet_ntop).
  std::string toString() const;
  // A sockaddr_in/sockaddr_in6 for connect(); port in host order. Returns
  // the length to pass to connect().
  socklen_t toSockaddr(std::uint16_t port, sockaddr_storage& out) const noexcept;

  friend bool operator==(const IpAddress&, const IpAddress&) = default;
  friend std::strong_ordering operator<=>(const IpAddress&, const IpAddress&) = default;

 private:
  Family family_ = Family::kV4;
  std::uint32_t v4_ = 0;
  std::array<std::uint8_t, 16> v6_{};
};

// Why an address is denied, or kPublic when it is not. The name (without
// the "resolved_denied:" prefix) is part of the reason code.
enum class AddressClass : std::uint8_t {
  kPublic,
  kUnspecified,    // 0.0.0.0/8, ::/128
  kLoopback,       // 127.0.0.0/8, ::1/128
  kPrivate,        // 10/8, 172.16/12, 192.168/16, fc00::/7
  kCgnat,          // 100.64.0.0/10
  kLinkLocal,      // 169.254.0.0/16 (incl. 169.254.169.254), fe80::/10
  kMetadata,       // 168.63.129.16 (Azure WireServer, a public range)
  kIetfProtocol,   // 192.0.0.0/24, 2001::/23 outside Teredo and benchmarking
  kDocumentation,  // 192.0.2/24, 198.51.100/24, 203.0.113/24, 2001:db8::/32, 3fff::/20
  kBenchmark,      // 198.18.0.0/15, 2001:2::/48
  kMulticast,      // 224.0.0.0/4, ff00::/8
  kBroadcast,      // 255.255.255.255
  kReserved,       // 240/4, 192.88.99/24, AS112 and AMT blocks, 2620:4f:8000::/48
  kIpv6Embedded,   // IPv4 embedded in IPv6: 64:ff9b::/96, 2002::/16, Teredo 2001::/32
  kIpv6NonGlobal,  // any other IPv6 outside 2000::/3 (::/96, fec0::/10, ...)
  kSelf,           // an address of the proxy host's own interfaces
};

// "public", "loopback", "link_local", "ipv6_non_global", ...
std::string_view addressClassName(AddressClass c) noexcept;

// The fixed denylist only (no self addresses): kPublic or a denied class.
// Total and noexcept; IPv4-mapped addresses are unwrapped first.
AddressClass classifyAddress(const IpAddress& address) noexcept;

}  // namespace airlock::egress
