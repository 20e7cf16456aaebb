// Red-team: a code-mode program floods the capability broker from inside
// the sandbox. The broker runs in the service (here: the `airlock run`
// process, as root, outside every limit of the sandbox), so whatever it
// spends per connection, per call or per byte must be bounded by the broker
// itself. Today it is not:
//
// * every accepted connection gets a reader thread, with no cap;
// * every admitted call whose capability has no ceiling class (job.wait,
//   job.poll, job.list, job.kill, fs.*) gets a detached thread, with no cap
//   on calls in flight;
// * each connection's decoder buffers an unfinished frame up to the 16 MiB
//   wire cap, with no cap on connections.
//
// Thread creation failing inside onCapCall/acceptLoop throws
// std::system_error on a thread with no handler: std::terminate, the service
// aborts (exit by SIGABRT) and leaves the sandbox for the next sweep. Without
// the test's cgroup the threads would instead run the host out of pids
// (kernel.pid_max), which breaks fork() for every process on the machine.
//
// The floods are bounded by a pids cgroup the test owns (so the host's pid
// space is never at risk) and by small connection counts.
#include <gtest/gtest.h>

#include "redteam_cli_support.h"

namespace airlock::testing {
namespace {

using namespace redteam_cli;

class RedteamCapabilityBrokerFloodTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = linuxJailUnavailable()) GTEST_SKIP() << *why;
    char tmpl[] = "/tmp/airlock-rt-broker-XXXXXX";
    work_ = ::mkdtemp(tmpl);
  }
  void TearDown() override {
    if (work_.empty()) return;
    sweep(state_.path(), work_);
    std::error_code ec;
    std::filesystem::remove_all(work_, ec);
  }
  std::string program(const std::string& text) {
    const std::string p = work_ + "/prog.py";
    writeText(p, text);
    return p;
  }
  TempStateDir state_;
  std::string work_;
};

// 600 job.wait calls in flight on one connection, one job started (one of
// the 32 spawns): the broker must refuse calls past a per-execution
// in-flight bound, not start a thread per call. Expected: the CLI finishes
// and reports the program's outcome; observed: SIGABRT
// ("terminate called after throwing an instance of 'std::system_error'").
TEST_F(RedteamCapabilityBrokerFloodTest, InFlightCallsWithoutCeilingCrashTheService) {
  PidsCgroup cg(400);
  if (!cg.valid()) GTEST_SKIP() << "no writable pids cgroup to bound the flood";
  const auto prog = program(R"PY(
import time
import airlock_cap as cap
from airlock_cap import wire

def main():
    ch = cap.channel()
    j = cap.job.start(["sleep", "60"])
    for i in range(600):
        ch._send(wire.CapCall(1_000_000 + i, bytes(ch.token), "job.wait",
                              {"job_id": j.job_id, "stdout_cursor": 0, "stderr_cursor": 0,
                               "timeout_ms": 20000}, 25000))
    time.sleep(3)
    return "flooded"
)PY");
  long peak_threads = 0;
  auto r = runCli(
      {"run", "--state-dir", state_.path(), "--timeout", "60", "--code", prog}, work_, cg.path(),
      [&](pid_t pid) { peak_threads = std::max(peak_threads, statusField(pid, "Threads")); });
  EXPECT_FALSE(r.signaled()) << "the service died of signal " << WTERMSIG(r.wait_status)
                             << "; stderr: " << r.err;
  EXPECT_NE(r.out.find("flooded"), std::string::npos)
      << "stdout: " << r.out << "\nstderr: " << r.err;
  EXPECT_LT(peak_threads, 200) << "the broker started a thread per call in flight";
}

// 450 idle connections to /run/airlock/cap.sock: one reader thread each in
// the service. Expected: a per-execution connection cap (refuse or close
// the excess); observed: SIGABRT once thread creation fails.
TEST_F(RedteamCapabilityBrokerFloodTest, ConnectionsWithoutCapCrashTheService) {
  PidsCgroup cg(400);
  if (!cg.valid()) GTEST_SKIP() << "no writable pids cgroup to bound the flood";
  const auto prog = program(R"PY(
import os, socket, time

def main():
    socks = []
    for _ in range(450):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(os.environ["AIRLOCK_CAP_SOCKET"])
        socks.append(s)
    time.sleep(3)
    return "flooded"
)PY");
  auto r = runCli({"run", "--state-dir", state_.path(), "--timeout", "60", "--code", prog}, work_,
                  cg.path());
  EXPECT_FALSE(r.signaled()) << "the service died of signal " << WTERMSIG(r.wait_status)
                             << "; stderr: " << r.err;
  EXPECT_NE(r.out.find("flooded"), std::string::npos)
      << "stdout: " << r.out << "\nstderr: " << r.err;
}

// 16 connections, each sending a 16 MiB length prefix and 15 MiB of body,
// from a sandbox limited to 64 MiB: the service buffers every unfinished
// frame (and string growth doubles it), ~480 MB of service memory that no
// sandbox limit accounts for. Scaled up (thousands of connections) this is
// a host OOM. Expected: the service's peak RSS stays far below what the
// sandbox sent (a cap on connections and on buffered bytes per execution).
TEST_F(RedteamCapabilityBrokerFloodTest, UnfinishedFramesAreBufferedWithoutBound) {
  const auto prog = program(R"PY(
import os, socket, struct, time

def main():
    chunk = b"\0" * (1 << 20)
    socks = []
    for _ in range(16):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(os.environ["AIRLOCK_CAP_SOCKET"])
        s.sendall(struct.pack(">I", 16 * 1024 * 1024))
        for _ in range(15):
            s.sendall(chunk)
        socks.append(s)
    time.sleep(2)
    return "flooded"
)PY");
  long peak_kb = 0;
  auto r = runCli(
      {"run", "--state-dir", state_.path(), "--memory", "64M", "--timeout", "60", "--code", prog},
      work_, "", [&](pid_t pid) { peak_kb = std::max(peak_kb, statusField(pid, "VmHWM")); });
  EXPECT_FALSE(r.signaled()) << r.err;
  EXPECT_LT(peak_kb, 128 * 1024) << "the service's peak RSS was " << peak_kb
                                 << " kB for a sandbox limited to 64 MiB";
}

}  // namespace
}  // namespace airlock::testing
