// The CONNECT proxy over loopback only. A FakeDns maps test names to
// 127.0.0.x; the proxy's classifier exempts exactly the sink addresses the
// test owns (TestSinkToken, classifier.h), so every other loopback address,
// including the proxy's own listener, stays refused.
#include "airlock/egress/proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "airlock/egress/authority.h"
#include "airlock/egress/sandbox_route.h"
#include "airlock/sys/unique_fd.h"
#include "egress_printers.h"
#include "fake_dns.h"

namespace airlock::egress {
namespace {

using sys::UniqueFd;
using namespace std::chrono_literals;

// Every socket operation in these tests is bounded by this receive/send
// timeout, so a broken proxy fails a test instead of hanging it.
constexpr int kIoTimeoutSeconds = 5;

void setTimeouts(int fd) {
  timeval tv{kIoTimeoutSeconds, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

UniqueFd connectTcp(const char* ip, std::uint16_t port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  setTimeouts(fd.get());
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  ::inet_pton(AF_INET, ip, &sa.sin_addr);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) return UniqueFd();
  return fd;
}

UniqueFd connectUnix(const std::string& path) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  setTimeouts(fd.get());
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::strncpy(sa.sun_path, path.c_str(), sizeof sa.sun_path - 1);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) return UniqueFd();
  return fd;
}

bool sendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

// Reads until "\r\n\r\n" (the proxy's response head); returns it.
std::string readHead(int fd) {
  std::string out;
  char c;
  while (out.size() < 8192 && out.find("\r\n\r\n") == std::string::npos) {
    if (::recv(fd, &c, 1, 0) != 1) break;
    out.push_back(c);
  }
  return out;
}

std::string readExactly(int fd, std::size_t n) {
  std::string out(n, '\0');
  std::size_t got = 0;
  while (got < n) {
    const ssize_t r = ::recv(fd, out.data() + got, n - got, 0);
    if (r <= 0) break;
    got += static_cast<std::size_t>(r);
  }
  out.resize(got);
  return out;
}

// 0 at orderly EOF, -1 on error or timeout, else bytes read.
ssize_t readSome(int fd) {
  char buf[4096];
  return ::recv(fd, buf, sizeof buf, 0);
}

// A TCP echo server on a loopback address; counts accepted connections.
class EchoSink {
 public:
  explicit EchoSink(const char* ip) {
    listener_ = UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    int one = 1;
    ::setsockopt(listener_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    ::inet_pton(AF_INET, ip, &sa.sin_addr);
    if (::bind(listener_.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
        ::listen(listener_.get(), 64) != 0)
      throw std::runtime_error("sink bind failed");
    socklen_t len = sizeof sa;
    ::getsockname(listener_.get(), reinterpret_cast<sockaddr*>(&sa), &len);
    port_ = ntohs(sa.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~EchoSink() {
    ::shutdown(listener_.get(), SHUT_RDWR);
    thread_.join();
    for (auto& t : workers_) t.join();
  }
  std::uint16_t port() const { return port_; }
  int accepted() const { return accepted_.load(); }

 private:
  void serve() {
    for (;;) {
      const int c = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) return;
      ++accepted_;
      workers_.emplace_back([c] {
        UniqueFd fd(c);
        setTimeouts(c);
        char buf[65536];
        for (;;) {
          const ssize_t n = ::recv(c, buf, sizeof buf, 0);
          if (n <= 0) break;
          if (!sendAll(c, std::string_view(buf, static_cast<std::size_t>(n)))) break;
        }
        ::shutdown(c, SHUT_WR);
      });
    }
  }
  UniqueFd listener_;
  std::uint16_t port_ = 0;
  std::atomic<int> accepted_{0};
  std::thread thread_;
  std::vector<std::thread> workers_;
};

class CapturingLog : public DecisionLog {
 public:
  void write(std::string_view line) override {
    std::lock_guard lock(mu_);
    lines_.push_back(nlohmann::json::parse(line));
    cv_.notify_all();
  }
  // Waits until at least n lines were written (bounded); returns them.
  std::vector<nlohmann::json> waitFor(std::size_t n) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(kIoTimeoutSeconds), [&] { return lines_.size() >= n; });
    return lines_;
  }
  std::vector<nlohmann::json> lines() {
    std::lock_guard lock(mu_);
    return lines_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<nlohmann::json> lines_;
};

// Passes every lookup to `inner`, except that once hold() was called the
// next lookup waits (bounded) until release(): a decision held in flight.
class GatedResolver : public Resolver {
 public:
  explicit GatedResolver(std::shared_ptr<Resolver> inner) : inner_(std::move(inner)) {}
  ResolveResult resolve(std::string_view host) override {
    {
      std::unique_lock lock(mu_);
      if (held_) {
        entered_ = true;
        cv_.notify_all();
        cv_.wait_for(lock, std::chrono::seconds(kIoTimeoutSeconds), [&] { return !held_; });
      }
    }
    return inner_->resolve(host);
  }
  void hold() {
    std::lock_guard lock(mu_);
    held_ = true;
  }
  // True once a lookup is waiting at the gate (bounded wait).
  bool waitEntered() {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(kIoTimeoutSeconds), [&] { return entered_; });
  }
  void release() {
    std::lock_guard lock(mu_);
    held_ = false;
    cv_.notify_all();
  }

 private:
  std::shared_ptr<Resolver> inner_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false;
  bool entered_ = false;
};

class ProxyTest : public ::testing::Test {
 protected:
  void SetUp() override { startProxy(ProxyLimits{}); }

  void startProxy(ProxyLimits limits) {
    proxy.reset();
    dns = std::make_shared<testing::FakeDns>();
    dns->add("sink.example.com.", {"127.0.0.2"});
    dns->add("sink6.example.com.", {"::ffff:127.0.0.2"});
    dns->add("private.example.com.", {"10.0.0.5"});
    dns->add("mixed.example.com.", {"127.0.0.2", "169.254.169.254"});
    dns->add("loop.example.com.", {"127.0.0.1"});
    dns->add("closed.example.com.", {"127.0.0.3"});
    dns->add("stall.example.com.", {"127.0.0.4"});
    log = std::make_shared<CapturingLog>();
    auto classifier = std::make_shared<AddressClassifier>(
        std::make_shared<FixedSelfAddresses>(std::vector<IpAddress>{}),
        testing::makeTestSinkToken(),
        std::vector<IpAddress>{*IpAddress::parse("127.0.0.2"), *IpAddress::parse("127.0.0.3"),
                               *IpAddress::parse("127.0.0.4")});
    gate = std::make_shared<GatedResolver>(std::make_shared<GetaddrinfoResolver>(dns->backend()));
    ProxyOptions o;
    o.resolver = gate;
    o.classifier = classifier;
    o.log = log;
    o.observer = observer;
    o.limits = limits;
    auto created = EgressProxy::create(std::move(o));
    ASSERT_TRUE(created.has_value()) << created.error().message();
    proxy = std::move(*created);
    const std::string yaml =
        "egress:\n  mode: allowlist\n  destinations:\n    - host: \"*.example.com\"\n      ports: "
        "[" +
        std::to_string(sink.port()) + "]\n";
    policy = *loadEgressPolicy(yaml, "proxy-test");
    auto id = proxy->listenTcp(*IpAddress::parse("127.0.0.1"), 0, who, policy);
    ASSERT_TRUE(id.has_value()) << id.error().message();
    listener = *id;
    port = proxy->boundPort(listener);
    ASSERT_NE(port, 0);
  }

  std::string connectTo(const std::string& target) {
    return "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n";
  }
  std::string sinkTarget(const char* name = "sink.example.com") {
    return std::string(name) + ":" + std::to_string(sink.port());
  }

  EchoSink sink{"127.0.0.2"};
  ProxyIdentity who{"env-1", "tenant-a", "run-7"};
  std::shared_ptr<testing::FakeDns> dns;
  std::shared_ptr<GatedResolver> gate;
  std::shared_ptr<CapturingLog> log;
  std::shared_ptr<ProxyObserver> observer;  // set before startProxy() to observe
  std::shared_ptr<const Policy> policy;
  std::unique_ptr<EgressProxy> proxy;
  ListenerId listener = 0;
  std::uint16_t port = 0;
};

TEST_F(ProxyTest, TunnelsToTheAllowedDestinationAndLogsIt) {
  UniqueFd c = connectTcp("127.0.0.1", port);
  ASSERT_TRUE(c.valid());
  ASSERT_TRUE(sendAll(c.get(), connectTo(sinkTarget())));
  EXPECT_EQ(readHead(c.get()), "HTTP/1.1 200 Connection established\r\n\r\n");
  std::string payload(1 << 20, '\0');
  for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i * 131 + 7);
  std::thread writer([&] { sendAll(c.get(), payload); });
  const std::string echoed = readExactly(c.get(), payload.size());
  writer.join();
  EXPECT_TRUE(echoed == payload) << "echo differs; got " << echoed.size() << " bytes";

  const auto lines = log->waitFor(1);
  ASSERT_EQ(lines.size(), 1u);
  const auto& l = lines[0];
  EXPECT_EQ(l["event"], "egress_decision");
  EXPECT_EQ(l["point"], "proxy");
  EXPECT_EQ(l["environment"], "env-1");
  EXPECT_EQ(l["tenant"], "tenant-a");
  EXPECT_EQ(l["run"], "run-7");
  EXPECT_EQ(l["host"], "sink.example.com");
  EXPECT_EQ(l["port"], sink.port());
  EXPECT_EQ(l["addresses"], nlohmann::json::array({"127.0.0.2"}));
  EXPECT_EQ(l["address"], "127.0.0.2");
  EXPECT_EQ(l["verdict"], "allow");
  EXPECT_EQ(l["reason"], "allowed");
  EXPECT_EQ(l["outcome"], "tunnel");
  EXPECT_TRUE(l["time"].is_string());
  EXPECT_EQ(dns->lookupCount(), 1u);
}

TEST_F(ProxyTest, EveryRefusalIsAnsweredWithItsReasonAndLogged) {
  struct Case {
    std::string request;
    int status;
    std::string reason;
  };
  const std::string sp = std::to_string(sink.port());
  const std::vector<Case> cases = {
      {connectTo("evil.test:" + sp), 403, "host_not_allowed"},
      {connectTo("sink.example.com:443"), 403, "port_not_allowed"},
      {connectTo("private.example.com:" + sp), 403, "resolved_denied:private"},
      {connectTo("mixed.example.com:" + sp), 403, "resolved_denied:link_local"},
      {connectTo("loop.example.com:" + sp), 403, "resolved_denied:loopback"},
      {connectTo("169.254.169.254:80"), 403, "ip_literal"},
      {connectTo("127.0.0.2:" + sp), 403, "ip_literal"},
      {"CONNECT sink.example.com:" + sp + " HTTP/1.1\r\nHost: evil.test\r\n\r\n", 400,
       "host_header_mismatch"},
      {"GET http://sink.example.com:" + sp + "/ HTTP/1.1\r\n\r\n", 405,
       "absolute_form_not_supported"},
      {"GET / HTTP/1.1\r\nHost: sink.example.com\r\n\r\n", 405, "origin_form_not_supported"},
      {"GET https://sink.example.com/ HTTP/1.1\r\n\r\n", 405, "https_absolute_form"},
      {"CONNECT pypi.org@sink.example.com:" + sp + " HTTP/1.1\r\n\r\n", 400, "malformed_authority"},
      {"HELLO\r\n\r\n", 400, "malformed_request"},
  };
  for (const auto& c : cases) {
    UniqueFd fd = connectTcp("127.0.0.1", port);
    ASSERT_TRUE(fd.valid());
    ASSERT_TRUE(sendAll(fd.get(), c.request));
    const std::string head = readHead(fd.get());
    EXPECT_TRUE(head.starts_with("HTTP/1.1 " + std::to_string(c.status) + " "))
        << c.request << head;
    EXPECT_NE(head.find("X-Airlock-Egress-Reason: " + c.reason + "\r\n"), std::string::npos)
        << c.request << head;
    EXPECT_EQ(head.find("10.0.0.5"), std::string::npos) << "a resolved address leaked: " << head;
    EXPECT_EQ(head.find("169.254"), std::string::npos) << head;
  }
  const auto lines = log->waitFor(cases.size());
  ASSERT_EQ(lines.size(), cases.size());
  for (std::size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(lines[i]["reason"], cases[i].reason) << i;
    EXPECT_EQ(lines[i]["verdict"], "deny") << i;
    EXPECT_EQ(lines[i]["outcome"], "refused") << i;
    EXPECT_EQ(lines[i]["run"], "run-7") << i;
    EXPECT_TRUE(lines[i]["address"].is_null()) << i;
  }
  // The private answer is in the operator's log with its class.
  EXPECT_EQ(lines[2]["addresses"], nlohmann::json::array({"10.0.0.5"}));
  EXPECT_EQ(lines[2]["denied"][0]["class"], "private");
  EXPECT_EQ(sink.accepted(), 0) << "a refused request reached the sink";
  // Only names the policy allowed were looked up.
  for (const auto& q : dns->queries()) EXPECT_TRUE(q.ends_with(".example.com.")) << q;
  EXPECT_EQ(dns->lookupCount(), 3u);  // private, mixed and loop; no other name was resolved
}

TEST_F(ProxyTest, BytesSentWithTheHeadAreForwardedAndHalfCloseWorks) {
  UniqueFd c = connectTcp("127.0.0.1", port);
  ASSERT_TRUE(c.valid());
  ASSERT_TRUE(sendAll(c.get(), connectTo(sinkTarget()) + "early bytes"));
  EXPECT_EQ(readHead(c.get()), "HTTP/1.1 200 Connection established\r\n\r\n");
  ASSERT_TRUE(sendAll(c.get(), " and more"));
  ASSERT_EQ(::shutdown(c.get(), SHUT_WR), 0);
  EXPECT_EQ(readExactly(c.get(), 20), "early bytes and more");
  EXPECT_EQ(readSome(c.get()), 0) << "EOF from the sink was not relayed";
}

TEST_F(ProxyTest, ResolvesOnceAndDialsTheCheckedAddress) {
  // A rebinding name: the first answer is the sink, every later one private.
  dns->addSequence("rebind.example.com.", {{"127.0.0.2"}, {"10.0.0.5"}});
  UniqueFd c = connectTcp("127.0.0.1", port);
  ASSERT_TRUE(sendAll(c.get(), connectTo(sinkTarget("rebind.example.com")) + "r"));
  EXPECT_EQ(readHead(c.get()), "HTTP/1.1 200 Connection established\r\n\r\n");
  EXPECT_EQ(readExactly(c.get(), 1), "r");
  EXPECT_EQ(dns->lookupCount(), 1u);
  EXPECT_EQ(sink.accepted(), 1);
  UniqueFd again = connectTcp("127.0.0.1", port);
  ASSERT_TRUE(sendAll(again.get(), connectTo(sinkTarget("rebind.example.com"))));
  EXPECT_NE(readHead(again.get()).find("X-Airlock-Egress-Reason: resolved_denied:private"),
            std::string::npos);
  const auto lines = log->waitFor(2);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["address"], "127.0.0.2");
  EXPECT_EQ(lines[1]["addresses"], nlohmann::json::array({"10.0.0.5"}));
  EXPECT_EQ(sink.accepted(), 1);
}

TEST_F(ProxyTest, MappedAnswerIsDialledAsIpv4) {
  UniqueFd c = connectTcp("127.0.0.1", port);
  ASSERT_TRUE(sendAll(c.get(), connectTo(sinkTarget("sink6.example.com")) + "x"));
  EXPECT_EQ(readHead(c.get()), "HTTP/1.1 200 Connection established\r\n\r\n");
  EXPECT_EQ(readExactly(c.get(), 1), "x");
}

TEST_F(ProxyTest, ConnectFailureIs502AndLogged) {
  UniqueFd c = connectTcp("127.0.0.1", port);
  ASSERT_TRUE(sendAll(c.get(), connectTo(sinkTarget("closed.example.com"))));
  const std::string head = readHead(c.get());
  EXPECT_TRUE(head.starts_with("HTTP/1.1 502 ")) << head;
  EXPECT_NE(head.find("X-Airlock-Egress-Reason: connect_failed"), std::string::npos);
  const auto lines = log->waitFor(1);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["verdict"], "allow");
  EXPECT_EQ(lines[0]["outcome"], "connect_failed");
  EXPECT_TRUE(lines[0]["error"].is_string());
}

TEST_F(ProxyTest, OversizedAndSilentHeadsAreClosed) {
  ProxyLimits limits;
  limits.head_timeout = 200ms;
  startProxy(limits);
  UniqueFd big = connectTcp("127.0.0.1", port);
  const std::string junk = "CONNECT sink.example.com:1 HTTP/1.1\r\nX: " + std::string(9000, 'a');
  sendAll(big.get(), junk);
  EXPECT_TRUE(readHead(big.get()).starts_with("HTTP/1.1 400 "));

  UniqueFd silent = connectTcp("127.0.0.1", port);
  ASSERT_TRUE(sendAll(silent.get(), "CONNECT sink.exa"));
  EXPECT_EQ(readSome(silent.get()), 0) << "the proxy kept a slow head open";
  const auto lines = log->waitFor(2);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["reason"], "malformed_request");
  EXPECT_EQ(lines[1]["outcome"], "client_error");
  EXPECT_EQ(lines[1]["request"], "CONNECT sink.exa");
}

TEST_F(ProxyTest, IdleTunnelsAreClosed) {
  ProxyLimits limits;
  limits.idle_timeout = 200ms;
  startProxy(limits);
  UniqueFd c = connectTcp("127.0.0.1", port);
  ASSERT_TRUE(sendAll(c.get(), connectTo(sinkTarget())));
  EXPECT_EQ(readHead(c.get()), "HTTP/1.1 200 Connection established\r\n\r\n");
  const auto before = std::chrono::steady_clock::now();
  EXPECT_EQ(readSome(c.get()), 0) << "idle tunnel was not closed";
  EXPECT_LT(std::chrono::steady_clock::now() - before, std::chrono::seconds(kIoTimeoutSeconds));
}

TEST_F(ProxyTest, OverCapacityIsRefused) {
  ProxyLimits limits;
  limits.max_connections = 1;
  startProxy(limits);
  UniqueFd first = connectTcp("127.0.0.1", port);
  ASSERT_TRUE(sendAll(first.get(), connectTo(sinkTarget())));
  EXPECT_EQ(readHead(first.get()), "HTTP/1.1 200 Connection established\r\n\r\n");
  UniqueFd second = connectTcp("127.0.0.1", port);
  EXPECT_TRUE(readHead(second.get()).starts_with("HTTP/1.1 503 "));
  const auto lines = log->waitFor(2);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1]["outcome"], "over_capacity");
}

TEST_F(ProxyTest, UnixListenerCarriesItsOwnIdentityAndPolicy) {
  const std::string path = "/tmp/airlock-egress-test-" + std::to_string(::getpid()) + ".sock";
  ::unlink(path.c_str());
  auto deny = Policy::denyAll();
  auto id = proxy->listenUnix(path, ProxyIdentity{"env-2", "tenant-b", "run-9"}, policy);
  ASSERT_TRUE(id.has_value()) << id.error().message();
  auto deny_id = proxy->listenUnix(path + ".deny", ProxyIdentity{"env-3", "t", "r"}, deny);
  ASSERT_TRUE(deny_id.has_value());

  UniqueFd c = connectUnix(path);
  ASSERT_TRUE(c.valid());
  ASSERT_TRUE(sendAll(c.get(), connectTo(sinkTarget()) + "u"));
  EXPECT_EQ(readHead(c.get()), "HTTP/1.1 200 Connection established\r\n\r\n");
  EXPECT_EQ(readExactly(c.get(), 1), "u");

  UniqueFd d = connectUnix(path + ".deny");
  ASSERT_TRUE(sendAll(d.get(), connectTo(sinkTarget())));
  EXPECT_NE(readHead(d.get()).find("X-Airlock-Egress-Reason: mode_deny"), std::string::npos);

  const auto lines = log->waitFor(2);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["environment"], "env-2");
  EXPECT_EQ(lines[1]["environment"], "env-3");
  EXPECT_EQ(lines[1]["reason"], "mode_deny");

  // Closing the listener closes its tunnels and its socket file.
  proxy->closeListener(*id);
  EXPECT_EQ(readSome(c.get()), 0);
  EXPECT_FALSE(connectUnix(path).valid());
  EXPECT_NE(::access(path.c_str(), F_OK), 0);
  proxy->closeListener(*deny_id);
}

// Sends `fds` in one packet on a handoff channel, as a sandbox's init does.
bool sendFds(int channel, std::vector<int> fds) {
  char byte = 'c';
  iovec iov{&byte, 1};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  std::vector<char> control(CMSG_SPACE(fds.size() * sizeof(int)));
  msg.msg_control = control.data();
  msg.msg_controllen = control.size();
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(fds.size() * sizeof(int));
  std::memcpy(CMSG_DATA(c), fds.data(), fds.size() * sizeof(int));
  return ::sendmsg(channel, &msg, MSG_NOSIGNAL) == 1;
}

// A connected loopback TCP pair: {client end, server end}, as a sandbox's
// client and init's accepted socket would be.
std::pair<UniqueFd, UniqueFd> tcpPair() {
  UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof sa;
  if (::bind(listener.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
      ::listen(listener.get(), 1) != 0 ||
      ::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&sa), &len) != 0)
    return {};
  UniqueFd client = connectTcp("127.0.0.1", ntohs(sa.sin_port));
  UniqueFd server(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  return {std::move(client), std::move(server)};
}

TEST_F(ProxyTest, HandoffChannelServesPassedConnectionsAsItsSandbox) {
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair), 0);
  UniqueFd sandbox_end(pair[0]);
  auto id =
      proxy->adoptHandoff(UniqueFd(pair[1]), ProxyIdentity{"env-h", "tenant-h", "run-h"}, policy);
  ASSERT_TRUE(id.has_value()) << id.error().message();

  // Junk first: a pipe, a listening socket, two sockets in one packet. Each
  // is closed unused and decides nothing; the channel keeps working.
  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  UniqueFd pipe_read(pipe_fds[0]), pipe_write(pipe_fds[1]);
  ASSERT_TRUE(sendFds(sandbox_end.get(), {pipe_read.get()}));
  UniqueFd listening(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_EQ(::listen(listening.get(), 1), 0);
  ASSERT_TRUE(sendFds(sandbox_end.get(), {listening.get()}));
  auto [c1, s1] = tcpPair();
  auto [c2, s2] = tcpPair();
  ASSERT_TRUE(c1.valid() && s1.valid() && c2.valid() && s2.valid());
  ASSERT_TRUE(sendFds(sandbox_end.get(), {s1.get(), s2.get()}));
  s1.reset();
  s2.reset();
  // The proxy closed its copies: the clients see end of file, no response.
  EXPECT_EQ(readSome(c1.get()), 0);
  EXPECT_EQ(readSome(c2.get()), 0);

  // A real connection: tunnelled, and logged as the channel's sandbox.
  auto [client, server] = tcpPair();
  ASSERT_TRUE(client.valid() && server.valid());
  ASSERT_TRUE(sendFds(sandbox_end.get(), {server.get()}));
  server.reset();
  ASSERT_TRUE(sendAll(client.get(), connectTo(sinkTarget()) + "h"));
  EXPECT_EQ(readHead(client.get()), "HTTP/1.1 200 Connection established\r\n\r\n");
  EXPECT_EQ(readExactly(client.get(), 1), "h");
  auto [refused, refused_server] = tcpPair();
  ASSERT_TRUE(sendFds(sandbox_end.get(), {refused_server.get()}));
  refused_server.reset();
  ASSERT_TRUE(sendAll(refused.get(), connectTo("169.254.169.254:80")));
  EXPECT_NE(readHead(refused.get()).find("X-Airlock-Egress-Reason: ip_literal"), std::string::npos);

  const auto lines = log->waitFor(2);
  ASSERT_EQ(lines.size(), 2u) << "junk fds must decide nothing";
  EXPECT_EQ(lines[0]["environment"], "env-h");
  EXPECT_EQ(lines[0]["tenant"], "tenant-h");
  EXPECT_EQ(lines[0]["run"], "run-h");
  EXPECT_EQ(lines[0]["reason"], "allowed");
  EXPECT_EQ(lines[1]["reason"], "ip_literal");

  // The sandbox going away (channel EOF) leaves its open tunnel working;
  // closing the listener ends it.
  sandbox_end.reset();
  ASSERT_TRUE(sendAll(client.get(), "x"));
  EXPECT_EQ(readExactly(client.get(), 1), "x");
  proxy->closeListener(*id);
  EXPECT_EQ(readSome(client.get()), 0);
}

TEST_F(ProxyTest, AdoptRefusesTheWrongKindOfSocket) {
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  UniqueFd other(pair[1]);
  auto handoff = proxy->adoptHandoff(UniqueFd(pair[0]), who, policy);
  ASSERT_FALSE(handoff.has_value());
  EXPECT_EQ(handoff.error().code, ErrorCode::kConfigurationError);
  auto listener_id = proxy->adoptListener(std::move(other), who, policy);  // not listening
  ASSERT_FALSE(listener_id.has_value());
  EXPECT_EQ(listener_id.error().code, ErrorCode::kConfigurationError);
}

TEST_F(ProxyTest, AdoptedUnixListenerServesItsSandbox) {
  const std::string path = "/tmp/airlock-egress-adopt-" + std::to_string(::getpid()) + ".sock";
  ::unlink(path.c_str());
  UniqueFd l(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::strncpy(sa.sun_path, path.c_str(), sizeof sa.sun_path - 1);
  ASSERT_EQ(::bind(l.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  ASSERT_EQ(::listen(l.get(), 8), 0);
  auto id = proxy->adoptListener(std::move(l), ProxyIdentity{"env-u", "t", "r"}, policy);
  ASSERT_TRUE(id.has_value()) << id.error().message();
  UniqueFd c = connectUnix(path);
  ASSERT_TRUE(sendAll(c.get(), connectTo(sinkTarget())));
  EXPECT_EQ(readHead(c.get()), "HTTP/1.1 200 Connection established\r\n\r\n");
  EXPECT_EQ(log->waitFor(1)[0]["environment"], "env-u");
  proxy->closeListener(*id);
  EXPECT_EQ(readSome(c.get()), 0);
  ::unlink(path.c_str());  // an adopted listener's path is its owner's to remove
}

TEST_F(ProxyTest, StopClosesEverythingAndIsIdempotent) {
  UniqueFd c = connectTcp("127.0.0.1", port);
  ASSERT_TRUE(sendAll(c.get(), connectTo(sinkTarget())));
  EXPECT_EQ(readHead(c.get()), "HTTP/1.1 200 Connection established\r\n\r\n");
  proxy->stop();
  EXPECT_EQ(readSome(c.get()), 0);
  EXPECT_EQ(proxy->activeConnections(), 0u);
  EXPECT_FALSE(connectTcp("127.0.0.1", port).valid());
  proxy->stop();
  EXPECT_FALSE(proxy->listenTcp(*IpAddress::parse("127.0.0.1"), 0, who, policy).has_value());
}

// More bytes than any pipe or socket buffer holds, both ways at once: the
// relay's backpressure (splice through a bounded pipe, or the copy
// fallback) must keep every byte in order, and the client's half-close
// must reach the sink only after the last byte.
TEST_F(ProxyTest, LargeTransfersKeepEveryByteInOrderBothWays) {
  UniqueFd c = connectTcp("127.0.0.1", port);
  ASSERT_TRUE(c.valid());
  ASSERT_TRUE(sendAll(c.get(), connectTo(sinkTarget())));
  ASSERT_EQ(readHead(c.get()).rfind("HTTP/1.1 200", 0), 0u);
  std::string data(16 << 20, '\0');
  for (std::size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<char>((i * 2654435761u) >> 13);
  bool sent = false;
  std::thread writer([&] {
    sent = sendAll(c.get(), data);
    ::shutdown(c.get(), SHUT_WR);
  });
  std::string back;
  back.reserve(data.size());
  char buf[65536];
  for (;;) {
    const ssize_t n = ::recv(c.get(), buf, sizeof buf, 0);
    if (n <= 0) {
      EXPECT_EQ(n, 0) << "the tunnel must end in an orderly EOF";
      break;
    }
    back.append(buf, static_cast<std::size_t>(n));
  }
  writer.join();
  EXPECT_TRUE(sent);
  ASSERT_EQ(back.size(), data.size());
  EXPECT_TRUE(back == data) << "bytes changed or reordered in the tunnel";
}

// Counts decisions by reason code, as a metrics adapter would.
class CountingObserver : public ProxyObserver {
 public:
  void onDecision(const DecisionRecord& record) override {
    std::lock_guard lock(mu_);
    ++by_reason_[record.decision.reasonCode() + "/" +
                 std::string(tunnelOutcomeName(record.outcome))];
    tenants_.insert(record.who.tenant_id);
    ++total_;
    cv_.notify_all();
  }
  // Waits (bounded) until n decisions were observed; returns the counts.
  std::map<std::string, int> waitFor(int n) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(kIoTimeoutSeconds), [&] { return total_ >= n; });
    return by_reason_;
  }
  std::set<std::string> tenants() {
    std::lock_guard lock(mu_);
    return tenants_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int total_ = 0;
  std::map<std::string, int> by_reason_;
  std::set<std::string> tenants_;
};

TEST_F(ProxyTest, ObserverSeesEveryLoggedDecisionWithItsReason) {
  auto counting = std::make_shared<CountingObserver>();
  observer = counting;
  startProxy(ProxyLimits{});
  for (const std::string& target :
       {sinkTarget(), std::string("evil.example.org:443"), sinkTarget("private.example.com")}) {
    UniqueFd c = connectTcp("127.0.0.1", port);
    ASSERT_TRUE(c.valid());
    ASSERT_TRUE(sendAll(c.get(), connectTo(target)));
    EXPECT_FALSE(readHead(c.get()).empty()) << target;
  }
  const std::map<std::string, int> expected = {{"allowed/tunnel", 1},
                                               {"host_not_allowed/refused", 1},
                                               {"resolved_denied:private/refused", 1}};
  EXPECT_EQ(counting->waitFor(3), expected);
  EXPECT_EQ(log->lines().size(), 3u);
  EXPECT_EQ(counting->tenants(), std::set<std::string>{"tenant-a"});
}

// Bytes that cannot begin an HTTP/1.x head with CRLF line ends are answered
// 400 at once and logged: the head timeout is a minute here, longer than
// every socket timeout of the test, so waiting it out would fail the read.
TEST_F(ProxyTest, NonHttpBytesAreAnswered400AtOnceAndLogged) {
  ProxyLimits limits;
  limits.head_timeout = std::chrono::seconds(60);
  startProxy(limits);
  struct Case {
    std::string bytes;
    std::string error_start;
  };
  const std::vector<Case> cases = {
      {std::string("\x05\x01\x00", 3), "a SOCKS5 greeting"},
      {std::string("\x04\x01\x01\xbb\x7f\x00\x00\x01user\0", 13), "a SOCKS4 greeting"},
      {"CONNECT " + sinkTarget() + " HTTP/1.1\n", "bare LF"},
      {"GET / HTTP/1.1\nHost: sink.example.com\n\n", "bare LF"},
      {"CONNECT " + sinkTarget() + " HTTP/1.1\r\nHost: x\n", "bare LF"},
  };
  for (const auto& c : cases) {
    UniqueFd fd = connectTcp("127.0.0.1", port);
    ASSERT_TRUE(fd.valid());
    ASSERT_TRUE(sendAll(fd.get(), c.bytes));
    const std::string head = readHead(fd.get());
    EXPECT_TRUE(head.starts_with("HTTP/1.1 400 ")) << sanitizeForLog(c.bytes) << " -> " << head;
    EXPECT_NE(head.find("X-Airlock-Egress-Reason: malformed_request\r\n"), std::string::npos)
        << head;
    EXPECT_EQ(readExactly(fd.get(), 34), "egress refused: malformed_request\n");
    EXPECT_EQ(readSome(fd.get()), 0) << "the connection is closed after the answer";
  }
  const auto lines = log->waitFor(cases.size());
  ASSERT_EQ(lines.size(), cases.size());
  for (std::size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(lines[i]["reason"], "malformed_request") << i;
    EXPECT_EQ(lines[i]["verdict"], "deny") << i;
    EXPECT_EQ(lines[i]["outcome"], "refused") << i;
    ASSERT_TRUE(lines[i]["error"].is_string()) << i;
    EXPECT_EQ(lines[i]["error"].get<std::string>().rfind(cases[i].error_start, 0), 0u)
        << lines[i].dump();
  }
  EXPECT_EQ(lines[0]["request"], "\\x05\\x01\\x00");
  EXPECT_EQ(sink.accepted(), 0);
  EXPECT_EQ(dns->lookupCount(), 0u) << "nothing was decided for bytes that are not a request";
}

// A loopback address:port whose SYNs are dropped: a listener with a backlog
// of 0 whose one accept-queue slot is taken, so a dial to it stays in
// SYN_SENT until its timeout.
class StalledSink {
 public:
  StalledSink(const char* ip, std::uint16_t port) {
    listener_ = UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    int one = 1;
    ::setsockopt(listener_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    ::inet_pton(AF_INET, ip, &sa.sin_addr);
    if (::bind(listener_.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
        ::listen(listener_.get(), 0) != 0)
      throw std::runtime_error("stalled sink bind failed");
    filler_ = connectTcp(ip, port);
    if (!filler_.valid()) throw std::runtime_error("stalled sink filler failed");
  }

 private:
  UniqueFd listener_;
  UniqueFd filler_;
};

// Sees the TCP SYNs to ip:port on lo (a packet socket; we run as root), so a
// test knows that a dial is in flight.
class SynWatch {
 public:
  SynWatch(const char* ip, std::uint16_t port) : port_(port) {
    ::inet_pton(AF_INET, ip, &ip_);
    fd_ = UniqueFd(::socket(AF_PACKET, SOCK_DGRAM | SOCK_CLOEXEC, htons(ETH_P_IP)));
    if (!fd_.valid()) return;
    sockaddr_ll sll{};
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(ETH_P_IP);
    sll.sll_ifindex = static_cast<int>(::if_nametoindex("lo"));
    if (::bind(fd_.get(), reinterpret_cast<sockaddr*>(&sll), sizeof sll) != 0) fd_.reset();
    if (fd_.valid()) setTimeouts(fd_.get());
  }
  bool valid() const { return fd_.valid(); }
  // True once a SYN (without ACK) to ip:port was seen; false after the
  // test's I/O timeout.
  bool waitForSyn() {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(kIoTimeoutSeconds);
    unsigned char p[2048];
    while (std::chrono::steady_clock::now() < deadline) {
      const ssize_t n = ::recv(fd_.get(), p, sizeof p, 0);
      if (n < 0) return false;
      const std::size_t ihl = static_cast<std::size_t>(p[0] & 0x0f) * 4;
      if (n < 20 || (p[0] >> 4) != 4 || p[9] != IPPROTO_TCP ||
          static_cast<std::size_t>(n) < ihl + 20)
        continue;
      if (std::memcmp(p + 16, &ip_, 4) != 0) continue;
      if (((p[ihl + 2] << 8) | p[ihl + 3]) != port_) continue;
      const unsigned char flags = p[ihl + 13];
      if ((flags & 0x02) != 0 && (flags & 0x10) == 0) return true;
    }
    return false;
  }

 private:
  UniqueFd fd_;
  in_addr ip_{};
  int port_;
};

// An allowed CONNECT whose dial is still in flight when its sandbox ends
// (the listener is closed: the sandbox was destroyed) gets its decision
// line: allowed, outcome dial_cancelled, the address and the cause.
TEST_F(ProxyTest, ADialInFlightWhenTheListenerClosesIsLogged) {
  StalledSink stalled("127.0.0.4", sink.port());
  SynWatch syn("127.0.0.4", sink.port());
  ASSERT_TRUE(syn.valid()) << "packet socket on lo: " << std::strerror(errno);
  UniqueFd c = connectTcp("127.0.0.1", port);
  ASSERT_TRUE(sendAll(c.get(), connectTo(sinkTarget("stall.example.com"))));
  ASSERT_TRUE(syn.waitForSyn()) << "the proxy never dialled";
  EXPECT_TRUE(log->lines().empty()) << "the dial must still be in flight";
  proxy->closeListener(listener);
  EXPECT_EQ(readSome(c.get()), 0) << "the client was not closed";
  const auto lines = log->waitFor(1);
  ASSERT_EQ(lines.size(), 1u);
  const auto& l = lines[0];
  EXPECT_EQ(l["host"], "stall.example.com");
  EXPECT_EQ(l["verdict"], "allow");
  EXPECT_EQ(l["reason"], "allowed");
  EXPECT_EQ(l["outcome"], "dial_cancelled");
  EXPECT_TRUE(l["address"].is_null()) << "nothing was connected";
  EXPECT_EQ(l["addresses"], nlohmann::json::array({"127.0.0.4"}));
  EXPECT_EQ(l["error"], "127.0.0.4: dial cancelled: the sandbox's listener was closed");
  EXPECT_EQ(l["run"], "run-7");
}

TEST_F(ProxyTest, ADialInFlightWhenTheProxyStopsIsLogged) {
  StalledSink stalled("127.0.0.4", sink.port());
  SynWatch syn("127.0.0.4", sink.port());
  ASSERT_TRUE(syn.valid()) << "packet socket on lo: " << std::strerror(errno);
  UniqueFd c = connectTcp("127.0.0.1", port);
  ASSERT_TRUE(sendAll(c.get(), connectTo(sinkTarget("stall.example.com"))));
  ASSERT_TRUE(syn.waitForSyn()) << "the proxy never dialled";
  proxy->stop();  // joins the I/O thread: every line is written when it returns
  const auto lines = log->lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["outcome"], "dial_cancelled");
  EXPECT_EQ(lines[0]["verdict"], "allow");
  EXPECT_EQ(lines[0]["error"], "127.0.0.4: dial cancelled: the proxy stopped");
  EXPECT_EQ(readSome(c.get()), 0);
}

// The same through the sandbox's route (sandbox_route.h), torn down as the
// sandbox ends: init hands over a connection, its CONNECT is dialling when
// the attachment is destroyed, and the line names the sandbox.
TEST_F(ProxyTest, ADialInFlightWhenTheSandboxsRouteIsTornDownIsLogged) {
  StalledSink stalled("127.0.0.4", sink.port());
  SynWatch syn("127.0.0.4", sink.port());
  ASSERT_TRUE(syn.valid()) << "packet socket on lo: " << std::strerror(errno);
  const std::shared_ptr<EgressProxy> shared = std::move(proxy);
  ProxyEgressRoute route(shared);
  EnvironmentHandle sandbox;
  sandbox.environment_id = "env-r";
  sandbox.tenant_id = "tenant-r";
  sandbox.run_id = "run-r";
  EgressPolicy egress;
  egress.mode = EgressMode::kAllowlist;
  egress.destinations.push_back({"stall.example.com", {sink.port()}});
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair), 0);
  UniqueFd sandbox_end(pair[0]);
  auto attachment = route.attachHandoff(sandbox, egress, UniqueFd(pair[1]));
  ASSERT_TRUE(attachment.has_value()) << attachment.error().message();
  auto [client, server] = tcpPair();
  ASSERT_TRUE(client.valid() && server.valid());
  ASSERT_TRUE(sendFds(sandbox_end.get(), {server.get()}));
  server.reset();
  ASSERT_TRUE(sendAll(client.get(), connectTo(sinkTarget("stall.example.com"))));
  ASSERT_TRUE(syn.waitForSyn()) << "the proxy never dialled";
  EXPECT_TRUE(log->lines().empty()) << "the dial must still be in flight";
  attachment->reset();  // the sandbox's end: its route goes
  EXPECT_EQ(readSome(client.get()), 0) << "the client was not closed";
  const auto lines = log->waitFor(1);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["environment"], "env-r");
  EXPECT_EQ(lines[0]["tenant"], "tenant-r");
  EXPECT_EQ(lines[0]["run"], "run-r");
  EXPECT_EQ(lines[0]["verdict"], "allow");
  EXPECT_EQ(lines[0]["outcome"], "dial_cancelled");
  EXPECT_EQ(lines[0]["error"], "127.0.0.4: dial cancelled: the sandbox's listener was closed");
}

// The sandbox ends while its CONNECT is still being decided (the lookup is
// held): the decision, once made, is logged although nobody is left to
// answer.
TEST_F(ProxyTest, ADecisionInFlightWhenTheListenerClosesIsLogged) {
  gate->hold();
  UniqueFd allowed = connectTcp("127.0.0.1", port);
  ASSERT_TRUE(sendAll(allowed.get(), connectTo(sinkTarget())));
  ASSERT_TRUE(gate->waitEntered());
  proxy->closeListener(listener);
  EXPECT_EQ(readSome(allowed.get()), 0) << "the client was not closed";
  gate->release();
  const auto lines = log->waitFor(1);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["verdict"], "allow");
  EXPECT_EQ(lines[0]["outcome"], "dial_cancelled");
  EXPECT_EQ(lines[0]["error"], "not dialled: the sandbox's listener was closed");
  EXPECT_EQ(sink.accepted(), 0) << "a cancelled CONNECT must not be dialled";
}

TEST(EgressProxy, RefusesIncompleteOptionsAndNonLoopbackTcp) {
  EXPECT_FALSE(EgressProxy::create(ProxyOptions{}).has_value());
  ProxyOptions o;
  o.resolver = std::make_shared<GetaddrinfoResolver>();
  o.classifier = std::make_shared<AddressClassifier>(
      std::make_shared<FixedSelfAddresses>(std::vector<IpAddress>{}));
  o.log = std::make_shared<CapturingLog>();
  o.limits.buffer_bytes = 0;
  EXPECT_FALSE(EgressProxy::create(o).has_value());
  o.limits.buffer_bytes = 1024;
  auto proxy = EgressProxy::create(o);
  ASSERT_TRUE(proxy.has_value());
  EXPECT_FALSE(
      (*proxy)->listenTcp(*IpAddress::parse("0.0.0.0"), 0, {}, Policy::denyAll()).has_value());
  EXPECT_FALSE((*proxy)->listenTcp(*IpAddress::parse("127.0.0.1"), 0, {}, nullptr).has_value());
}

TEST(ProxyLog, FormatsOneJsonLine) {
  Decision d;
  d.reason = Reason::kResolvedDenied;
  d.address_class = AddressClass::kLinkLocal;
  d.host = "a.example.com";
  d.port = 443;
  d.resolved = {*IpAddress::parse("169.254.169.254")};
  d.denied = {{*IpAddress::parse("169.254.169.254"), AddressClass::kLinkLocal}};
  ProxyIdentity who{"e", "t", "r"};
  const std::string line = formatDecisionLine(
      DecisionRecord{who, d, TunnelOutcome::kRefused, std::nullopt, "", "",
                     std::chrono::microseconds(12)},
      std::chrono::system_clock::time_point(std::chrono::milliseconds(1764476637123)));
  EXPECT_EQ(line.find('\n'), std::string::npos);
  const auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j["time"], "2025-11-30T04:23:57.123Z");
  EXPECT_EQ(j["reason"], "resolved_denied:link_local");
  EXPECT_EQ(j["denied"][0]["class"], "link_local");
  EXPECT_EQ(j["elapsed_us"], 12);
  Decision bad;
  bad.reason = Reason::kMalformedRequest;
  const auto k = nlohmann::json::parse(formatDecisionLine(
      DecisionRecord{
          who, bad, TunnelOutcome::kRefused, std::nullopt, "", std::string("GE\xff\0T", 5), {}},
      std::chrono::system_clock::now()));
  EXPECT_TRUE(k["host"].is_null());
  EXPECT_EQ(k["request"], "GE\\xff\\x00T");
  // An error message keeps its quotes (JSON escapes them once); only bytes
  // that cannot be shown are escaped.
  const auto e = nlohmann::json::parse(
      formatDecisionLine(DecisionRecord{who,
                                        d,
                                        TunnelOutcome::kConnectFailed,
                                        std::nullopt,
                                        "connect to \"a.example.com\": refused\x01",
                                        "",
                                        {}},
                         std::chrono::system_clock::now()));
  EXPECT_EQ(e["error"], "connect to \"a.example.com\": refused\\x01");
}

}  // namespace
}  // namespace airlock::egress
