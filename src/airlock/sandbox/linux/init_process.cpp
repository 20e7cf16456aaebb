#include "airlock/sandbox/linux/init_process.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/keyctl.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>

#include "airlock/port/egress_route.h"
#include "airlock/sandbox/linux/control_protocol.h"
#include "airlock/sandbox/linux/sandboxed_exec.h"
#include "airlock/sys/fd_passing.h"

extern char** environ;

namespace airlock::linux_jail {
namespace {

// --- helpers safe after clone: no allocation ------------------------------

void sendHeader(int fd, MessageType type, int status, int step, const int* pass_fds = nullptr,
                int npass = 0, std::int64_t cpu_usec = 0) noexcept {
  MessageHeader h{};
  h.type = type;
  h.status = status;
  h.step = step;
  h.cpu_usec = cpu_usec;
  iovec iov{&h, sizeof h};
  (void)sys::sendWithFds(fd, &iov, 1, pass_fds, npass);
}

[[noreturn]] void failSetup(int fd, int step, int err) noexcept {
  sendHeader(fd, MessageType::kSetupFailed, err, step);
  ::_exit(1);
}

// The service's argv and environment are in init's memory because init is
// a clone of the service; /proc/1/cmdline and /proc/1/environ show those
// areas (red-team cases B22, B24, B26). Wipe them (the pages are copy-on-write,
// the service keeps its own) and leave the name "airlock-init" in argv.
void scrubInheritedStrings(const InitContext& ctx) noexcept {
  if (ctx.env_start != nullptr && ctx.env_end > ctx.env_start)
    std::memset(ctx.env_start, 0, static_cast<std::size_t>(ctx.env_end - ctx.env_start));
  if (ctx.arg_start != nullptr && ctx.arg_end > ctx.arg_start) {
    const std::size_t len = static_cast<std::size_t>(ctx.arg_end - ctx.arg_start);
    std::memset(ctx.arg_start, 0, len);
    static constexpr char kName[] = "airlock-init";
    if (len > sizeof kName) std::memcpy(ctx.arg_start, kName, sizeof kName);
  }
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) std::memset(*e, 0, cstrlen(*e));
}

// Closes every fd from 3 up except those in keep[0..n) (negative entries
// are ignored). keep is sorted in place.
void closeAllFdsFromThreeExcept(int* keep, int n) noexcept {
  for (int i = 1; i < n; ++i)
    for (int j = i; j > 0 && keep[j - 1] > keep[j]; --j) {
      const int t = keep[j];
      keep[j] = keep[j - 1];
      keep[j - 1] = t;
    }
  unsigned next = 3;  // the lowest fd not yet dealt with
  for (int i = 0; i < n; ++i) {
    if (keep[i] < static_cast<int>(next)) continue;
    const unsigned fd = static_cast<unsigned>(keep[i]);
    if (fd > next) ::syscall(SYS_close_range, next, fd - 1, 0U);
    next = fd + 1;
  }
  ::syscall(SYS_close_range, next, ~0U, 0U);
}

void killAllButInit() noexcept {
  ::kill(-1, SIGKILL);
}

// Parses a decimal at *p (after spaces), moving *p past it.
long parseLong(const char** p, const char* end) noexcept {
  while (*p < end && **p == ' ') ++*p;
  bool negative = false;
  if (*p < end && **p == '-') {
    negative = true;
    ++*p;
  }
  long v = 0;
  while (*p < end && **p >= '0' && **p <= '9') v = v * 10 + (*(*p)++ - '0');
  return negative ? -v : v;
}

// A process's parent and session as this pid namespace sees them (0 for one
// outside it), from /proc/<pid>/stat; false once it is gone.
bool parentAndSession(long pid, long* ppid, long* sid) noexcept {
  char path[40] = "/proc/";
  char digits[24];
  int n = 0;
  for (long v = pid; v > 0 && n < 23; v /= 10) digits[n++] = static_cast<char>('0' + v % 10);
  std::size_t at = cstrlen(path);
  while (n > 0) path[at++] = digits[--n];
  for (const char* tail = "/stat"; *tail != '\0'; ++tail) path[at++] = *tail;
  path[at] = '\0';
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[512];
  const ssize_t len = ::read(fd, buf, sizeof buf);
  ::close(fd);
  if (len <= 0) return false;
  // "pid (comm) state ppid pgrp session ...": comm may hold anything, so
  // the fields start after its last ')'.
  const char* end = buf + len;
  const char* p = end;
  while (p > buf && *(p - 1) != ')') --p;
  if (p == buf || end - p < 4) return false;
  p += 2;  // ") " up to the state
  ++p;     // the state
  *ppid = parseLong(&p, end);
  (void)parseLong(&p, end);  // pgrp
  *sid = parseLong(&p, end);
  return true;
}

// Whether `pid` is a side process's (code mode's effects, startSideProcess;
// side_process.h): an effect, whose parent (the helper) is outside the pid
// namespace, or a process that stayed in an effect's session. These are
// not the command's: a job outlives the command that ran beside it.
bool isSideProcess(long pid) noexcept {
  long ppid = 0, sid = 0;
  if (!parentAndSession(pid, &ppid, &sid)) return false;
  if (ppid == 0) return true;
  if (sid <= 1 || sid == pid) return false;
  long leader_ppid = 0, leader_sid = 0;
  return parentAndSession(sid, &leader_ppid, &leader_sid) && leader_sid == sid && leader_ppid == 0;
}

// SIGKILL to every process of the sandbox but init and the side processes;
// how many it found.
int killCommandProcesses() noexcept {
  const int dir = ::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) {
    killAllButInit();  // no /proc to tell them apart: the command wins
    return 0;
  }
  int found = 0;
  alignas(8) char buf[4096];
  for (;;) {
    const long n = ::syscall(SYS_getdents64, dir, buf, sizeof buf);
    if (n <= 0) break;
    for (long off = 0; off < n;) {
      // struct linux_dirent64: d_ino, d_off, d_reclen, d_type, d_name.
      unsigned short reclen = 0;
      std::memcpy(&reclen, buf + off + 16, sizeof reclen);
      const char* name = buf + off + 19;
      off += reclen;
      if (name[0] < '1' || name[0] > '9') continue;
      const char* p = name;
      const long pid = parseLong(&p, name + cstrlen(name));
      if (pid <= 1 || isSideProcess(pid)) continue;
      ::kill(static_cast<pid_t>(pid), SIGKILL);
      ++found;
    }
  }
  ::close(dir);
  return found;
}

// Ends a command: kills what it left (not the side processes) and reaps
// it, repeating until none of it is left. If `main` is reaped here, its
// wait status lands in *main_status.
void endCommand(pid_t main, int* main_status) noexcept {
  for (;;) {
    const int found = killCommandProcesses();
    for (;;) {
      int status = 0;
      const pid_t p = ::waitpid(-1, &status, WNOHANG | __WALL);
      if (p < 0 && errno == EINTR) continue;
      if (p <= 0) break;
      if (p == main) *main_status = status;
    }
    if (found == 0) return;
    pollfd none{-1, 0, 0};
    (void)::poll(&none, 1, 1);  // a killed process takes a moment to exit
  }
}

// User + system CPU of every child init has reaped, in microseconds. The
// command and everything it started end up reaped by init (orphans are
// re-parented to it), so the delta across a command is the command's CPU.
std::int64_t reapedChildrenCpuUsec() noexcept {
  struct rusage ru {};
  ::getrusage(RUSAGE_CHILDREN, &ru);
  return (static_cast<std::int64_t>(ru.ru_utime.tv_sec) + ru.ru_stime.tv_sec) * 1000000 +
         ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
}

// --- egress: the loopback listener --------------------------------------------

// 127.0.0.1:kEgressRelayPort in the sandbox's network namespace, bound
// before any command runs (so no command can take the port first), without
// SO_REUSEPORT (so none can share it). Returns the fd or -errno.
int openEgressListener() noexcept {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -errno;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(kEgressRelayPort);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 128) != 0) {
    const int err = errno;
    ::close(fd);
    return -err;
  }
  return fd;
}

// Accepts every pending connection and passes each, unread, to the proxy.
// A connection the channel cannot take right now (the proxy is behind, or
// gone) is closed: the client sees a reset, and init never blocks here.
void handOffConnections(int listener, int channel) noexcept {
  for (;;) {
    int conn = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;  // EAGAIN: nothing left; EMFILE and others: try on the next wakeup
    }
    char byte = 'c';
    iovec iov{&byte, 1};
    (void)sys::sendWithFds(channel, &iov, 1, &conn, 1, MSG_DONTWAIT);
    ::close(conn);
  }
}

// --- the command child ------------------------------------------------------

// A command's steps before the request fills in what to run (cwd, argv,
// envp, stdio). Every signal back to its default action matters here too: the
// service may ignore SIGPIPE or handle SIGINT, and an ignored signal would
// survive exec into the command. sandboxed_exec.h lists every step.
SandboxedExec commandExec(const InitContext& ctx) noexcept {
  return SandboxedExec{.seccomp = ctx.seccomp,
                       .uid = ctx.sandbox_uid,
                       .gid = ctx.sandbox_gid,
                       .first_for_oom_killer = true,
                       .cgroup_entry_fd = ctx.command_cgroup_fd};
}

// Parses a kRun payload in place into the preallocated slots: out's cwd,
// argv and envp.
bool parseRun(const InitContext& ctx, const MessageHeader& h, char* payload, std::size_t len,
              SandboxedExec& out) noexcept {
  if (h.argc == 0 || h.argc > kMaxArgs || h.envc > kMaxArgs || len == 0 || payload[len - 1] != '\0')
    return false;
  char* p = payload;
  char* end = payload + len;
  auto next = [&]() -> char* {
    if (p >= end) return nullptr;
    char* s = p;
    p += cstrlen(p) + 1;
    return s;
  };
  out.cwd = next();
  if (out.cwd == nullptr) return false;
  for (std::uint32_t i = 0; i < h.argc; ++i) {
    if ((ctx.arg_slots[i] = next()) == nullptr) return false;
  }
  ctx.arg_slots[h.argc] = nullptr;
  for (std::uint32_t i = 0; i < h.envc; ++i) {
    if ((ctx.env_slots[i] = next()) == nullptr) return false;
  }
  ctx.env_slots[h.envc] = nullptr;
  out.argv = ctx.arg_slots;
  out.envp = ctx.env_slots;
  return true;
}

void closeIf(int fd) noexcept {
  if (fd >= 0) ::close(fd);
}

// Serves requests until the control socket closes (the service is gone or
// destroyed the sandbox): then init exits and the kernel kills the rest.
[[noreturn]] void serve(const InitContext& ctx, int sigfd, int egress_listener) noexcept {
  const int ctl = ctx.control_fd;
  // A command is active from kRun until init answers kEnd with kExited; its
  // main process may exit earlier (kMainExited) while what it started runs on.
  bool active = false;
  pid_t command = -1;  // the main process while it runs
  int main_status = 0;
  std::int64_t cpu_before = 0;
  for (;;) {
    // A negative fd is ignored by poll: no egress, no third entry.
    pollfd fds[3] = {{ctl, POLLIN, 0}, {sigfd, POLLIN, 0}, {egress_listener, POLLIN, 0}};
    if (::poll(fds, 3, -1) < 0) {
      if (errno == EINTR) continue;
      ::_exit(1);
    }
    if (fds[2].revents & POLLIN) handOffConnections(egress_listener, ctx.egress_fd);
    if (fds[1].revents & POLLIN) {
      signalfd_siginfo si;
      while (::read(sigfd, &si, sizeof si) == sizeof si) {
      }
      for (;;) {
        int status = 0;
        pid_t p = ::waitpid(-1, &status, WNOHANG | __WALL);
        if (p <= 0) break;
        if (p == command) {
          command = -1;
          main_status = status;
          sendHeader(ctl, MessageType::kMainExited, status, 0);
        }
      }
    }
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      MessageHeader h{};
      iovec iov[2] = {{&h, sizeof h}, {ctx.recv_buffer, ctx.recv_buffer_size}};
      sys::ReceivedFds received;
      const ssize_t n = sys::receiveWithFds(ctl, iov, 2, 3, received);
      if (n <= 0) {
        killAllButInit();
        ::_exit(0);
      }
      const int* passed = received.fds;
      const int npassed = received.count;
      if (static_cast<std::size_t>(n) < sizeof h || received.truncated) {
        for (int i = 0; i < npassed; ++i) closeIf(passed[i]);
        continue;
      }
      if (h.type == MessageType::kEnd) {
        if (active) {
          // Nothing the command started may outlive it (side processes are
          // not the command's: they end with their job).
          endCommand(command, &main_status);
          command = -1;
          active = false;
          sendHeader(ctl, MessageType::kExited, main_status, 0, nullptr, 0,
                     reapedChildrenCpuUsec() - cpu_before);
        }
        continue;
      }
      if (h.type != MessageType::kRun || active) {
        for (int i = 0; i < npassed; ++i) closeIf(passed[i]);
        continue;
      }
      SandboxedExec req = commandExec(ctx);
      int start_errno = EINVAL;
      const int want = h.has_stdin ? 3 : 2;
      bool ok = npassed == want &&
                parseRun(ctx, h, ctx.recv_buffer, static_cast<std::size_t>(n) - sizeof h, req);
      if (ok) {
        req.stdin_fd = h.has_stdin ? passed[0] : -1;
        req.stdout_fd = passed[want - 2];
        req.stderr_fd = passed[want - 1];
        cpu_before = reapedChildrenCpuUsec();
        main_status = 0;
        // Init is a raw clone of a multi-threaded service: a lock another
        // thread held at that moment (malloc's, stdio's) stays held here
        // forever. glibc's fork() takes those locks and would hang, so init
        // forks with _Fork(), the async-signal-safe fork that takes none.
        pid_t child = ::_Fork();
        if (child == 0) execSandboxed(req);
        if (child < 0) start_errno = errno;
        command = child;
      }
      for (int i = 0; i < npassed; ++i) closeIf(passed[i]);
      if (!ok || command < 0) {
        command = -1;
        sendHeader(ctl, MessageType::kRunFailed, start_errno, 0);
      } else {
        active = true;
      }
    }
  }
}

}  // namespace

void locateInheritedStrings(InitContext& ctx) {
  // /proc/self/stat fields 48-51: arg_start arg_end env_start env_end. The
  // command name (field 2) may contain spaces and parentheses: skip to the
  // last ')'.
  char buf[4096];
  int fd = ::open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return;
  buf[n] = '\0';
  char* p = std::strrchr(buf, ')');
  if (p == nullptr) return;
  int field = 2;
  unsigned long long values[4] = {};
  for (char* tok = std::strtok(p + 1, " "); tok != nullptr; tok = std::strtok(nullptr, " ")) {
    ++field;
    if (field >= 48 && field <= 51) values[field - 48] = std::strtoull(tok, nullptr, 10);
  }
  if (field < 51) return;
  ctx.arg_start = reinterpret_cast<char*>(values[0]);
  ctx.arg_end = reinterpret_cast<char*>(values[1]);
  ctx.env_start = reinterpret_cast<char*>(values[2]);
  ctx.env_end = reinterpret_cast<char*>(values[3]);
}

[[noreturn]] void runInit(const InitContext& ctx) noexcept {
  const int ctl = ctx.control_fd;
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  ::prctl(PR_SET_NAME, "airlock-init");
  // Init is a clone of the service: drop every fd it inherited except the
  // control socket, the egress channel and the commands' cgroup entry
  // (another sandbox's socket or workspace must not be held here), leave the
  // caller's session and terminal, and forget handlers.
  {
    int keep[3] = {ctl, ctx.egress_fd, ctx.command_cgroup_fd};
    closeAllFdsFromThreeExcept(keep, 3);
  }
  int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (devnull >= 0) {
    ::dup2(devnull, 0);
    ::dup2(devnull, 1);
    ::dup2(devnull, 2);
    if (devnull > 2 && devnull != ctl && devnull != ctx.egress_fd) ::close(devnull);
  }
  ::setsid();
  resetSignalDispositions();
  scrubInheritedStrings(ctx);

  // Wait for the service to write our uid/gid maps and cgroup membership.
  MessageHeader go{};
  ssize_t n;
  do {
    n = ::recv(ctl, &go, sizeof go, 0);
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(sizeof go) || go.type != MessageType::kGo) ::_exit(1);

  if (rawSetresgid(0) != 0) failSetup(ctl, -1, errno);
  if (rawSetgroupsEmpty() != 0) failSetup(ctl, -2, errno);
  if (rawSetresuid(0) != 0) failSetup(ctl, -3, errno);
  // A credential change cleared the parent-death signal: set it again.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  // A fresh, empty session keyring instead of the service's (B21).
  ::syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, nullptr);
  if (::unshare(CLONE_NEWCGROUP) != 0) failSetup(ctl, -4, errno);

  const auto& plan = *ctx.plan;
  for (std::size_t i = 0; i < plan.size(); ++i) {
    int err = runSetupStep(plan[i]);
    if (err != 0) failSetup(ctl, static_cast<int>(i), err);
  }

  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &chld, nullptr);
  int sigfd = ::signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sigfd < 0) failSetup(ctl, -5, errno);

  // After the plan: the loopback interface is up.
  int egress_listener = -1;
  if (ctx.egress_fd >= 0) {
    egress_listener = openEgressListener();
    if (egress_listener < 0) failSetup(ctl, -7, -egress_listener);
  }

  int dirs[3];
  const char* names[3] = {"/workspace", "/tmp", "/dev/shm"};
  for (int i = 0; i < 3; ++i) {
    dirs[i] = ::open(names[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirs[i] < 0) failSetup(ctl, -6, errno);
  }
  sendHeader(ctl, MessageType::kReady, 0, 0, dirs, 3);
  for (int fd : dirs) ::close(fd);
  serve(ctx, sigfd, egress_listener);
}

}  // namespace airlock::linux_jail
