// The sandbox egress proxy (spec 000, "What the proxy does on CONNECT"). Boost.Asio stays in
// proxy.cpp.
//
// Per connection: read the request head (at most kMaxRequestHead bytes,
// within head_timeout; bytes that cannot begin an HTTP/1.x head with CRLF
// line ends, a SOCKS greeting or a bare LF, are answered 400
// malformed_request at once: refuseEarly() in request_head.h), decide
// with decideRequest() on the resolver pool (one lookup, every address
// checked), then either answer the refusal
// (status from httpStatusFor(), header "X-Airlock-Egress-Reason: <code>",
// Connection: close) or connect to the decision's dialAddresses() in order,
// never to a name and never after a second lookup, within connect_timeout
// for all attempts together. On success it answers "200 Connection
// established", forwards any bytes the client sent after the head, and
// relays both directions with one bounded buffer of buffer_bytes per
// direction (a pipe that splice(2) moves the bytes through without copying
// them to user space; a heap buffer if a socket cannot splice),
// half-closing each side on EOF and closing both after idle_timeout without
// traffic in either direction. Every decision writes one line to the
// DecisionLog (proxy_log.h), including refusals, connect failures, and an
// allowed CONNECT whose dial closeListener() or stop() cut short (outcome
// dial_cancelled).
//
// Listeners. Each listener belongs to one sandbox: its ProxyIdentity and the
// Policy it was provisioned with are fixed at listen time (a running sandbox
// keeps its policy; the proxy has no admin interface on any listener).
// listenUnix and adoptListener serve a per-sandbox UNIX socket bound into
// the sandbox (an in-sandbox relay connects once per client connection);
// adoptHandoff serves a per-sandbox handoff channel on which the sandbox's
// init passes connections it accepted inside the sandbox, one fd per packet
// (port/egress_route.h); listenTcp on a loopback address serves tests and
// benchmarks.
// closeListener closes the socket and every tunnel opened through it.
//
// Threads: one I/O thread runs every socket; blocking resolution runs on a
// pool of resolver_threads. All public methods are thread-safe.
//
// Testing seam: loopback sinks are reachable only when the AddressClassifier
// was built with a TestSinkToken (classifier.h); nothing here weakens the
// address check.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "airlock/core/error.h"
#include "airlock/egress/classifier.h"
#include "airlock/egress/policy.h"
#include "airlock/egress/proxy_log.h"
#include "airlock/egress/resolver.h"
#include "airlock/sys/unique_fd.h"

namespace airlock::egress {

struct ProxyLimits {
  std::chrono::milliseconds head_timeout{10'000};
  std::chrono::milliseconds connect_timeout{10'000};
  std::chrono::milliseconds idle_timeout{300'000};
  // Per direction per tunnel; the pipe is capped at 1 MiB (fs.pipe-max-size).
  // 1 MiB moves bulk data ~1.3x faster than 64 KiB or 256 KiB
  // (docs/benchmarks.md). Worst case, with every tunnel stalled in both
  // directions: 2 x buffer_bytes x max_connections of kernel pipe memory
  // (1 GiB at the defaults); lower either where that matters.
  std::size_t buffer_bytes = 1024 * 1024;
  std::size_t max_connections = 512;  // beyond it: 503, over_capacity
  // Per listener (one sandbox): so that one sandbox cannot take every
  // connection of a shared proxy from the others. Beyond it: 503,
  // over_capacity, for that sandbox only.
  std::size_t max_connections_per_listener = 64;
  std::size_t resolver_threads = 4;
};

// Metrics hook (spec 000, "Tracked metrics";
// egress_decisions_total{point, verdict, reason, tenant} and
// egress_resolved_denied_total{class}): told about every decision the proxy
// logs, refusals, connect failures and malformed heads included, so the
// service can count them by reason without this library depending on a
// metrics library. Called on a proxy thread right after the log line is
// written, with the same record; the record and its references live only
// for the call. Implementations must be thread-safe and must not block
// (they run on the I/O thread); an exception is swallowed.
class ProxyObserver {
 public:
  virtual ~ProxyObserver() = default;
  virtual void onDecision(const DecisionRecord& record) = 0;
};

struct ProxyOptions {
  std::shared_ptr<Resolver> resolver;                   // required
  std::shared_ptr<const AddressClassifier> classifier;  // required
  std::shared_ptr<DecisionLog> log;                     // required
  std::shared_ptr<ProxyObserver> observer;              // optional
  ProxyLimits limits;
};

using ListenerId = std::uint64_t;

class EgressProxy {
 public:
  // ConfigurationError if a required option is missing or a limit is zero.
  // The I/O thread starts here; stop() or the destructor ends it.
  static Result<std::unique_ptr<EgressProxy>> create(ProxyOptions options);
  virtual ~EgressProxy() = default;

  // Binds and listens on a UNIX stream socket at `path` (which must not
  // exist; mode 0600 is the caller's umask business). ExecutionUnavailable
  // with errno on failure.
  virtual Result<ListenerId> listenUnix(const std::string& path, ProxyIdentity who,
                                        std::shared_ptr<const Policy> policy) = 0;
  // Binds `address:port` (port 0 picks one); `address` must be loopback.
  // Returns the id; boundPort() gives the port.
  virtual Result<ListenerId> listenTcp(const IpAddress& address, std::uint16_t port,
                                       ProxyIdentity who, std::shared_ptr<const Policy> policy) = 0;
  // Serves an already listening UNIX stream socket (the adapter bound it
  // where the sandbox can reach it). The proxy owns the fd from here on.
  // ConfigurationError when it is not a listening stream socket.
  virtual Result<ListenerId> adoptListener(sys::UniqueFd listener, ProxyIdentity who,
                                           std::shared_ptr<const Policy> policy) = 0;
  // Serves a handoff channel: a SOCK_SEQPACKET socket whose every packet
  // carries one fd by SCM_RIGHTS. An fd that is a connected TCP stream
  // socket becomes a client connection like an accepted one; anything else
  // (a listener, a datagram socket, a file, several fds) is closed unused.
  // The channel's end of file stops the reading, not the open tunnels;
  // closeListener ends both. ConfigurationError when the fd is not a
  // SOCK_SEQPACKET UNIX socket.
  virtual Result<ListenerId> adoptHandoff(sys::UniqueFd channel, ProxyIdentity who,
                                          std::shared_ptr<const Policy> policy) = 0;
  virtual std::uint16_t boundPort(ListenerId id) const = 0;
  // Stops accepting on `id` and closes its tunnels. Unknown ids are ignored.
  virtual void closeListener(ListenerId id) = 0;
  // Connections currently open (reading a head, dialling or tunnelling).
  virtual std::size_t activeConnections() const = 0;
  // Closes every listener and tunnel and joins the threads. Idempotent.
  virtual void stop() = 0;
};

}  // namespace airlock::egress
