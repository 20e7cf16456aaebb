// Red-team: the broker kills a side process (proc.run, job.start) with
// kill(-pgid, SIGKILL), where pgid is the effect's *host* pid, remembered
// when it started (LinuxSideProcess::effect_). It sends that signal again
// long after the effect has exited and been reaped by its helper: the job's
// pump once the job exits, then the JobTable destructor and
// ~LinuxSideProcess at the end of the execution. By then the pid can belong
// to any host process; if that process leads a process group (every shell
// job, every daemon that setsid()s, every other sandbox's init), the
// service, running as root, SIGKILLs that whole group.
//
// The test makes the reuse deterministic instead of waiting for the pid
// space to wrap: once the job's effect is gone it sets
// /proc/sys/kernel/ns_last_pid so that its own next fork gets the effect's
// old pid, makes that child a session (and group) leader, and lets the
// program finish. Expected: the decoy survives (a side process is killed
// through something that cannot be reused: a pidfd, the helper's
// knowledge that the effect is reaped, or the sandbox's cgroup/pid
// namespace). Observed: the decoy dies of SIGKILL when the execution ends.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "redteam_cli_support.h"

namespace airlock::testing {
namespace {

using namespace redteam_cli;

pid_t parentOf(pid_t pid) {
  const std::string stat = readText("/proc/" + std::to_string(pid) + "/stat");
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream in(stat.substr(close + 2));
  std::string state;
  pid_t ppid = -1;
  in >> state >> ppid;
  return ppid;
}

std::string commOf(pid_t pid) {
  std::string c = readText("/proc/" + std::to_string(pid) + "/comm");
  while (!c.empty() && c.back() == '\n') c.pop_back();
  return c;
}

// The host pid of a `sleep` whose grandparent is `cli` (cli -> helper ->
// effect), or -1.
pid_t findEffect(pid_t cli) {
  pid_t found = -1;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return -1;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const pid_t pid = static_cast<pid_t>(std::stol(e->d_name));
    if (commOf(pid) == "sleep" && parentOf(parentOf(pid)) == cli) {
      found = pid;
      break;
    }
  }
  ::closedir(d);
  return found;
}

// A child of this test with exactly `pid`, leading its own session, or -1.
pid_t forkDecoyAt(pid_t pid) {
  for (int attempt = 0; attempt < 20; ++attempt) {
    writeText("/proc/sys/kernel/ns_last_pid", std::to_string(pid - 1));
    pid_t child = ::fork();
    if (child == 0) {
      ::setsid();
      for (;;) ::pause();
    }
    if (child == pid) return child;
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
  }
  return -1;
}

TEST(RedteamSideProcessStaleGroupKillTest, AnExitedJobsPidIsKilledAgainAfterReuse) {
  if (auto why = linuxJailUnavailable()) GTEST_SKIP() << *why;
  if (::access("/proc/sys/kernel/ns_last_pid", W_OK) != 0)
    GTEST_SKIP() << "ns_last_pid is not writable";
  TempStateDir state;
  char tmpl[] = "/tmp/airlock-rt-stalepg-XXXXXX";
  const std::string work = ::mkdtemp(tmpl);
  const std::string prog = work + "/prog.py";
  writeText(prog, R"PY(
import time
import airlock_cap as cap

def main():
    j = cap.job.start(["sleep", "2"])
    while cap.job.wait(j, timeout_ms=5000).state == "running":
        pass
    time.sleep(5)
    return "done"
)PY");

  pid_t effect = -1;
  pid_t decoy = -1;
  auto r = runCli({"run", "--state-dir", state.path(), "--timeout", "60", "--code", prog}, work, "",
                  [&](pid_t cli) {
                    if (decoy > 0) return;
                    if (effect < 0) {
                      effect = findEffect(cli);
                      return;
                    }
                    if (::kill(effect, 0) == 0 || errno != ESRCH) return;  // not reaped yet
                    decoy = forkDecoyAt(effect);
                    if (decoy < 0) decoy = 0;  // could not take the pid; give up
                  });
  EXPECT_EQ(r.exitCode(), 0) << r.err;
  ASSERT_GT(effect, 0) << "the job's effect was never seen";
  ASSERT_GT(decoy, 0) << "could not give the decoy the effect's old pid " << effect;

  std::this_thread::sleep_for(300ms);
  int status = 0;
  const pid_t w = ::waitpid(decoy, &status, WNOHANG);
  if (w == 0) {
    ::kill(decoy, SIGKILL);
    ::waitpid(decoy, nullptr, 0);
  }
  std::error_code ec;
  std::filesystem::remove_all(work, ec);
  EXPECT_EQ(w, 0) << "an unrelated host process group that reused the exited job's pid " << effect
                  << " was killed (signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0) << ")";
}

}  // namespace
}  // namespace airlock::testing
