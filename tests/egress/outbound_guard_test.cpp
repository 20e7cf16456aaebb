// The outbound guard (outbound_guard.h) against test HTTP servers on
// loopback. The whole binary runs in a network namespace of its own (main()
// below, testing/hermetic_net.h): only loopback exists, and /etc/hosts maps
// the test names to a trap listener, so a guard that let libcurl resolve a
// name itself would reach the trap (or nothing), never the internet, and the
// tests would see it. The guard's own lookups go to a FakeDns; its
// classifier exempts exactly the two sink addresses (TestSinkToken).
#include "airlock/egress/outbound_guard.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "airlock/sys/unique_fd.h"
#include "egress_printers.h"
#include "fake_dns.h"
#include "hermetic_main.h"

namespace airlock::egress {
namespace {

using sys::UniqueFd;

bool g_hermetic = false;  // set by main() when the namespace is in place

constexpr const char* kSinkA = "127.0.0.2";      // hooks.example.com
constexpr const char* kSinkB = "127.0.0.4";      // other.example.com
constexpr const char* kHostsTrap = "127.0.0.3";  // what /etc/hosts says for both names
constexpr const char* kProxyTrap = "127.0.0.5";  // what the proxy variables point at

UniqueFd listenOn(const char* ip, std::uint16_t& port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  ::inet_pton(AF_INET, ip, &sa.sin_addr);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
      ::listen(fd.get(), 16) != 0)
    return UniqueFd();
  socklen_t len = sizeof sa;
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&sa), &len);
  port = ntohs(sa.sin_port);
  return fd;
}

// True if a connection is waiting in `listener`'s backlog. The kernel
// completes the handshake before connect() returns, so a client that has
// finished has either left a connection here or never connected.
bool hasPendingConnection(int listener) {
  pollfd p{listener, POLLIN, 0};
  return ::poll(&p, 1, 0) != 0;
}

std::string okResponse(const std::string& body) {
  return "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n\r\n" + body;
}
std::string redirectResponse(int status, const std::string& location) {
  return "HTTP/1.1 " + std::to_string(status) + " Redirect\r\nLocation: " + location +
         "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
}

// One-connection-at-a-time HTTP/1.1 server with scripted responses per path.
// Each request (head and body) is recorded before the response is written,
// so it is visible as soon as the guard's fetch returns.
class TestHttpServer {
 public:
  explicit TestHttpServer(const char* ip) {
    listener_ = listenOn(ip, port_);
    if (::pipe2(stop_, O_CLOEXEC) != 0) stop_[0] = stop_[1] = -1;
    thread_ = std::thread([this] { loop(); });
  }
  ~TestHttpServer() {
    if (stop_[1] >= 0) (void)::write(stop_[1], "x", 1);
    thread_.join();
    ::close(stop_[0]);
    ::close(stop_[1]);
  }
  bool ok() const { return listener_.valid() && stop_[0] >= 0; }
  std::uint16_t port() const { return port_; }
  void on(const std::string& path, std::string response) {
    std::lock_guard lock(mu_);
    responses_[path] = std::move(response);
  }
  std::vector<std::string> requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }

 private:
  void loop() {
    for (;;) {
      pollfd fds[2] = {{listener_.get(), POLLIN, 0}, {stop_[0], POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0) continue;
      if (fds[1].revents != 0) return;
      UniqueFd c(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!c.valid()) continue;
      timeval tv{5, 0};
      ::setsockopt(c.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      ::setsockopt(c.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
      serve(c.get());
    }
  }
  void serve(int fd) {
    std::string in;
    char buf[4096];
    std::size_t head_end;
    while ((head_end = in.find("\r\n\r\n")) == std::string::npos) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return;
      in.append(buf, static_cast<std::size_t>(n));
    }
    std::size_t content_length = 0;
    std::smatch m;
    const std::string head = in.substr(0, head_end);
    if (std::regex_search(head, m, std::regex("\r\ncontent-length: *([0-9]+)", std::regex::icase)))
      content_length = std::stoul(m[1].str());
    while (in.size() < head_end + 4 + content_length) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      in.append(buf, static_cast<std::size_t>(n));
    }
    const auto sp1 = in.find(' ');
    const auto sp2 = in.find(' ', sp1 + 1);
    const std::string path = in.substr(sp1 + 1, sp2 - sp1 - 1);
    std::string response;
    {
      std::lock_guard lock(mu_);
      requests_.push_back(in);
      auto it = responses_.find(path);
      response = it != responses_.end()
                     ? it->second
                     : std::string("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
    }
    std::string_view out = response;
    while (!out.empty()) {
      const ssize_t n = ::send(fd, out.data(), out.size(), MSG_NOSIGNAL);
      if (n <= 0) return;
      out.remove_prefix(static_cast<std::size_t>(n));
    }
    ::shutdown(fd, SHUT_WR);
  }

  UniqueFd listener_;
  std::uint16_t port_ = 0;
  int stop_[2] = {-1, -1};
  mutable std::mutex mu_;
  std::map<std::string, std::string> responses_;
  std::vector<std::string> requests_;
  std::thread thread_;
};

bool hasHeader(const std::string& request, const std::string& name) {
  return std::regex_search(request, std::regex("\r\n" + name + ":", std::regex::icase));
}

class OutboundGuardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!g_hermetic) GTEST_SKIP() << "needs root for a private network namespace";
    ASSERT_TRUE(a_.ok());
    ASSERT_TRUE(b_.ok());
    hosts_trap_ = listenOn(kHostsTrap, hosts_trap_port_);
    ASSERT_TRUE(hosts_trap_.valid());
    dns_.add("hooks.example.com.", {kSinkA});
    dns_.add("other.example.com.", {kSinkB});
    dns_.add("private.example.com.", {"93.184.215.14", "10.0.0.7"});
    dns_.add("meta.example.com.", {"169.254.169.254"});
    dns_.add("azure.example.com.", {"168.63.129.16"});
    const std::string yaml =
        "egress:\n  mode: allowlist\n  destinations:\n"
        "    - host: hooks.example.com\n      ports: [" +
        std::to_string(a_.port()) +
        "]\n"
        "    - host: other.example.com\n      ports: [" +
        std::to_string(b_.port()) +
        "]\n"
        "    - host: \"*.example.com\"\n      ports: [80, 443]\n";
    auto policy = loadEgressPolicy(yaml, "test");
    ASSERT_TRUE(policy.has_value()) << policy.error().message();
    policy_ = *policy;
    guard_ = makeGuard(OutboundLimits{});
  }

  std::unique_ptr<OutboundGuard> makeGuard(OutboundLimits limits,
                                           std::shared_ptr<OutboundObserver> observer = nullptr) {
    auto classifier = std::make_shared<AddressClassifier>(
        std::make_shared<FixedSelfAddresses>(std::vector<IpAddress>{}),
        testing::makeTestSinkToken(),
        std::vector<IpAddress>{*IpAddress::parse(kSinkA), *IpAddress::parse(kSinkB)});
    return std::make_unique<OutboundGuard>(policy_,
                                           std::make_shared<GetaddrinfoResolver>(dns_.backend()),
                                           classifier, limits, std::move(observer));
  }

  std::string urlA(const std::string& path) const {
    return "http://hooks.example.com:" + std::to_string(a_.port()) + path;
  }
  std::string urlB(const std::string& path) const {
    return "http://other.example.com:" + std::to_string(b_.port()) + path;
  }

  TestHttpServer a_{kSinkA};
  TestHttpServer b_{kSinkB};
  UniqueFd hosts_trap_;
  std::uint16_t hosts_trap_port_ = 0;
  testing::FakeDns dns_;
  std::shared_ptr<const Policy> policy_;
  std::unique_ptr<OutboundGuard> guard_;
};

TEST_F(OutboundGuardTest, AllowedFetchDialsTheCheckedAddress) {
  a_.on("/hello", okResponse("hello"));
  const auto r = guard_->fetch({urlA("/hello")});
  ASSERT_TRUE(r.has_value()) << r.error().error.message();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "hello");
  ASSERT_EQ(r->hops.size(), 1u);
  EXPECT_TRUE(r->hops[0].decision.allowed());
  ASSERT_TRUE(r->hops[0].dialed.has_value());
  EXPECT_EQ(r->hops[0].dialed->toString(), kSinkA);
  EXPECT_EQ(dns_.queries(), std::vector<std::string>{"hooks.example.com."});
  ASSERT_EQ(a_.requests().size(), 1u);
  EXPECT_NE(a_.requests()[0].find("GET /hello HTTP/1.1\r\n"), std::string::npos);
  EXPECT_FALSE(hasPendingConnection(hosts_trap_.get()));
}

TEST_F(OutboundGuardTest, RefusedHostIsNeitherResolvedNorDialled) {
  const auto r = guard_->fetch({"http://evil.example.org:" + std::to_string(a_.port()) + "/"});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, "host_not_allowed");
  EXPECT_EQ(r.error().error.code, ErrorCode::kExecutionRejected);
  EXPECT_NE(r.error().error.message().find("host_not_allowed"), std::string::npos)
      << r.error().error.message();
  EXPECT_EQ(dns_.lookupCount(), 0u);
  EXPECT_TRUE(a_.requests().empty());
}

TEST_F(OutboundGuardTest, UnlistedPortIsRefused) {
  const auto r = guard_->fetch({"http://hooks.example.com:8080/x"});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, "port_not_allowed");
  EXPECT_EQ(dns_.lookupCount(), 0u);
}

TEST_F(OutboundGuardTest, NameResolvingToAPrivateAddressIsRefused) {
  const auto r = guard_->fetch({"https://private.example.com/x"});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, "resolved_denied:private");
  ASSERT_EQ(r.error().hops.size(), 1u);
  EXPECT_FALSE(r.error().hops[0].dialed.has_value());
  ASSERT_EQ(r.error().hops[0].decision.denied.size(), 1u);
  EXPECT_EQ(r.error().hops[0].decision.denied[0].address.toString(), "10.0.0.7");
  EXPECT_EQ(dns_.lookupCount(), 1u);
}

TEST_F(OutboundGuardTest, MetadataAddressIsRefusedByNameAndAsLiteral) {
  auto r = guard_->fetch({"http://meta.example.com/latest/meta-data/"});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, "resolved_denied:link_local");
  r = guard_->fetch({"https://azure.example.com/"});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, "resolved_denied:metadata");
  r = guard_->fetch({"http://169.254.169.254/latest/meta-data/"});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, "ip_literal");
  r = guard_->fetch({"http://[::ffff:169.254.169.254]/"});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, "ip_literal");
}

TEST_F(OutboundGuardTest, RedirectToARefusedDestinationIsRefused) {
  struct Case {
    std::string location, hop_code;
  };
  const std::vector<Case> cases = {
      {"http://169.254.169.254/latest/meta-data/", "ip_literal"},
      {"http://meta.example.com/latest/meta-data/", "resolved_denied:link_local"},
      {"https://hooks.example.com.evil.com/", "host_not_allowed"},
      {"gopher://hooks.example.com:" + std::to_string(a_.port()) + "/_x", "scheme_not_allowed"},
      {"http://user:pw@hooks.example.com:" + std::to_string(a_.port()) + "/",
       "malformed_authority"},
      {"/\\evil.com/", "malformed_request"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.location);
    a_.on("/redir", redirectResponse(302, c.location));
    const auto r = guard_->fetch({urlA("/redir")});
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().code, "redirect_denied");
    EXPECT_EQ(r.error().error.code, ErrorCode::kExecutionRejected);
    EXPECT_NE(r.error().error.message().find("redirect_denied"), std::string::npos);
    ASSERT_EQ(r.error().hops.size(), 2u);
    EXPECT_EQ(r.error().hops[0].status, 302);
    EXPECT_EQ(r.error().hops[1].decision.reasonCode(), c.hop_code);
    EXPECT_FALSE(r.error().hops[1].dialed.has_value());
  }
  EXPECT_EQ(a_.requests().size(), cases.size());
  EXPECT_TRUE(b_.requests().empty());
}

// The headers a program might set: credentials by any name, custom ones,
// and the safe list of outbound_guard.h.
const std::vector<std::pair<std::string, std::string>> kProgramHeaders = {
    {"Authorization", "Bearer secret-token"},
    {"Proxy-Authorization", "Basic c2VjcmV0"},
    {"Cookie", "session=1"},
    {"X-Api-Key", "k"},
    {"X-Trace", "t1"},
    {"Api-Token", "t2"},
    {"Accept", "application/json"},
    {"Accept-Language", "en"},
    {"Accept-Encoding", "identity"},
    {"Cache-Control", "no-cache"},
    {"User-Agent", "agent/1"},
    {"Content-Type", "application/json"},
    {"Content-Language", "en"},
};
const std::set<std::string> kAlwaysSafe = {"accept", "accept-language", "accept-encoding",
                                           "cache-control", "user-agent"};
const std::set<std::string> kSafeWithBody = {"content-type", "content-language"};

std::string lowered(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

TEST_F(OutboundGuardTest, ACrossOriginRedirectCarriesOnlyTheSafeHeaders) {
  a_.on("/start", redirectResponse(307, urlB("/landing")));
  b_.on("/landing", redirectResponse(302, urlA("/back")));
  a_.on("/back", okResponse("done"));
  OutboundRequest req{urlA("/start"), "POST"};
  req.headers = kProgramHeaders;
  req.body = "{\"event\":1}";
  const auto r = guard_->fetch(req);
  ASSERT_TRUE(r.has_value()) << r.error().error.message();
  EXPECT_EQ(r->body, "done");
  ASSERT_EQ(r->hops.size(), 3u);
  EXPECT_TRUE(r->hops[0].credentials_sent);
  EXPECT_FALSE(r->hops[1].credentials_sent);
  EXPECT_FALSE(r->hops[2].credentials_sent);  // once dropped, never restored

  const auto at_a = a_.requests();
  const auto at_b = b_.requests();
  ASSERT_EQ(at_a.size(), 2u);
  ASSERT_EQ(at_b.size(), 1u);
  for (const auto& [name, value] : kProgramHeaders)
    EXPECT_TRUE(hasHeader(at_a[0], name)) << name << " on the first hop: " << at_a[0];
  // B got a 307: the body and its Content-Type went along, nothing else but
  // the safe list.
  for (const auto& [name, value] : kProgramHeaders) {
    const std::string n = lowered(name);
    const bool expected = kAlwaysSafe.count(n) > 0 || kSafeWithBody.count(n) > 0;
    EXPECT_EQ(hasHeader(at_b[0], name), expected) << name << " at the other origin: " << at_b[0];
  }
  // Back at A after a 302 (now a GET without a body): the safe list only,
  // without the body's headers.
  for (const auto& [name, value] : kProgramHeaders) {
    const bool expected = kAlwaysSafe.count(lowered(name)) > 0;
    EXPECT_EQ(hasHeader(at_a[1], name), expected)
        << name << " back at the first origin: " << at_a[1];
  }
  // 307 keeps method and body; 302 after POST becomes GET without a body.
  EXPECT_EQ(at_b[0].rfind("POST /landing ", 0), 0u) << at_b[0];
  EXPECT_NE(at_b[0].find("{\"event\":1}"), std::string::npos);
  EXPECT_EQ(at_a[1].rfind("GET /back ", 0), 0u) << at_a[1];
}

TEST_F(OutboundGuardTest, ASafeHeaderNamedAsACredentialIsDroppedAcrossOrigins) {
  a_.on("/start", redirectResponse(302, urlB("/landing")));
  b_.on("/landing", okResponse("ok"));
  OutboundRequest req{urlA("/start")};
  req.headers = {{"User-Agent", "tenant-42"}, {"Accept", "*/*"}};
  req.credential_headers = {"user-agent"};
  const auto r = guard_->fetch(req);
  ASSERT_TRUE(r.has_value()) << r.error().error.message();
  const auto at_b = b_.requests();
  ASSERT_EQ(at_b.size(), 1u);
  EXPECT_FALSE(hasHeader(at_b[0], "User-Agent")) << at_b[0];
  EXPECT_TRUE(hasHeader(at_b[0], "Accept")) << at_b[0];
}

// The port is part of the origin: a redirect to the same name on another
// port (a second loopback server on the same address) is another origin,
// and the credentials stay behind.
TEST_F(OutboundGuardTest, ARedirectToAnotherPortOfTheSameHostCarriesNoCredentials) {
  TestHttpServer c{kSinkA};
  ASSERT_TRUE(c.ok());
  auto policy = loadEgressPolicy(
      "egress:\n  mode: allowlist\n  destinations:\n"
      "    - host: hooks.example.com\n      ports: [" +
          std::to_string(a_.port()) + ", " + std::to_string(c.port()) + "]\n",
      "test");
  ASSERT_TRUE(policy.has_value()) << policy.error().message();
  policy_ = *policy;
  const auto guard = makeGuard(OutboundLimits{});
  const std::string url_c = "http://hooks.example.com:" + std::to_string(c.port()) + "/landing";
  a_.on("/start", redirectResponse(302, url_c));
  c.on("/landing", okResponse("landed"));
  OutboundRequest req{urlA("/start")};
  req.headers = {{"X-Api-Key", "k"}, {"Authorization", "Bearer t"}, {"Accept", "*/*"}};
  const auto r = guard->fetch(req);
  ASSERT_TRUE(r.has_value()) << r.error().error.message();
  EXPECT_EQ(r->body, "landed");
  ASSERT_EQ(r->hops.size(), 2u);
  EXPECT_TRUE(r->hops[0].credentials_sent);
  EXPECT_FALSE(r->hops[1].credentials_sent);
  const auto at_a = a_.requests();
  const auto at_c = c.requests();
  ASSERT_EQ(at_a.size(), 1u);
  ASSERT_EQ(at_c.size(), 1u);
  EXPECT_TRUE(hasHeader(at_a[0], "X-Api-Key")) << at_a[0];
  EXPECT_TRUE(hasHeader(at_a[0], "Authorization")) << at_a[0];
  EXPECT_FALSE(hasHeader(at_c[0], "X-Api-Key")) << at_c[0];
  EXPECT_FALSE(hasHeader(at_c[0], "Authorization")) << at_c[0];
  EXPECT_TRUE(hasHeader(at_c[0], "Accept")) << at_c[0];
}

TEST_F(OutboundGuardTest, ASameOriginRedirectKeepsEveryHeader) {
  a_.on("/start", redirectResponse(307, "/next"));
  a_.on("/next", okResponse("ok"));
  OutboundRequest req{urlA("/start"), "PUT"};
  req.headers = kProgramHeaders;
  req.body = "x";
  const auto r = guard_->fetch(req);
  ASSERT_TRUE(r.has_value()) << r.error().error.message();
  const auto at_a = a_.requests();
  ASSERT_EQ(at_a.size(), 2u);
  for (const auto& [name, value] : kProgramHeaders)
    EXPECT_TRUE(hasHeader(at_a[1], name)) << name << ": " << at_a[1];
  EXPECT_TRUE(r->hops[1].credentials_sent);
}

TEST_F(OutboundGuardTest, EachHopResolvesOnceAndCurlNeverResolves) {
  // /etc/hosts in this namespace sends both names to the trap: if libcurl
  // looked a name up itself it would connect there (or be refused by the
  // pin), and either way the fetch would not reach the sinks as asserted.
  a_.on("/one", redirectResponse(301, urlB("/two")));
  b_.on("/two", redirectResponse(308, urlA("/three")));
  a_.on("/three", okResponse("three"));
  const auto r = guard_->fetch({urlA("/one")});
  ASSERT_TRUE(r.has_value()) << r.error().error.message();
  EXPECT_EQ(r->body, "three");
  ASSERT_EQ(r->hops.size(), 3u);
  EXPECT_EQ(dns_.queries(), (std::vector<std::string>{"hooks.example.com.", "other.example.com.",
                                                      "hooks.example.com."}));
  for (const auto& hop : r->hops) {
    EXPECT_EQ(hop.decision.lookups, 1);
  }
  EXPECT_EQ(r->hops[1].dialed->toString(), kSinkB);
  EXPECT_FALSE(hasPendingConnection(hosts_trap_.get()));
}

TEST_F(OutboundGuardTest, ProxyEnvironmentVariablesAreIgnored) {
  std::uint16_t trap_port = 0;
  UniqueFd trap = listenOn(kProxyTrap, trap_port);
  ASSERT_TRUE(trap.valid());
  const std::string proxy = "http://" + std::string(kProxyTrap) + ":" + std::to_string(trap_port);
  const char* names[] = {"http_proxy",  "HTTP_PROXY", "https_proxy",
                         "HTTPS_PROXY", "ALL_PROXY",  "all_proxy"};
  for (const char* n : names) ::setenv(n, proxy.c_str(), 1);
  a_.on("/p", okResponse("direct"));
  const auto r = guard_->fetch({urlA("/p")});
  for (const char* n : names) ::unsetenv(n);
  ASSERT_TRUE(r.has_value()) << r.error().error.message();
  EXPECT_EQ(r->body, "direct");
  EXPECT_EQ(a_.requests().size(), 1u);
  EXPECT_FALSE(hasPendingConnection(trap.get()));
}

class RecordingObserver : public OutboundObserver {
 public:
  void onDecision(const Decision& decision, int hop) override {
    std::lock_guard lock(mu_);
    seen.emplace_back(hop, decision.reasonCode());
  }
  std::mutex mu_;
  std::vector<std::pair<int, std::string>> seen;
};

TEST_F(OutboundGuardTest, ObserverSeesEveryHopDecision) {
  auto observer = std::make_shared<RecordingObserver>();
  guard_ = makeGuard(OutboundLimits{}, observer);
  a_.on("/one", redirectResponse(302, urlB("/two")));
  b_.on("/two", redirectResponse(302, "http://meta.example.com/latest/meta-data/"));
  const auto r = guard_->fetch({urlA("/one")});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, "redirect_denied");
  (void)guard_->check("https://evil.example.org/");  // check() reports nothing
  const std::vector<std::pair<int, std::string>> expected = {
      {0, "allowed"}, {1, "allowed"}, {2, "resolved_denied:link_local"}};
  EXPECT_EQ(observer->seen, expected);
}

TEST_F(OutboundGuardTest, RedirectChainsAreBounded) {
  a_.on("/loop", redirectResponse(302, "/loop"));
  guard_ = makeGuard(OutboundLimits{.max_redirects = 3});
  const auto r = guard_->fetch({urlA("/loop")});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, "redirect_denied");
  EXPECT_NE(r.error().error.message().find("more than 3 redirects"), std::string::npos);
  EXPECT_EQ(a_.requests().size(), 4u);
}

TEST_F(OutboundGuardTest, ResponseSizeIsBounded) {
  a_.on("/big", okResponse(std::string(5000, 'x')));
  a_.on("/chunked",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        "1388\r\n" +
            std::string(5000, 'y') + "\r\n0\r\n\r\n");
  guard_ = makeGuard(OutboundLimits{.max_body_bytes = 4096});
  for (const char* path : {"/big", "/chunked"}) {
    SCOPED_TRACE(path);
    const auto r = guard_->fetch({urlA(path)});
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().code, "response_too_large");
    EXPECT_EQ(r.error().error.code, ErrorCode::kExecutionUnavailable);
  }
}

TEST_F(OutboundGuardTest, ErrorsNameTheOriginButNeverThePathOrQuery) {
  const auto r = guard_->fetch({"http://meta.example.com/hook?token=s3cret"});
  ASSERT_FALSE(r.has_value());
  const std::string message = r.error().error.message();
  EXPECT_NE(message.find("http://meta.example.com:80"), std::string::npos) << message;
  EXPECT_EQ(message.find("s3cret"), std::string::npos) << message;
}

// URL parsing alone (no server, no DNS): the PW rows of egress-vectors.tsv
// that need no redirect, and the strictness rules of outbound_guard.h.
TEST(EgressUrl, RefusalsBeforeAnyLookup) {
  struct Case {
    const char* url;
    Reason reason;
  };
  const Case cases[] = {
      {"https://evil.com#@hooks.example.com/", Reason::kHostNotAllowed},  // host is evil.com
      {"https://hooks.example.com\\@evil.com/", Reason::kMalformedAuthority},
      {"http://1.1.1.1 &@2.2.2.2# @3.3.3.3/", Reason::kMalformedAuthority},
      {"https://0x7f.1/", Reason::kIpLiteral},
      {"https://2130706433/", Reason::kIpLiteral},
      {"https://[::1]/", Reason::kIpLiteral},
      {"gopher://hooks.example.com:443/_x", Reason::kSchemeNotAllowed},
      {"file:///etc/passwd", Reason::kSchemeNotAllowed},
      {"ftp://hooks.example.com/", Reason::kSchemeNotAllowed},
      {"http://hooks.example.com/x", Reason::kPortNotAllowed},
      {"https://user@hooks.example.com/", Reason::kMalformedAuthority},
      {"https://user:pw@hooks.example.com/", Reason::kMalformedAuthority},
      {"https://hooks.example.com:0443/", Reason::kMalformedAuthority},
      {"https://hooks.example.com:+443/", Reason::kMalformedAuthority},
      {"https://hooks.example.com:65536/", Reason::kMalformedAuthority},
      {"https://hooks%2eexample.com/", Reason::kMalformedAuthority},
      {"https://hooks.ex\xc3\xa4mple.com/", Reason::kNonAsciiHost},
      {"https://hooks.example.com/a b", Reason::kMalformedRequest},
      {"https://hooks.example.com/\r\nX: y", Reason::kMalformedRequest},
      {"hooks.example.com:443", Reason::kSchemeNotAllowed},
      {"//hooks.example.com/", Reason::kMalformedRequest},
      {"https:hooks.example.com/", Reason::kMalformedRequest},
      {"https:///x", Reason::kMalformedAuthority},
  };
  auto policy = loadEgressPolicy(
      "egress:\n  mode: allowlist\n  destinations:\n    - host: hooks.example.com\n      ports: "
      "[443]\n",
      "PW");
  ASSERT_TRUE(policy.has_value()) << policy.error().message();
  testing::FakeDns dns;
  dns.setDefault({"93.184.215.14"});
  OutboundGuard guard(*policy, std::make_shared<GetaddrinfoResolver>(dns.backend()),
                      std::make_shared<AddressClassifier>(
                          std::make_shared<FixedSelfAddresses>(std::vector<IpAddress>{})));
  for (const Case& c : cases) {
    SCOPED_TRACE(c.url);
    const UrlDecision d = guard.check(c.url);
    EXPECT_FALSE(d.decision.allowed());
    EXPECT_EQ(d.decision.reason, c.reason) << d.decision.detail;
  }
  EXPECT_EQ(dns.lookupCount(), 0u);

  const UrlDecision ok = guard.check("https://Hooks.Example.COM./x?y=1");
  EXPECT_TRUE(ok.decision.allowed()) << ok.decision.reasonCode();
  ASSERT_TRUE(ok.url.has_value());
  EXPECT_EQ(ok.url->authority.host, "hooks.example.com");
  EXPECT_EQ(ok.url->authority.port, 443);
  EXPECT_EQ(ok.url->url, "https://hooks.example.com/x?y=1");
  EXPECT_EQ(dns.queries(), std::vector<std::string>{"hooks.example.com."});
}

// Every PW row of egress-vectors.tsv (tests/egress/data; PW is the
// platform's outbound point under {hooks.example.com: [443]}), decided by
// the guard. A redirect row is the guard's redirect step: the first URL is
// allowed, and the Location is decided from scratch and refused (fetch()
// reports that as redirect_denied; OutboundGuardTest.RedirectToARefused...
// runs the same through real redirects). The HTTPS_PROXY row: the URL is
// decided and dialled as if the variable were absent (never 10.0.0.9; the
// real request is OutboundGuardTest.ProxyEnvironmentVariablesAreIgnored).
TEST(EgressUrl, EveryPlatformVectorRow) {
  std::ifstream in(AIRLOCK_EGRESS_VECTORS);
  ASSERT_TRUE(in.good()) << AIRLOCK_EGRESS_VECTORS;
  std::set<std::string> codes;
  for (int r = 0; r <= static_cast<int>(Reason::kInternalError); ++r)
    codes.insert(std::string(reasonName(static_cast<Reason>(r))));
  auto leadingCode = [&codes](const std::string& text) -> std::optional<std::string> {
    std::size_t n = 0;
    while (n < text.size() && (std::islower(static_cast<unsigned char>(text[n])) || text[n] == '_'))
      ++n;
    const std::string word = text.substr(0, n);
    if (codes.count(word) != 0) return word;
    return std::nullopt;
  };
  auto policy = loadEgressPolicy(
      "egress:\n  mode: allowlist\n  destinations:\n    - host: hooks.example.com\n      ports: "
      "[443]\n",
      "PW");
  ASSERT_TRUE(policy.has_value()) << policy.error().message();
  std::string line;
  int rows = 0;
  while (std::getline(in, line)) {
    if (line.rfind("PW\t", 0) != 0) continue;
    ++rows;
    std::vector<std::string> cols;
    for (std::size_t start = 0;;) {
      const auto tab = line.find('\t', start);
      cols.push_back(
          line.substr(start, tab == std::string::npos ? std::string::npos : tab - start));
      if (tab == std::string::npos) break;
      start = tab + 1;
    }
    ASSERT_GE(cols.size(), 4u) << line;
    const std::string input = cols[1].substr(4);  // after "URL "
    const std::string& expected = cols[2];
    const std::string& reason = cols[3];
    SCOPED_TRACE(cols[1]);
    ASSERT_EQ(cols[1].rfind("URL ", 0), 0u);

    testing::FakeDns dns;
    dns.setDefault({"93.184.215.14"});
    OutboundGuard guard(*policy, std::make_shared<GetaddrinfoResolver>(dns.backend()),
                        std::make_shared<AddressClassifier>(
                            std::make_shared<FixedSelfAddresses>(std::vector<IpAddress>{})));
    std::string url = input;
    std::smatch m;
    if (std::regex_match(input, m, std::regex(R"((\S+) ; DNS -> \{([^}]*)\})"))) {
      url = m[1].str();
      dns.setDefault({m[2].str()});
    } else if (std::regex_match(input, m, std::regex(R"((\S+) -> (30[1-8]) Location: (\S+))"))) {
      const UrlDecision first = guard.check(m[1].str());
      EXPECT_TRUE(first.decision.allowed()) << first.decision.reasonCode();
      const UrlDecision hop = guard.check(m[3].str());
      EXPECT_EQ(expected, "deny");
      EXPECT_FALSE(hop.decision.allowed());
      if (reason.rfind("redirect_denied: ", 0) == 0) {
        if (auto code = leadingCode(reason.substr(17))) {
          EXPECT_EQ(hop.decision.reasonCode(), *code);
        }
      }
      continue;
    } else if (std::regex_match(input, m,
                                std::regex(R"((\S+) with HTTPS_PROXY=(\S+) in the worker env)"))) {
      ::setenv("HTTPS_PROXY", m[2].str().c_str(), 1);
      const UrlDecision d = guard.check(m[1].str());
      ::unsetenv("HTTPS_PROXY");
      EXPECT_EQ(expected, "deny");  // what is denied is the proxy route
      ASSERT_TRUE(d.decision.allowed()) << d.decision.reasonCode();
      EXPECT_EQ(d.decision.dialAddresses(),
                std::vector<IpAddress>{*IpAddress::parse("93.184.215.14")});
      continue;
    }
    const UrlDecision d = guard.check(url);
    EXPECT_EQ(d.decision.allowed(), expected == "allow") << d.decision.reasonCode();
    if (auto code = leadingCode(reason)) {
      EXPECT_EQ(d.decision.reasonCode(), *code);
    }
    if (!d.decision.allowed() && d.decision.reason != Reason::kResolvedDenied) {
      EXPECT_EQ(dns.lookupCount(), 0u) << "refused before any lookup";
    }
  }
  EXPECT_EQ(rows, 10);
}

}  // namespace
}  // namespace airlock::egress

// The whole binary runs in its own network and mount namespace (see the top
// of this file), entered before any thread exists.
int main(int argc, char** argv) {
  // glibc compares /etc/hosts names literally and the resolver asks for
  // "name.", so both spellings are listed.
  std::ostringstream hosts;
  hosts << "127.0.0.1 localhost\n";
  for (const char* name : {"hooks.example.com", "other.example.com", "meta.example.com",
                           "private.example.com", "evil.example.org"})
    hosts << airlock::egress::kHostsTrap << " " << name << " " << name << ".\n";
  return airlock::egress::testing::runTestsInHermeticNetwork(
      argc, argv, "outbound guard tests", hosts.str(), airlock::egress::g_hermetic,
      "tests that dial are skipped");
}
