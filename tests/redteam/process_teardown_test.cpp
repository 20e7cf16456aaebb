// Red-team regression: nothing a command starts outlives it, however it hides
// (red-team case B39: double fork + setsid + ignored signals + closed stdio + its own
// process group; a child holding a TCP port), and orphans are reaped by the
// sandbox's init so dead processes do not use up the pid limit (B43).
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>

#include "../sandbox/linux/linux_test_support.h"
#include "airlock/port/cancel_token.h"

namespace airlock::testing {
namespace {

class RedteamTeardownTest : public SandboxTest {
 protected:
  void provision(std::int64_t pids_max) {
    reprovision([&](ResourceLimits& l) { l.pids_max = pids_max; });
  }
};

ExecutionCommand python(const std::string& program, std::int64_t timeout_seconds) {
  ExecutionCommand c;
  c.argv = {"python3", "-c", program};
  c.timeout_seconds = timeout_seconds;
  c.maximum_output_bytes = 1 << 20;
  return c;
}

constexpr const char* kHider = R"PY(
import os, signal, socket, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        for s in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT, signal.SIGUSR1):
            signal.signal(s, signal.SIG_IGN)
        os.setpgid(0, 0)
        for fd in (0, 1, 2):
            os.close(fd)
        i = 0
        while True:
            with open("/workspace/alive", "a") as f:
                f.write("%d\n" % i)
            i += 1
            time.sleep(0.1)
    os._exit(0)
if os.fork() == 0:
    s = socket.socket()
    s.bind(("127.0.0.1", 8080))
    s.listen(1)
    time.sleep(1000)
time.sleep(0.5)
print("hidden", flush=True)
time.sleep(1000)
)PY";

// B39: after a TIMEOUT, the hidden grandchild no longer writes, no process of
// the command remains, and the port it held is free for the next command.
TEST_F(RedteamTeardownTest, B39_HiddenDescendantsDieWithTheirCommand) {
  provision(64);
  auto r = run(python(kHider, 2));
  EXPECT_EQ(r.killed_by, KillReason::kTimeout);
  EXPECT_EQ(r.stdout_data, "hidden\n");
  EXPECT_LT(r.duration_ms, 8000);

  auto check = run(shell(
      "a=$(wc -l < /workspace/alive); sleep 1; b=$(wc -l < /workspace/alive); echo \"$a $b\"; "
      "n=0; for p in /proc/[0-9]*; do c=$(cat $p/comm 2>/dev/null); "
      "case \"$c\" in python*) n=$((n+1));; esac; done; echo \"python=$n\"; "
      "python3 -c 'import socket; s=socket.socket(); s.bind((\"127.0.0.1\", 8080)); print(\"port "
      "free\")'"));
  std::istringstream in(check.stdout_data);
  long before = -1, after = -2;
  in >> before >> after;
  EXPECT_GT(before, 0) << "the hidden writer never ran: " << check.stdout_data;
  EXPECT_EQ(before, after) << "a descendant of the timed-out command is still writing";
  EXPECT_NE(check.stdout_data.find("python=0"), std::string::npos) << check.stdout_data;
  EXPECT_NE(check.stdout_data.find("port free"), std::string::npos)
      << check.stdout_data << check.stderr_data;
}

// B39 for a command that exits on its own (no kill reason): its detached
// descendants are killed before the result is returned.
TEST_F(RedteamTeardownTest, B39_DetachedDescendantsOfANormalExitAreKilled) {
  provision(64);
  auto r =
      run(shell("(setsid sh -c 'trap \"\" HUP TERM INT; exec 0<&- 1>&- 2>&-; "
                "while :; do echo x >> /workspace/alive2; sleep 0.1; done' &); sleep 0.5; exit 3"));
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_FALSE(r.killed_by.has_value());
  auto check = run(shell(
      "a=$(wc -l < /workspace/alive2); sleep 1; b=$(wc -l < /workspace/alive2); echo \"$a $b\""));
  std::istringstream in(check.stdout_data);
  long before = -1, after = -2;
  in >> before >> after;
  EXPECT_GT(before, 0);
  EXPECT_EQ(before, after) << "a detached descendant survived its command's exit";
}

// B43: 500 orphaned grandchildren under pids=64. Each is reaped by init, so
// fork never fails, zombies never pile up, and the command's own exit status
// (7) is reported, not hidden by init.
TEST_F(RedteamTeardownTest, B43_OrphansAreReapedSoThePidLimitIsNotExhausted) {
  provision(64);
  auto r = run(python(R"PY(
import os, sys, time
fails = 0
maxz = 0
for i in range(500):
    try:
        pid = os.fork()
    except OSError:
        fails += 1
        time.sleep(0.01)
        continue
    if pid == 0:
        try:
            if os.fork() == 0:
                os._exit(0)
        except OSError:
            pass
        os._exit(0)
    os.waitpid(pid, 0)
    if i % 25 == 0:
        time.sleep(0.02)
        z = 0
        for p in os.listdir("/proc"):
            if p.isdigit():
                try:
                    if open("/proc/%s/stat" % p).read().rsplit(")", 1)[1].split()[0] == "Z":
                        z += 1
                except OSError:
                    pass
        maxz = max(maxz, z)
print(fails, maxz, flush=True)
sys.exit(7)
)PY",
                      120));
  EXPECT_EQ(r.exit_code, 7) << r.stderr_data;
  std::istringstream in(r.stdout_data);
  int fails = -1, max_zombies = -1;
  in >> fails >> max_zombies;
  EXPECT_EQ(fails, 0) << "fork failed: dead processes used up pids.max";
  EXPECT_GE(max_zombies, 0);
  EXPECT_LE(max_zombies, 8) << "orphans are not being reaped";
}

}  // namespace
}  // namespace airlock::testing
