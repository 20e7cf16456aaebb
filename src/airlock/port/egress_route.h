// Where a sandbox's egress goes: the seam between an adapter and the egress
// proxy (spec 000, "The egress boundary").
//
// An adapter never dials anything and never sees a policy decision. When a
// sandbox is provisioned with egress enabled (EnvironmentSpec.egress in
// allowlist mode with at least one destination: the operator's yes and the
// call's yes already combined by the caller), the adapter starts an
// in-sandbox listener on 127.0.0.1:kEgressRelayPort and hands every
// connection accepted there to the route, over a channel that belongs to
// that one sandbox. The route therefore knows which sandbox is asking from
// the channel alone, never from the request. A sandbox without egress gets
// no listener and no channel: its connections fail in its own network
// namespace, which holds only a loopback interface.
//
// Two channel shapes, one per kind of adapter:
//  * attachHandoff (linux): the service end of a SOCK_SEQPACKET socketpair.
//    Each packet carries exactly one fd (SCM_RIGHTS): a connected TCP socket
//    that the sandbox's init accepted inside the sandbox's network
//    namespace. The proxy then talks to the sandbox's client directly; no
//    byte is copied inside the sandbox.
//  * attachListener (kernel-isolating adapters such as gvisor, whose sockets
//    are not host fds): a listening UNIX stream socket whose path is bound
//    into the sandbox; an in-sandbox relay connects to it once per client
//    connection and copies bytes.
// Everything received on either channel is untrusted: an fd that is not a
// connected stream socket is closed unread, and each connection's request
// is parsed and decided like any other.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "airlock/core/error.h"
#include "airlock/core/types.h"
#include "airlock/sys/unique_fd.h"

namespace airlock {

// The in-sandbox port of the egress listener; HTTPS_PROXY and friends point
// at http://127.0.0.1:<this> (core/environment_tiers.h).
inline constexpr std::uint16_t kEgressRelayPort = 3128;

// True when `egress` lets a sandbox reach anything: allowlist mode with at
// least one destination. Anything else means no listener, no channel.
inline bool egressEnabled(const EgressPolicy& egress) {
  return egress.mode == EgressMode::kAllowlist && !egress.destinations.empty();
}

// Adds the tier-2 proxy variables (both spellings of HTTPS_PROXY,
// HTTP_PROXY and ALL_PROXY) pointing at the in-sandbox listener. Adapters
// call it only for a sandbox with egress.
inline void addEgressProxyVariables(std::map<std::string, std::string>& environment) {
  const std::string url = "http://127.0.0.1:" + std::to_string(kEgressRelayPort);
  for (const char* name :
       {"HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy"})
    environment[name] = url;
}

// Keeps one sandbox's channel served. Destroying it closes the channel and
// every tunnel opened through it; adapters destroy it when the sandbox is
// destroyed.
class EgressAttachment {
 public:
  virtual ~EgressAttachment() = default;
};

class EgressRoute {
 public:
  virtual ~EgressRoute() = default;
  // `sandbox` names the requester in every decision log line; `policy` is
  // the sandbox's EnvironmentSpec.egress, fixed for the sandbox's life.
  // ConfigurationError when the policy does not compile (the adapter then
  // refuses the provision); ExecutionUnavailable when the proxy is stopped.
  virtual Result<std::unique_ptr<EgressAttachment>> attachHandoff(const EnvironmentHandle& sandbox,
                                                                  const EgressPolicy& policy,
                                                                  sys::UniqueFd channel) = 0;
  virtual Result<std::unique_ptr<EgressAttachment>> attachListener(const EnvironmentHandle& sandbox,
                                                                   const EgressPolicy& policy,
                                                                   sys::UniqueFd listener) = 0;
};

}  // namespace airlock
