// The address check of a decision: the fixed denylist (address.h) plus the
// proxy host's own interface addresses (so the proxy never dials itself). Self
// addresses are denied on every port.
//
// Test seam. Proxy tests over loopback need the proxy to dial the test's own
// sink on 127.0.0.x, which the denylist refuses. The only way to exempt an
// address is the constructor taking a TestSinkToken. A TestSinkToken can be
// created only by airlock::egress::testing::makeTestSinkToken(), which is
// declared here but defined in tests/egress/testing (CMake target
// airlock_egress_testing), a library no production target links: production
// code that tried to call it would not link. An exemption is an exact
// address, never a range, and a classifier built without the token has none.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <vector>

#include "airlock/egress/address.h"

namespace airlock::egress {

// The current addresses of this host. Implementations are thread-safe.
class SelfAddressSource {
 public:
  virtual ~SelfAddressSource() = default;
  virtual std::shared_ptr<const std::vector<IpAddress>> current() = 0;
};

// getifaddrs(3), re-read when the last read is older than `max_age`, so an
// address added to an interface is denied at most max_age later. If
// getifaddrs fails the last good list is kept.
class InterfaceAddressSource final : public SelfAddressSource {
 public:
  explicit InterfaceAddressSource(
      std::chrono::milliseconds max_age = std::chrono::milliseconds(1000));
  std::shared_ptr<const std::vector<IpAddress>> current() override;

 private:
  std::mutex mu_;
  std::chrono::milliseconds max_age_;
  std::chrono::steady_clock::time_point read_at_{};
  std::shared_ptr<const std::vector<IpAddress>> addresses_;
};

// A fixed list (tests; a host whose addresses are configured).
class FixedSelfAddresses final : public SelfAddressSource {
 public:
  explicit FixedSelfAddresses(std::vector<IpAddress> addresses)
      : addresses_(std::make_shared<const std::vector<IpAddress>>(std::move(addresses))) {}
  std::shared_ptr<const std::vector<IpAddress>> current() override { return addresses_; }

 private:
  std::shared_ptr<const std::vector<IpAddress>> addresses_;
};

class TestSinkToken;
namespace testing {
// Defined only in tests/egress/testing (airlock_egress_testing).
TestSinkToken makeTestSinkToken();
}  // namespace testing

// Proof that the caller is a test. Not constructible outside
// testing::makeTestSinkToken().
class TestSinkToken {
 private:
  TestSinkToken() = default;
  friend TestSinkToken testing::makeTestSinkToken();
};

class AddressClassifier {
 public:
  // Production: the fixed denylist plus `self` (must not be null).
  explicit AddressClassifier(std::shared_ptr<SelfAddressSource> self);
  // Tests only: as above, but each address in `test_sinks` (exact match,
  // after unwrapping IPv4-mapped) is classified kPublic.
  AddressClassifier(std::shared_ptr<SelfAddressSource> self, const TestSinkToken& token,
                    std::vector<IpAddress> test_sinks);

  // kPublic or the class that denies `address`. Never throws.
  AddressClass classify(const IpAddress& address) const noexcept;

 private:
  std::shared_ptr<SelfAddressSource> self_;
  std::vector<IpAddress> test_sinks_;
};

}  // namespace airlock::egress
