#include "airlock/egress/resolver.h"

#include <algorithm>
#include <cstring>

namespace airlock::egress {

GetaddrinfoResolver::Backend GetaddrinfoResolver::systemBackend() {
  return Backend{
      [](const char* node, const addrinfo* hints, addrinfo** result) {
        return ::getaddrinfo(node, nullptr, hints, result);
      },
      [](addrinfo* list) { ::freeaddrinfo(list); },
  };
}

ResolveResult GetaddrinfoResolver::resolve(std::string_view canonical_host) {
  if (canonical_host.empty() || canonical_host.back() == '.' ||
      canonical_host.find('\0') != std::string_view::npos)
    return tl::unexpected(
        ResolveFailure{Reason::kInternalError, "resolver given a non-canonical name"});
  const std::string fqdn = std::string(canonical_host) + ".";
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_protocol = IPPROTO_TCP;
  hints.ai_flags = 0;  // no AI_NUMERICHOST tricks needed: the name is never numeric
  addrinfo* list = nullptr;
  const int rc = backend_.getaddrinfo(fqdn.c_str(), &hints, &list);
  if (rc != 0) {
    const Reason reason =
        (rc == EAI_NONAME || rc == EAI_NODATA) ? Reason::kDnsNoAnswer : Reason::kDnsError;
    std::string detail = ::gai_strerror(rc);
    if (rc == EAI_SYSTEM) detail += std::string(": ") + std::strerror(errno);
    if (list != nullptr) backend_.freeaddrinfo(list);
    return tl::unexpected(ResolveFailure{reason, std::move(detail)});
  }
  std::vector<IpAddress> out;
  for (addrinfo* it = list; it != nullptr && out.size() < kMaxAddresses; it = it->ai_next) {
    auto a = IpAddress::fromSockaddr(it->ai_addr, it->ai_addrlen);
    if (a && std::find(out.begin(), out.end(), *a) == out.end()) out.push_back(*a);
  }
  if (list != nullptr) backend_.freeaddrinfo(list);
  if (out.empty())
    return tl::unexpected(ResolveFailure{Reason::kDnsNoAnswer, "no IPv4 or IPv6 address"});
  return out;
}

}  // namespace airlock::egress
