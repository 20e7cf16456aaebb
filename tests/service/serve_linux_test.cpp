// `airlock serve` on the linux mechanism, over HTTP: behaviour that only a
// real adapter shows (the fake runs every command at once).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <future>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "../sandbox/linux/linux_test_support.h"
#include "raw_client.h"
#include "serve_process.h"

namespace airlock::testing {
namespace {

constexpr const char* kToken = "serve-linux-token-0123456789abcdef";

// One `airlock serve` on a fresh state directory (any free port, kToken)
// with the environment of tenant t1, run r1 created: `serve` and its `id`.
class ServeLinux : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = linuxJailUnavailable()) GTEST_SKIP() << *why;
    serve_ = std::make_unique<ServeProcess>(std::vector<std::string>{
        "AIRLOCK_STATE_DIR=" + state_.path(), "AIRLOCK_LISTEN=127.0.0.1:0",
        std::string("AIRLOCK_SERVICE_TOKEN=") + kToken, "PATH=/usr/bin:/bin"});
    ASSERT_GT(serve_->port(), 0) << serve_->log();
    auto h = serve_->request("POST", "/v1/environments", R"({"tenant_id": "t1", "run_id": "r1"})",
                             kToken);
    ASSERT_EQ(h.status, 201) << h.body;
    id_ = h.json()["environment_id"];
  }

  // Asks for the next command until the environment stops answering 409
  // (its running command has ended), for at most 30 s: that answer.
  HttpReply nextCommand(const std::string& body) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    HttpReply next;
    do {
      next = serve_->request("POST", "/v1/environments/" + id_ + "/execute", body, kToken, 30);
    } while (next.status == 409 && std::chrono::steady_clock::now() < deadline);
    return next;
  }
  // The command names of every process in the sandbox, by a command that
  // lists them.
  std::string processNames() {
    auto ps =
        nextCommand(R"({"argv": ["sh", "-c", "for p in /proc/[0-9]*; do cat $p/comm; done"]})");
    EXPECT_EQ(ps.status, 200) << ps.body;
    return ps.json().value("stdout", std::string());
  }

  TempStateDir state_;
  std::unique_ptr<ServeProcess> serve_;
  std::string id_;
};

// A streaming execute whose client closes the connection mid-command: the
// command ends as CANCELLED (the metric counts it), the environment takes
// the next command, and nothing of the cancelled command (its main process
// or the process it started in the background) is left running.
TEST_F(ServeLinux, AStreamingExecuteWhoseClientLeavesIsCancelledAndLeavesNothingRunning) {
  RawConnection c = RawConnection::open(serve_->port());
  ASSERT_TRUE(c.valid());
  const nlohmann::json cmd = {{"argv", {"sh", "-c", "sleep 600 & echo started; exec sleep 600"}},
                              {"timeout_seconds", 600}};
  ASSERT_TRUE(
      c.sendAll(postRequest("/v1/environments/" + id_ + "/execute?stream=1", cmd.dump(), kToken)));
  std::string got;
  while (got.find("started") == std::string::npos) {
    std::string part = c.readSome(4096, std::chrono::seconds(60));
    ASSERT_FALSE(part.empty()) << "the stream ended before the command started: " << got;
    got += part;
  }
  c.close();  // the client goes away while its command runs
  auto next = nextCommand(R"({"argv": ["true"]})");
  ASSERT_EQ(next.status, 200) << "the command of the client that left was not cancelled: "
                              << next.body;
  const std::string metrics = serve_->request("GET", "/metrics", "", kToken).body;
  EXPECT_NE(metrics.find("killed_by=\"CANCELLED\"} 1"), std::string::npos) << metrics;
  EXPECT_EQ(processNames().find("sleep"), std::string::npos) << "a process outlived the cancel";
}

// The cancel route ends a running (unstreamed) execute: 204 at once, and
// the execute answers with killed_by CANCELLED, no exit code and the
// output the command had written; nothing of it is left running.
TEST_F(ServeLinux, TheCancelRouteEndsARunningCommandWithItsPartialOutput) {
  ServeProcess& serve = *serve_;
  const std::string base = "/v1/environments/" + id_;
  const nlohmann::json cmd = {
      {"argv", {"sh", "-c", "echo partial; sleep 600 & touch started; exec sleep 600"}},
      {"timeout_seconds", 600},
      {"execution_id", "exec-1"}};
  auto running = std::async(std::launch::async, [&] {
    return serve.request("POST", base + "/execute", cmd.dump(), kToken, 120);
  });
  HttpReply seen;  // until the command has started: bounded by time, not a count
  for (const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
       seen.status != 200 && std::chrono::steady_clock::now() < until;)
    seen = serve.request("GET", base + "/files?path=started", "", kToken);
  ASSERT_EQ(seen.status, 200) << "the command never started";
  auto cancelled = serve.request("POST", base + "/executions/exec-1/cancel", "", kToken);
  EXPECT_EQ(cancelled.status, 204) << cancelled.body;
  const HttpReply result = running.get();
  ASSERT_EQ(result.status, 200) << result.body;
  const auto j = result.json();
  EXPECT_EQ(j["killed_by"], "CANCELLED") << result.body;
  EXPECT_TRUE(j["exit_code"].is_null());
  EXPECT_EQ(j["timed_out"], false);
  EXPECT_EQ(j["stdout"], "partial\n");
  EXPECT_EQ(j["output_held_open"], nlohmann::json::array());
  EXPECT_EQ(serve.request("POST", base + "/executions/exec-1/cancel", "", kToken).status, 404)
      << "over: nothing to cancel";
  EXPECT_EQ(processNames().find("sleep"), std::string::npos) << "a process outlived the cancel";
}

// A second execute while one runs is refused (409), and leaves the sandbox,
// its running command and its files alone; a client that gives up waiting
// for a non-streamed execute does not take the environment with it either.
TEST_F(ServeLinux, ABusyOrAbandonedExecuteLeavesTheEnvironmentAlive) {
  ServeProcess& serve = *serve_;
  const std::string& id = id_;
  const std::string base = "/v1/environments/" + id;
  ASSERT_EQ(serve.request("PUT", base + "/files?path=keep.txt", "kept", kToken).status, 204);

  // A client that gives up at once (a 1 s client timeout) on a command
  // that says it started, then waits for a file this test writes.
  auto abandoned = serve.request(
      "POST", base + "/execute",
      R"({"argv": ["sh", "-c", "touch started; while [ ! -e go ]; do sleep 0.05; done"], "timeout_seconds": 60})",
      kToken, 1);
  EXPECT_EQ(abandoned.status, 0) << abandoned.body;
  HttpReply seen;  // until the command has started: bounded by time, not a count
  for (const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
       seen.status != 200 && std::chrono::steady_clock::now() < until;)
    seen = serve.request("GET", base + "/files?path=started", "", kToken);
  ASSERT_EQ(seen.status, 200) << "the command never started";

  // Still running: a second execute is refused, and changes nothing.
  auto busy = serve.request("POST", base + "/execute", R"({"argv": ["true"]})", kToken);
  EXPECT_EQ(busy.status, 409) << busy.body;
  EXPECT_NE(busy.body.find("another command is running"), std::string::npos) << busy.body;
  EXPECT_EQ(serve.request("GET", base + "/files?path=keep.txt", "", kToken).body, "kept");
  EXPECT_EQ(serve.request("GET", base, "", kToken).status, 200) << "the environment was destroyed";

  // Let the abandoned command end; the environment takes the next one.
  ASSERT_EQ(serve.request("PUT", base + "/files?path=go", "", kToken).status, 204);
  HttpReply next;
  for (const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
       std::chrono::steady_clock::now() < until;) {
    next = serve.request("POST", base + "/execute", R"({"argv": ["cat", "keep.txt"]})", kToken);
    if (next.status != 409) break;
  }
  ASSERT_EQ(next.status, 200) << next.body;
  EXPECT_EQ(next.json()["stdout"], "kept") << next.body;
  EXPECT_EQ(serve.request("DELETE", base, "", kToken).status, 204);
  const int status = serve.signalAndWait(SIGTERM);
  ASSERT_TRUE(WIFEXITED(status)) << serve.log();
}

// Code mode through `airlock serve`: a program runs over HTTP, and the
// service's own fire loop moves its schedule into the outbox (the loop runs
// every schedule_fire_interval, 1 s by default).
TEST_F(ServeLinux, CodeModeRunsAProgramAndTheServiceFiresItsSchedule) {
  ServeProcess& serve = *serve_;
  const std::string& id = id_;
  nlohmann::json body = {{"program",
                          "from airlock_cap import schedule, proc\n"
                          "def main():\n"
                          "    schedule.after('soon', 1, body='wake up')\n"
                          "    return proc.stdout(['echo', 'ran'])\n"}};
  auto ran = serve.request("POST", "/v1/environments/" + id + "/code", body.dump(), kToken);
  ASSERT_EQ(ran.status, 200) << ran.body << serve.log();
  EXPECT_EQ(ran.json()["outcome"]["completed"], "ran\n") << ran.body;

  // The fire appears in the outbox once the service's loop passes it.
  nlohmann::json fires = nlohmann::json::array();
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (fires.empty() && std::chrono::steady_clock::now() < until) {
    auto r = serve.request("GET", "/v1/schedule-fires?after=0", "", kToken);
    ASSERT_EQ(r.status, 200) << r.body;
    fires = r.json()["fires"];
  }
  ASSERT_EQ(fires.size(), 1u) << serve.log();
  EXPECT_EQ(fires[0]["creator"], id);
  EXPECT_EQ(fires[0]["name"], "soon");
  EXPECT_EQ(fires[0]["body"], "wake up");
  // The counter moves once the firing pass has committed (just after the
  // fire became visible in the outbox).
  HttpReply metrics;
  while (metrics.body.find("airlock_schedule_fires_total 1") == std::string::npos &&
         std::chrono::steady_clock::now() < until)
    metrics = serve.request("GET", "/metrics", "", kToken);
  EXPECT_NE(metrics.body.find("airlock_schedule_fires_total 1"), std::string::npos) << metrics.body;
  EXPECT_EQ(metrics.body.find("airlock_schedule_fires_total 2"), std::string::npos)
      << "fired twice";
  EXPECT_EQ(serve.request("DELETE", "/v1/environments/" + id, "", kToken).status, 204);
  const int status = serve.signalAndWait(SIGTERM);
  ASSERT_TRUE(WIFEXITED(status)) << serve.log();
}

// A command running when its environment is extended runs on to the new
// expires_at. Under a 10 s lifetime (which also caps a command's timeout),
// a command admitted 4 s in with 6 s left sleeps 7 s: past the first
// expiry, within its timeout. Extended while it runs, it ends on its own
// (exit 0, not EXPIRED) and the environment lives on; its own timeout still
// ends a later one.
TEST(ServeLinuxLifetime, ACommandRunningWhenItsEnvironmentIsExtendedRunsOnToTheNewExpiry) {
  if (auto why = linuxJailUnavailable()) GTEST_SKIP() << *why;
  TempStateDir state;
  ServeProcess serve({"AIRLOCK_STATE_DIR=" + state.path(), "AIRLOCK_LISTEN=127.0.0.1:0",
                      std::string("AIRLOCK_SERVICE_TOKEN=") + kToken, "PATH=/usr/bin:/bin",
                      "AIRLOCK_ENVIRONMENT_LIFETIME=10s", "AIRLOCK_ENVIRONMENT_HARD_CAP=300s",
                      "AIRLOCK_REAPER_INTERVAL=1s"});
  ASSERT_GT(serve.port(), 0) << serve.log();
  auto made =
      serve.request("POST", "/v1/environments", R"({"tenant_id": "t1", "run_id": "r1"})", kToken);
  ASSERT_EQ(made.status, 201) << made.body;
  const std::string base = "/v1/environments/" + made.json()["environment_id"].get<std::string>();
  // The environment ages 4 s: the next command is admitted with 6 s left.
  auto aged = serve.request("POST", base + "/execute", R"({"argv": ["sleep", "4"]})", kToken, 60);
  ASSERT_EQ(aged.status, 200) << aged.body;
  const nlohmann::json cmd = {{"argv", {"sh", "-c", "touch started; sleep 7; echo done"}},
                              {"timeout_seconds", 60}};
  auto running = std::async(std::launch::async, [&] {
    return serve.request("POST", base + "/execute", cmd.dump(), kToken, 120);
  });
  HttpReply seen;  // until the command has started: bounded by time, not a count
  for (const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(6);
       seen.status != 200 && std::chrono::steady_clock::now() < until;)
    seen = serve.request("GET", base + "/files?path=started", "", kToken);
  ASSERT_EQ(seen.status, 200) << "the command never started";
  auto extended = serve.request("POST", base + "/extend", R"({"seconds": 120})", kToken);
  ASSERT_EQ(extended.status, 200) << extended.body;
  const HttpReply result = running.get();
  ASSERT_EQ(result.status, 200) << result.body;
  const auto j = result.json();
  EXPECT_TRUE(j["killed_by"].is_null()) << result.body;
  EXPECT_EQ(j["exit_code"], 0) << result.body;
  EXPECT_EQ(j["stdout"], "done\n");
  EXPECT_EQ(serve.request("GET", base, "", kToken).status, 200) << "the environment lives on";

  auto timed = serve.request("POST", base + "/execute",
                             R"({"argv": ["sleep", "60"], "timeout_seconds": 1})", kToken, 60);
  ASSERT_EQ(timed.status, 200) << timed.body;
  EXPECT_EQ(timed.json()["killed_by"], "TIMEOUT") << timed.body;
  EXPECT_EQ(serve.request("DELETE", base, "", kToken).status, 204);
}

// An operator's ceiling above the built-in one is the mechanism's ceiling
// too: a memory limit between the two provisions (it is a limit, not a
// reservation), one above the operator's is refused naming that ceiling.
TEST(ServeLinuxCeilings, AnOperatorCeilingAboveTheBuiltInOneHolds) {
  if (auto why = linuxJailUnavailable()) GTEST_SKIP() << *why;
  TempStateDir state;
  const std::string config = state.path() + "/settings.yaml";
  std::ofstream(config) << "limits:\n  ceilings:\n    memory_bytes: 128G\n";
  ServeProcess serve({"AIRLOCK_STATE_DIR=" + state.path(), "AIRLOCK_LISTEN=127.0.0.1:0",
                      std::string("AIRLOCK_SERVICE_TOKEN=") + kToken, "PATH=/usr/bin:/bin"},
                     AIRLOCK_BINARY, {"--config", config});
  ASSERT_GT(serve.port(), 0) << serve.log();
  auto made = serve.request(
      "POST", "/v1/environments",
      R"({"tenant_id": "t1", "run_id": "r1", "limits": {"memory_bytes": 107374182400}})", kToken);
  ASSERT_EQ(made.status, 201) << made.body;
  const std::string id = made.json()["environment_id"];
  auto ran =
      serve.request("POST", "/v1/environments/" + id + "/execute", R"({"argv": ["true"]})", kToken);
  EXPECT_EQ(ran.status, 200) << ran.body;
  EXPECT_EQ(serve.request("DELETE", "/v1/environments/" + id, "", kToken).status, 204);
  auto above = serve.request(
      "POST", "/v1/environments",
      R"({"tenant_id": "t1", "run_id": "r2", "limits": {"memory_bytes": 150323855360}})", kToken);
  EXPECT_NE(above.status, 201) << above.body;
  EXPECT_NE(above.body.find("128 GiB"), std::string::npos) << above.body;
}

}  // namespace
}  // namespace airlock::testing
