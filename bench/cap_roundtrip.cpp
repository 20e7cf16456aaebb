// The capability channel's round trip against a plain UNIX-socket echo of
// the same frames, in the same run (docs/benchmarks.md).
//
//   bench_cap_roundtrip [sequential=20000] [pipelined=20000] [rounds=5]
//
// Peers, both UNIX stream sockets in a temporary directory:
//   broker  a BrokerSession (kRun, policy allowing exactly "bench.noop") whose
//           table has one unclassified no-op capability, "bench.noop",
//           answering nil; audit lines are formatted and written to
//           /dev/null, as a service would write them somewhere;
//   echo    a thread that accepts one connection and writes back every byte
//           it reads, as it reads it: the floor any request/answer over a
//           UNIX socket costs on this machine;
//   thread  the echo, but each frame (cut by its length prefix) is written
//           back from a new detached thread, as the broker runs each
//           admitted call: the floor of thread-per-call with no decoding,
//           policy or audit.
// The client is the same for both, as a program would be: per call it
// encodes a cap_call frame (the session's token, "bench.noop", args {},
// deadline_ms 10000), writes it, and reads until its FrameDecoder yields a
// frame (a cap_result from the broker, the same cap_call from the echoes).
// Sequential: one call at a time, round trip from encode to decoded answer,
// in blocks of 1000 alternating between the peers after a warm-up;
// median, p90, p99. Pipelined: K calls in flight from one connection (a new
// call as each answer arrives), calls per second over `pipelined` calls,
// `rounds` rounds alternating; median of the rounds. K stays under the
// broker's max_calls_in_flight (64).
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "airlock/capability/broker/broker.h"
#include "airlock/capability/wire/frame.h"
#include "airlock/port/capability_channel.h"
#include "airlock/sys/unique_fd.h"

namespace {

namespace cap = airlock::capability;
namespace wire = airlock::capability::wire;
using airlock::sys::UniqueFd;
using Clock = std::chrono::steady_clock;

constexpr const char* kNoop = "bench.noop";

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "bench_cap_roundtrip: %s: %s\n", what, std::strerror(errno));
  std::exit(1);
}

sockaddr_un unixAddr(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
  return a;
}

UniqueFd connectTo(const std::string& path) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un a = unixAddr(path);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) die("connect");
  return fd;
}

void writeAll(int fd, const std::string& s) {
  const char* p = s.data();
  std::size_t left = s.size();
  while (left > 0) {
    ssize_t n = ::send(fd, p, left, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) die("send");
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

// The program's side of one connection.
class Client {
 public:
  Client(UniqueFd fd, std::string token) : fd_(std::move(fd)), token_(std::move(token)) {}

  std::size_t send() {
    auto bytes = wire::encodeFrame(
        wire::Frame{next_id_++, wire::CapCall{token_, kNoop, wire::Value::map({}), 10000}});
    if (!bytes) {
      std::fprintf(stderr, "encode failed\n");
      std::exit(1);
    }
    writeAll(fd_.get(), *bytes);
    return bytes->size();
  }

  // Blocks until one frame is decoded; fails the run on anything else or on
  // a refusal (the broker must answer ok).
  void receive() {
    for (;;) {
      auto ev = decoder_.next();
      if (auto* f = std::get_if<wire::Frame>(&ev)) {
        if (auto* r = std::get_if<wire::CapResult>(&f->body)) {
          if (auto* refusal = std::get_if<wire::Refusal>(&r->answer)) {
            std::fprintf(stderr, "refused: %s: %s\n", refusal->code.c_str(),
                         refusal->message.c_str());
            std::exit(1);
          }
        }
        return;
      }
      if (!std::holds_alternative<wire::FrameDecoder::NeedMore>(ev)) {
        std::fprintf(stderr, "unexpected event from the peer\n");
        std::exit(1);
      }
      ssize_t n = ::read(fd_.get(), buf_, sizeof buf_);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) die("read");
      decoder_.feed(std::string_view(buf_, static_cast<std::size_t>(n)));
    }
  }

 private:
  UniqueFd fd_;
  std::string token_;
  std::uint64_t next_id_ = 1;
  wire::FrameDecoder decoder_;
  char buf_[65536];
};

// The echo peer: one connection, every byte back as read.
class EchoServer {
 public:
  explicit EchoServer(std::string path) : path_(std::move(path)) {
    listener_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un a = unixAddr(path_);
    if (::bind(listener_.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) die("bind echo");
    if (::listen(listener_.get(), 4) != 0) die("listen echo");
    thread_ = std::thread([this] {
      UniqueFd c(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!c.valid()) return;
      char buf[65536];
      for (;;) {
        ssize_t n = ::read(c.get(), buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        writeAll(c.get(), std::string(buf, static_cast<std::size_t>(n)));
      }
    });
  }
  ~EchoServer() {
    if (thread_.joinable()) thread_.join();
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  UniqueFd listener_;
  std::thread thread_;
};

// The thread-per-call reference: like the echo, but it cuts the stream into
// frames (4-byte big-endian length) and answers each frame from a new
// detached thread, as the broker runs each admitted call: the floor of a
// thread-per-call design with no decoding, policy or audit.
class ThreadEchoServer {
 public:
  explicit ThreadEchoServer(std::string path)
      : path_(std::move(path)), state_(std::make_shared<State>()) {
    listener_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un a = unixAddr(path_);
    if (::bind(listener_.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
      die("bind thread-echo");
    if (::listen(listener_.get(), 4) != 0) die("listen thread-echo");
    thread_ = std::thread([this] {
      state_->fd.reset(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!state_->fd.valid()) return;
      std::string pending;
      char buf[65536];
      for (;;) {
        ssize_t n = ::read(state_->fd.get(), buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        pending.append(buf, static_cast<std::size_t>(n));
        std::size_t at = 0;
        while (pending.size() - at >= 4) {
          const auto* p = reinterpret_cast<const unsigned char*>(pending.data() + at);
          const std::size_t len = (std::size_t{p[0]} << 24) | (std::size_t{p[1]} << 16) |
                                  (std::size_t{p[2]} << 8) | p[3];
          if (pending.size() - at < 4 + len) break;
          std::string frame = pending.substr(at, 4 + len);
          at += 4 + len;
          state_->running.fetch_add(1);
          std::thread([st = state_, frame = std::move(frame)] {
            {
              std::lock_guard lk(st->write_mu);
              writeAll(st->fd.get(), frame);
            }
            st->running.fetch_sub(1);
          }).detach();
        }
        pending.erase(0, at);
      }
    });
  }
  ~ThreadEchoServer() {
    if (thread_.joinable()) thread_.join();
    while (state_->running.load() != 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const std::string& path() const { return path_; }

 private:
  struct State {
    UniqueFd fd;
    std::mutex write_mu;
    std::atomic<int> running{0};
  };
  std::string path_;
  UniqueFd listener_;
  std::shared_ptr<State> state_;
  std::thread thread_;
};

double pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  std::size_t i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

double median(std::vector<double> v) {
  return pct(std::move(v), 0.5);
}

// CPU time of the whole process (every thread: client, peer, broker), us.
double cpuMicros() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  auto us = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_usec);
  };
  return us(u.ru_utime) + us(u.ru_stime);
}

// One sequential block: `n` round trips, microseconds each appended.
void sequential(Client& c, int n, std::vector<double>& out) {
  for (int i = 0; i < n; ++i) {
    const auto t0 = Clock::now();
    c.send();
    c.receive();
    out.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
}

// `n` calls with `k` in flight; calls per second.
double pipelined(Client& c, int n, int k) {
  const auto t0 = Clock::now();
  int sent = 0, got = 0;
  for (; sent < std::min(k, n); ++sent) c.send();
  while (got < n) {
    c.receive();
    ++got;
    if (sent < n) {
      c.send();
      ++sent;
    }
  }
  return n / std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string loadAverage() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

}  // namespace

int main(int argc, char** argv) {
  const int seq_n = argc > 1 ? std::atoi(argv[1]) : 20000;
  const int pipe_n = argc > 2 ? std::atoi(argv[2]) : 20000;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 5;
  // "inline": the no-op runs on the connection's reader thread
  // (CallPlacement::kInline, as notes.* do); default: on a session worker.
  const bool run_inline = argc > 4 && std::string_view(argv[4]) == "inline";
  constexpr int kBlock = 1000;
  const std::vector<int> ks = {1, 8, 32, 60};

  char tmpl[] = "/tmp/airlock-capbench-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) die("mkdtemp");
  const std::string dir = tmpl;
  UniqueFd dirfd(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!dirfd.valid()) die("open dir");

  UniqueFd devnull(::open("/dev/null", O_WRONLY | O_CLOEXEC));
  auto table = std::make_shared<cap::CapabilityTable>();
  table->add(
      kNoop, cap::CeilingClass::kNone,
      [](const cap::CallContext&) -> wire::Answer { return wire::Value::nil(); },
      run_inline ? cap::CallPlacement::kInline : cap::CallPlacement::kWorker);
  std::printf("broker no-op placement: %s\n", run_inline ? "inline (reader thread)" : "worker");
  cap::SessionOptions opts;
  opts.execution_id = "bench";
  opts.shape = cap::BootShape::kRun;
  opts.policy.allowed = {kNoop};
  const int null_fd = devnull.get();
  opts.audit = [null_fd](std::string_view line) {
    std::string l(line);
    l.push_back('\n');
    [[maybe_unused]] ssize_t n = ::write(null_fd, l.data(), l.size());
  };
  auto channel = airlock::openDirectoryCapabilityChannel(std::move(dirfd));
  if (!channel) {
    std::fprintf(stderr, "capability channel: %s\n", channel.error().message().c_str());
    return 1;
  }
  auto session = cap::BrokerSession::open(std::move(*channel), std::move(opts), table);
  if (!session) {
    std::fprintf(stderr, "BrokerSession::open: %s\n", session.error().message().c_str());
    return 1;
  }
  const std::string token = (*session)->token();
  EchoServer echo(dir + "/echo.sock");
  ThreadEchoServer thread_echo(dir + "/thread-echo.sock");

  Client broker_client(connectTo(dir + "/" + std::string(airlock::kCapabilitySocketName)), token);
  Client echo_client(connectTo(echo.path()), token);
  Client thread_client(connectTo(thread_echo.path()), token);

  {
    auto probe =
        wire::encodeFrame(wire::Frame{1, wire::CapCall{token, kNoop, wire::Value::map({}), 10000}});
    auto answer = wire::encodeFrame(wire::Frame{1, wire::CapResult{wire::Value::nil()}});
    utsname u{};
    ::uname(&u);
    std::printf("kernel %s, %u hardware threads, load average %s\n", u.release,
                std::thread::hardware_concurrency(), loadAverage().c_str());
    std::printf(
        "cap_call frame %zu bytes, cap_result frame %zu bytes (the echo returns the cap_call)\n",
        probe->size(), answer->size());
  }

  // Warm-up.
  std::vector<double> scratch;
  sequential(broker_client, 2000, scratch);
  sequential(echo_client, 2000, scratch);
  sequential(thread_client, 2000, scratch);
  pipelined(broker_client, 2000, 32);
  pipelined(echo_client, 2000, 32);
  pipelined(thread_client, 2000, 32);

  std::vector<double> rt_broker, rt_echo, rt_thread;
  rt_thread.reserve(static_cast<std::size_t>(seq_n));
  double cpu_echo = 0, cpu_thread = 0, cpu_broker = 0;
  rt_broker.reserve(static_cast<std::size_t>(seq_n));
  rt_echo.reserve(static_cast<std::size_t>(seq_n));
  for (int done = 0; done < seq_n; done += kBlock) {
    const int n = std::min(kBlock, seq_n - done);
    double c0 = cpuMicros();
    sequential(echo_client, n, rt_echo);
    double c1 = cpuMicros();
    sequential(thread_client, n, rt_thread);
    double c2 = cpuMicros();
    sequential(broker_client, n, rt_broker);
    double c3 = cpuMicros();
    cpu_echo += c1 - c0;
    cpu_thread += c2 - c1;
    cpu_broker += c3 - c2;
  }
  std::printf("\nsequential round trip, us (%d calls each, blocks of %d alternating)\n", seq_n,
              kBlock);
  std::printf("  %-7s %9s %9s %9s %9s\n", "peer", "median", "p90", "p99", "mean");
  auto row = [](const char* name, const std::vector<double>& v) {
    double sum = 0;
    for (double x : v) sum += x;
    std::printf("  %-7s %9.1f %9.1f %9.1f %9.1f\n", name, median(v), pct(v, 0.9), pct(v, 0.99),
                sum / static_cast<double>(v.size()));
  };
  row("echo", rt_echo);
  row("thread", rt_thread);
  row("broker", rt_broker);
  const double med_b = median(rt_broker), med_e = median(rt_echo);
  std::printf(
      "  broker/echo median %.2fx, p90 %.2fx, p99 %.2fx; broker median - echo median %.1f us\n",
      med_b / med_e, pct(rt_broker, 0.9) / pct(rt_echo, 0.9),
      pct(rt_broker, 0.99) / pct(rt_echo, 0.99), med_b - med_e);
  std::printf(
      "  process CPU per call (user+sys, all threads), us: echo %.1f, thread %.1f, broker %.1f\n",
      cpu_echo / seq_n, cpu_thread / seq_n, cpu_broker / seq_n);
  std::printf("  thread/echo median %.2fx; broker/thread median %.2fx\n", median(rt_thread) / med_e,
              med_b / median(rt_thread));

  std::printf(
      "\ncalls per second from one connection, K in flight (%d calls x %d rounds, median)\n",
      pipe_n, rounds);
  std::printf("  %4s %10s %10s %10s %12s %13s\n", "K", "echo", "thread", "broker", "broker/echo",
              "broker/thread");
  for (int k : ks) {
    std::vector<double> b, e, t;
    for (int r = 0; r < rounds; ++r) {
      e.push_back(pipelined(echo_client, pipe_n, k));
      t.push_back(pipelined(thread_client, pipe_n, k));
      b.push_back(pipelined(broker_client, pipe_n, k));
    }
    std::printf("  %4d %10.0f %10.0f %10.0f %11.2fx %12.2fx\n", k, median(e), median(t), median(b),
                median(b) / median(e), median(b) / median(t));
  }
  std::printf("\nload average at the end %s; broker answered %llu calls\n", loadAverage().c_str(),
              static_cast<unsigned long long>((*session)->callsAnswered()));
  std::printf(
      "targets: median round trip < 50 us: %s (%.1f us); overhead over echo <= 2x: %s (%.2fx)\n",
      med_b < 50 ? "met" : "NOT met", med_b, med_b / med_e <= 2.0 ? "met" : "NOT met",
      med_b / med_e);

  (*session)->finish();
  {
    Client a = std::move(echo_client);  // closing the echo connections ends their threads
    Client b = std::move(thread_client);
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return 0;
}
