#include "airlock/egress/classifier.h"

#include <ifaddrs.h>

#include <algorithm>
#include <stdexcept>

namespace airlock::egress {

InterfaceAddressSource::InterfaceAddressSource(std::chrono::milliseconds max_age)
    : max_age_(max_age), addresses_(std::make_shared<const std::vector<IpAddress>>()) {}

std::shared_ptr<const std::vector<IpAddress>> InterfaceAddressSource::current() {
  std::lock_guard lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  if (read_at_ != std::chrono::steady_clock::time_point{} && now - read_at_ < max_age_)
    return addresses_;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return addresses_;
  std::vector<IpAddress> found;
  for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr) continue;
    const socklen_t len =
        it->ifa_addr->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
    if (auto a = IpAddress::fromSockaddr(it->ifa_addr, len)) {
      if (std::find(found.begin(), found.end(), *a) == found.end()) found.push_back(*a);
    }
  }
  ::freeifaddrs(list);
  addresses_ = std::make_shared<const std::vector<IpAddress>>(std::move(found));
  read_at_ = now;
  return addresses_;
}

AddressClassifier::AddressClassifier(std::shared_ptr<SelfAddressSource> self)
    : self_(std::move(self)) {
  if (!self_) throw std::logic_error("AddressClassifier needs a SelfAddressSource");
}

AddressClassifier::AddressClassifier(std::shared_ptr<SelfAddressSource> self, const TestSinkToken&,
                                     std::vector<IpAddress> test_sinks)
    : AddressClassifier(std::move(self)) {
  test_sinks_ = std::move(test_sinks);
}

AddressClass AddressClassifier::classify(const IpAddress& address) const noexcept {
  const IpAddress plain = address.unmapped().value_or(address);
  if (std::find(test_sinks_.begin(), test_sinks_.end(), plain) != test_sinks_.end())
    return AddressClass::kPublic;
  const AddressClass fixed = classifyAddress(plain);
  if (fixed != AddressClass::kPublic) return fixed;
  try {
    const auto self = self_->current();
    for (const auto& s : *self) {
      if (s.unmapped().value_or(s) == plain) return AddressClass::kSelf;
    }
  } catch (...) {
    // Allocation failure while refreshing: fail closed.
    return AddressClass::kSelf;
  }
  return AddressClass::kPublic;
}

}  // namespace airlock::egress
