#include "airlock/egress/proxy.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <functional>
#include <future>
#include <map>
#include <thread>

#include "airlock/egress/request_head.h"
#include "airlock/sys/fd_passing.h"
#include "airlock/sys/io.h"

namespace airlock::egress {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using unix_stream = asio::local::stream_protocol;
using namespace asio::experimental::awaitable_operators;
using Clock = std::chrono::steady_clock;
constexpr auto kNoThrow = asio::experimental::as_tuple(asio::use_awaitable);

tcp::endpoint toEndpoint(const IpAddress& address, std::uint16_t port) {
  const IpAddress a = address.unmapped().value_or(address);
  if (a.isV4()) return {asio::ip::address_v4(a.v4Value()), port};
  asio::ip::address_v6::bytes_type bytes;
  std::copy(a.v6Bytes().begin(), a.v6Bytes().end(), bytes.begin());
  return {asio::ip::address_v6(bytes), port};
}

const char* statusText(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 403:
      return "Forbidden";
    case 405:
      return "Method Not Allowed";
    case 500:
      return "Internal Server Error";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    default:
      return "Error";
  }
}

// The refusal a client sees: the status and the reason code, never an
// address (reason.h).
std::string refusalResponse(int status, std::string_view code) {
  const std::string body = "egress refused: " + std::string(code) + "\n";
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + statusText(status) + "\r\n";
  out += "X-Airlock-Egress-Reason: " + std::string(code) + "\r\n";
  if (status == 405) out += "Allow: CONNECT\r\n";
  out += "Content-Type: text/plain\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n\r\n" + body;
  return out;
}

std::string firstLine(std::string_view bytes) {
  const auto end = bytes.find("\r\n");
  return std::string(bytes.substr(0, std::min<std::size_t>(end, 200)));
}

struct Listener {
  Listener(ProxyIdentity w, std::shared_ptr<const Policy> p)
      : who(std::move(w)), policy(std::move(p)) {}
  ListenerId id = 0;
  ProxyIdentity who;
  std::shared_ptr<const Policy> policy;
  std::unique_ptr<tcp::acceptor> tcp_acceptor;
  std::unique_ptr<unix_stream::acceptor> unix_acceptor;
  std::unique_ptr<asio::posix::stream_descriptor> handoff;  // adoptHandoff's channel
  std::string unix_path;  // empty for an adopted listener: nothing to unlink
  std::uint16_t port = 0;
  bool closed = false;                                         // I/O thread only
  std::map<std::uint64_t, std::function<void()>> connections;  // I/O thread only
};

struct TunnelState {
  Clock::time_point last_activity = Clock::now();
};

class ScopeExit {
 public:
  explicit ScopeExit(std::function<void()> f) : f_(std::move(f)) {}
  ~ScopeExit() { f_(); }
  ScopeExit(const ScopeExit&) = delete;
  ScopeExit& operator=(const ScopeExit&) = delete;

 private:
  std::function<void()> f_;
};

class ProxyImpl final : public EgressProxy {
 public:
  explicit ProxyImpl(ProxyOptions options)
      : opt_(std::move(options)),
        pool_(opt_.limits.resolver_threads),
        work_(asio::make_work_guard(ioc_)),
        thread_([this] { ioc_.run(); }) {}

  ~ProxyImpl() override { stop(); }

  Result<ListenerId> listenUnix(const std::string& path, ProxyIdentity who,
                                std::shared_ptr<const Policy> policy) override {
    if (!policy) return fail(ErrorCode::kConfigurationError, "listener needs a policy");
    if (path.empty() || path.size() >= sizeof(sockaddr_un::sun_path))
      return fail(ErrorCode::kConfigurationError, "UNIX socket path is empty or too long");
    auto l = std::make_shared<Listener>(std::move(who), std::move(policy));
    l->unix_path = path;
    l->unix_acceptor = std::make_unique<unix_stream::acceptor>(ioc_);
    boost::system::error_code ec;
    const unix_stream::endpoint ep(path);
    l->unix_acceptor->open(ep.protocol(), ec);
    if (!ec) l->unix_acceptor->bind(ep, ec);
    if (!ec) l->unix_acceptor->listen(asio::socket_base::max_listen_connections, ec);
    if (ec)
      return failErrno(ErrorCode::kExecutionUnavailable, "cannot listen on UNIX socket " + path,
                       ec.value());
    return start(l);
  }

  Result<ListenerId> listenTcp(const IpAddress& address, std::uint16_t port, ProxyIdentity who,
                               std::shared_ptr<const Policy> policy) override {
    if (!policy) return fail(ErrorCode::kConfigurationError, "listener needs a policy");
    if (classifyAddress(address) != AddressClass::kLoopback)
      return fail(ErrorCode::kConfigurationError,
                  "the proxy listens on TCP only on a loopback address, not " + address.toString());
    auto l = std::make_shared<Listener>(std::move(who), std::move(policy));
    l->tcp_acceptor = std::make_unique<tcp::acceptor>(ioc_);
    boost::system::error_code ec;
    const tcp::endpoint ep = toEndpoint(address, port);
    l->tcp_acceptor->open(ep.protocol(), ec);
    if (!ec) l->tcp_acceptor->set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) l->tcp_acceptor->bind(ep, ec);
    if (!ec) l->tcp_acceptor->listen(asio::socket_base::max_listen_connections, ec);
    if (!ec) l->port = l->tcp_acceptor->local_endpoint(ec).port();
    if (ec)
      return failErrno(ErrorCode::kExecutionUnavailable,
                       "cannot listen on " + address.toString() + ":" + std::to_string(port),
                       ec.value());
    return start(l);
  }

  Result<ListenerId> adoptListener(sys::UniqueFd listener, ProxyIdentity who,
                                   std::shared_ptr<const Policy> policy) override {
    const Adoption what{SOCK_STREAM, true, "listener needs a policy",
                        "adoptListener needs a listening UNIX stream socket",
                        "adopt UNIX listener"};
    return adopt(std::move(listener), std::move(who), std::move(policy), what,
                 [this](Listener& l, int fd, boost::system::error_code& ec) {
                   l.unix_acceptor = std::make_unique<unix_stream::acceptor>(ioc_);
                   l.unix_acceptor->assign(unix_stream(), fd, ec);
                 });
  }

  Result<ListenerId> adoptHandoff(sys::UniqueFd channel, ProxyIdentity who,
                                  std::shared_ptr<const Policy> policy) override {
    const Adoption what{SOCK_SEQPACKET, false, "handoff channel needs a policy",
                        "adoptHandoff needs a SOCK_SEQPACKET UNIX socket", "adopt handoff channel"};
    return adopt(std::move(channel), std::move(who), std::move(policy), what,
                 [this](Listener& l, int fd, boost::system::error_code& ec) {
                   l.handoff = std::make_unique<asio::posix::stream_descriptor>(ioc_);
                   l.handoff->assign(fd, ec);
                 });
  }

  std::uint16_t boundPort(ListenerId id) const override {
    std::lock_guard lock(mu_);
    auto it = listeners_.find(id);
    return it == listeners_.end() ? 0 : it->second->port;
  }

  void closeListener(ListenerId id) override {
    std::shared_ptr<Listener> l;
    {
      std::lock_guard lock(mu_);
      auto it = listeners_.find(id);
      if (it == listeners_.end()) return;
      l = it->second;
      listeners_.erase(it);
    }
    onIoThread([this, l] { closeOnIo(*l); });
  }

  std::size_t activeConnections() const override { return active_.load(); }

  void stop() override {
    if (stopped_.exchange(true)) return;
    std::map<ListenerId, std::shared_ptr<Listener>> all;
    {
      std::lock_guard lock(mu_);
      all.swap(listeners_);
    }
    onIoThread([this, &all] {
      for (auto& [id, l] : all) closeOnIo(*l);
    });
    // Every socket is closed: the coroutines finish on their own (a lookup
    // in flight finishes first), then run() returns.
    work_.reset();
    if (thread_.joinable()) thread_.join();
    pool_.join();
  }

 private:
  Result<ListenerId> start(const std::shared_ptr<Listener>& l) {
    {
      std::lock_guard lock(mu_);
      if (stopped_) return fail(ErrorCode::kExecutionUnavailable, "egress proxy is stopped");
      l->id = ++next_listener_;
      listeners_[l->id] = l;
    }
    if (l->tcp_acceptor)
      asio::co_spawn(ioc_, acceptLoop(l, *l->tcp_acceptor), asio::detached);
    else if (l->unix_acceptor)
      asio::co_spawn(ioc_, acceptLoop(l, *l->unix_acceptor), asio::detached);
    else
      asio::co_spawn(ioc_, handoffLoop(l), asio::detached);
    return l->id;
  }

  // Runs `f` on the I/O thread and waits for it (inline when already there).
  void onIoThread(std::function<void()> f) {
    if (ioc_.get_executor().running_in_this_thread() || !thread_.joinable()) {
      f();
      return;
    }
    std::packaged_task<void()> task(std::move(f));
    auto done = task.get_future();
    asio::post(ioc_, [&task] { task(); });
    done.wait();
  }

  void closeOnIo(Listener& l) {
    l.closed = true;
    boost::system::error_code ignored;
    if (l.tcp_acceptor) l.tcp_acceptor->close(ignored);
    if (l.unix_acceptor) {
      l.unix_acceptor->close(ignored);
      if (!l.unix_path.empty()) ::unlink(l.unix_path.c_str());
    }
    if (l.handoff) l.handoff->close(ignored);
    const auto closers = l.connections;  // closing does not erase; the session does
    for (const auto& [id, close] : closers) close();
  }

  template <class Acceptor>
  asio::awaitable<void> acceptLoop(std::shared_ptr<Listener> l, Acceptor& acceptor) {
    asio::steady_timer backoff(ioc_);
    for (;;) {
      auto [ec, socket] = co_await acceptor.async_accept(kNoThrow);
      if (l->closed || !acceptor.is_open()) co_return;
      if (ec) {
        // EMFILE and friends: back off instead of spinning.
        backoff.expires_after(std::chrono::milliseconds(50));
        co_await backoff.async_wait(kNoThrow);
        continue;
      }
      if constexpr (std::is_same_v<Acceptor, tcp::acceptor>) {
        boost::system::error_code ignored;
        socket.set_option(tcp::no_delay(true), ignored);
      }
      asio::co_spawn(ioc_, session(l, std::move(socket)), asio::detached);
    }
  }

  // Reads the handoff channel: one fd per packet. Only a connected TCP
  // socket becomes a session; the sender is inside a sandbox and anything
  // else it passes is closed unused.
  asio::awaitable<void> handoffLoop(std::shared_ptr<Listener> l) {
    for (;;) {
      auto [ec] =
          co_await l->handoff->async_wait(asio::posix::descriptor_base::wait_read, kNoThrow);
      if (l->closed || !l->handoff->is_open()) co_return;
      if (ec) co_return;
      for (;;) {
        char byte = 0;
        iovec iov{&byte, 1};
        // Up to kMaxPassedFds kept, so that a packet of one fd is told
        // from a packet of several (any beyond are closed by the receive).
        sys::ReceivedFds received;
        const ssize_t n = sys::receiveWithFds(l->handoff->native_handle(), &iov, 1,
                                              sys::kMaxPassedFds, received, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (n <= 0) co_return;  // end of file: the sandbox is gone; tunnels stay until closed
        const int fd = received.fds[0];
        const bool one = received.count == 1;
        int domain = 0;
        if (one && isSocket(fd, AF_INET, SOCK_STREAM, false))
          domain = AF_INET;
        else if (one && isSocket(fd, AF_INET6, SOCK_STREAM, false))
          domain = AF_INET6;
        if (domain == 0) {
          for (int k = 0; k < received.count; ++k) ::close(received.fds[k]);
          continue;
        }
        tcp::socket socket(ioc_);
        boost::system::error_code aec;
        socket.assign(domain == AF_INET ? tcp::v4() : tcp::v6(), fd, aec);
        if (aec) {
          ::close(fd);
          continue;
        }
        socket.non_blocking(true, aec);
        socket.set_option(tcp::no_delay(true), aec);
        asio::co_spawn(ioc_, session(l, std::move(socket)), asio::detached);
      }
    }
  }

  // What adopting one kind of UNIX socket checks, and what it says when a
  // check fails.
  struct Adoption {
    int type;                  // SOCK_STREAM or SOCK_SEQPACKET
    bool listening;            // must the socket be listening
    const char* needs_policy;  // the refusal of a null policy
    const char* wrong_socket;  // the refusal of any other fd
    const char* assigning;     // the context of a failed asio assign
  };

  // The one path of adoptListener and adoptHandoff: check the policy and the
  // socket, let `assign` wrap the fd in the listener's asio object, and start
  // it. The fd is released to asio only once assigned.
  template <class Assign>
  Result<ListenerId> adopt(sys::UniqueFd fd, ProxyIdentity who,
                           std::shared_ptr<const Policy> policy, const Adoption& what,
                           Assign assign) {
    if (!policy) return fail(ErrorCode::kConfigurationError, what.needs_policy);
    if (!isSocket(fd.get(), AF_UNIX, what.type, what.listening))
      return fail(ErrorCode::kConfigurationError, what.wrong_socket);
    auto l = std::make_shared<Listener>(std::move(who), std::move(policy));
    boost::system::error_code ec;
    assign(*l, fd.get(), ec);
    if (ec) return failErrno(ErrorCode::kExecutionUnavailable, what.assigning, ec.value());
    (void)fd.release();
    return start(l);
  }

  // True when `fd` is a socket of this family and type, listening or not as
  // asked.
  static bool isSocket(int fd, int family, int type, bool listening) {
    int value = 0;
    socklen_t len = sizeof value;
    if (fd < 0 || ::getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &value, &len) != 0 || value != family)
      return false;
    len = sizeof value;
    if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &value, &len) != 0 || value != type) return false;
    len = sizeof value;
    if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &value, &len) != 0) return false;
    return (value != 0) == listening;
  }

  void log(const Listener& l, const Decision& d, TunnelOutcome outcome,
           std::optional<IpAddress> dialed, std::string error, std::string_view request,
           Clock::time_point started) {
    DecisionRecord record{
        l.who,
        d,
        outcome,
        dialed,
        std::move(error),
        firstLine(request),
        std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - started)};
    try {
      opt_.log->write(formatDecisionLine(record, std::chrono::system_clock::now()));
    } catch (...) {
      // A failing log must not take the proxy down; the refusal still stands.
    }
    if (opt_.observer) {
      try {
        opt_.observer->onDecision(record);
      } catch (...) {
        // Metrics are best effort, like the log.
      }
    }
  }

  // Why a listener's connections are being closed, for the log.
  std::string whyCancelled() const {
    return stopped_.load() ? "the proxy stopped" : "the sandbox's listener was closed";
  }

  // What reading a request head found: the bytes read (the head and any
  // bytes after it), and the head's size, or why there is no head.
  struct HeadRead {
    std::string buf;
    std::size_t head_size = 0;
    const char* client_error = nullptr;  // why the client sent no head
    std::optional<RequestRefusal> refused_early;
  };

  // Each read is checked at once: bytes that cannot begin an HTTP/1.x head
  // with CRLF line ends (a SOCKS greeting, a bare LF) are refused without
  // waiting for more.
  template <class Socket>
  asio::awaitable<HeadRead> readHead(Listener& l, Socket& client, asio::steady_timer& timer) {
    HeadRead out;
    std::string& buf = out.buf;
    const auto head_deadline = Clock::now() + opt_.limits.head_timeout;
    for (;;) {
      const std::size_t had = buf.size();
      buf.resize(kMaxRequestHead);
      timer.expires_at(head_deadline);
      const auto room = asio::buffer(buf.data() + had, kMaxRequestHead - had);
      auto read = co_await (client.async_read_some(room, kNoThrow) || timer.async_wait(kNoThrow));
      const std::size_t got = read.index() == 0 ? std::get<1>(std::get<0>(read)) : 0;
      buf.resize(had + got);
      if (l.closed) {
        out.client_error = "the listener closed before the request head was complete";
        break;
      }
      if (read.index() == 1) {
        out.client_error = "no complete request head in time";
        break;
      }
      if (std::get<0>(std::get<0>(read))) {
        out.client_error = "connection ended before the request head";
        break;
      }
      const auto end = buf.find("\r\n\r\n", had < 3 ? 0 : had - 3);
      if (end != std::string::npos) {
        out.head_size = end + 4;
        break;
      }
      if ((out.refused_early = refuseEarly(buf))) break;
      if (buf.size() >= kMaxRequestHead) {
        out.refused_early = RequestRefusal{
            Reason::kMalformedRequest,
            "request head larger than " + std::to_string(kMaxRequestHead) + " bytes"};
        break;
      }
    }
    co_return out;
  }

  // What dialling the checked addresses came to: the address connected, or
  // the last error and whether the deadline ran out; `cancelled` when the
  // listener closed under the dial (already logged).
  struct DialResult {
    std::optional<IpAddress> dialed;
    std::string error;
    bool timed_out = false;
    bool cancelled = false;
  };

  asio::awaitable<DialResult> dialChecked(Listener& l, tcp::socket& upstream,
                                          asio::steady_timer& timer, const Decision& d,
                                          const std::string& head, Clock::time_point started) {
    DialResult out;
    const auto deadline = Clock::now() + opt_.limits.connect_timeout;
    for (const IpAddress& a : d.dialAddresses()) {
      if (Clock::now() >= deadline) {
        out.timed_out = true;
        break;
      }
      timer.expires_at(deadline);
      const tcp::endpoint endpoint = toEndpoint(a, d.port);
      auto r = co_await (upstream.async_connect(endpoint, kNoThrow) || timer.async_wait(kNoThrow));
      if (l.closed) {
        // Closing the listener closed `upstream` under the dial.
        log(l, d, TunnelOutcome::kDialCancelled, std::nullopt,
            a.toString() + ": dial cancelled: " + whyCancelled(), head, started);
        out.cancelled = true;
        co_return out;
      }
      if (r.index() == 0 && !std::get<0>(std::get<0>(r))) {
        out.dialed = a;
        break;
      }
      if (r.index() == 1) {
        out.timed_out = true;
        out.error = a.toString() + ": connect timeout";
      } else {
        out.error = a.toString() + ": " + std::get<0>(std::get<0>(r)).message();
      }
      boost::system::error_code ignored;
      upstream.close(ignored);
      if (out.timed_out) break;
    }
    co_return out;
  }

  template <class Socket>
  asio::awaitable<void> session(std::shared_ptr<Listener> l, Socket client) {
    const auto started = Clock::now();
    const std::uint64_t conn = ++next_connection_;
    ++active_;
    tcp::socket upstream(ioc_);
    auto close_both = [&client, &upstream] {
      boost::system::error_code ignored;
      client.close(ignored);
      upstream.close(ignored);
    };
    l->connections[conn] = close_both;
    ScopeExit done([this, &l, conn] {
      l->connections.erase(conn);
      --active_;
    });
    if (l->closed) co_return;

    const bool listener_full = l->connections.size() > opt_.limits.max_connections_per_listener;
    if (listener_full || active_.load() > opt_.limits.max_connections) {
      Decision d;
      d.reason = Reason::kInternalError;
      log(*l, d, TunnelOutcome::kOverCapacity, std::nullopt,
          listener_full ? "too many connections from this sandbox" : "too many connections", "",
          started);
      const std::string response = refusalResponse(503, "over_capacity");
      co_await asio::async_write(client, asio::buffer(response), kNoThrow);
      co_return;
    }

    // 1. The request head, bounded in size and time.
    asio::steady_timer timer(ioc_);
    HeadRead read = co_await readHead(*l, client, timer);
    const std::string& buf = read.buf;
    if (std::optional<RequestRefusal>& refused_early = read.refused_early) {
      Decision d;
      d.reason = refused_early->reason;
      d.detail = std::move(refused_early->detail);
      log(*l, d, TunnelOutcome::kRefused, std::nullopt, d.detail, buf, started);
      const std::string response = refusalResponse(httpStatusFor(d.reason), d.reasonCode());
      co_await asio::async_write(client, asio::buffer(response), kNoThrow);
      co_return;
    }
    if (read.client_error != nullptr) {
      if (!buf.empty()) {
        Decision d;
        d.reason = Reason::kMalformedRequest;
        log(*l, d, TunnelOutcome::kClientError, std::nullopt, read.client_error, buf, started);
      }
      co_return;
    }
    const std::size_t head_size = read.head_size;
    const std::string head = buf.substr(0, head_size);
    const std::string early = buf.substr(head_size);

    // 2. The decision, off the I/O thread (the resolver blocks).
    // g++ 12 destroys non-trivial temporaries of a co_await full-expression
    // twice (a lambda capturing a shared_ptr freed the policy under ASan), so
    // every co_await below names its non-trivial operands first and this
    // lambda captures only pointers.
    const Policy* policy = l->policy.get();
    const auto decide_on_pool = [this, policy, &head]() -> asio::awaitable<Decision> {
      co_return decideRequest(*policy, head, *opt_.resolver, *opt_.classifier);
    };
    Decision d = co_await asio::co_spawn(pool_, decide_on_pool, asio::use_awaitable);
    if (l->closed) {
      // The sandbox ended while its request was decided: no one is left to
      // answer, but the decision still gets its line.
      if (d.allowed())
        log(*l, d, TunnelOutcome::kDialCancelled, std::nullopt, "not dialled: " + whyCancelled(),
            head, started);
      else
        log(*l, d, TunnelOutcome::kRefused, std::nullopt, d.detail, head, started);
      co_return;
    }
    if (!d.allowed()) {
      log(*l, d, TunnelOutcome::kRefused, std::nullopt, d.detail, head, started);
      const std::string response = refusalResponse(httpStatusFor(d.reason), d.reasonCode());
      co_await asio::async_write(client, asio::buffer(response), kNoThrow);
      co_return;
    }

    // 3. Dial exactly the checked addresses, in order, within one deadline.
    DialResult dial = co_await dialChecked(*l, upstream, timer, d, head, started);
    if (dial.cancelled) co_return;
    std::optional<IpAddress>& dialed = dial.dialed;
    std::string& error = dial.error;
    const bool timed_out = dial.timed_out;
    if (!dialed) {
      if (error.empty()) error = "connect timeout";
      log(*l, d, TunnelOutcome::kConnectFailed, std::nullopt, error, head, started);
      const std::string response = refusalResponse(timed_out ? 504 : 502, "connect_failed");
      co_await asio::async_write(client, asio::buffer(response), kNoThrow);
      co_return;
    }
    {
      boost::system::error_code ignored;
      upstream.set_option(tcp::no_delay(true), ignored);
    }
    log(*l, d, TunnelOutcome::kTunnel, dialed, "", head, started);

    // 4. The tunnel.
    static constexpr std::string_view kEstablished = "HTTP/1.1 200 Connection established\r\n\r\n";
    auto [wec, wn] = co_await asio::async_write(client, asio::buffer(kEstablished), kNoThrow);
    if (wec) co_return;
    if (!early.empty()) {
      auto [eec, en] = co_await asio::async_write(upstream, asio::buffer(early), kNoThrow);
      if (eec) co_return;
    }
    TunnelState state;
    co_await ((relay(client, upstream, state, close_both) &&
               relay(upstream, client, state, close_both)) ||
              watchdog(state, close_both));
  }

  // One direction of a tunnel. First choice: splice(2) through a pipe of
  // buffer_bytes (the bounded buffer), so the bytes never enter user space;
  // a kernel or socket type that cannot splice falls back to copying
  // through one buffer_bytes buffer.
  template <class From, class To>
  asio::awaitable<void> relay(From& from, To& to, TunnelState& state,
                              const std::function<void()>& close_both) {
    if (co_await spliceRelay(from, to, state, close_both)) co_return;
    std::unique_ptr<char[]> data(new char[opt_.limits.buffer_bytes]);
    for (;;) {
      auto [ec, n] = co_await from.async_read_some(
          asio::buffer(data.get(), opt_.limits.buffer_bytes), kNoThrow);
      if (ec) {
        if (ec == asio::error::eof) {
          boost::system::error_code ignored;
          to.shutdown(asio::socket_base::shutdown_send, ignored);
        } else {
          close_both();
        }
        co_return;
      }
      state.last_activity = Clock::now();
      auto [wec, wn] = co_await asio::async_write(to, asio::buffer(data.get(), n), kNoThrow);
      if (wec) {
        close_both();
        co_return;
      }
      state.last_activity = Clock::now();
    }
  }

  // The splice relay. Returns false, having moved nothing, when splice is
  // unavailable (the caller copies instead). Same semantics as the copy
  // loop: end of file half-closes `to` once the pipe is drained, any error
  // closes both sockets, every move counts as activity for the idle timer.
  // Sockets are re-checked after every await: close_both() (the other
  // direction, the watchdog, closeListener) may have closed them.
  template <class From, class To>
  asio::awaitable<bool> spliceRelay(From& from, To& to, TunnelState& state,
                                    const std::function<void()>& close_both) {
    // splice(2) to a socket cannot take MSG_NOSIGNAL: a peer that went away
    // raises SIGPIPE, so this (I/O) thread blocks it and discards it below.
    static thread_local const bool sigpipe_blocked = [] {
      sigset_t set;
      sigemptyset(&set);
      sigaddset(&set, SIGPIPE);
      return ::pthread_sigmask(SIG_BLOCK, &set, nullptr) == 0;
    }();
    if (!sigpipe_blocked) co_return false;
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) co_return false;
    const sys::UniqueFd pipe_r(fds[0]), pipe_w(fds[1]);
    // Best effort: without CAP_SYS_RESOURCE the size is capped by
    // fs.pipe-max-size and the user's fs.pipe-user-pages-soft; use what we got.
    (void)::fcntl(pipe_w.get(), F_SETPIPE_SZ,
                  static_cast<int>(std::min<std::size_t>(opt_.limits.buffer_bytes, 1 << 20)));
    const int size = ::fcntl(pipe_w.get(), F_GETPIPE_SZ);
    if (size <= 0) co_return false;
    const std::size_t capacity = static_cast<std::size_t>(size);
    boost::system::error_code ec;
    from.native_non_blocking(true, ec);
    if (!ec) to.native_non_blocking(true, ec);
    if (ec) co_return false;
    constexpr unsigned kFlags = SPLICE_F_MOVE | SPLICE_F_NONBLOCK;
    auto fail = [&close_both] {
      sigset_t set;
      sigemptyset(&set);
      sigaddset(&set, SIGPIPE);
      const timespec zero{0, 0};
      while (::sigtimedwait(&set, nullptr, &zero) > 0) {
      }
      close_both();
    };
    std::size_t in_pipe = 0;
    bool eof = false;
    bool moved = false;
    for (;;) {
      if (!from.is_open() || !to.is_open()) co_return true;
      if (eof && in_pipe == 0) {
        to.shutdown(asio::socket_base::shutdown_send, ec);
        co_return true;
      }
      bool would_block_in = eof || in_pipe == capacity;
      if (!would_block_in) {
        const ssize_t n =
            sys::spliceSome(from.native_handle(), pipe_w.get(), capacity - in_pipe, kFlags);
        if (n > 0) {
          in_pipe += static_cast<std::size_t>(n);
          moved = true;
          state.last_activity = Clock::now();
        } else if (n == 0) {
          eof = true;
          continue;
        } else if (errno == EAGAIN) {
          would_block_in = true;
        } else {
          if (!moved && (errno == EINVAL || errno == ENOSYS)) co_return false;
          fail();
          co_return true;
        }
      }
      if (in_pipe > 0) {
        const ssize_t n = sys::spliceSome(pipe_r.get(), to.native_handle(), in_pipe, kFlags);
        if (n > 0) {
          in_pipe -= static_cast<std::size_t>(n);
          moved = true;
          state.last_activity = Clock::now();
          continue;
        }
        if (n < 0 && errno != EAGAIN) {
          if (!moved && (errno == EINVAL || errno == ENOSYS)) co_return false;
          fail();
          co_return true;
        }
        if (!would_block_in) continue;  // reading can still make progress
        // Full pipe (or nothing more to read) and a full socket: wait to write.
        auto [wec] = co_await to.async_wait(asio::socket_base::wait_write, kNoThrow);
        if (wec) {
          if (from.is_open() && to.is_open()) fail();
          co_return true;
        }
        continue;
      }
      if (would_block_in) {
        auto [rec] = co_await from.async_wait(asio::socket_base::wait_read, kNoThrow);
        if (rec) {
          if (from.is_open() && to.is_open()) fail();
          co_return true;
        }
      }
    }
  }

  asio::awaitable<void> watchdog(TunnelState& state, const std::function<void()>& close_both) {
    const auto idle = opt_.limits.idle_timeout;
    const auto tick = std::clamp<std::chrono::milliseconds>(idle / 4, std::chrono::milliseconds(10),
                                                            std::chrono::milliseconds(1000));
    asio::steady_timer timer(ioc_);
    for (;;) {
      timer.expires_after(tick);
      auto [ec] = co_await timer.async_wait(kNoThrow);
      if (ec) co_return;  // the tunnel ended and cancelled the watchdog
      if (Clock::now() - state.last_activity >= idle) {
        close_both();
        co_return;
      }
    }
  }

  ProxyOptions opt_;
  mutable std::mutex mu_;
  std::map<ListenerId, std::shared_ptr<Listener>> listeners_;
  ListenerId next_listener_ = 0;
  std::atomic<std::uint64_t> next_connection_{0};
  std::atomic<std::size_t> active_{0};
  std::atomic<bool> stopped_{false};
  // Declared after everything the coroutines use, so it is destroyed first.
  asio::io_context ioc_;
  asio::thread_pool pool_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::thread thread_;
};

}  // namespace

Result<std::unique_ptr<EgressProxy>> EgressProxy::create(ProxyOptions options) {
  if (!options.resolver || !options.classifier || !options.log)
    return fail(ErrorCode::kConfigurationError,
                "egress proxy needs a resolver, a classifier and a log");
  const auto& l = options.limits;
  if (l.head_timeout.count() <= 0 || l.connect_timeout.count() <= 0 ||
      l.idle_timeout.count() <= 0 || l.buffer_bytes == 0 || l.max_connections == 0 ||
      l.max_connections_per_listener == 0 || l.resolver_threads == 0)
    return fail(ErrorCode::kConfigurationError, "egress proxy limits must be positive");
  return std::unique_ptr<EgressProxy>(new ProxyImpl(std::move(options)));
}

}  // namespace airlock::egress
