// The linux adapter's side of egress (port/egress_route.h): which
// sandboxes get init's loopback listener and the proxy variables, that each
// connection accepted there arrives on that sandbox's own channel, and that
// the command can neither reach the channel nor take the port.
// The proxy itself is tested in tests/egress; the whole path in
// tests/gates/egress.
#include <sys/socket.h>
#include <sys/un.h>

#include <atomic>
#include <cstring>
#include <mutex>

#include "airlock/port/egress_route.h"
#include "linux_test_support.h"

namespace airlock::testing {
namespace {

using sys::UniqueFd;

// Records every attachment; the test reads the channel itself.
class RecordingRoute final : public EgressRoute {
 public:
  struct Attached {
    EnvironmentHandle sandbox;
    EgressPolicy policy;
    UniqueFd channel;
  };
  class Ticket final : public EgressAttachment {
   public:
    explicit Ticket(std::atomic<int>& live) : live_(live) { ++live_; }
    ~Ticket() override { --live_; }

   private:
    std::atomic<int>& live_;
  };

  Result<std::unique_ptr<EgressAttachment>> attachHandoff(const EnvironmentHandle& sandbox,
                                                          const EgressPolicy& policy,
                                                          UniqueFd channel) override {
    std::lock_guard lk(mu);
    attached.push_back({sandbox, policy, std::move(channel)});
    return std::unique_ptr<EgressAttachment>(new Ticket(live));
  }
  Result<std::unique_ptr<EgressAttachment>> attachListener(const EnvironmentHandle&,
                                                           const EgressPolicy&, UniqueFd) override {
    return fail(ErrorCode::kExecutionUnavailable, "not used by the linux adapter");
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

// Waits (bounded by SO_RCVTIMEO) for one packet on the channel; returns the
// single fd it carries, or an invalid fd.
UniqueFd receiveConnection(int channel) {
  timeval tv{30, 0};
  ::setsockopt(channel, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char byte;
  iovec iov{&byte, 1};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  if (::recvmsg(channel, &msg, MSG_CMSG_CLOEXEC) != 1) return UniqueFd();
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  if (c == nullptr || c->cmsg_type != SCM_RIGHTS) return UniqueFd();
  int fd;
  std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
  return UniqueFd(fd);
}

class LinuxEgress : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = linuxJailUnavailable()) GTEST_SKIP() << *why;
    route_ = std::make_shared<RecordingRoute>();
    options_ = testOptions(state_.path());
    options_.egress_route = route_;
    auto env = linux_jail::createLinuxEnvironment(options_);
    ASSERT_TRUE(env) << env.error().message();
    env_ = std::move(*env);
  }

  ExecutionResult run(const EnvironmentHandle& h, const std::string& script) {
    auto r = env_->execute(h, shell(script));
    EXPECT_TRUE(r) << r.error().message();
    return r ? *r : ExecutionResult{};
  }

  TempStateDir state_;
  linux_jail::LinuxEnvironmentOptions options_;
  std::shared_ptr<RecordingRoute> route_;
  std::unique_ptr<ExecutionEnvironment> env_;
};

TEST_F(LinuxEgress, ConnectionsToTheLoopbackListenerArriveOnTheSandboxsChannel) {
  auto spec = linuxSpec(options_);
  spec.egress = oneDestination();
  auto h = env_->provision(spec);
  ASSERT_TRUE(h) << h.error().message();
  ASSERT_EQ(route_->attached.size(), 1u);
  EXPECT_EQ(route_->attached[0].sandbox, *h);
  EXPECT_EQ(route_->attached[0].policy, spec.egress);
  EXPECT_EQ(route_->live.load(), 1);

  // The test plays the proxy: it answers whatever arrives on the channel.
  std::string seen;
  std::thread proxy([&] {
    UniqueFd conn = receiveConnection(route_->attached[0].channel.get());
    if (!conn.valid()) return;
    char buf[64];
    const ssize_t n = ::recv(conn.get(), buf, sizeof buf, 0);
    if (n > 0) seen.assign(buf, static_cast<std::size_t>(n));
    (void)!::send(conn.get(), "pong\n", 5, MSG_NOSIGNAL);
  });
  auto r =
      run(*h,
          "echo \"$HTTPS_PROXY $http_proxy $ALL_PROXY\"; "
          "/usr/bin/python3 -c 'import socket; s=socket.create_connection((\"127.0.0.1\",3128)); "
          "s.sendall(b\"ping\"); print(s.recv(10).decode().strip())'");
  proxy.join();
  EXPECT_EQ(r.exit_code, 0) << r.stderr_data;
  EXPECT_EQ(r.stdout_data,
            "http://127.0.0.1:3128 http://127.0.0.1:3128 http://127.0.0.1:3128\npong\n");
  EXPECT_EQ(seen, "ping");

  ASSERT_TRUE(env_->destroy(*h));
  EXPECT_EQ(route_->live.load(), 0) << "destroy must release the sandbox's attachment";
}

TEST_F(LinuxEgress, TheCommandCannotTakeThePortOrHoldTheChannel) {
  auto spec = linuxSpec(options_);
  spec.egress = oneDestination();
  auto h = env_->provision(spec);
  ASSERT_TRUE(h) << h.error().message();
  auto r = run(*h,
               "/usr/bin/python3 -c '\n"
               "import os, socket\n"
               "s = socket.socket()\n"
               "try:\n"
               "    s.bind((\"127.0.0.1\", 3128)); print(\"bound\")\n"
               "except OSError as e:\n"
               "    print(\"bind:\", e.errno)\n"
               "s.close()\n"
               "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)\n"
               "try:\n"
               "    s.bind((\"127.0.0.1\", 3128)); print(\"bound reuseport\")\n"
               "except OSError as e:\n"
               "    print(\"reuseport:\", e.errno)\n"
               "s.close()\n"
               "print(sorted(int(f) for f in os.listdir(\"/proc/self/fd\")))\n"
               "'");
  EXPECT_EQ(r.exit_code, 0) << r.stderr_data;
  // EADDRINUSE both ways; fds 0-2 plus the one listdir opened, nothing more.
  EXPECT_EQ(r.stdout_data, "bind: 98\nreuseport: 98\n[0, 1, 2, 3]\n");
  ASSERT_TRUE(env_->destroy(*h));
}

TEST_F(LinuxEgress, NoEgressMeansNoListenerNoVariablesNoChannel) {
  for (bool empty_allowlist : {false, true}) {
    SCOPED_TRACE(empty_allowlist ? "allowlist without destinations" : "deny");
    auto spec = linuxSpec(options_);
    if (empty_allowlist) spec.egress.mode = EgressMode::kAllowlist;
    auto h = env_->provision(spec);
    ASSERT_TRUE(h) << h.error().message();
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

TEST(LinuxEgressWithoutRoute, EgressIsRefusedWithAClearError) {
  if (auto why = linuxJailUnavailable()) GTEST_SKIP() << *why;
  TempStateDir state;
  auto options = testOptions(state.path());
  auto env = linux_jail::createLinuxEnvironment(options);
  ASSERT_TRUE(env) << env.error().message();
  auto spec = linuxSpec(options);
  spec.egress = oneDestination();
  auto h = (*env)->provision(spec);
  ASSERT_FALSE(h.has_value());
  EXPECT_EQ(h.error().code, ErrorCode::kExecutionRejected);
  EXPECT_NE(h.error().message().find("no egress proxy"), std::string::npos) << h.error().message();
}

}  // namespace
}  // namespace airlock::testing
