// The egress proxy against a direct loopback connection and against
// tinyproxy, in the same run (docs/benchmarks.md).
//
//   bench_egress_proxy [bulk_MiB=1024] [bulk_rounds=3] [connections=2000]
//                      [proxy_buffer_KiB=ProxyLimits default] [with_tinyproxy=1]
//
// Peers, all on loopback, all to the same sink on 127.0.0.2:
//   direct     the client connects to the sink;
//   airlock    EgressProxy (listenTcp on 127.0.0.3), CONNECT by name; the
//              resolver answers 127.0.0.2 at once (no DNS: the latency is the
//              proxy's own), the classifier exempts exactly 127.0.0.2
//              (TestSinkToken, tests/egress/testing), decision lines are
//              formatted and written to /dev/null;
//   tinyproxy  tinyproxy-bin on 127.0.0.4 with an allowlist of comparable
//              shape (ConnectPort for the two sink ports, FilterDefaultDeny
//              with one entry, the sink's address), CONNECT by address;
//              started here and killed by pid at the end;
//   splice-ref a reference relay with no policy and no HTTP: one blocking
//              thread per direction doing splice(2) socket -> pipe -> socket
//              (1 MiB pipe), a thread pair per connection, on 127.0.0.6. It is
//              what any user-space relay costs on this machine, the floor
//              for the airlock peer.
// Bulk: the client sends an 8-byte length then N bytes; the sink reads
// exactly N and answers one byte; time from the first byte sent to the
// answer. Rounds are interleaved direct, airlock, tinyproxy.
// Setup: time from socket() to the first byte the sink sends after accept
// (through a proxy: connect, CONNECT, the 200 head, then that byte), in
// blocks of 100 per peer round-robin; medians and p90.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "airlock/egress/proxy.h"
#include "airlock/sys/unique_fd.h"

namespace {

using airlock::sys::UniqueFd;
using Clock = std::chrono::steady_clock;
namespace eg = airlock::egress;

constexpr const char* kSinkIp = "127.0.0.2";
constexpr const char* kProxyIp = "127.0.0.3";
constexpr const char* kTinyIp = "127.0.0.4";
constexpr const char* kRefIp = "127.0.0.6";
constexpr const char* kSinkName = "sink.bench.example.com";
constexpr std::size_t kChunk = 256 * 1024;

sockaddr_in addr(const char* ip, std::uint16_t port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  ::inet_pton(AF_INET, ip, &sa.sin_addr);
  return sa;
}

UniqueFd listenOn(const char* ip, std::uint16_t& port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sa = addr(ip, port);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
      ::listen(fd.get(), 512) != 0) {
    std::perror("bind/listen");
    std::exit(1);
  }
  socklen_t len = sizeof sa;
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&sa), &len);
  port = ntohs(sa.sin_port);
  return fd;
}

UniqueFd connectTo(const char* ip, std::uint16_t port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  sockaddr_in sa = addr(ip, port);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) return UniqueFd();
  return fd;
}

bool sendAll(int fd, const char* data, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::send(fd, data, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

bool recvAll(int fd, char* data, std::size_t n) {
  while (n > 0) {
    const ssize_t r = ::recv(fd, data, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    data += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

// Reads a proxy's response head byte by byte (so nothing after it is
// consumed) and checks for a 200.
bool readConnectReply(int fd) {
  std::string head;
  char c;
  while (head.size() < 4096 && head.find("\r\n\r\n") == std::string::npos) {
    if (::recv(fd, &c, 1, 0) != 1) return false;
    head.push_back(c);
  }
  return head.rfind("HTTP/1.1 200", 0) == 0 || head.rfind("HTTP/1.0 200", 0) == 0;
}

// The sink: a bulk port and a setup port, one thread each, each connection
// served inline (the benchmark runs one connection at a time).
class Sink {
 public:
  Sink() {
    bulk_ = listenOn(kSinkIp, bulk_port_);
    setup_ = listenOn(kSinkIp, setup_port_);
    bulk_thread_ = std::thread([this] { bulkLoop(); });
    setup_thread_ = std::thread([this] { setupLoop(); });
  }
  ~Sink() {
    stop_ = true;
    ::shutdown(bulk_.get(), SHUT_RDWR);
    ::shutdown(setup_.get(), SHUT_RDWR);
    bulk_thread_.join();
    setup_thread_.join();
  }
  std::uint16_t bulkPort() const { return bulk_port_; }
  std::uint16_t setupPort() const { return setup_port_; }

 private:
  void bulkLoop() {
    std::vector<char> buf(kChunk);
    while (!stop_) {
      UniqueFd c(::accept4(bulk_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!c.valid()) continue;
      std::uint64_t n = 0;
      if (!recvAll(c.get(), reinterpret_cast<char*>(&n), sizeof n)) continue;
      while (n > 0) {
        const ssize_t r = ::recv(c.get(), buf.data(), std::min<std::uint64_t>(n, buf.size()), 0);
        if (r <= 0) break;
        n -= static_cast<std::uint64_t>(r);
      }
      if (n == 0) sendAll(c.get(), "k", 1);
    }
  }
  void setupLoop() {
    while (!stop_) {
      UniqueFd c(::accept4(setup_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (c.valid()) sendAll(c.get(), "x", 1);
    }
  }

  UniqueFd bulk_, setup_;
  std::uint16_t bulk_port_ = 0, setup_port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread bulk_thread_, setup_thread_;
};

// The reference relay. The client sends the sink port (2 bytes, host
// order) and then the stream; one thread per direction splices it on.
class SpliceRelay {
 public:
  SpliceRelay() {
    listener_ = listenOn(kRefIp, port_);
    thread_ = std::thread([this] {
      for (;;) {
        const int c = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) return;
        std::thread([c] { serve(c); }).detach();
      }
    });
  }
  ~SpliceRelay() {
    ::shutdown(listener_.get(), SHUT_RDWR);
    thread_.join();
  }
  std::uint16_t port() const { return port_; }

 private:
  static void pump(int from, int to) {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) return;
    ::fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
    for (;;) {
      const ssize_t n = ::splice(from, nullptr, p[1], nullptr, 1 << 20, SPLICE_F_MOVE);
      if (n <= 0) break;
      for (ssize_t left = n; left > 0;) {
        const ssize_t w =
            ::splice(p[0], nullptr, to, nullptr, static_cast<std::size_t>(left), SPLICE_F_MOVE);
        if (w <= 0) {
          left = 0;
          break;
        }
        left -= w;
      }
    }
    ::shutdown(to, SHUT_WR);
    ::close(p[0]);
    ::close(p[1]);
  }
  static void serve(int c) {
    UniqueFd client(c);
    std::uint16_t port = 0;
    if (!recvAll(c, reinterpret_cast<char*>(&port), sizeof port)) return;
    UniqueFd up = connectTo(kSinkIp, port);
    if (!up.valid()) return;
    std::thread back([&] { pump(up.get(), c); });
    pump(c, up.get());
    back.join();
  }

  UniqueFd listener_;
  std::uint16_t port_ = 0;
  std::thread thread_;
};

class FixedResolver final : public eg::Resolver {
 public:
  eg::ResolveResult resolve(std::string_view) override {
    return std::vector<eg::IpAddress>{*eg::IpAddress::parse(kSinkIp)};
  }
};

struct Peer {
  std::string name;
  // Opens a connection that reaches the sink's `port`; invalid on failure.
  std::function<UniqueFd(std::uint16_t port)> open;
};

Peer directPeer() {
  return {"direct", [](std::uint16_t port) { return connectTo(kSinkIp, port); }};
}

Peer proxyPeer(std::string name, const char* ip, std::uint16_t proxy_port, std::string host) {
  return {std::move(name), [ip, proxy_port, host](std::uint16_t port) {
            UniqueFd fd = connectTo(ip, proxy_port);
            if (!fd.valid()) return fd;
            const std::string req = "CONNECT " + host + ":" + std::to_string(port) +
                                    " HTTP/1.1\r\nHost: " + host + ":" + std::to_string(port) +
                                    "\r\n\r\n";
            if (!sendAll(fd.get(), req.data(), req.size()) || !readConnectReply(fd.get()))
              return UniqueFd();
            return fd;
          }};
}

// Seconds for one bulk transfer of `bytes`, or a negative value on failure.
double bulkOnce(const Peer& peer, std::uint16_t port, std::uint64_t bytes) {
  static const std::vector<char> data(kChunk, 'b');
  UniqueFd fd = peer.open(port);
  if (!fd.valid()) return -1;
  const auto t0 = Clock::now();
  if (!sendAll(fd.get(), reinterpret_cast<const char*>(&bytes), sizeof bytes)) return -1;
  for (std::uint64_t left = bytes; left > 0;) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(left, data.size()));
    if (!sendAll(fd.get(), data.data(), n)) return -1;
    left -= n;
  }
  char k;
  if (!recvAll(fd.get(), &k, 1)) return -1;
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Microseconds from socket() to the sink's first byte, or negative.
double setupOnce(const Peer& peer, std::uint16_t port) {
  const auto t0 = Clock::now();
  UniqueFd fd = peer.open(port);
  if (!fd.valid()) return -1;
  char x;
  if (!recvAll(fd.get(), &x, 1) || x != 'x') return -1;
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5)];
}

std::string loadavg() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

// tinyproxy in the foreground, killed by pid in the destructor.
class Tinyproxy {
 public:
  Tinyproxy(std::uint16_t bulk_port, std::uint16_t setup_port) {
    namespace fs = std::filesystem;
    char tmpl[] = "/tmp/airlock-bench-tinyproxy-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) return;
    dir_ = tmpl;
    {
      // A port picked by binding port 0 and closing (the window is tiny and
      // a failure shows as "tinyproxy did not start").
      UniqueFd probe = listenOn(kTinyIp, port_);
    }
    std::ofstream(dir_ / "filter") << "^127\\.0\\.0\\.2$\n";
    std::ofstream conf(dir_ / "tinyproxy.conf");
    conf << "User nobody\nGroup nogroup\n"
         << "Port " << port_ << "\nListen " << kTinyIp << "\nBindSame no\n"
         << "Timeout 600\nMaxClients 256\nLogLevel Critical\n"
         << "Allow 127.0.0.0/8\n"
         << "ConnectPort " << bulk_port << "\nConnectPort " << setup_port << "\n"
         << "Filter \"" << (dir_ / "filter").string() << "\"\nFilterDefaultDeny Yes\n"
         << "FilterExtended Yes\nDisableViaHeader Yes\n";
    conf.close();
    const std::string conf_path = (dir_ / "tinyproxy.conf").string();
    pid_ = ::fork();
    if (pid_ == 0) {
      const int null = ::open("/dev/null", O_RDWR);
      ::dup2(null, STDOUT_FILENO);
      ::dup2(null, STDERR_FILENO);
      ::execlp("tinyproxy", "tinyproxy", "-d", "-c", conf_path.c_str(), nullptr);
      ::_exit(127);
    }
    // Wait (bounded) until it accepts connections.
    for (int i = 0; i < 200; ++i) {
      if (connectTo(kTinyIp, port_).valid()) {
        ready_ = true;
        break;
      }
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  ~Tinyproxy() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
    std::error_code ignored;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
  }
  bool ready() const { return ready_; }
  std::uint16_t port() const { return port_; }

 private:
  std::filesystem::path dir_;
  std::uint16_t port_ = 0;
  pid_t pid_ = -1;
  bool ready_ = false;
};

}  // namespace

int main(int argc, char** argv) {
  const std::uint64_t bulk_mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1024;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 3;
  const int connections = argc > 3 ? std::atoi(argv[3]) : 2000;
  const std::size_t buffer_kib =
      argc > 4 ? std::strtoull(argv[4], nullptr, 10) : eg::ProxyLimits{}.buffer_bytes / 1024;
  const std::uint64_t bulk_bytes = bulk_mib << 20;
  const bool with_tinyproxy = argc > 5 ? std::atoi(argv[5]) != 0 : true;
  ::signal(SIGPIPE, SIG_IGN);

  utsname u{};
  ::uname(&u);
  std::printf("machine: %u cpus, kernel %s, load average at start %s; proxy buffer %zu KiB\n",
              std::thread::hardware_concurrency(), u.release, loadavg().c_str(), buffer_kib);

  Sink sink;

  // The Airlock proxy.
  auto policy = eg::loadEgressPolicy(
      std::string("egress:\n  mode: allowlist\n  destinations:\n    - host: ") + kSinkName +
          "\n      ports: [" + std::to_string(sink.bulkPort()) + ", " +
          std::to_string(sink.setupPort()) + "]\n",
      "bench");
  if (!policy) {
    std::fprintf(stderr, "policy: %s\n", policy.error().message().c_str());
    return 1;
  }
  const int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  eg::ProxyOptions options;
  options.resolver = std::make_shared<FixedResolver>();
  options.classifier = std::make_shared<eg::AddressClassifier>(
      std::make_shared<eg::FixedSelfAddresses>(std::vector<eg::IpAddress>{}),
      eg::testing::makeTestSinkToken(), std::vector<eg::IpAddress>{*eg::IpAddress::parse(kSinkIp)});
  options.log = std::make_shared<eg::FdDecisionLog>(devnull);
  options.limits.buffer_bytes = buffer_kib * 1024;
  auto proxy = eg::EgressProxy::create(options);
  if (!proxy) {
    std::fprintf(stderr, "proxy: %s\n", proxy.error().message().c_str());
    return 1;
  }
  auto listener = (*proxy)->listenTcp(*eg::IpAddress::parse(kProxyIp), 0,
                                      eg::ProxyIdentity{"bench", "bench", "bench"}, *policy);
  if (!listener) {
    std::fprintf(stderr, "listen: %s\n", listener.error().message().c_str());
    return 1;
  }
  const std::uint16_t proxy_port = (*proxy)->boundPort(*listener);

  SpliceRelay reference;
  std::optional<Tinyproxy> tiny;
  if (with_tinyproxy) tiny.emplace(sink.bulkPort(), sink.setupPort());
  std::vector<Peer> peers = {directPeer(), proxyPeer("airlock", kProxyIp, proxy_port, kSinkName)};
  if (!tiny) {
    std::printf("tinyproxy not run (argument 5 is 0)\n");
  } else if (tiny->ready()) {
    peers.push_back(proxyPeer("tinyproxy", kTinyIp, tiny->port(), kSinkIp));
    // The allowlists are live: a CONNECT to an unlisted address is refused by both.
    UniqueFd probe = proxyPeer("x", kTinyIp, tiny->port(), "127.0.0.9").open(sink.setupPort());
    UniqueFd probe2 =
        proxyPeer("x", kProxyIp, proxy_port, "other.example.com").open(sink.setupPort());
    std::printf(
        "allowlist check: tinyproxy refuses 127.0.0.9: %s; airlock refuses other.example.com: %s\n",
        probe.valid() ? "NO" : "yes", probe2.valid() ? "NO" : "yes");
  } else {
    std::printf("tinyproxy did not start (is tinyproxy-bin installed?); peer skipped\n");
  }
  peers.push_back({"splice-ref", [&reference](std::uint16_t port) {
                     UniqueFd fd = connectTo(kRefIp, reference.port());
                     if (fd.valid() &&
                         !sendAll(fd.get(), reinterpret_cast<const char*>(&port), sizeof port))
                       return UniqueFd();
                     return fd;
                   }});

  // Bulk throughput.
  std::vector<std::vector<double>> bulk(peers.size());
  bulkOnce(peers[0], sink.bulkPort(), 64 << 20);  // warm-up
  for (int r = 0; r < rounds; ++r)
    for (std::size_t p = 0; p < peers.size(); ++p) {
      const double s = bulkOnce(peers[p], sink.bulkPort(), bulk_bytes);
      if (s < 0) {
        std::fprintf(stderr, "%s: bulk transfer failed\n", peers[p].name.c_str());
        return 1;
      }
      bulk[p].push_back(static_cast<double>(bulk_bytes) / s / 1e9);
    }
  std::printf("\nbulk transfer, %llu MiB x %d rounds (GB/s):\n",
              static_cast<unsigned long long>(bulk_mib), rounds);
  const double direct_gbs = percentile(bulk[0], 0.5);
  for (std::size_t p = 0; p < peers.size(); ++p) {
    std::printf("  %-10s median %.3f  min %.3f  max %.3f  ratio to direct %.2f\n",
                peers[p].name.c_str(), percentile(bulk[p], 0.5), percentile(bulk[p], 0),
                percentile(bulk[p], 1), percentile(bulk[p], 0.5) / direct_gbs);
  }

  // Connection setup.
  std::vector<std::vector<double>> setup(peers.size());
  for (std::size_t p = 0; p < peers.size(); ++p)
    for (int i = 0; i < 50; ++i) setupOnce(peers[p], sink.setupPort());  // warm-up
  constexpr int kBlock = 100;
  for (int done = 0; done < connections; done += kBlock)
    for (std::size_t p = 0; p < peers.size(); ++p)
      for (int i = 0; i < kBlock && done + i < connections; ++i) {
        const double us = setupOnce(peers[p], sink.setupPort());
        if (us < 0) {
          std::fprintf(stderr, "%s: connection failed\n", peers[p].name.c_str());
          return 1;
        }
        setup[p].push_back(us);
      }
  std::printf("\nconnection setup to the sink's first byte, %d per peer (us):\n", connections);
  const double direct_us = percentile(setup[0], 0.5);
  for (std::size_t p = 0; p < peers.size(); ++p) {
    const double med = percentile(setup[p], 0.5);
    std::printf(
        "  %-10s median %7.1f  p90 %7.1f  overhead over direct %7.1f  (%.0f conn/s "
        "sequential)\n",
        peers[p].name.c_str(), med, percentile(setup[p], 0.9), med - direct_us, 1e6 / med);
  }
  std::printf(
      "\ntargets: airlock bulk >= 0.90 of direct: %s (%.2f); setup overhead < 200 us "
      "median: %s (%.1f us)\n",
      percentile(bulk[1], 0.5) / direct_gbs >= 0.9 ? "met" : "NOT met",
      percentile(bulk[1], 0.5) / direct_gbs,
      percentile(setup[1], 0.5) - direct_us < 200 ? "met" : "NOT met",
      percentile(setup[1], 0.5) - direct_us);
  std::printf("load average at end %s\n", loadavg().c_str());
  (*proxy)->stop();
  return 0;
}
