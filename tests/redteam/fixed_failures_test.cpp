// Red-team regressions for the failures a red-team pass found against the
// linux mechanism (vsock, the service's argv in /proc/1/cmdline, deep trees,
// sparse files, working directories through symlinks, truncation flags,
// concurrent sweeps). Each failed before its fix and states the required
// behaviour.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>

#include "../sandbox/linux/linux_test_support.h"

namespace airlock::testing {
namespace {

class RedteamFixed : public SandboxTest {};

// FAIL-1 (network denied by default; B49-B51 class): AF_VSOCK is not covered
// by the network namespace. A sandbox can bind host vsock ports (the host then
// gets EADDRINUSE) and can dial the hypervisor (CID 2). Fix: seccomp allowlist
// of socket()/socketpair() families (AF_UNIX, AF_INET, AF_INET6, AF_NETLINK).
TEST_F(RedteamFixed, NetworkDenied_VsockSocketsAreRefused) {
  ExecutionCommand c;
  c.argv = {"python3", "-c",
            "import socket\n"
            "for fam in (40, 17, 29, 30, 21, 41, 44):  # VSOCK PACKET CAN TIPC RDS KCM XDP\n"
            "    try:\n"
            "        socket.socket(fam, socket.SOCK_STREAM if fam == 40 else socket.SOCK_RAW if "
            "fam in (17, 29) else socket.SOCK_SEQPACKET).close()\n"
            "        print('open', fam)\n"
            "    except OSError as e:\n"
            "        print('refused', fam, e.errno)\n"};
  c.timeout_seconds = 30;
  c.maximum_output_bytes = 4096;
  auto r = run(c);
  EXPECT_EQ(r.stdout_data.find("open "), std::string::npos) << r.stdout_data;
}

// FAIL-2 (B22/B24/B26): the sandbox's init is a clone of the service and keeps
// its argv, so /proc/1/cmdline shows the service's command line (binary path,
// --copy-in host paths, any flag values) to every command. Fix: scrub the
// [arg_start, arg_end) range in runInit as scrubInheritedStrings does for
// environ (addresses read from /proc/self/stat before clone).
TEST_F(RedteamFixed, B26_InitDoesNotShowTheServiceCommandLine) {
  std::ifstream self("/proc/self/cmdline");
  std::string argv0;
  std::getline(self, argv0, '\0');
  ASSERT_FALSE(argv0.empty());
  auto r = run(shell("tr '\\0' '\\n' < /proc/1/cmdline"));
  EXPECT_EQ(r.stdout_data.find(argv0), std::string::npos)
      << "the service's argv is visible in the sandbox: " << r.stdout_data;
}

// FAIL-3 (B33/B09; untrusted input handled as data): a command that leaves a
// tree deeper than SnapshotLimits::max_depth (4096) makes execute() return
// ExecutionUnavailable: its exit code, output and kill reason are lost, and
// every later execute in the sandbox fails at the "before" snapshot. Required:
// the result is returned with files_changed_truncated (or a SNAPSHOT_TOO_LARGE
// flag), and later commands still run.
TEST_F(RedteamFixed, B09_DeepTreeDoesNotLoseTheResult) {
  auto c = shell(
      "python3 -c 'import os\nfor i in range(4200):\n    os.mkdir(\"d\"); os.chdir(\"d\")'; "
      "echo visible; exit 9");
  auto r = env_->execute(handle_, c);
  ASSERT_TRUE(r) << "result lost: " << r.error().message();
  EXPECT_EQ(r->exit_code, 9);
  EXPECT_EQ(r->stdout_data, "visible\n");
  auto next = env_->execute(handle_, shell("echo still usable"));
  ASSERT_TRUE(next) << "sandbox unusable after a deep tree: " << next.error().message();
}

// FAIL-4 (B32, service stall; partly fixed in d167078): files_changed now
// stops hashing after 2 x workspace_bytes of *apparent* size, but a file with
// no allocated block still costs that much SHA-256 work, after the command
// and outside its timeout, and the CLI ignores SIGINT/SIGTERM meanwhile. At
// --disk 64G a 127 GiB sparse file kept `airlock run` busy for 157 s after a
// 3 ms command. Required: cost bounded by allocated data (charge st_blocks,
// or leave files whose st_blocks*512 is far below st_size unhashed), and
// hashing that honours the cancel token and a deadline.
TEST_F(RedteamFixed, B32_SparseFileDoesNotStallTheService) {
  ASSERT_TRUE(env_->destroy(handle_));
  auto spec = linuxSpec(options_);
  spec.limits.workspace_bytes = std::int64_t{16} << 30;  // hash budget 32 GiB
  auto h = env_->provision(spec);
  ASSERT_TRUE(h) << h.error().message();
  handle_ = *h;
  auto c = shell("truncate -s 31G /workspace/sparse.bin && echo made", 10);
  const auto started = std::chrono::steady_clock::now();
  auto r = run(c);
  const auto took = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(r.stdout_data, "made\n");
  EXPECT_LT(took, std::chrono::seconds(10))
      << "execute took " << std::chrono::duration_cast<std::chrono::seconds>(took).count()
      << " s for a command that ends at once (hashing holes of a file with no data)";
}

// FAIL-5 (B12 letter of the rule): working_directory is resolved by chdir()
// in the command child before it drops to the sandbox uid, following
// workspace symlinks, so a planted "w -> /" starts the next command outside
// /workspace. Required: cwd resolves beneath /workspace (openat2
// RESOLVE_BENEATH on a /workspace fd + fchdir, after dropping privileges).
TEST_F(RedteamFixed, B12_WorkingDirectoryStaysInsideTheWorkspace) {
  ASSERT_EQ(run(shell("ln -s / w; ln -s ../.. up; echo ok")).stdout_data, "ok\n");
  for (const char* wd : {"w", "up"}) {
    auto c = shell("pwd -P");
    c.working_directory = wd;
    auto r = env_->execute(handle_, c);
    if (!r) continue;  // rejected: fine
    EXPECT_EQ(r->stdout_data.rfind("/workspace", 0), 0u) << wd << " resolved to " << r->stdout_data;
  }
}

// FAIL-6 (B36 reporting): when the cap is crossed on stdout, stderr is closed
// with data still unread but stderr_truncated stays false, so a cut stderr is
// indistinguishable from a complete one. Fixed: past the cap both pipes are
// drained (and the bytes dropped) until the kill closes them, and each flag
// means "bytes of this stream were dropped", so data unread at the cut marks
// its stream. A stream that lost nothing (silent, or its writer killed
// before it wrote again) is not marked: Parity.*/OutputLimit* and
// LinuxEnvironmentTest.OutputPastTheCapIsTruncatedAndKilled pin that down.
TEST_F(RedteamFixed, B36_StreamsCutAtTheCapAreMarkedWhenTheyLostBytes) {
  auto c = shell(
      "(while :; do echo eeeeeeeeeeeeeeeeeeee >&2; done) & while :; do echo oooooooooooooooooooo; "
      "done");
  c.maximum_output_bytes = 1 << 16;
  auto r = run(c);
  ASSERT_EQ(r.killed_by, KillReason::kOutputLimit);
  // Which stream crosses the cap, and whether the other writes again before
  // the kill, is scheduling; every time, together they hold exactly the cap
  // and the stream the cut fell in is marked.
  EXPECT_EQ(r.stdout_data.size() + r.stderr_data.size(), std::size_t{1} << 16);
  EXPECT_TRUE(r.stdout_truncated || r.stderr_truncated)
      << r.stdout_data.size() << " / " << r.stderr_data.size();
}

// FAIL-7 (B42 recovery vs. live sandboxes; LIFECYCLE): sweepOrphans() of a
// service starting on a shared state directory (the CLI's default
// /run/airlock) can take the flock of a lock file another service created
// but has not locked yet (lockFile: open(O_EXCL) then flock), kill and
// unlink it; the owner then locks the unlinked inode and carries on, and the
// next sweep kills its live sandbox ("init died", "Broken pipe"), or
// provision fails with EWOULDBLOCK / a vanished cgroup. Observed 6 failures
// in 600 provision+execute cycles with 6 concurrent services. Fix: create the
// lock under a temporary name, flock it, then link() it into place; the
// sweeper re-checks (fstat vs stat, st_nlink) before acting.
TEST(RedteamFixedLifecycle, B42_ConcurrentServicesOnOneStateDirDoNotSweepEachOther) {
  if (auto why = linuxJailUnavailable()) GTEST_SKIP() << *why;
  TempStateDir state;
  constexpr int kWorkers = 6;
  constexpr int kIterations = 60;
  std::vector<std::pair<pid_t, int>> workers;  // pid, read end of its report pipe
  for (int w = 0; w < kWorkers; ++w) {
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(fds[0]);
      int failures = 0;
      for (int i = 0; i < kIterations; ++i) {
        auto options = testOptions(state.path());
        auto env = linux_jail::createLinuxEnvironment(options);  // sweeps
        if (!env) {
          ++failures;
          continue;
        }
        auto h = (*env)->provision(linuxSpec(options));
        if (!h) {
          ++failures;
          continue;
        }
        auto r = (*env)->execute(*h, shell("sleep 0.05; echo ok", 30));
        if (!r || r->stdout_data != "ok\n") ++failures;
        (void)(*env)->destroy(*h);
      }
      (void)!::write(fds[1], &failures, sizeof failures);
      ::_exit(0);
    }
    ::close(fds[1]);
    workers.emplace_back(pid, fds[0]);
  }
  int total = 0;
  for (auto [pid, fd] : workers) {
    int failures = kIterations;
    if (::read(fd, &failures, sizeof failures) != sizeof failures) failures = kIterations;
    ::close(fd);
    int status = 0;
    ::waitpid(pid, &status, 0);
    total += failures;
  }
  EXPECT_EQ(total, 0) << total << " of " << kWorkers * kIterations
                      << " provision/execute cycles failed because another service's sweep "
                         "took, killed or unlinked a live sandbox";
}

}  // namespace
}  // namespace airlock::testing
