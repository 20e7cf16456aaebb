// The execution node's reaper question over HTTP (execution/
// stale_lease_client.h) against real gateways: service::HttpServer serving
// the gateway's Api (with its lease book and internal credential) on
// 127.0.0.1:0. What each test measures:
//   - a lease whose run's epoch was bumped comes back stale, a current one
//     and one of an unknown run do not;
//   - a wrong credential, or the operator's token, gets nothing stale (the
//     gateway refuses it), and the refusal is reported;
//   - a gateway that is down is skipped for the next; all down is none;
//   - a gateway answering 200 with a malformed body counts as not
//     answering, and ids an answer names that were not asked are dropped;
//   - a LocalNode reaper pass asking through this client destroys exactly
//     the environment of the stale lease.
#include "airlock/node/stale_lease_client.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "airlock/core/limits_defaults.h"
#include "airlock/execution/node.h"
#include "airlock/gateway/api/api.h"
#include "airlock/sandbox/fake/fake_environment.h"
#include "airlock/service/http_server.h"

namespace airlock::execution {
namespace {

constexpr const char* kOperatorToken = "operator-token-0123456789abcdef";
constexpr const char* kCredential = "internal-credential-0123456789abcdef";

// A server on 127.0.0.1:0 serving `handler`, run on a thread of its own
// until destroyed.
class RunningServer {
 public:
  RunningServer(const service::Settings& settings, service::RequestHandler& handler,
                ExecutionEnvironment& env) {
    auto created = service::HttpServer::create(settings, handler, env);
    EXPECT_TRUE(created.has_value()) << created.error().message();
    if (!created) return;
    server_ = std::move(*created);
    thread_ = std::thread([this] { server_->run(); });
  }
  ~RunningServer() {
    if (server_) server_->stop();
    if (thread_.joinable()) thread_.join();
  }
  RunningServer(const RunningServer&) = delete;
  RunningServer& operator=(const RunningServer&) = delete;
  std::string url() const {
    return "http://127.0.0.1:" + std::to_string(server_ ? server_->port() : 0);
  }

 private:
  std::unique_ptr<service::HttpServer> server_;
  std::thread thread_;
};

// A gateway: the Api over a node of its own, its lease book in memory.
struct Gateway {
  explicit Gateway(const service::Settings& settings)
      : env(fake::FakeOptions{}),
        node(env),
        api(settings, node, gateway::ServiceImages::hostOnly(fake::kFakeImageDigest), metrics) {
    api.attachInternalCredential(kCredential);
  }
  service::Metrics metrics{"fake"};
  fake::FakeEnvironment env;
  LocalNode node;
  gateway::Api api;
};

// A port on 127.0.0.1 that nothing listens on: bound, then closed.
std::string closedPortUrl() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  ::close(fd);
  return "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
}

// Environment ids as nodes make them.
std::string envId(int n) {
  return "node-a.0190a1b2-c3d4-7e5f-8a9b-" + std::to_string(100000000000 + n);
}

class StaleLeaseClientTest : public ::testing::Test {
 protected:
  StaleLeaseClientTest() {
    settings_.service_token = kOperatorToken;
    settings_.listen = "127.0.0.1:0";
    gateway_ = std::make_unique<Gateway>(settings_);
    server_ = std::make_unique<RunningServer>(settings_, gateway_->api, gateway_->env);
  }
  ~StaleLeaseClientTest() override {
    server_.reset();
    gateway_.reset();
  }
  StaleLeaseQuery query(std::vector<std::string> urls, std::string credential = kCredential) {
    node::GatewayEndpoints endpoints;
    endpoints.urls = std::move(urls);
    endpoints.credential = std::move(credential);
    endpoints.timeout = std::chrono::seconds(10);
    endpoints.on_unanswered = [this](std::string_view url, std::string_view why) {
      unanswered_.push_back(std::string(url) + ": " + std::string(why));
    };
    return node::staleLeaseQueryOverHttp(std::move(endpoints));
  }

  service::Settings settings_;
  std::unique_ptr<Gateway> gateway_;
  std::unique_ptr<RunningServer> server_;
  std::vector<std::string> unanswered_;
};

const std::vector<LiveLease> kAsked = {
    {"t1", "r1", 4, envId(1)},  // r1 is at 5: stale
    {"t1", "r1", 5, envId(2)},  // current
    {"t1", "r9", 1, envId(3)},  // a run the gateway never heard of
    {"t2", "r1", 4, envId(4)},  // another tenant's run r1, at 4: current
};

TEST_F(StaleLeaseClientTest, ABumpedEpochComesBackStaleACurrentOneDoesNot) {
  ASSERT_TRUE(gateway_->api.leases().renew("t1", "r1", 5));
  ASSERT_TRUE(gateway_->api.leases().renew("t2", "r1", 4));
  EXPECT_EQ(query({server_->url()})(kAsked), std::vector<std::string>{envId(1)});
  EXPECT_TRUE(unanswered_.empty()) << unanswered_.front();
  EXPECT_EQ(query({server_->url()})({}), std::vector<std::string>{});
}

TEST_F(StaleLeaseClientTest, AWrongCredentialGetsNothingStale) {
  ASSERT_TRUE(gateway_->api.leases().renew("t1", "r1", 5));
  EXPECT_EQ(query({server_->url()}, "not-the-credential")(kAsked), std::vector<std::string>{});
  EXPECT_EQ(query({server_->url()}, kOperatorToken)(kAsked), std::vector<std::string>{})
      << "the operator's token is not the internal credential";
  ASSERT_EQ(unanswered_.size(), 2U);
  EXPECT_EQ(unanswered_[0], server_->url() + ": HTTP 401");
  EXPECT_EQ(unanswered_[1], server_->url() + ": HTTP 401");
}

TEST_F(StaleLeaseClientTest, AGatewayThatIsDownIsSkippedForTheNext) {
  ASSERT_TRUE(gateway_->api.leases().renew("t1", "r1", 5));
  const std::string down = closedPortUrl();
  EXPECT_EQ(query({down, server_->url() + "/"})(kAsked), std::vector<std::string>{envId(1)});
  ASSERT_EQ(unanswered_.size(), 1U);
  EXPECT_EQ(unanswered_[0].rfind(down + ": no connection", 0), 0U) << unanswered_[0];
}

TEST_F(StaleLeaseClientTest, WhenNoGatewayAnswersNothingIsStale) {
  ASSERT_TRUE(gateway_->api.leases().renew("t1", "r1", 5));
  EXPECT_EQ(query({closedPortUrl(), closedPortUrl()})(kAsked), std::vector<std::string>{});
  EXPECT_EQ(unanswered_.size(), 2U);
  EXPECT_EQ(query({})(kAsked), std::vector<std::string>{});
}

// A gateway that answers every request 200 with `body`.
class FixedAnswer final : public service::RequestHandler {
 public:
  explicit FixedAnswer(std::string body) : body_(std::move(body)) {}
  service::HttpResponse handle(const service::HttpRequest&) override {
    ++asked;
    service::HttpResponse r;
    r.body = body_;
    return r;
  }
  service::HttpResponse handleStreaming(const service::HttpRequest& request,
                                        const std::function<void(std::string)>&,
                                        const CancelToken*) override {
    return handle(request);
  }
  bool wantsStream(const service::HttpRequest&) const override { return false; }
  bool runsCommand(const service::HttpRequest&) const override { return false; }
  bool needsNoToken(const service::HttpRequest&) const override { return true; }
  bool authorized(const service::HttpRequest&) const override { return true; }
  std::string routeLabel(std::string_view) const override { return "any"; }
  int reap() override { return 0; }
  Result<std::size_t> fireSchedules() override { return 0; }
  void destroyAll() override {}
  service::Metrics& metrics() override { return metrics_; }
  std::atomic<int> asked{0};

 private:
  std::string body_;
  service::Metrics metrics_{"fake"};
};

TEST_F(StaleLeaseClientTest, AMalformedAnswerCountsAsNotAnswering) {
  ASSERT_TRUE(gateway_->api.leases().renew("t1", "r1", 5));
  fake::FakeEnvironment env{fake::FakeOptions{}};
  FixedAnswer malformed(R"({"stale": "all of them"})");
  RunningServer bad(settings_, malformed, env);
  EXPECT_EQ(query({bad.url(), server_->url()})(kAsked), std::vector<std::string>{envId(1)});
  EXPECT_EQ(malformed.asked.load(), 1);
  ASSERT_EQ(unanswered_.size(), 1U);
  EXPECT_NE(unanswered_[0].find("malformed"), std::string::npos) << unanswered_[0];
}

TEST_F(StaleLeaseClientTest, IdsThatWereNotAskedAboutAreIgnored) {
  fake::FakeEnvironment env{fake::FakeOptions{}};
  FixedAnswer overreaching("{\"stale\": [\"" + envId(2) + "\", \"" + envId(77) + "\", \"" +
                           envId(2) + "\"]}");
  RunningServer other(settings_, overreaching, env);
  EXPECT_EQ(query({other.url()})(kAsked), std::vector<std::string>{envId(2)});
}

TEST_F(StaleLeaseClientTest, ALocalNodesReaperPassDestroysExactlyTheStaleEnvironment) {
  fake::FakeEnvironment adapter{fake::FakeOptions{}};
  LocalNode node(adapter);
  auto provision = [&](const std::string& run, std::int64_t epoch) {
    EnvironmentSpec spec;
    spec.tenant_id = "t1";
    spec.run_id = run;
    spec.lease_epoch = epoch;
    spec.image_digest = fake::kFakeImageDigest;
    spec.limits = defaultLimits();
    auto handle = node.provision(spec);
    EXPECT_TRUE(handle.has_value()) << handle.error().message();
    return handle.value_or(EnvironmentHandle{}).environment_id;
  };
  const std::string bumped = provision("r1", 1);
  const std::string current = provision("r2", 1);
  const std::string unknown = provision("r3", 1);
  ASSERT_TRUE(gateway_->api.leases().renew("t1", "r1", 2));  // r1 re-claimed elsewhere
  ASSERT_TRUE(gateway_->api.leases().renew("t1", "r2", 1));
  EXPECT_EQ(node.reap(query({server_->url()})), 1);
  EXPECT_FALSE(node.find(bumped).has_value()) << "the stale environment is destroyed";
  EXPECT_TRUE(node.find(current).has_value());
  EXPECT_TRUE(node.find(unknown).has_value());
  // With every gateway down the next pass keeps everything.
  ASSERT_TRUE(gateway_->api.leases().renew("t1", "r2", 3));
  EXPECT_EQ(node.reap(query({closedPortUrl()})), 0);
  EXPECT_EQ(node.liveCount(), 2U);
  EXPECT_EQ(node.reap(query({server_->url()})), 1);
  EXPECT_FALSE(node.find(current).has_value());
  node.destroyAll();
}

}  // namespace
}  // namespace airlock::execution
