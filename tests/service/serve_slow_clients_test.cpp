// Streaming executes (?stream=1) whose clients read one byte a second, stop
// reading, or go away, on a real mechanism: every command still ends at its
// own timeout or output cap, a client that goes away has its command
// cancelled, /healthz keeps answering promptly, destroy completes under a
// stalled stream, and the service stops on SIGTERM.
#include <gtest/gtest.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "../sandbox/linux/linux_test_support.h"
#include "raw_client.h"
#include "serve_process.h"

namespace airlock::testing {
namespace {

using namespace std::chrono_literals;
constexpr const char* kToken = "serve-slow-clients-token-0123456789";

// What each client does, by index.
enum class Client { kSlowReader, kStoppedAtCap, kVanishes, kStoppedAtTimeout };
constexpr Client kinds[] = {Client::kSlowReader, Client::kStoppedAtCap, Client::kVanishes,
                            Client::kStoppedAtTimeout};
constexpr int kTimeoutSeconds = 4;

nlohmann::json commandFor(Client kind) {
  switch (kind) {
    case Client::kStoppedAtCap:  // far past its 1 MiB cap
      return {{"argv", {"sh", "-c", "touch started; head -c 50000000 /dev/zero | tr '\\0' y"}},
              {"timeout_seconds", 120},
              {"maximum_output_bytes", 1 << 20}};
    case Client::kVanishes:  // would run for minutes if not cancelled
      return {{"argv", {"sh", "-c", "touch started; echo started; exec sleep 600"}},
              {"timeout_seconds", 600}};
    case Client::kSlowReader:
    case Client::kStoppedAtTimeout:  // 3 MB of output, then it outlives its timeout
      break;
  }
  return {{"argv",
           {"sh", "-c", "touch started; head -c 3000000 /dev/zero | tr '\\0' x; exec sleep 600"}},
          {"timeout_seconds", kTimeoutSeconds},
          {"maximum_output_bytes", 8 << 20}};
}

// The body of a chunked HTTP/1.1 response (after the head).
std::string dechunk(const std::string& raw) {
  std::string out;
  std::size_t at = raw.find("\r\n\r\n");
  if (at == std::string::npos) return out;
  at += 4;
  for (;;) {
    const std::size_t eol = raw.find("\r\n", at);
    if (eol == std::string::npos) return out;
    const std::size_t size = std::stoul(raw.substr(at, eol - at), nullptr, 16);
    if (size == 0) return out;
    out += raw.substr(eol + 2, size);
    at = eol + 2 + size + 2;
  }
}

// The last NDJSON line: {"result": ExecutionResult} (or an error).
nlohmann::json lastLine(const std::string& body) {
  std::size_t end = body.size();
  while (end > 0 && body[end - 1] == '\n') --end;
  const std::size_t start = body.rfind('\n', end == 0 ? 0 : end - 1);
  return nlohmann::json::parse(body.substr(start == std::string::npos ? 0 : start + 1, end),
                               nullptr, false);
}

// GET /healthz on its own connection: the status, or 0. Nothing shared
// with the rest of the test (ServeProcess's lock is held by its log
// drainer, a thread of normal priority: a real-time prober waiting on it
// would measure that).
long healthStatus(int port) {
  RawConnection c = RawConnection::open(port);
  if (!c.valid() || !c.sendAll("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
    return 0;
  const std::string answer = c.readToEnd(10s);
  return answer.rfind("HTTP/1.1 200", 0) == 0 ? 200 : 0;
}

// Threads that are told to stop and joined when the scope ends, however it
// ends: an ASSERT that returns early must not leave a joinable std::thread
// (that aborts the whole run, and the service with its sandboxes outlives
// it).
struct JoinOnExit {
  std::function<void()> stop;
  std::vector<std::thread> threads;
  ~JoinOnExit() {
    stop();
    for (auto& t : threads)
      if (t.joinable()) t.join();
  }
};

struct Mechanism {
  std::vector<std::string> env;
  int clients;
};

void runSlowClients(const Mechanism& mechanism, const TempStateDir& state) {
  const std::string config = state.path() + "/settings.yaml";
  std::ofstream(config) << "max_concurrent_executions: " << mechanism.clients + 16 << "\n";
  std::vector<std::string> env = mechanism.env;
  env.push_back("AIRLOCK_STATE_DIR=" + state.path());
  env.push_back("AIRLOCK_LISTEN=127.0.0.1:0");
  env.push_back(std::string("AIRLOCK_SERVICE_TOKEN=") + kToken);
  ServeProcess serve(env, AIRLOCK_BINARY, {"--config", config});
  ASSERT_GT(serve.port(), 0) << serve.log();

  const int n = mechanism.clients;
  std::vector<std::string> ids;
  for (int i = 0; i < n; ++i) {
    auto made = serve.request(
        "POST", "/v1/environments",
        nlohmann::json{{"tenant_id", "t1"}, {"run_id", "r" + std::to_string(i)}}.dump(), kToken);
    ASSERT_EQ(made.status, 201) << made.body;
    ids.push_back(made.json()["environment_id"]);
  }

  // /healthz, asked again and again while everything below runs.
  std::atomic<bool> probing{true};
  std::atomic<long> worst_health_ms{0};
  std::atomic<int> health_failures{0};
  // The prober runs at a real-time priority: on two cores shared with a
  // hundred busy sandboxes, an ordinary thread of this test is itself
  // scheduled out for hundreds of milliseconds, and would measure that
  // instead of the service. It probes every 20 ms (pacing, so that it never
  // holds a core).
  std::atomic<bool> realtime{false};
  const int port = serve.port();
  JoinOnExit probe{[&] { probing = false; }, {}};
  probe.threads.emplace_back([&] {
    sched_param param{};
    param.sched_priority = 10;
    realtime = ::pthread_setschedparam(::pthread_self(), SCHED_FIFO, &param) == 0;
    while (probing) {
      std::this_thread::sleep_for(20ms);
      const auto t0 = std::chrono::steady_clock::now();
      const long status = healthStatus(port);
      const long ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now() - t0)
                          .count();
      if (status != 200) ++health_failures;
      worst_health_ms = std::max(worst_health_ms.load(), ms);
    }
  });

  std::vector<RawConnection> clients;
  for (int i = 0; i < n; ++i) {
    clients.push_back(RawConnection::open(serve.port(), false, 4096));
    ASSERT_TRUE(clients.back().valid());
    const auto kind = kinds[i % 4];
    ASSERT_TRUE(clients.back().sendAll(
        postRequest("/v1/environments/" + ids[static_cast<std::size_t>(i)] + "/execute?stream=1",
                    commandFor(kind).dump(), kToken)));
  }
  // Slow readers take a byte a second; vanishing clients leave once their
  // command has started.
  std::atomic<bool> slow_reading{true};
  std::vector<std::string> received(static_cast<std::size_t>(n));
  JoinOnExit readers{[&] { slow_reading = false; }, {}};
  for (int i = 0; i < n; ++i) {
    const auto kind = kinds[i % 4];
    auto& c = clients[static_cast<std::size_t>(i)];
    auto& got = received[static_cast<std::size_t>(i)];
    if (kind == Client::kSlowReader) {
      readers.threads.emplace_back([&] {
        while (slow_reading) {
          got += c.readSome(1, 1000ms);
          std::this_thread::sleep_for(1s);  // the behaviour under test: a slow client
        }
      });
    } else if (kind == Client::kVanishes) {
      readers.threads.emplace_back([&] {
        while (got.find("started") == std::string::npos) {
          std::string part = c.readSome(4096, 60s);
          if (part.empty()) break;
          got += part;
        }
        c.close();
      });
    }
  }

  // Every streamed request has been taken by its environment before the
  // environment is asked for its next command: otherwise that request can
  // reach the environment first, and the streamed one is the one refused as
  // busy. Taken means its command touched "started" (each does first), or
  // its answer has begun (a command starved of CPU on this loaded machine
  // may reach its timeout before its first step).
  const auto start_deadline = std::chrono::steady_clock::now() + 60s;
  for (int i = 0; i < n; ++i) {
    const auto at = static_cast<std::size_t>(i);
    auto answered = [&] {
      pollfd p{clients[at].fd(), POLLIN, 0};
      return ::poll(&p, 1, 0) > 0;
    };
    HttpReply seen;
    while (seen.status != 200 && !answered() && std::chrono::steady_clock::now() < start_deadline)
      seen =
          serve.request("GET", "/v1/environments/" + ids[at] + "/files?path=started", "", kToken);
    ASSERT_TRUE(seen.status == 200 || answered())
        << "client " << i << ": its request was never taken (" << seen.body << ")";
  }

  // Every command ends, while the clients still have not read their output:
  // the environment takes the next command. Commands that would outlive
  // this deadline (the vanished clients' 600 s) prove they were cancelled.
  const auto deadline = std::chrono::steady_clock::now() + 90s;
  for (int i = 0; i < n; ++i) {
    HttpReply next;
    do {
      next =
          serve.request("POST", "/v1/environments/" + ids[static_cast<std::size_t>(i)] + "/execute",
                        R"({"argv": ["true"]})", kToken, 30);
    } while (next.status == 409 && std::chrono::steady_clock::now() < deadline);
    EXPECT_EQ(next.status, 200) << "client " << i << ": its command did not end: " << next.body;
  }
  readers.stop();
  for (auto& t : readers.threads) t.join();

  // Now the clients that kept their connection read the rest: the result
  // says the command ended at its own timeout or cap, not when read.
  for (int i = 0; i < n; ++i) {
    const auto kind = kinds[i % 4];
    if (kind == Client::kVanishes) continue;
    auto& c = clients[static_cast<std::size_t>(i)];
    bool complete = false;
    std::string raw = received[static_cast<std::size_t>(i)] + c.readToEnd(60s, &complete);
    ASSERT_TRUE(complete) << "client " << i << ": the response did not end";
    const auto line = lastLine(dechunk(raw));
    ASSERT_TRUE(line.contains("result")) << "client " << i << ": " << line.dump().substr(0, 400);
    const auto& result = line["result"];
    if (kind == Client::kStoppedAtCap) {
      EXPECT_EQ(result["killed_by"], "OUTPUT_LIMIT") << "client " << i;
    } else {
      EXPECT_EQ(result["killed_by"], "TIMEOUT") << "client " << i;
      EXPECT_LT(result["duration_ms"].get<long>(), (kTimeoutSeconds + 5) * 1000) << "client " << i;
    }
  }
  probe.stop();
  for (auto& t : probe.threads) t.join();
  EXPECT_EQ(health_failures, 0);
  std::printf("/healthz: worst %ld ms over the run (prober at %s priority)\n",
              worst_health_ms.load(), realtime ? "real-time" : "normal");
  // Without a real-time prober (no CAP_SYS_NICE) the figure is this test's
  // own scheduling, not the service's: then only the answers are checked.
  // The target is 100 ms. On a 2-core machine the worst probe measured
  // 0-65 ms on gvisor (20 clients) and 3-17 ms on linux (100 clients), with
  // the loop at a real-time priority, a descriptor table sized at start and
  // no worker resuming the loop through its scheduler lock; before those it
  // was 0.1-1.4 s. A fresh-clone CI run with other tests beside this one
  // measured 274 ms once, so the bound is 1 s: it leaves room for that and
  // still fails when the loop waits for a worker or a lock again (the old
  // failures: seconds, or no answer).
  if (realtime) {
    EXPECT_LT(worst_health_ms, 1000) << "/healthz took " << worst_health_ms << " ms at worst";
  }
  // The vanished clients' commands were cancelled.
  const auto metrics = serve.request("GET", "/metrics", "", kToken).body;
  EXPECT_NE(metrics.find("killed_by=\"CANCELLED\"} " + std::to_string(n / 4)), std::string::npos)
      << metrics;

  // A stream stalled mid-command: destroying its environment completes, and
  // the service stops on SIGTERM with another stalled stream open.
  RawConnection stalled[2];
  for (int k = 0; k < 2; ++k) {
    stalled[k] = RawConnection::open(serve.port(), false, 4096);
    nlohmann::json cmd = {
        {"argv",
         {"sh", "-c", "touch started; head -c 3000000 /dev/zero | tr '\\0' x; exec sleep 600"}},
        {"timeout_seconds", 600},
        {"maximum_output_bytes", 8 << 20}};
    ASSERT_TRUE(stalled[k].sendAll(
        postRequest("/v1/environments/" + ids[static_cast<std::size_t>(k)] + "/execute?stream=1",
                    cmd.dump(), kToken)));
    HttpReply seen;
    for (int tries = 0; tries < 2000 && seen.status != 200; ++tries)
      seen = serve.request(
          "GET", "/v1/environments/" + ids[static_cast<std::size_t>(k)] + "/files?path=started", "",
          kToken);
    ASSERT_EQ(seen.status, 200) << "the stalled command never started";
  }
  auto destroyed = serve.request("DELETE", "/v1/environments/" + ids[0], "", kToken, 30);
  EXPECT_EQ(destroyed.status, 204) << "destroy under a stalled stream: " << destroyed.body;
  const auto status = serve.signalAndWaitFor(SIGTERM, 60s);
  ASSERT_TRUE(status.has_value()) << "serve did not stop within 60 s with a stalled stream open";
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << serve.log().substr(0, 4000);
}

TEST(ServeSlowClients, LinuxCommandsEndAtTheirLimitsWhateverTheirClientsDo) {
  if (auto why = linuxJailUnavailable()) GTEST_SKIP() << *why;
  TempStateDir state;
  runSlowClients({{"PATH=/usr/bin:/bin"}, 100}, state);
}

// A client that sends more bytes after its streaming request and then hangs
// up still has its command cancelled (the hang-up is seen behind unread
// bytes).
TEST(ServeSlowClients, AClientThatHangsUpBehindBytesItSentIsStillCancelled) {
  if (auto why = linuxJailUnavailable()) GTEST_SKIP() << *why;
  TempStateDir state;
  ServeProcess serve({"PATH=/usr/bin:/bin", "AIRLOCK_STATE_DIR=" + state.path(),
                      "AIRLOCK_LISTEN=127.0.0.1:0",
                      std::string("AIRLOCK_SERVICE_TOKEN=") + kToken});
  ASSERT_GT(serve.port(), 0) << serve.log();
  auto made =
      serve.request("POST", "/v1/environments", R"({"tenant_id": "t1", "run_id": "r1"})", kToken);
  ASSERT_EQ(made.status, 201) << made.body;
  const std::string id = made.json()["environment_id"];
  RawConnection c = RawConnection::open(serve.port());
  ASSERT_TRUE(c.valid());
  nlohmann::json cmd = {{"argv", {"sh", "-c", "touch started; exec sleep 600"}},
                        {"timeout_seconds", 600}};
  ASSERT_TRUE(
      c.sendAll(postRequest("/v1/environments/" + id + "/execute?stream=1", cmd.dump(), kToken)));
  HttpReply seen;
  for (int tries = 0; tries < 2000 && seen.status != 200; ++tries)
    seen = serve.request("GET", "/v1/environments/" + id + "/files?path=started", "", kToken);
  ASSERT_EQ(seen.status, 200) << "the command never started";
  ASSERT_TRUE(c.sendAll("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"));  // bytes it never reads back
  c.close();
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  HttpReply next;
  do {
    next = serve.request("POST", "/v1/environments/" + id + "/execute", R"({"argv": ["true"]})",
                         kToken, 30);
  } while (next.status == 409 && std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(next.status, 200) << "the command of the client that hung up was not cancelled: "
                              << next.body;
  EXPECT_EQ(serve.request("DELETE", "/v1/environments/" + id, "", kToken).status, 204);
  const auto status = serve.signalAndWaitFor(SIGTERM, 60s);
  ASSERT_TRUE(status.has_value()) << "serve did not stop";
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << serve.log().substr(0, 4000);
}

TEST(ServeSlowClients, GvisorCommandsEndAtTheirLimitsWhateverTheirClientsDo) {
  if (::geteuid() != 0) GTEST_SKIP() << "the gvisor mechanism needs root";
  if (::access("/usr/bin/runsc", X_OK) != 0 && ::access("/usr/sbin/runsc", X_OK) != 0)
    GTEST_SKIP() << "runsc is not installed (Debian package runsc)";
  TempStateDir state;
  // Fewer clients: each gVisor sandbox is a runsc sandbox of its own.
  runSlowClients({{"AIRLOCK_DEPLOYMENT_MODE=production", "AIRLOCK_AUTH_MODE=token",
                   "AIRLOCK_SANDBOX=gvisor", "PATH=/usr/sbin:/usr/bin:/sbin:/bin"},
                  20},
                 state);
}

}  // namespace
}  // namespace airlock::testing
