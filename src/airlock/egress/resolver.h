// Name resolution for egress decisions (spec 000: "Resolve the name at the
// proxy, using the platform's resolver"; one lookup, so the checked address is the
// dialled one, and only for names the strict parser produced).
//
// A Resolver is called at most once per decision, only with a canonical
// name that parseAuthority() produced and the policy allowed; never with raw
// request bytes and never for a refused name (red-team case B50: the proxy does not
// resolve names that are not on the allowlist).
#pragma once

#include <netdb.h>

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <vector>

#include "airlock/egress/address.h"
#include "airlock/egress/reason.h"

namespace airlock::egress {

struct ResolveFailure {
  Reason reason;       // kDnsError (SERVFAIL, timeout, system error) or kDnsNoAnswer
  std::string detail;  // gai_strerror text or similar; for logs
};

// Every address of the answer, in resolver order, without duplicates.
using ResolveResult = tl::expected<std::vector<IpAddress>, ResolveFailure>;

class Resolver {
 public:
  virtual ~Resolver() = default;
  // `canonical_host` has no trailing dot; implementations must resolve it as
  // a fully qualified name. Blocking; thread-safe. Never throws.
  virtual ResolveResult resolve(std::string_view canonical_host) = 0;
};

// The answers a single lookup may keep; a larger answer is truncated to the
// first kMaxAddresses (all of which are checked, and only they are dialled).
inline constexpr std::size_t kMaxAddresses = 32;

// getaddrinfo(3) with AF_UNSPEC, SOCK_STREAM and the name given as
// "<canonical_host>." so that resolv.conf search domains and ndots never
// expand it (pypi.org never becomes pypi.org.cluster.local). EAI_NONAME and
// EAI_NODATA, and an answer with no IPv4/IPv6 address, are kDnsNoAnswer;
// every other failure is kDnsError. Addresses other than AF_INET/AF_INET6
// are ignored.
class GetaddrinfoResolver final : public Resolver {
 public:
  // The system calls, replaceable so tests can observe the exact name and
  // hints passed and script the answers.
  struct Backend {
    std::function<int(const char* node, const addrinfo* hints, addrinfo** result)> getaddrinfo;
    std::function<void(addrinfo*)> freeaddrinfo;
  };
  static Backend systemBackend();

  GetaddrinfoResolver() : GetaddrinfoResolver(systemBackend()) {}
  explicit GetaddrinfoResolver(Backend backend) : backend_(std::move(backend)) {}

  ResolveResult resolve(std::string_view canonical_host) override;

 private:
  Backend backend_;
};

}  // namespace airlock::egress
