// `airlock serve` against clients that hold connections without using them:
// the connection bounds, the deadline for an unauthenticated request, the
// accept loop at the descriptor limit, and request framing it refuses. The
// fake mechanism is enough: nothing here is about sandboxes.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "../sandbox/linux/linux_test_support.h"
#include "raw_client.h"
#include "serve_process.h"

namespace airlock::testing {
namespace {

constexpr const char* kToken = "serve-connections-token-0123456789";

int openFdCount(pid_t pid) {
  int n = 0;
  if (DIR* d = ::opendir(("/proc/" + std::to_string(pid) + "/fd").c_str())) {
    while (const dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
    ::closedir(d);
  }
  return n;
}

class ServeConnections : public ::testing::Test {
 protected:
  // Starts serve (fake mechanism) with `yaml` as its settings file.
  void start(const std::string& yaml = "") {
    const std::string config = state_.path() + "/settings.yaml";
    std::ofstream(config) << yaml;
    serve_ = std::make_unique<ServeProcess>(
        std::vector<std::string>{"AIRLOCK_STATE_DIR=" + state_.path(), "AIRLOCK_LISTEN=127.0.0.1:0",
                                 "AIRLOCK_SANDBOX=fake",
                                 std::string("AIRLOCK_SERVICE_TOKEN=") + kToken,
                                 "PATH=/usr/bin:/bin"},
        AIRLOCK_BINARY, std::vector<std::string>{"--config", config});
    ASSERT_GT(serve_->port(), 0) << serve_->log();
  }
  // An authenticated round trip: provision, execute, destroy.
  void expectServiceAnswers(const std::string& when) {
    auto made = serve_->request("POST", "/v1/environments",
                                R"({"tenant_id": "t1", "run_id": "r1"})", kToken, 20);
    ASSERT_EQ(made.status, 201) << when << ": " << made.body;
    const std::string id = made.json()["environment_id"];
    auto ran = serve_->request("POST", "/v1/environments/" + id + "/execute",
                               R"({"argv": ["echo", "hi"]})", kToken, 20);
    EXPECT_EQ(ran.status, 200) << when << ": " << ran.body;
    EXPECT_EQ(serve_->request("DELETE", "/v1/environments/" + id, "", kToken, 20).status, 204)
        << when;
  }

  TempStateDir state_;
  std::unique_ptr<ServeProcess> serve_;
};

// dev auth without a configured token: serve makes one (48 hex digits of
// the kernel's CSPRNG), writes it 0600 to <state_dir>/service-token with no
// temporary file left beside it, and answers requests that carry it.
TEST_F(ServeConnections, DevAuthWritesAFreshTokenFileThatAuthenticates) {
  serve_ = std::make_unique<ServeProcess>(
      std::vector<std::string>{"AIRLOCK_STATE_DIR=" + state_.path(), "AIRLOCK_LISTEN=127.0.0.1:0",
                               "AIRLOCK_SANDBOX=fake", "PATH=/usr/bin:/bin"});
  ASSERT_GT(serve_->port(), 0) << serve_->log();
  const std::string path = state_.path() + "/service-token";
  std::ifstream in(path);
  std::string token;
  ASSERT_TRUE(std::getline(in, token)) << path;
  EXPECT_EQ(token.size(), 48u);
  EXPECT_EQ(token.find_first_not_of("0123456789abcdef"), std::string::npos) << token;
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_NE(::access((path + ".tmp").c_str(), F_OK), 0);
  EXPECT_EQ(serve_->request("GET", "/v1/images", "", token, 20).status, 200) << serve_->log();
  EXPECT_EQ(serve_->request("GET", "/v1/images", "", std::string(48, '0'), 20).status, 401);
}

// Holds `count` idle connections to 127.0.0.1:port in a child process of
// its own (a process's descriptor limit may be below what the test needs in
// all), until `release` is closed. Between fork and _exit the child makes
// only syscalls (the parent has threads).
struct IdleHolder {
  pid_t pid = -1;
  int ready = -1;    // the child writes one byte once every connect is under way
  int release = -1;  // closed by the parent: the child exits, closing them all
};

IdleHolder holdIdleConnections(int port, int count) {
  int ready[2], release[2];
  if (::pipe2(ready, O_CLOEXEC) != 0 || ::pipe2(release, O_CLOEXEC) != 0) return {};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(ready[0]);
    ::close(release[1]);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int opened = 0;
    for (int i = 0; i < count; ++i) {
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
      if (fd < 0) break;
      if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 ||
          errno == EINPROGRESS)
        ++opened;
    }
    const char verdict = opened == count ? 'y' : 'n';
    (void)!::write(ready[1], &verdict, 1);
    char byte;
    (void)!::read(release[0], &byte, 1);
    ::_exit(0);
  }
  ::close(ready[1]);
  ::close(release[0]);
  return {pid, ready[0], release[1]};
}

// 20,000 idle connections that never send a byte (held by two processes):
// authenticated callers are still served while they are open (the service
// closes the idle ones waiting longest to make room), and once they close
// the service holds no more descriptors than before.
TEST_F(ServeConnections, TwentyThousandIdleConnectionsNeverLockOutAuthenticatedCallers) {
  constexpr int kPerHolder = 10000;
  start();
  expectServiceAnswers("before the idle connections");
  const int baseline = openFdCount(serve_->pid());

  std::vector<IdleHolder> holders;
  for (int k = 0; k < 2; ++k) {
    holders.push_back(holdIdleConnections(serve_->port(), kPerHolder));
    ASSERT_GT(holders.back().pid, 0);
    char verdict = 0;
    ASSERT_EQ(::read(holders.back().ready, &verdict, 1), 1);
    ASSERT_EQ(verdict, 'y') << "holder " << k << " could not open " << kPerHolder << " connections";
    expectServiceAnswers("with " + std::to_string((k + 1) * kPerHolder) + " idle connections");
  }
  auto health = serve_->request("GET", "/healthz", "", "", 20);
  EXPECT_EQ(health.status, 200) << health.body;
  // The service never holds more than its bound of unauthenticated ones.
  EXPECT_LT(openFdCount(serve_->pid()), baseline + 1024 + 64);

  // Newest first: a later holder inherited the parent's end of an earlier
  // one's release pipe.
  for (auto it = holders.rbegin(); it != holders.rend(); ++it) {
    auto& h = *it;
    ::close(h.release);
    int status = 0;
    ::waitpid(h.pid, &status, 0);
    ::close(h.ready);
  }
  expectServiceAnswers("after the idle connections closed");
  // What they held is given back (the closes reach the service a little
  // after ours; wait for it, bounded).
  int now = openFdCount(serve_->pid());
  for (int i = 0; i < 2000 && now > baseline + 8; ++i) {
    serve_->request("GET", "/healthz");
    now = openFdCount(serve_->pid());
  }
  EXPECT_LE(now, baseline + 8) << "descriptors still held after the idle connections closed";
  const auto status = serve_->signalAndWaitFor(SIGTERM, std::chrono::seconds(30));
  ASSERT_TRUE(status.has_value()) << "serve did not stop";
  EXPECT_TRUE(WIFEXITED(*status)) << serve_->log();
}

// Past max_unauthenticated_connections, the connection idle longest is
// closed for a new one, and an authenticated caller still gets in.
TEST_F(ServeConnections, UnauthenticatedConnectionsPastTheirBoundAreClosedOldestFirst) {
  start("max_unauthenticated_connections: 8\n");
  std::vector<RawConnection> idle;
  for (int i = 0; i < 20; ++i) {
    idle.push_back(RawConnection::open(serve_->port()));
    ASSERT_TRUE(idle.back().valid());
  }
  // The first twelve are closed by the service (end of stream); the last
  // eight stay open.
  for (std::size_t i = 0; i < 12; ++i) {
    bool timed_out = false;
    const std::string got = idle[i].readSome(16, std::chrono::seconds(5), &timed_out);
    EXPECT_FALSE(timed_out) << "connection " << i << " (among the oldest) is still open";
    EXPECT_EQ(got, "") << "connection " << i;
  }
  for (std::size_t i = 12; i < 20; ++i) {
    bool timed_out = false;
    idle[i].readSome(16, std::chrono::milliseconds(20), &timed_out);
    EXPECT_TRUE(timed_out) << "connection " << i << " (among the newest) was closed";
  }
  // A caller with the token still gets in; each of its connections makes
  // room by closing the oldest idle one (12, 13, 14), and never a newer one.
  expectServiceAnswers("past the bound");
  bool timed_out = false;
  idle[12].readSome(16, std::chrono::seconds(5), &timed_out);
  EXPECT_FALSE(timed_out) << "the oldest remaining idle connection was not the one closed";
  idle[19].readSome(16, std::chrono::milliseconds(20), &timed_out);
  EXPECT_TRUE(timed_out) << "the newest idle connection was closed";
}

// A connection that has not authenticated must send its request within
// unauthenticated_request_timeout.
TEST_F(ServeConnections, AConnectionThatSendsNothingIsClosedAtItsDeadline) {
  start("unauthenticated_request_timeout: 1s\n");
  RawConnection c = RawConnection::open(serve_->port());
  ASSERT_TRUE(c.valid());
  bool complete = false;
  const std::string got = c.readToEnd(std::chrono::seconds(8), &complete);
  EXPECT_TRUE(complete) << "the silent connection was not closed within 8 s (deadline 1 s)";
  EXPECT_EQ(got, "");
  expectServiceAnswers("after the deadline");
}

// Only "chunked" is decoded: a request with another transfer coding is
// refused (501) rather than handed on undecoded.
TEST_F(ServeConnections, TransferCodingsOtherThanChunkedAreRefused) {
  start();
  for (const std::string coding : {"gzip, chunked", "deflate, chunked", "chunked, chunked"}) {
    RawConnection c = RawConnection::open(serve_->port());
    ASSERT_TRUE(c.valid());
    const std::string body = R"({"tenant_id": "t1", "run_id": "r1"})";
    char size[16];
    std::snprintf(size, sizeof size, "%zx", body.size());
    ASSERT_TRUE(c.sendAll(
        std::string("POST /v1/environments HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ") +
        kToken + "\r\nTransfer-Encoding: " + coding + "\r\n\r\n" + size + "\r\n" + body +
        "\r\n0\r\n\r\n"));
    bool complete = false;
    const std::string answer = c.readToEnd(std::chrono::seconds(10), &complete);
    EXPECT_TRUE(complete) << coding;
    EXPECT_TRUE(answer.rfind("HTTP/1.1 501", 0) == 0 || answer.rfind("HTTP/1.1 400", 0) == 0)
        << coding << ": " << answer;
  }
  // Nothing was provisioned by the refused requests.
  auto listed = serve_->request("GET", "/v1/environments?tenant_id=t1", "", kToken);
  ASSERT_EQ(listed.status, 200) << listed.body;
  EXPECT_EQ(listed.json()["environments"].size(), 0u) << listed.body;
}

// A header folded over lines (obs-fold) is refused before anything reads
// it: a folded Authorization never authenticates. The scheme is matched
// case-insensitively (RFC 9110).
TEST_F(ServeConnections, AFoldedHeaderIsRefusedAndTheSchemeIsCaseInsensitive) {
  start();
  const std::string token = kToken;
  const std::string folds[] = {"Authorization: Bearer\r\n " + token,
                               "Authorization:\r\n Bearer " + token,
                               "Authorization: Bearer " + token + "\r\n \r\n",
                               "Authorization: Bearer " + token + "\r\nX-Other: a\r\n\tb"};
  for (const std::string& header : folds) {
    RawConnection c = RawConnection::open(serve_->port());
    ASSERT_TRUE(c.valid());
    ASSERT_TRUE(c.sendAll("GET /v1/environments HTTP/1.1\r\nHost: x\r\n" + header + "\r\n\r\n"));
    bool complete = false;
    const std::string answer = c.readToEnd(std::chrono::seconds(10), &complete);
    EXPECT_TRUE(complete);
    EXPECT_EQ(answer.rfind("HTTP/1.1 400", 0), 0u) << header << " -> " << answer.substr(0, 200);
  }
  for (const std::string scheme : {"bearer", "BEARER", "Bearer"}) {
    RawConnection c = RawConnection::open(serve_->port());
    ASSERT_TRUE(c.valid());
    ASSERT_TRUE(c.sendAll(
        "GET /v1/environments HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: " +
        scheme + " " + token + "\r\n\r\n"));
    const std::string answer = c.readToEnd(std::chrono::seconds(10));
    EXPECT_EQ(answer.rfind("HTTP/1.1 200", 0), 0u) << scheme << " -> " << answer.substr(0, 200);
  }
}

// A client without the token never takes an execution slot: its requests
// are answered 401 at once and its connection closes, however many it
// pipelines and whether or not it reads.
TEST_F(ServeConnections, UnauthenticatedRequestsNeverTakeAnExecutionSlot) {
  start("max_concurrent_executions: 1\n");
  std::string flood;
  for (int i = 0; i < 50; ++i)
    flood += "POST /v1/environments/x/execute HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}";
  RawConnection holders[2] = {RawConnection::open(serve_->port(), false, 2048),
                              RawConnection::open(serve_->port(), false, 2048)};
  for (auto& h : holders) {
    ASSERT_TRUE(h.valid());
    ASSERT_TRUE(h.sendAll(flood));
  }
  expectServiceAnswers("with unauthenticated pipelines that never read");
  for (auto& h : holders) {
    bool complete = false;
    const std::string answer = h.readToEnd(std::chrono::seconds(10), &complete);
    EXPECT_TRUE(complete) << "the unauthenticated connection stayed open";
    EXPECT_EQ(answer.rfind("HTTP/1.1 401", 0), 0u) << answer.substr(0, 200);
    EXPECT_EQ(answer.find("HTTP/1.1", 1), std::string::npos)
        << "more than one answer on a refused connection";
  }
}

// The token counts only in the request head: an Authorization field in a
// chunked body's trailer never authenticates.
TEST_F(ServeConnections, ATrailerAuthorizationNeverAuthenticates) {
  start();
  RawConnection c = RawConnection::open(serve_->port());
  ASSERT_TRUE(c.valid());
  const std::string body = R"({"tenant_id":"t1","run_id":"trailer"})";
  char size[16];
  std::snprintf(size, sizeof size, "%zx", body.size());
  ASSERT_TRUE(c.sendAll(
      std::string("POST /v1/environments HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                  "Connection: close\r\n\r\n") +
      size + "\r\n" + body + "\r\n0\r\nAuthorization: Bearer " + kToken + "\r\n\r\n"));
  const std::string answer = c.readToEnd(std::chrono::seconds(10));
  EXPECT_EQ(answer.rfind("HTTP/1.1 401", 0), 0u) << answer.substr(0, 200);
  auto listed = serve_->request("GET", "/v1/environments?tenant_id=t1", "", kToken);
  EXPECT_EQ(listed.json()["environments"].size(), 0u) << listed.body;
}

// A request whose head carried the token is in progress while its body
// arrives: new connections past the bounds never cut it off.
TEST_F(ServeConnections, AnAuthenticatedUploadInProgressIsNeverClosedForRoom) {
  start("max_connections: 6\nmax_unauthenticated_connections: 3\n");
  auto made = serve_->request("POST", "/v1/environments", R"({"tenant_id": "t1", "run_id": "r1"})",
                              kToken, 20);
  ASSERT_EQ(made.status, 201) << made.body;
  const std::string id = made.json()["environment_id"];
  RawConnection upload = RawConnection::open(serve_->port());
  ASSERT_TRUE(upload.valid());
  const std::string data(200000, 'u');
  ASSERT_TRUE(upload.sendAll("PUT /v1/environments/" + id +
                             "/files?path=big.bin HTTP/1.1\r\nHost: x\r\n"
                             "Authorization: Bearer " +
                             std::string(kToken) + "\r\nConnection: close\r\nContent-Length: " +
                             std::to_string(data.size()) + "\r\n\r\n" + data.substr(0, 1000)));
  // A few round trips later the service has read the upload's head (bytes
  // that reached it first); then a flood of new connections arrives.
  for (int i = 0; i < 3; ++i) {
    RawConnection probe = RawConnection::open(serve_->port());
    ASSERT_TRUE(probe.sendAll("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
    ASSERT_EQ(probe.readToEnd(std::chrono::seconds(10)).rfind("HTTP/1.1 200", 0), 0u);
  }
  std::vector<RawConnection> flood;
  for (int i = 0; i < 12; ++i) {
    flood.push_back(RawConnection::open(serve_->port()));
    ASSERT_TRUE(flood.back().valid());
    ASSERT_TRUE(flood.back().sendAll("GET /heal"));
  }
  ASSERT_TRUE(upload.sendAll(data.substr(1000)));
  const std::string answer = upload.readToEnd(std::chrono::seconds(10));
  EXPECT_EQ(answer.rfind("HTTP/1.1 204", 0), 0u)
      << "the upload was cut off: " << answer.substr(0, 200);
}

}  // namespace
}  // namespace airlock::testing
