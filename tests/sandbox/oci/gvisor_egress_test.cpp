// The gvisor adapter's side of egress (port/egress_route.h,
// attachListener): which sandboxes get the shim's loopback listener, the
// egress socket and the proxy variables; that the relay carries bytes both
// ways, half-closes included, to that sandbox's own socket; that one stalled
// connection does not hold up another; and that the command can neither
// take the port, reach the socket nor stop the relay.
// The proxy itself is tested in tests/egress; the whole path in
// tests/gates/egress.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <thread>

#include "airlock/port/egress_route.h"
#include "airlock/sys/unique_fd.h"
#include "gvisor_test_support.h"

namespace airlock::testing {
namespace {

using sys::UniqueFd;

// Records every attachment; the test plays the proxy on the listener.
class RecordingRoute final : public EgressRoute {
 public:
  struct Attached {
    EnvironmentHandle sandbox;
    EgressPolicy policy;
    UniqueFd listener;
  };
  class Ticket final : public EgressAttachment {
   public:
    explicit Ticket(std::atomic<int>& live) : live_(live) { ++live_; }
    ~Ticket() override { --live_; }

   private:
    std::atomic<int>& live_;
  };

  Result<std::unique_ptr<EgressAttachment>> attachHandoff(const EnvironmentHandle&,
                                                          const EgressPolicy&, UniqueFd) override {
    return fail(ErrorCode::kExecutionUnavailable, "not used by the gvisor adapter");
  }
  Result<std::unique_ptr<EgressAttachment>> attachListener(const EnvironmentHandle& sandbox,
                                                           const EgressPolicy& policy,
                                                           UniqueFd listener) override {
    std::lock_guard lk(mu);
    attached.push_back({sandbox, policy, std::move(listener)});
    return std::unique_ptr<EgressAttachment>(new Ticket(live));
  }

  std::mutex mu;
  std::vector<Attached> attached;
  std::atomic<int> live{0};
};

EgressPolicy oneDestination() {
  EgressPolicy p;
  p.mode = EgressMode::kAllowlist;
  p.destinations.push_back({"www.example.org", {443}});
  return p;
}

ExecutionCommand shell(std::string script) {
  ExecutionCommand c;
  c.argv = {"sh", "-c", std::move(script)};
  c.timeout_seconds = 60;
  c.maximum_output_bytes = 1 << 20;
  return c;
}

// Waits (at most 30 s) for one connection on the (non-blocking) listener.
UniqueFd acceptOne(int listener) {
  pollfd p{listener, POLLIN, 0};
  if (::poll(&p, 1, 30000) != 1) return UniqueFd();
  return UniqueFd(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
}

// Reads until end of file (each wait at most 30 s).
std::string readToEof(int fd) {
  std::string got;
  char buf[65536];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 30000) != 1) return got + "<timeout>";
    const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && errno == EAGAIN) continue;
    if (n <= 0) return got;
    got.append(buf, static_cast<std::size_t>(n));
  }
}

bool sendAll(int fd, const std::string& data) {
  std::size_t off = 0;
  while (off < data.size()) {
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, 30000) != 1) return false;
    const ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EAGAIN) continue;
    if (n <= 0) return false;
    off += static_cast<std::size_t>(n);
  }
  return true;
}

// The bytes both sides send: (bytes(range(251)) * k)[:n] in Python.
std::string pattern(std::size_t n) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>(i % 251);
  return s;
}

constexpr std::size_t kBulk = 1 << 20;

class GvisorEgress : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = gvisorUnavailableHere()) GTEST_SKIP() << *why;
    route_ = std::make_shared<RecordingRoute>();
    options_ = gvisorOptions(state_.path());
    options_.egress_route = route_;
    auto env = gvisor::createGvisorEnvironment(options_);
    ASSERT_TRUE(env) << env.error().message();
    env_ = std::move(*env);
  }

  ExecutionResult run(const EnvironmentHandle& h, const std::string& script) {
    auto r = env_->execute(h, shell(script));
    EXPECT_TRUE(r) << r.error().message();
    return r ? *r : ExecutionResult{};
  }

  std::string sandboxDir(const EnvironmentHandle& h) const {
    return state_.path() + "/sandboxes/" + h.environment_id;
  }

  GvisorStateDir state_;
  gvisor::GvisorEnvironmentOptions options_;
  std::shared_ptr<RecordingRoute> route_;
  std::unique_ptr<ExecutionEnvironment> env_;
};

TEST_F(GvisorEgress, TheRelayCarriesBothWaysWithHalfClosesToTheSandboxsOwnSocket) {
  auto spec = gvisorSpec(options_);
  spec.egress = oneDestination();
  auto h = env_->provision(spec);
  ASSERT_TRUE(h) << h.error().message();
  ASSERT_EQ(route_->attached.size(), 1u);
  EXPECT_EQ(route_->attached[0].sandbox, *h);
  EXPECT_EQ(route_->attached[0].policy, spec.egress);
  EXPECT_EQ(route_->live.load(), 1);

  // The socket's directory is root's alone, like the control directory.
  struct stat st {};
  ASSERT_EQ(::stat((sandboxDir(*h) + "/egress").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  EXPECT_EQ(st.st_uid, 0u);
  ASSERT_EQ(::stat((sandboxDir(*h) + "/egress/sock").c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));

  // The test plays the proxy: it reads the client's whole request (which
  // ends with the client's half-close), then answers and closes.
  std::string seen;
  std::thread proxy([&] {
    UniqueFd conn = acceptOne(route_->attached[0].listener.get());
    if (!conn.valid()) return;
    seen = readToEof(conn.get());
    (void)sendAll(conn.get(), pattern(kBulk));
  });
  auto r = run(*h,
               "echo \"$HTTPS_PROXY $http_proxy $ALL_PROXY\"; /usr/bin/python3 -c '\n"
               "import socket\n"
               "n = 1 << 20\n"
               "want = (bytes(range(251)) * (n // 251 + 1))[:n]\n"
               "s = socket.create_connection((\"127.0.0.1\", 3128))\n"
               "s.sendall(want); s.shutdown(socket.SHUT_WR)\n"
               "got = bytearray()\n"
               "while True:\n"
               "    b = s.recv(65536)\n"
               "    if not b: break\n"
               "    got += b\n"
               "print(len(got), bytes(got) == want)\n"
               "'");
  proxy.join();
  EXPECT_EQ(r.exit_code, 0) << r.stderr_data;
  EXPECT_EQ(r.stdout_data,
            "http://127.0.0.1:3128 http://127.0.0.1:3128 http://127.0.0.1:3128\n1048576 True\n");
  EXPECT_EQ(seen.size(), kBulk);
  EXPECT_TRUE(seen == pattern(kBulk)) << "the relay changed the client's bytes";

  const std::string dir = sandboxDir(*h);
  ASSERT_TRUE(env_->destroy(*h));
  EXPECT_EQ(route_->live.load(), 0) << "destroy must release the sandbox's attachment";
  env_.reset();  // waits for the teardown worker
  EXPECT_FALSE(std::filesystem::exists(dir)) << "the sandbox directory (and its socket) remains";
}

TEST_F(GvisorEgress, OneStalledConnectionDoesNotHoldUpAnother) {
  auto spec = gvisorSpec(options_);
  spec.egress = oneDestination();
  auto h = env_->provision(spec);
  ASSERT_TRUE(h) << h.error().message();
  ASSERT_EQ(route_->attached.size(), 1u);

  // Two connections arrive in either order: "hold" gets no answer at all,
  // "ping" gets "pong".
  std::string answered;
  std::thread proxy([&] {
    const int listener = route_->attached[0].listener.get();
    UniqueFd conns[2] = {acceptOne(listener), acceptOne(listener)};
    if (!conns[0].valid() || !conns[1].valid()) return;
    bool read[2] = {false, false};
    while (!read[0] || !read[1]) {
      pollfd p[2] = {{conns[0].get(), POLLIN, 0}, {conns[1].get(), POLLIN, 0}};
      if (::poll(p, 2, 30000) <= 0) return;
      for (int i = 0; i < 2; ++i) {
        if (read[i] || !(p[i].revents & (POLLIN | POLLHUP))) continue;
        char buf[4];
        if (::recv(conns[i].get(), buf, 4, MSG_WAITALL) != 4) return;
        read[i] = true;
        if (std::string(buf, 4) == "ping") {
          answered += "ping";
          (void)sendAll(conns[i].get(), "pong\n");
        } else {
          answered += "hold";
        }
      }
    }
    // The held connection stays open until the command is over.
    (void)readToEof(conns[0].get());
    (void)readToEof(conns[1].get());
  });
  auto r = run(*h,
               "/usr/bin/python3 -c '\n"
               "import socket\n"
               "a = socket.create_connection((\"127.0.0.1\", 3128)); a.sendall(b\"hold\")\n"
               "b = socket.create_connection((\"127.0.0.1\", 3128)); b.sendall(b\"ping\")\n"
               "b.settimeout(30)\n"
               "print(b.recv(10).decode().strip())\n"
               "'");
  proxy.join();
  EXPECT_EQ(r.exit_code, 0) << r.stderr_data;
  EXPECT_EQ(r.stdout_data, "pong\n");
  EXPECT_EQ(answered.size(), 8u) << answered;
  ASSERT_TRUE(env_->destroy(*h));
}

TEST_F(GvisorEgress, MoreConnectionsThanRelaysWaitTheirTurnAndAllArrive) {
  auto spec = gvisorSpec(options_);
  spec.egress = oneDestination();
  auto h = env_->provision(spec);
  ASSERT_TRUE(h) << h.error().message();
  ASSERT_EQ(route_->attached.size(), 1u);

  // 100 connections open at once (the shim relays at most 64 at a time):
  // each says its number, gets it back, and the proxy closes it.
  constexpr int kConnections = 100;
  int answered = 0;
  std::thread proxy([&] {
    const int listener = route_->attached[0].listener.get();
    std::vector<UniqueFd> open;
    while (answered < kConnections) {
      std::vector<pollfd> p{{listener, POLLIN, 0}};
      for (auto& c : open) p.push_back({c.get(), POLLIN, 0});
      if (::poll(p.data(), p.size(), 30000) <= 0) return;
      if (p[0].revents & POLLIN) {
        UniqueFd c(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
        if (c.valid()) open.push_back(std::move(c));
      }
      for (std::size_t i = 1; i < p.size(); ++i) {
        if (!(p[i].revents & (POLLIN | POLLHUP))) continue;
        char buf[4];
        if (::recv(p[i].fd, buf, 4, MSG_WAITALL) == 4 && sendAll(p[i].fd, std::string(buf, 4)))
          ++answered;
        ::shutdown(p[i].fd, SHUT_RDWR);
      }
      std::erase_if(open, [&](const UniqueFd& c) {
        for (std::size_t i = 1; i < p.size(); ++i)
          if (p[i].fd == c.get() && (p[i].revents & (POLLIN | POLLHUP))) return true;
        return false;
      });
    }
  });
  auto r = run(*h,
               "/usr/bin/python3 -c '\n"
               "import socket\n"
               "conns = [socket.create_connection((\"127.0.0.1\", 3128)) for _ in range(100)]\n"
               "for i, c in enumerate(conns):\n"
               "    c.sendall(b\"%04d\" % i)\n"
               "ok = 0\n"
               "for i, c in enumerate(conns):\n"
               "    c.settimeout(30)\n"
               "    ok += c.recv(4) == b\"%04d\" % i\n"
               "    c.close()\n"
               "print(ok)\n"
               "'");
  proxy.join();
  EXPECT_EQ(r.exit_code, 0) << r.stderr_data;
  EXPECT_EQ(r.stdout_data, "100\n");
  EXPECT_EQ(answered, kConnections);
  ASSERT_TRUE(env_->destroy(*h));
}

TEST_F(GvisorEgress, TheCommandCannotTakeThePortReachTheSocketOrStopTheRelay) {
  auto spec = gvisorSpec(options_);
  spec.egress = oneDestination();
  auto h = env_->provision(spec);
  ASSERT_TRUE(h) << h.error().message();
  ASSERT_EQ(route_->attached.size(), 1u);
  auto r = run(*h,
               "/usr/bin/python3 -c '\n"
               "import os, socket\n"
               "for reuse in (False, True):\n"
               "    s = socket.socket()\n"
               "    if reuse:\n"
               "        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
               "        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)\n"
               "    try:\n"
               "        s.bind((\"127.0.0.1\", 3128)); print(\"bound\")\n"
               "    except OSError as e:\n"
               "        print(\"bind:\", e.errno)\n"
               "    s.close()\n"
               "u = socket.socket(socket.AF_UNIX)\n"
               "try:\n"
               "    u.connect(\"/.airlock/egress/sock\"); print(\"reached the socket\")\n"
               "except OSError as e:\n"
               "    print(\"socket:\", e.errno)\n"
               "u.close()\n"
               "try:\n"
               "    os.kill(1, 9); print(\"killed the shim\")\n"
               "except OSError as e:\n"
               "    print(\"kill:\", e.errno)\n"
               "print(sorted(int(f) for f in os.listdir(\"/proc/self/fd\")))\n"
               "'");
  EXPECT_EQ(r.exit_code, 0) << r.stderr_data;
  // EADDRINUSE both ways, EACCES, EPERM; fds 0-2 plus the one listdir opened.
  EXPECT_EQ(r.stdout_data, "bind: 98\nbind: 98\nsocket: 13\nkill: 1\n[0, 1, 2, 3]\n");

  // The relay still serves a later command.
  std::string seen;
  std::thread proxy([&] {
    UniqueFd conn = acceptOne(route_->attached[0].listener.get());
    if (!conn.valid()) return;
    char buf[4];
    if (::recv(conn.get(), buf, 4, MSG_WAITALL) == 4) seen.assign(buf, 4);
    (void)sendAll(conn.get(), "pong\n");
  });
  r = run(*h,
          "/usr/bin/python3 -c 'import socket; s=socket.create_connection((\"127.0.0.1\",3128)); "
          "s.sendall(b\"ping\"); print(s.recv(10).decode().strip())'");
  proxy.join();
  EXPECT_EQ(r.stdout_data, "pong\n") << r.stderr_data;
  EXPECT_EQ(seen, "ping");
  ASSERT_TRUE(env_->destroy(*h));
}

TEST_F(GvisorEgress, NoEgressMeansNoListenerNoVariablesNoSocket) {
  for (bool empty_allowlist : {false, true}) {
    SCOPED_TRACE(empty_allowlist ? "allowlist without destinations" : "deny");
    auto spec = gvisorSpec(options_);
    if (empty_allowlist) spec.egress.mode = EgressMode::kAllowlist;
    auto h = env_->provision(spec);
    ASSERT_TRUE(h) << h.error().message();
    EXPECT_FALSE(std::filesystem::exists(sandboxDir(*h) + "/egress"));
    std::ifstream config(sandboxDir(*h) + "/bundle/config.json");
    const std::string text{std::istreambuf_iterator<char>(config), {}};
    ASSERT_FALSE(text.empty());
    EXPECT_EQ(text.find("egress"), std::string::npos) << "the bundle binds or starts egress";
    auto r = run(*h,
                 "env | grep -ci proxy; /usr/bin/python3 -c 'import socket\n"
                 "try:\n"
                 "    socket.create_connection((\"127.0.0.1\",3128)); print(\"connected\")\n"
                 "except OSError as e:\n"
                 "    print(\"refused\", e.errno)'");
    EXPECT_EQ(r.stdout_data, "0\nrefused 111\n") << r.stderr_data;
    ASSERT_TRUE(env_->destroy(*h));
  }
  EXPECT_TRUE(route_->attached.empty());
}

// Socket paths longer than sun_path (108 bytes) are bound through the
// directory's fd: a deep state directory still gets its control and egress
// sockets.
TEST(GvisorEgressDeepStateDir, SocketsBeyondSunPathStillWork) {
  if (auto why = gvisorUnavailableHere()) GTEST_SKIP() << *why;
  GvisorStateDir state;
  auto route = std::make_shared<RecordingRoute>();
  auto options = gvisorOptions(state.path() + "/" + std::string(80, 'd'));
  options.egress_route = route;
  {
    auto env = gvisor::createGvisorEnvironment(options);
    ASSERT_TRUE(env) << env.error().message();
    auto spec = gvisorSpec(options);
    spec.egress = oneDestination();
    auto h = (*env)->provision(spec);
    ASSERT_TRUE(h) << h.error().message();
    const std::string sock = options.state_dir + "/sandboxes/" + h->environment_id + "/egress/sock";
    EXPECT_GT(sock.size(), sizeof(sockaddr_un{}.sun_path));
    ASSERT_EQ(route->attached.size(), 1u);
    std::string seen;
    std::thread proxy([&] {
      UniqueFd conn = acceptOne(route->attached[0].listener.get());
      if (!conn.valid()) return;
      char buf[4];
      if (::recv(conn.get(), buf, 4, MSG_WAITALL) == 4) seen.assign(buf, 4);
      (void)sendAll(conn.get(), "pong\n");
    });
    auto r =
        (*env)->execute(*h, shell("/usr/bin/python3 -c 'import socket; "
                                  "s=socket.create_connection((\"127.0.0.1\",3128)); "
                                  "s.sendall(b\"ping\"); print(s.recv(10).decode().strip())'"));
    proxy.join();
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->stdout_data, "pong\n") << r->stderr_data;
    EXPECT_EQ(seen, "ping");
    ASSERT_TRUE((*env)->destroy(*h));
  }
  EXPECT_EQ(route->live.load(), 0);
}

TEST(GvisorEgressWithoutRoute, EgressIsRefusedWithAClearError) {
  if (auto why = gvisorUnavailableHere()) GTEST_SKIP() << *why;
  GvisorStateDir state;
  auto options = gvisorOptions(state.path());
  auto env = gvisor::createGvisorEnvironment(options);
  ASSERT_TRUE(env) << env.error().message();
  auto spec = gvisorSpec(options);
  spec.egress = oneDestination();
  auto h = (*env)->provision(spec);
  ASSERT_FALSE(h.has_value());
  EXPECT_EQ(h.error().code, ErrorCode::kExecutionRejected);
  EXPECT_NE(h.error().message().find("no egress proxy"), std::string::npos) << h.error().message();
}

}  // namespace
}  // namespace airlock::testing
