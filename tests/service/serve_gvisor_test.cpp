// `airlock serve` with deployment_mode=production and
// sandbox=gvisor starts and runs a command end to end over HTTP (and with
// sandbox=linux it refuses: gate_production_refuses_dev). Skipped, with the
// reason, only where runsc is absent.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <optional>
#include <string>
#include <vector>

#include "../sandbox/linux/linux_test_support.h"
#include "raw_client.h"
#include "serve_process.h"

namespace airlock::testing {
namespace {

constexpr const char* kToken = "serve-gvisor-token-0123456789abcdef";

// `airlock serve` in production mode on gvisor, with a token, on a loopback
// port; skipped where the mechanism cannot run.
class ServeGvisor : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "the gvisor mechanism needs root";
    if (::access("/usr/bin/runsc", X_OK) != 0 && ::access("/usr/sbin/runsc", X_OK) != 0)
      GTEST_SKIP() << "runsc is not installed (Debian package runsc)";
    serve_.emplace(std::vector<std::string>{
        "AIRLOCK_DEPLOYMENT_MODE=production", "AIRLOCK_AUTH_MODE=token", "AIRLOCK_SANDBOX=gvisor",
        std::string("AIRLOCK_SERVICE_TOKEN=") + kToken, "AIRLOCK_STATE_DIR=" + state_.path(),
        "AIRLOCK_LISTEN=127.0.0.1:0", "PATH=/usr/sbin:/usr/bin:/sbin:/bin"});
    ASSERT_GT(serve_->port(), 0) << serve_->log();
  }

  TempStateDir state_;
  std::optional<ServeProcess> serve_;
};

TEST_F(ServeGvisor, ProductionModeOnGvisorRunsACommandEndToEnd) {
  ServeProcess& serve = *serve_;
  auto h =
      serve.request("POST", "/v1/environments", R"({"tenant_id": "t1", "run_id": "r1"})", kToken);
  ASSERT_EQ(h.status, 201) << h.body;
  const std::string id = h.json()["environment_id"];
  auto r =
      serve.request("POST", "/v1/environments/" + id + "/execute",
                    R"J({"argv": ["python3", "-c", "print(1)"], "timeout_seconds": 60})J", kToken);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["exit_code"], 0) << r.body;
  EXPECT_EQ(r.json()["stdout"], "1\n") << r.body;
  EXPECT_EQ(serve.request("DELETE", "/v1/environments/" + id, "", kToken).status, 204);
  const int status = serve.signalAndWait(SIGTERM);
  ASSERT_TRUE(WIFEXITED(status)) << serve.log();
  EXPECT_EQ(WEXITSTATUS(status), 0) << serve.log();
}

// Cancel over HTTP on gvisor: a streaming execute whose client closes the
// connection ends as CANCELLED, and the cancel route ends a running execute
// with CANCELLED and its partial output; the environment takes the next
// command each time.
TEST_F(ServeGvisor, AClientThatLeavesAndTheCancelRouteEndCommandsAsCancelled) {
  ServeProcess& serve = *serve_;
  auto h =
      serve.request("POST", "/v1/environments", R"({"tenant_id": "t1", "run_id": "r1"})", kToken);
  ASSERT_EQ(h.status, 201) << h.body;
  const std::string base = "/v1/environments/" + h.json()["environment_id"].get<std::string>();
  const auto next = [&] {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    HttpReply r;
    do {
      r = serve.request("POST", base + "/execute", R"({"argv": ["true"]})", kToken, 30);
    } while (r.status == 409 && std::chrono::steady_clock::now() < deadline);
    return r;
  };

  RawConnection c = RawConnection::open(serve.port());
  ASSERT_TRUE(c.valid());
  ASSERT_TRUE(c.sendAll(postRequest(
      base + "/execute?stream=1",
      R"({"argv": ["sh", "-c", "echo started; exec sleep 600"], "timeout_seconds": 600})",
      kToken)));
  std::string got;
  while (got.find("started") == std::string::npos) {
    std::string part = c.readSome(4096, std::chrono::seconds(60));
    ASSERT_FALSE(part.empty()) << "the stream ended before the command started: " << got;
    got += part;
  }
  c.close();
  EXPECT_EQ(next().status, 200) << "the command of the client that left was not cancelled";
  EXPECT_NE(serve.request("GET", "/metrics", "", kToken).body.find("killed_by=\"CANCELLED\"} 1"),
            std::string::npos);

  auto running = std::async(std::launch::async, [&] {
    return serve.request(
        "POST", base + "/execute",
        R"({"argv": ["sh", "-c", "echo partial; touch started; exec sleep 600"], "timeout_seconds": 600, "execution_id": "exec-1"})",
        kToken, 120);
  });
  // Until the command has started (gvisor under load can take seconds),
  // bounded by time, not by a count of requests.
  HttpReply seen;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  while (seen.status != 200 && std::chrono::steady_clock::now() < until)
    seen = serve.request("GET", base + "/files?path=started", "", kToken);
  ASSERT_EQ(seen.status, 200) << "the command never started";
  EXPECT_EQ(serve.request("POST", base + "/executions/exec-1/cancel", "", kToken).status, 204);
  const HttpReply result = running.get();
  ASSERT_EQ(result.status, 200) << result.body;
  EXPECT_EQ(result.json()["killed_by"], "CANCELLED") << result.body;
  EXPECT_TRUE(result.json()["exit_code"].is_null());
  EXPECT_EQ(result.json()["stdout"], "partial\n");
  EXPECT_EQ(next().status, 200);
  EXPECT_EQ(serve.request("DELETE", base, "", kToken).status, 204);
  const int status = serve.signalAndWait(SIGTERM);
  ASSERT_TRUE(WIFEXITED(status)) << serve.log();
}

}  // namespace
}  // namespace airlock::testing
