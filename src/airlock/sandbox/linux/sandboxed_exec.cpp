#include "airlock/sandbox/linux/sandboxed_exec.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

#include "airlock/sandbox/host/image_exec.h"
#include "airlock/sys/io.h"

namespace airlock::linux_jail {

std::size_t cstrlen(const char* s) noexcept {
  std::size_t n = 0;
  while (s[n] != '\0') ++n;
  return n;
}

void writeStr(int fd, const char* s) noexcept {
  (void)sys::writeAll(fd, s, cstrlen(s));  // a message nobody can read is dropped
}

long rawSetresuid(uid_t uid) noexcept {
  return ::syscall(SYS_setresuid, uid, uid, uid);
}
long rawSetresgid(gid_t gid) noexcept {
  return ::syscall(SYS_setresgid, gid, gid, gid);
}
long rawSetgroupsEmpty() noexcept {
  return ::syscall(SYS_setgroups, 0, nullptr);
}

void resetSignalDispositions() noexcept {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    ::sigaction(sig, &dfl, nullptr);
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
}

[[noreturn]] void execSandboxed(const SandboxedExec& e) noexcept {
  resetSignalDispositions();
  if (::setsid() < 0) ::_exit(125);  // fail closed: never share a session (B17)
  if (e.cgroup_entry_fd >= 0 && ::write(e.cgroup_entry_fd, "0", 1) != 1) {
    const int err = errno;
    if (e.stderr_fd >= 0) {
      writeStr(e.stderr_fd, "airlock: cannot enter the sandbox's memory limit: ");
      writeStr(e.stderr_fd, host::execErrorText(err));
      writeStr(e.stderr_fd, "\n");
    }
    ::_exit(125);
  }

  int in = e.stdin_fd >= 0 ? e.stdin_fd : ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (in < 0 || ::dup2(in, 0) < 0 || ::dup2(e.stdout_fd, 1) < 0 || ::dup2(e.stderr_fd, 2) < 0)
    ::_exit(125);
  ::syscall(SYS_close_range, 3U, ~0U, 0U);  // only fds 0-2 reach the process (B12)
  // While still ns-root and before the filter: the terminal is taken once,
  // by the session leader setsid just made.
  if (e.controlling_terminal && ::ioctl(0, TIOCSCTTY, 0) != 0) ::_exit(125);

  // Init is protected from the OOM killer where the service may (-1000 needs
  // CAP_SYS_RESOURCE); where it may not, init (a clone of the service,
  // carrying its pages) is often the biggest task in the sandbox's cgroup,
  // so a command asks to be taken first. Its /proc files belong to the
  // host's root while it is not dumpable (its credentials changed), so it
  // is dumpable for the one write: still ns-root here, it cannot be
  // reached by the sandbox user, and the uid change below makes it not
  // dumpable again until execve.
  if (e.first_for_oom_killer) ::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
  int adj = ::open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
  if (adj >= 0) {
    if (e.first_for_oom_killer) {
      (void)!::write(adj, "1000", 4);
    } else {
      (void)!::write(adj, "0", 1);
    }
    ::close(adj);
  }
  if (e.first_for_oom_killer) ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);

  const struct rlimit no_core { 0, 0 };
  ::setrlimit(RLIMIT_CORE, &no_core);
  // nofile: enough for builds, bounded for the host.
  struct rlimit nofile {};
  if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0) {
    if (nofile.rlim_max > 4096) nofile.rlim_max = 4096;
    if (nofile.rlim_cur > nofile.rlim_max) nofile.rlim_cur = nofile.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &nofile);
  }

  // Drop every capability: bounding set first (needs CAP_SETPCAP), then the
  // uid change clears the permitted, effective and ambient sets.
  for (int cap = 0; cap <= CAP_LAST_CAP; ++cap) ::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
  if (rawSetgroupsEmpty() != 0 || rawSetresgid(e.gid) != 0 || rawSetresuid(e.uid) != 0)
    ::_exit(125);
  if (e.die_with_parent) ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // the uid change cleared it

  // The working directory, resolved as the sandbox user and beneath
  // /workspace: a symlink the sandbox planted cannot move it out (B12).
  {
    int ws = ::open("/workspace", O_PATH | O_DIRECTORY | O_CLOEXEC);
    int dir = ws;
    if (ws >= 0 && e.cwd != nullptr && e.cwd[0] != '\0') {
      struct open_how how {};
      how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
      how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
      dir = static_cast<int>(::syscall(SYS_openat2, ws, e.cwd, &how, sizeof how));
    }
    if (dir < 0 || ::fchdir(dir) != 0) {
      writeStr(2, "airlock: the working directory is not a directory inside /workspace\n");
      ::_exit(125);
    }
    if (dir != ws) ::close(dir);
    ::close(ws);
  }
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) ::_exit(125);
  if (e.seccomp == nullptr || ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, e.seccomp) != 0)
    ::_exit(125);

  host::execFromImagePathOrExit(e.argv, e.envp);
}

}  // namespace airlock::linux_jail
