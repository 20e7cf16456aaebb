// airlock-gvisor-shim: the in-sandbox half of the gvisor mechanism
// (sandbox/oci/gvisor_environment.h). Bound read-only at /.airlock/shim.
// Runs inside gVisor only; it trusts nothing it reads but the host's
// request, which arrives on the control socket only root can reach.
//
//   shim init   the container's process: pid 1 of the sandbox, uid 0 with
//               CAP_KILL, CAP_SETUID, CAP_SETGID and CAP_SETPCAP only.
//               Connects to /.airlock/ctl/sock (the host's listening socket,
//               reached through runsc --host-uds=open; the directory is 0700
//               root, so the command cannot), then serves one command at a
//               time. Per command it reads a request (the host's stdin,
//               stdout and stderr pipe ends as SCM_RIGHTS; process limit,
//               working directory, argv, environment), forks the command as
//               uid 1000 with no capabilities, no_new_privs, its own
//               session, RLIMIT_NPROC = the process limit plus
//               kPidsRefusalSpare (gVisor refuses a fork past it), core 0,
//               nofile 4096, and keeps no copy of the
//               pipes (so their end-of-file is the command's). It then
//               reports the main process's exit, reports the command at its
//               process limit (polling /proc every 20 ms, every 1 ms once
//               the command holds a quarter of it), and on the host's
//               stop byte kills every process but itself and the side
//               processes (below), reaps them and reports kDone. Without a stop it
//               reports kDone once every process of the command is gone
//               and then waits for the stop byte (the host sends exactly one
//               per command)
//               (as pid 1 it is every orphan's parent, so "no child left"
//               means "no process left"). When the socket closes (the host
//               is gone) it kills the command and exits, which ends the
//               sandbox.
//   shim init egress
//               the same, for a sandbox with egress (port/egress_route.h):
//               before it connects to the host (so before any command can
//               run) it listens on 127.0.0.1:3128 (no SO_REUSEADDR or
//               SO_REUSEPORT: no command can take or share the port), and a
//               relay thread serves that listener: per accepted connection
//               it connects to /.airlock/egress/sock (the host's egress
//               socket, reached through --host-uds=open; 0700 root like the
//               control directory) and copies bytes both ways through two
//               bounded buffers, passing each end of file on as a half-close.
//               The relay never reads or judges the bytes: the proxy behind
//               the socket decides. Commands cannot stop it: it is a thread
//               of pid 1 (uid 0; commands run as uid 1000), its fds are
//               close-on-exec and each command keeps only fds 0-2, and the
//               stop's kill(-1, SIGKILL) spares pid 1.
//
// Side processes (code mode's proc.run and job.start effects; the host's
// ExecutionEnvironment::startSideProcess, and the channel in
// shim_protocol.h): before the command channel, init connects to
// /.airlock/ctl/side, and a side thread of pid 1 serves it for the
// sandbox's life, concurrently with whatever command runs. Per request it
// forks a *keeper* (uid 0, a child of pid 1, holding only its five pipe
// ends), which forks the effect exactly as a command is started
// (execCommand: uid 1000, no capabilities, no_new_privs, its own session,
// RLIMIT_NPROC, stdio from the host's pipes, the working directory beneath
// /workspace) plus a parent-death signal, reports kStarted and later
// kMainExited on the status pipe, and SIGKILLs the effect's process group
// when the kill pipe reaches end-of-file. The keeper is the effect's parent
// until it has reaped it, so the group id it signals is the effect's own;
// it exits once it has reported. Keepers are not the command's: pid 1 keeps
// their pids (g_keepers) and leaves them out of the command's process count.
// They are spared by pid 1's end-of-command rule: the stop kills every
// process but pid 1, the keepers, their effects and what stays in an
// effect's session (code mode's jobs outlive commands and programs,
// docs/capabilities.md), repeating until none is left, and kDone comes once
// only side processes remain.
//
// A side process on a terminal (SideCommand::terminal; the request ends
// with its rows and columns) gets a keeper that also holds the terminal:
// the host cannot hold a gVisor terminal's master, which lives in the
// sentry. The keeper opens the sandbox's /dev/ptmx (the slave owned by the
// sandbox user and the tty group), starts the effect with the slave as its
// stdin, stdout and stderr and as the controlling terminal of its new
// session (TIOCSCTTY), closes the host's stderr pipe (a terminal has one
// output) and relays through two bounded buffers: the host's stdin into the
// master, its end-of-file typed as the terminal's end-of-file character
// once, and the master's output to the host's stdout. The kill pipe brings
// resize records (TIOCSWINSZ on the master, then SIGWINCH to the session's
// processes, which this gVisor does not send), and its end-of-file SIGKILLs
// every process of the effect's session (a shell's jobs have groups of
// their own). After the effect has exited the keeper reports it at once
// and keeps relaying while anything of its session is left (this gVisor
// never reports end-of-file on a master, so /proc says when nothing that
// could write is left, looked at from every millisecond up to every
// kSessionLookMaxMs); then it relays what the terminal still holds, closes
// the host's stdout and exits. Known gaps of this gVisor's terminals: the
// end-of-file character on an empty line of a canonical-mode reader (`cat`,
// `sh -i`) is dropped instead of making its read return 0 (a program that
// reads the terminal raw, such as Python's readline, sees the byte), and a
// closed master does not hang up the slave.
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/openat2.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "airlock/port/egress_route.h"
#include "airlock/sandbox/host/image_exec.h"
#include "airlock/sandbox/oci/oci_bundle.h"
#include "airlock/sandbox/oci/shim_protocol.h"
#include "airlock/sandbox/sandbox_baseline.h"
#include "airlock/sys/fd_passing.h"
#include "airlock/sys/io.h"

namespace {

using airlock::oci::ShimRecord;
using airlock::oci::ShimRecordType;

void writeStr(int fd, const char* s) {
  (void)airlock::sys::writeAll(fd, s, std::strlen(s));
}

struct Request {
  int stdio[3] = {-1, -1, -1};  // passed by the host with the request; side: stdin may be -1
  int status_fd = -1;           // side processes only: the status pipe's write end
  int kill_fd = -1;             // side processes only: the kill pipe's read end
  pid_t die_with = 0;           // > 0: SIGKILL when this parent (the keeper) dies
  // Side processes on a terminal: its size (then stdio[0..2] are its slave,
  // which becomes the process's controlling terminal). 0: pipes.
  std::uint16_t rows = 0;
  std::uint16_t columns = 0;
  long nproc = 0;
  std::string cwd;
  std::vector<std::string> argv;
  std::vector<std::string> env;
};

// Request: u32 length, then NUL-terminated fields: nproc, cwd, argc,
// argv..., envc, env..., and for a side request optionally rows, columns
// (a terminal).
// The host's stdin, stdout and stderr pipe ends arrive as SCM_RIGHTS with
// the length; for a side request (`side`), stdout, stderr, status, kill and
// optionally stdin (shim_protocol.h).
bool readRequest(int sock, Request& req, bool side = false) {
  static_assert(airlock::oci::kSideFdsMax <= airlock::sys::kMaxPassedFds);
  std::uint32_t len = 0;
  {
    const iovec iov{&len, sizeof len};
    const int want_min = side ? airlock::oci::kSideFdsMin : 3;
    const int want_max = side ? airlock::oci::kSideFdsMax : 3;
    airlock::sys::ReceivedFds received;
    const ssize_t n = airlock::sys::receiveWithFds(sock, &iov, 1, want_max, received, MSG_WAITALL);
    const int* fds = received.fds;  // -1 past received.count
    const int got = received.count;
    if (side) {
      req.stdio[1] = fds[0];
      req.stdio[2] = fds[1];
      req.status_fd = fds[2];
      req.kill_fd = fds[3];
      req.stdio[0] = fds[4];
    } else {
      for (int k = 0; k < 3; ++k) req.stdio[k] = fds[k];
    }
    if (n != static_cast<ssize_t>(sizeof len) || got < want_min) return false;
  }
  if (len == 0 || len > (8u << 20)) return false;
  std::string payload(len, '\0');
  if (airlock::sys::readFull(sock, payload.data(), len) != static_cast<ssize_t>(len) ||
      payload.back() != '\0')
    return false;
  std::vector<std::string> fields;
  std::size_t start = 0;
  while (start < payload.size()) {
    std::size_t end = payload.find('\0', start);
    fields.emplace_back(payload, start, end - start);
    start = end + 1;
  }
  std::size_t i = 0;
  auto next = [&](std::string& out) {
    if (i >= fields.size()) return false;
    out = fields[i++];
    return true;
  };
  auto number = [&](long& out) {
    std::string s;
    if (!next(s) || s.empty() || s.size() > 9 ||
        s.find_first_not_of("0123456789") != std::string::npos)
      return false;
    out = std::strtol(s.c_str(), nullptr, 10);
    return true;
  };
  long argc = 0, envc = 0;
  if (!number(req.nproc) || !next(req.cwd) || !number(argc) || argc < 1) return false;
  for (long k = 0; k < argc; ++k) {
    std::string a;
    if (!next(a)) return false;
    req.argv.push_back(std::move(a));
  }
  if (!number(envc)) return false;
  for (long k = 0; k < envc; ++k) {
    std::string e;
    if (!next(e)) return false;
    req.env.push_back(std::move(e));
  }
  if (side && fields.size() - i == 2) {
    long rows = 0, columns = 0;
    if (!number(rows) || !number(columns) || rows < 1 || rows > 0xffff || columns < 1 ||
        columns > 0xffff)
      return false;
    req.rows = static_cast<std::uint16_t>(rows);
    req.columns = static_cast<std::uint16_t>(columns);
  }
  return i == fields.size();
}

[[noreturn]] void execCommand(const Request& req) {
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  // SIGKILL, SIGSTOP and the signals libc keeps for itself refuse
  // (EINVAL); there is nothing to reset in those.
  for (int s = 1; s < NSIG; ++s) (void)::signal(s, SIG_DFL);
  if (::setsid() < 0) ::_exit(125);
  for (int fd = 0; fd < 3; ++fd)
    if (::dup2(req.stdio[fd], fd) < 0) ::_exit(125);
  ::syscall(SYS_close_range, 3U, ~0U, 0U);  // only fds 0-2 reach the command
  // A new session leader with no terminal yet: its slave becomes its
  // controlling terminal (job control, ^C, /dev/tty).
  if (req.rows > 0 && ::ioctl(0, TIOCSCTTY, 0) != 0) ::_exit(125);

  const rlimit no_core{0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  const rlimit nofile{airlock::oci::kNofileLimit, airlock::oci::kNofileLimit};
  ::setrlimit(RLIMIT_NOFILE, &nofile);
  // The kernel's refusal sits kPidsRefusalSpare above the limit the shim
  // reports at (oci_bundle.h); the command is killed when the shim sees the
  // limit, so it never keeps the spare.
  const rlim_t cap = static_cast<rlim_t>(req.nproc + airlock::oci::kPidsRefusalSpare);
  const rlimit nproc{cap, cap};
  if (::setrlimit(RLIMIT_NPROC, &nproc) != 0) ::_exit(125);

  for (int cap = 0; cap <= CAP_LAST_CAP; ++cap) ::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
  if (::setgroups(0, nullptr) != 0 ||
      ::setresgid(airlock::oci::kSandboxGid, airlock::oci::kSandboxGid,
                  airlock::oci::kSandboxGid) != 0 ||
      ::setresuid(airlock::oci::kSandboxUid, airlock::oci::kSandboxUid,
                  airlock::oci::kSandboxUid) != 0)
    ::_exit(125);
  // Set after the uid change (which clears it); a keeper already gone by
  // then is caught by the parent check.
  if (req.die_with > 0 &&
      (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0 || ::getppid() != req.die_with))
    ::_exit(125);
  {
    // Resolved as the sandbox user beneath /workspace (openat2 where this
    // gVisor has it; the host checked the path before the command started,
    // and no other command can run in between, so the fallback is a plain
    // walk that refuses symlinks component by component).
    int ws = ::open("/workspace", O_PATH | O_DIRECTORY | O_CLOEXEC);
    int dir = ws;
    if (ws >= 0 && !req.cwd.empty()) {
      open_how how{};
      how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
      how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
      dir = static_cast<int>(::syscall(SYS_openat2, ws, req.cwd.c_str(), &how, sizeof how));
      if (dir < 0 && errno == ENOSYS) {
        dir = ::dup(ws);
        std::size_t start = 0;
        while (dir >= 0 && start < req.cwd.size()) {
          std::size_t end = req.cwd.find('/', start);
          if (end == std::string::npos) end = req.cwd.size();
          const std::string comp = req.cwd.substr(start, end - start);
          int nd = comp == ".."
                       ? -1
                       : ::openat(dir, comp.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
          ::close(dir);
          dir = nd;
          start = end + 1;
        }
      }
    }
    if (dir < 0 || ::fchdir(dir) != 0) {
      writeStr(2, "airlock: the working directory is not a directory inside /workspace\n");
      ::_exit(125);
    }
  }
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) ::_exit(125);

  std::vector<char*> argv, envp;
  for (const auto& a : req.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : req.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  airlock::host::execFromImagePathOrExit(argv.data(), envp.data());
}

bool send(int sock, ShimRecordType type, std::int64_t value) {
  char buf[airlock::oci::kShimRecordBytes];
  airlock::oci::encodeShimRecord(ShimRecord{type, value}, buf);
  return airlock::sys::sendAll(sock, buf, sizeof buf);
}

// ---- side-process keepers -----------------------------------------------------

// The live keepers (children of pid 1): the side thread adds a keeper's pid
// under the lock it forked it under, so pid 1's reaper, which removes pids
// as it reaps them, never sees a keeper before it is listed.
pthread_mutex_t g_keeper_mu = PTHREAD_MUTEX_INITIALIZER;
std::vector<pid_t>* g_keepers = nullptr;  // created before any thread; never freed

void forgetKeeper(pid_t pid) {
  pthread_mutex_lock(&g_keeper_mu);
  for (auto it = g_keepers->begin(); it != g_keepers->end(); ++it) {
    if (*it == pid) {
      g_keepers->erase(it);
      break;
    }
  }
  pthread_mutex_unlock(&g_keeper_mu);
}

long keeperCount() {
  pthread_mutex_lock(&g_keeper_mu);
  const long n = static_cast<long>(g_keepers->size());
  pthread_mutex_unlock(&g_keeper_mu);
  return n;
}

// Processes in the sandbox other than pid 1, this shim and the side
// processes' keepers: the command's (and the side processes' effects,
// which run as the same user under the same RLIMIT_NPROC).
long commandProcesses() {
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return 0;
  const long self = ::getpid();
  long n = 0;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    const long pid = std::strtol(e->d_name, nullptr, 10);
    if (pid != 1 && pid != self) ++n;
  }
  ::closedir(d);
  return n - keeperCount();
}

bool isKeeper(long pid) {
  pthread_mutex_lock(&g_keeper_mu);
  bool found = false;
  for (pid_t k : *g_keepers) found = found || k == pid;
  pthread_mutex_unlock(&g_keeper_mu);
  return found;
}

// What /proc/<pid>/stat says of a process.
struct ProcStat {
  char state = '?';  // 'Z': a zombie, which holds nothing any more
  long ppid = 0;
  long sid = 0;
};

// False once the process is gone.
bool readProcStat(long pid, ProcStat& st) {
  char path[64];
  (void)std::snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[512];
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  // "pid (comm) state ppid pgrp session ...": comm may hold anything.
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr || p[1] != ' ' || p[2] == '\0' || p[3] != ' ') return false;
  st.state = p[2];
  char* end = nullptr;
  st.ppid = std::strtol(p + 4, &end, 10);  // after ") S "
  (void)std::strtol(end, &end, 10);        // pgrp
  st.sid = std::strtol(end, &end, 10);
  return true;
}

// Whether `pid` is a side process's (code mode's effects): a keeper, an
// effect (a keeper's child), or a process that stayed in an effect's
// session. These are not the command's: a job outlives the command that ran
// beside it.
bool isSideProcess(long pid) {
  if (isKeeper(pid)) return true;
  ProcStat st;
  if (!readProcStat(pid, st)) return false;
  if (isKeeper(st.ppid)) return true;
  if (st.sid <= 1 || st.sid == pid) return false;
  ProcStat leader;
  return readProcStat(st.sid, leader) && leader.sid == st.sid && isKeeper(leader.ppid);
}

// The processes of session `sid` that are not zombies; with `sig` (not 0)
// each is sent it. Returns how many there were.
long sessionProcesses(long sid, int sig) {
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return 0;
  long n = 0;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    const long pid = std::strtol(e->d_name, nullptr, 10);
    ProcStat st;
    if (!readProcStat(pid, st) || st.sid != sid || st.state == 'Z') continue;
    if (sig != 0) ::kill(static_cast<pid_t>(pid), sig);
    ++n;
  }
  ::closedir(d);
  return n;
}

// The command's processes: every process but pid 1, this shim and the side
// processes. With `kill`, each gets SIGKILL. Returns how many there were.
long commandProcessesLeft(bool kill) {
  DIR* d = ::opendir("/proc");
  if (d == nullptr) {
    if (kill) ::kill(-1, SIGKILL);  // no /proc to tell them apart: the command wins
    return 0;
  }
  const long self = ::getpid();
  long n = 0;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    const long pid = std::strtol(e->d_name, nullptr, 10);
    if (pid == 1 || pid == self || isSideProcess(pid)) continue;
    if (kill) ::kill(static_cast<pid_t>(pid), SIGKILL);
    ++n;
  }
  ::closedir(d);
  return n;
}

std::int64_t childrenCpuUsec() {
  rusage ru{};
  ::getrusage(RUSAGE_CHILDREN, &ru);
  return (static_cast<std::int64_t>(ru.ru_utime.tv_sec) + ru.ru_stime.tv_sec) * 1000000 +
         ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
}

// Supervises one command (see the file comment). Returns false when the
// host is gone (the socket closed): the caller then exits, which ends the
// sandbox.
bool runCommand(int sock, int sigchld_fd, const Request& req) {
  const pid_t main_pid = ::fork();
  if (main_pid == 0) execCommand(req);
  const int fork_errno = errno;
  // The shim keeps no copy of the command's stdio: end-of-file on the
  // host's pipes means the command's processes closed them.
  for (int fd : req.stdio) ::close(fd);
  if (main_pid < 0) return send(sock, ShimRecordType::kStartFailed, fork_errno);
  if (!send(sock, ShimRecordType::kStarted, main_pid)) return false;

  const std::int64_t cpu_before = childrenCpuUsec();
  bool main_exited = false;
  bool stop = false;
  bool host_gone = false;
  bool pids_reported = false;
  bool killing_reported = false;
  for (;;) {
    // From a quarter of the limit up the count is sampled every
    // millisecond: a fork bomb doubles per generation and, once it meets
    // RLIMIT_NPROC, shrinks as its forks fail; the moment it sits at the
    // limit must not fall between two samples (oci_bundle.h,
    // kPidsRefusalSpare, has the measurements). The count comes
    // before the reaping: an orphan that has exited (a zombie, counted by the
    // kernel's RLIMIT_NPROC too) stays counted until this process, its
    // reaper, has sampled; only processes whose own parent reaps them can
    // leave between two samples.
    int interval_ms = 20;
    if (!pids_reported && !stop) {
      long n = commandProcesses();
      if (n >= req.nproc) {
        pids_reported = true;
        send(sock, ShimRecordType::kPidsLimit, n);
      } else if (4 * n >= req.nproc) {
        interval_ms = 1;
      }
    }
    // Reap: the main process, and everything reparented to pid 1.
    for (;;) {
      int status = 0;
      pid_t p = ::waitpid(-1, &status, WNOHANG);
      if (p > 0) {
        forgetKeeper(p);
        if (p == main_pid) {
          main_exited = true;
          send(sock, ShimRecordType::kMainExited, status);
        }
        continue;
      }
      // Every process of the command is gone: as pid 1, every orphan is
      // this process's child, so no child left means no process left; with
      // side processes (keepers are children) alive, /proc says.
      const bool none_left =
          (p < 0 && errno == ECHILD) || (p == 0 && main_exited && commandProcessesLeft(false) == 0);
      if (none_left && main_exited) {
        if (!send(sock, ShimRecordType::kDone, childrenCpuUsec() - cpu_before) || host_gone)
          return false;
        // The host sends exactly one stop byte per command; consume it here
        // (unless the poll below already did) so it is never read as the
        // start of the next request.
        if (stop) return true;
        char c = 0;
        return airlock::sys::readSome(sock, &c, 1) == 1 && c == airlock::oci::kStopByte;
      }
      break;
    }
    if (stop) {
      (void)commandProcessesLeft(true);  // every process of the command
      if (!killing_reported) killing_reported = send(sock, ShimRecordType::kKilling, 0);
      ::usleep(1000);
      continue;
    }
    pollfd p[2] = {{sock, POLLIN, 0}, {sigchld_fd, POLLIN, 0}};
    if (airlock::sys::pollSome(p, 2, interval_ms) > 0 && (p[1].revents & POLLIN)) {
      signalfd_siginfo info[16];
      // drained; the reap loop does the work
      (void)airlock::sys::readSome(sigchld_fd, info, sizeof info);
    }
    if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      char c = 0;
      ssize_t n = ::recv(sock, &c, 1, MSG_DONTWAIT);
      // The stop byte, or the host is gone: either way the command ends.
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) host_gone = stop = true;
      if (n == 1 && c == airlock::oci::kStopByte) stop = true;
    }
  }
}

// ---- bounded copying between two fds ------------------------------------------

// What one direction of a relay holds at most: the egress relay's
// connections and a side process's terminal.
constexpr std::size_t kRelayBuffer = 32 * 1024;

// One direction of a relay: bytes read from `from` wait in buf[off, len)
// until written to `to`. Both fds are non-blocking.
struct Half {
  int from = -1;
  int to = -1;
  char* buf = nullptr;  // kRelayBuffer bytes
  std::size_t off = 0;
  std::size_t len = 0;
  bool eof = false;   // `from` reached end of file
  bool shut = false;  // and `to` was told, in the relay's own way (egress: a half-close)
  bool wantsRead() const { return !eof && len < kRelayBuffer; }
  bool wantsWrite() const { return off < len; }
};

// Reads what fits; false on a read error. End of file is a read of 0, or
// EIO: what a terminal's master reads once no slave is open (Linux).
bool fill(Half& h) {
  ssize_t n = ::read(h.from, h.buf + h.len, kRelayBuffer - h.len);
  if (n > 0) {
    h.len += static_cast<std::size_t>(n);
    return true;
  }
  if (n == 0 || errno == EIO) {
    h.eof = true;
    return true;
  }
  return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
}

// Writes what is buffered; false on a write error (the reader is gone;
// SIGPIPE is ignored in every process of the shim).
bool drain(Half& h) {
  ssize_t n = ::write(h.to, h.buf + h.off, h.len - h.off);
  if (n > 0) {
    h.off += static_cast<std::size_t>(n);
    if (h.off == h.len) h.off = h.len = 0;
    return true;
  }
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
}

// ---- egress relay ------------------------------------------------------------

// At most this many relayed connections at once; more wait in the
// listener's backlog. Each holds two kRelayBuffer buffers and a thread.
constexpr int kMaxRelays = 64;
constexpr std::size_t kRelayStack = 128 * 1024;

pthread_mutex_t g_relay_mu = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t g_relay_cv = PTHREAD_COND_INITIALIZER;
int g_relays = 0;

// 127.0.0.1:kEgressRelayPort, listening. -1 on failure (errno set).
int listenEgress() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(airlock::kEgressRelayPort);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 128) != 0) {
    const int e = errno;
    ::close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

int connectEgressSocket() {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string path =
      std::string(airlock::oci::kEgressDirInSandbox) + "/" + airlock::oci::kEgressSocketName;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  int rc;
  do {
    rc = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0 || ::fcntl(fd, F_SETFL, O_NONBLOCK) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Copies both ways until both ends have ended their sending (each end of
// file passed on as a half-close): true. False when either side fails.
// Memory: the two buffers, whatever the peers do.
bool relayConnection(int client, int upstream, char* up_buf, char* down_buf) {
  Half up, down;
  up.from = client;
  up.to = upstream;
  up.buf = up_buf;
  down.from = upstream;
  down.to = client;
  down.buf = down_buf;
  for (;;) {
    for (Half* h : {&up, &down}) {
      if (h->eof && !h->wantsWrite() && !h->shut) {
        ::shutdown(h->to, SHUT_WR);
        h->shut = true;
      }
    }
    if (up.shut && down.shut) return true;
    pollfd p[2] = {{client, 0, 0}, {upstream, 0, 0}};
    if (up.wantsRead()) p[0].events |= POLLIN;
    if (down.wantsWrite()) p[0].events |= POLLOUT;
    if (down.wantsRead()) p[1].events |= POLLIN;
    if (up.wantsWrite()) p[1].events |= POLLOUT;
    // An fd with nothing wanted is left out, so its hang-up cannot spin the
    // loop; a wanted read or write on a hung-up fd reports it instead.
    for (pollfd& q : p)
      if (q.events == 0) q.fd = -1;
    if (p[0].fd < 0 && p[1].fd < 0) return false;  // unreachable: nothing left to do
    const int ready = airlock::sys::pollSome(p, 2, -1);
    if (ready < 0) return false;
    if (ready == 0) continue;  // a signal: poll again
    const short readable = POLLIN | POLLHUP | POLLERR;
    const short writable = POLLOUT | POLLHUP | POLLERR;
    if ((p[0].revents & readable) && up.wantsRead() && !fill(up)) return false;
    if ((p[1].revents & readable) && down.wantsRead() && !fill(down)) return false;
    if ((p[1].revents & writable) && up.wantsWrite() && !drain(up)) return false;
    if ((p[0].revents & writable) && down.wantsWrite() && !drain(down)) return false;
  }
}

void* relayThread(void* arg) {
  const int client = static_cast<int>(reinterpret_cast<std::intptr_t>(arg));
  bool clean = false;
  std::unique_ptr<char[]> up_buf(new (std::nothrow) char[kRelayBuffer]);
  std::unique_ptr<char[]> down_buf(new (std::nothrow) char[kRelayBuffer]);
  const int upstream = up_buf && down_buf ? connectEgressSocket() : -1;
  if (upstream >= 0) {
    clean = relayConnection(client, upstream, up_buf.get(), down_buf.get());
    ::close(upstream);
  }
  if (!clean) {
    // The client sees a reset, not a clean end, when the relay failed.
    const linger abort{1, 0};
    ::setsockopt(client, SOL_SOCKET, SO_LINGER, &abort, sizeof abort);
  }
  ::close(client);
  pthread_mutex_lock(&g_relay_mu);
  --g_relays;
  pthread_cond_signal(&g_relay_cv);
  pthread_mutex_unlock(&g_relay_mu);
  return nullptr;
}

// Starts fn(fd) on a detached thread with a stack of `stack_bytes` (0: the
// default); false when pthread_create fails.
bool startDetached(void* (*fn)(void*), int fd, std::size_t stack_bytes) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (stack_bytes != 0) pthread_attr_setstacksize(&attr, stack_bytes);
  pthread_t t;
  const bool started =
      pthread_create(&t, &attr, fn, reinterpret_cast<void*>(static_cast<std::intptr_t>(fd))) == 0;
  pthread_attr_destroy(&attr);
  return started;
}

// Accepts on the loopback listener for the sandbox's life; one thread per
// connection, at most kMaxRelays at once.
void* acceptThread(void* arg) {
  const int listener = static_cast<int>(reinterpret_cast<std::intptr_t>(arg));
  for (;;) {
    pthread_mutex_lock(&g_relay_mu);
    while (g_relays >= kMaxRelays) pthread_cond_wait(&g_relay_cv, &g_relay_mu);
    pthread_mutex_unlock(&g_relay_mu);
    const int client = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (client < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
        ::poll(nullptr, 0, 10);  // out of resources: let a connection end first
      continue;
    }
    pthread_mutex_lock(&g_relay_mu);
    ++g_relays;
    pthread_mutex_unlock(&g_relay_mu);
    if (!startDetached(relayThread, client, kRelayStack)) {
      ::close(client);
      pthread_mutex_lock(&g_relay_mu);
      --g_relays;
      pthread_mutex_unlock(&g_relay_mu);
    }
  }
  return nullptr;
}

// ---- side processes --------------------------------------------------------------

bool writeRecord(int fd, ShimRecordType type, std::int64_t value) {
  char buf[airlock::oci::kShimRecordBytes];
  airlock::oci::encodeShimRecord(ShimRecord{type, value}, buf);
  return airlock::sys::writeAll(fd, buf, sizeof buf);
}

void closeRequestFds(const Request& req) {
  for (int fd : {req.stdio[0], req.stdio[1], req.stdio[2], req.status_fd, req.kill_fd})
    if (fd >= 0) ::close(fd);
}

// A side process's pseudo-terminal, as its keeper holds it.
struct Terminal {
  int master = -1;  // non-blocking
  int slave = -1;
};

// Opens a terminal of `rows` x `columns` (both ends close-on-exec). The
// slave belongs to the sandbox user and the tty group, as a login's
// terminal does: this devpts gives a new slave its opener's effective ids
// (and mode 0600), so both ends are opened under those ids (root here has no
// CAP_DAC_OVERRIDE to open the user's slave). False with errno set.
bool openTerminal(std::uint16_t rows, std::uint16_t columns, Terminal& t) {
  if (::setresgid(-1, airlock::kTtyGid, -1) != 0 ||
      ::setresuid(-1, airlock::oci::kSandboxUid, -1) != 0)
    return false;
  int unlock = 0;
  unsigned number = 0;
  const winsize size{rows, columns, 0, 0};
  char path[32];
  t.master = ::open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
  if (t.master >= 0 && ::ioctl(t.master, TIOCSPTLCK, &unlock) == 0 &&
      ::ioctl(t.master, TIOCGPTN, &number) == 0 && ::ioctl(t.master, TIOCSWINSZ, &size) == 0) {
    (void)std::snprintf(path, sizeof path, "/dev/pts/%u", number);
    t.slave = ::open(path, O_RDWR | O_NOCTTY | O_CLOEXEC);
  }
  const int open_errno = errno;
  // Back to root (the real ids, so no capability is needed), which gives
  // back the capabilities the change of effective uid cleared.
  if (::setresuid(-1, 0, -1) != 0 || ::setresgid(-1, 0, -1) != 0) ::_exit(125);
  errno = open_errno;
  return t.slave >= 0;
}

// The terminal's end-of-file character (^D unless the process changed it).
char endOfFileCharacter(int master) {
  termios t{};
  if (::tcgetattr(master, &t) == 0 && t.c_cc[VEOF] != _POSIX_VDISABLE)
    return static_cast<char>(t.c_cc[VEOF]);
  return '\x04';
}

// A wait status (as waitpid's) from what waitid reported.
int waitStatusOf(const siginfo_t& info) {
  if (info.si_code == CLD_EXITED) return (info.si_status & 0xff) << 8;
  if (info.si_code == CLD_DUMPED) return (info.si_status & 0x7f) | 0x80;
  return info.si_status & 0x7f;  // CLD_KILLED
}

long long monotonicMs() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<long long>(now.tv_sec) * 1000 + now.tv_nsec / 1000000;
}

// How often the keeper of a terminal looks for what is left of the
// effect's session after the effect has exited: from every millisecond,
// doubling up to this (while it kills: every millisecond).
constexpr long long kSessionLookMaxMs = 256;

// The relay of a terminal's keeper once its effect runs (keepOnTerminal):
// until the effect has exited, nothing of its session is left and the
// output is out. The effect stays a zombie until then, so its pid, group
// and session ids cannot be taken by another process while the keeper
// still signals them.
class TerminalRelay {
 public:
  TerminalRelay(const Request& req, int master, pid_t effect, int sigchld_fd)
      : effect_(effect),
        master_(master),
        status_fd_(req.status_fd),
        control_(req.kill_fd),
        sigchld_fd_(sigchld_fd) {
    in_.from = req.stdio[0];
    in_.to = master;
    in_.buf = in_buf_;
    out_.from = master;
    out_.to = req.stdio[1];
    out_.buf = out_buf_;
    for (int fd : {in_.from, out_.to}) ::fcntl(fd, F_SETFL, O_NONBLOCK);
  }

  [[noreturn]] void run() {
    for (;;) {
      noteExit();
      const long long now = monotonicMs();
      lookAtSession(now);
      endStreams();
      if (exited_ && session_over_ && out_.to < 0) {
        ::waitpid(effect_, nullptr, 0);
        ::_exit(0);
      }
      pollfd p[5] = {{master_, 0, 0},
                     {in_.from, static_cast<short>(in_.wantsRead() ? POLLIN : 0), 0},
                     // Always watched while open: POLLERR says the host's reader is gone.
                     {out_.to, static_cast<short>(out_.wantsWrite() ? POLLOUT : 0), 0},
                     {control_, POLLIN, 0},
                     {sigchld_fd_, POLLIN, 0}};
      if (out_.wantsRead()) p[0].events |= POLLIN;
      if (in_.wantsWrite()) p[0].events |= POLLOUT;
      // An fd with nothing wanted is left out, so its hang-up cannot spin the loop.
      for (int k : {0, 1})
        if (p[k].events == 0) p[k].fd = -1;
      if (airlock::sys::pollSome(p, 5, timeoutMs(now)) <= 0) continue;
      if (p[4].revents & POLLIN) {
        signalfd_siginfo info[16];
        (void)airlock::sys::readSome(sigchld_fd_, info, sizeof info);
      }
      if (p[3].revents & (POLLIN | POLLHUP | POLLERR)) readControl();
      move(p);
    }
  }

 private:
  // Reports the effect's exit once (waitid WNOWAIT: not reaped).
  void noteExit() {
    if (exited_) return;
    siginfo_t info{};
    if (::waitid(P_PID, effect_, &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        info.si_pid == effect_) {
      writeRecord(status_fd_, ShimRecordType::kMainExited, waitStatusOf(info));
      exited_ = true;
    }
  }

  // After the exit (the session's other processes may still hold the
  // terminal: this gVisor never reports a master's end of file) and while
  // killing, what is left of the session is looked at, at most every
  // look_every_ms_; killing, each look SIGKILLs what it finds.
  void lookAtSession(long long now) {
    if (!(exited_ || killing_) || session_over_ || now < next_look_ms_) return;
    if (killing_) ::kill(-effect_, SIGKILL);
    const long left = sessionProcesses(effect_, killing_ ? SIGKILL : 0);
    session_over_ = exited_ && left == 0;
    if (!killing_) look_every_ms_ = std::min(look_every_ms_ * 2, kSessionLookMaxMs);
    next_look_ms_ = now + (killing_ ? 1 : look_every_ms_);
  }

  int timeoutMs(long long now) const {
    int timeout_ms = -1;
    if ((exited_ || killing_) && !session_over_)
      timeout_ms = static_cast<int>(std::max(0LL, next_look_ms_ - now));
    // Without a signalfd, the exit is found by polling.
    if (sigchld_fd_ < 0 && !exited_) timeout_ms = timeout_ms < 0 ? 50 : std::min(timeout_ms, 50);
    return timeout_ms;
  }

  // The ends of input and output, as far as they have come.
  void endStreams() {
    // Nothing can write to the terminal any more: what it holds is the
    // rest of the output.
    if (session_over_ && out_.wantsRead()) {
      const std::size_t before = out_.len;
      if (!fill(out_) || out_.len == before) out_.eof = true;
      if (out_.to < 0) out_.off = out_.len = 0;
    }
    // The host's stdin ended and what came before is typed: ^D, once.
    if (in_.eof && !in_.shut && !in_.wantsWrite()) {
      in_.buf[0] = endOfFileCharacter(master_);
      in_.off = 0;
      in_.len = 1;
      in_.shut = true;
    }
    if (out_.eof && !out_.wantsWrite() && out_.to >= 0) outputGone();  // every byte is out
  }

  // Resize records, or the end of the pipe: the kill.
  void readControl() {
    const ssize_t n =
        airlock::sys::readSome(control_, record_ + record_len_, sizeof record_ - record_len_);
    if (n > 0) {
      record_len_ += static_cast<std::size_t>(n);
      if (record_len_ < sizeof record_) return;
      record_len_ = 0;
      const auto size = airlock::oci::decodeTerminalResize(record_);
      const winsize ws{size.rows, size.columns, 0, 0};
      // This gVisor sends no SIGWINCH for a new size and tells no one
      // outside the session which group is in the foreground: every
      // process of the session is told (one that does not handle SIGWINCH
      // ignores it).
      if (::ioctl(master_, TIOCSWINSZ, &ws) == 0) (void)sessionProcesses(effect_, SIGWINCH);
      return;
    }
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    ::kill(effect_, SIGKILL);  // in case it has not reached setsid
    killing_ = true;
    next_look_ms_ = 0;
    ::close(control_);
    control_ = -1;
  }

  // Bytes both ways, as far as the poll said they can go.
  void move(const pollfd p[5]) {
    const short readable = POLLIN | POLLHUP | POLLERR;
    if ((p[1].revents & readable) && in_.wantsRead() && !fill(in_)) in_.eof = true;
    if ((p[0].revents & readable) && out_.wantsRead()) {
      if (!fill(out_)) out_.eof = true;
      if (out_.to < 0) out_.off = out_.len = 0;
    }
    if ((p[0].revents & (POLLOUT | POLLERR | POLLHUP)) && in_.wantsWrite() && !drain(in_)) {
      in_.off = in_.len = 0;  // the terminal takes no more input
      in_.eof = in_.shut = true;
    }
    if (out_.to >= 0 && (p[2].revents & (POLLERR | POLLHUP))) outputGone();
    if (out_.to >= 0 && (p[2].revents & POLLOUT) && out_.wantsWrite() && !drain(out_)) outputGone();
  }

  // The host's stdout is closed: every byte is out, or its reader is gone.
  // What the terminal says from now on is read and dropped, so nothing of
  // the session blocks on a full terminal.
  void outputGone() {
    if (out_.to >= 0) ::close(out_.to);
    out_.to = -1;
    out_.off = out_.len = 0;
  }

  const pid_t effect_;
  const int master_;
  const int status_fd_;
  int control_;  // the kill pipe: resize records, then end-of-file (the kill)
  const int sigchld_fd_;
  char in_buf_[kRelayBuffer];
  char out_buf_[kRelayBuffer];
  Half in_;   // the host's stdin, typed into the terminal; `shut`: ^D typed
  Half out_;  // the terminal's output to the host's stdout; `to` -1 once closed
  char record_[airlock::oci::kResizeRecordBytes];
  std::size_t record_len_ = 0;
  bool exited_ = false;        // the effect's exit is reported
  bool killing_ = false;       // the host closed the kill pipe
  bool session_over_ = false;  // exited, and no process of its session is left
  long long look_every_ms_ = 1;
  long long next_look_ms_ = 0;
};

// The keeper of a side process on a terminal (see the file comment): opens
// the terminal, starts the effect on its slave and relays (TerminalRelay).
[[noreturn]] void keepOnTerminal(Request& req, int sigchld_fd) {
  Terminal term;
  if (!openTerminal(req.rows, req.columns, term)) {
    writeRecord(req.status_fd, ShimRecordType::kStartFailed, errno);
    ::_exit(0);
  }
  ::close(req.stdio[2]);  // a terminal has one output: the host's stderr ends at once
  Request effect_req = req;
  for (int& fd : effect_req.stdio) fd = term.slave;
  const pid_t effect = ::fork();
  if (effect == 0) execCommand(effect_req);
  const int fork_errno = errno;
  ::close(term.slave);  // the effect's are the only copies
  if (effect < 0) {
    writeRecord(req.status_fd, ShimRecordType::kStartFailed, fork_errno);
    ::_exit(0);
  }
  writeRecord(req.status_fd, ShimRecordType::kStarted, effect);
  TerminalRelay(req, term.master, effect, sigchld_fd).run();
}

// The keeper of one side process (see the file comment). Runs in a child of
// pid 1 forked by the side thread, single-threaded, with SIGCHLD blocked
// (the side thread's mask) and SIGPIPE ignored (pid 1's).
[[noreturn]] void runKeeper(Request req) {
  // Keep only the five pipe ends, renumbered 3..7 (through numbers above
  // them, so no renumbering overwrites an end not yet moved); every fd of
  // pid 1 (its channels, the egress listener) is closed.
  if (req.stdio[0] < 0) req.stdio[0] = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  int* ends[5] = {&req.stdio[0], &req.stdio[1], &req.stdio[2], &req.status_fd, &req.kill_fd};
  for (int* e : ends) {
    *e = ::fcntl(*e, F_DUPFD_CLOEXEC, 16);
    if (*e < 0) ::_exit(125);
  }
  for (int i = 0; i < 5; ++i) {
    if (::dup3(*ends[i], 3 + i, O_CLOEXEC) < 0) ::_exit(125);
    *ends[i] = 3 + i;
  }
  ::syscall(SYS_close_range, 8U, ~0U, 0U);
  ::close(0);
  ::close(1);  // the keeper writes nothing but records; its stderr stays pid 1's (runsc's log)

  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &chld, nullptr);
  const int sigchld_fd = ::signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);

  req.die_with = ::getpid();
  if (req.rows > 0) keepOnTerminal(req, sigchld_fd);
  const pid_t effect = ::fork();
  if (effect == 0) execCommand(req);
  const int fork_errno = errno;
  // No copy of the effect's stdio stays here: end-of-file on the host's
  // pipes is the effect's (and what it started).
  for (int& fd : req.stdio) {
    ::close(fd);
    fd = -1;
  }
  if (effect < 0) {
    writeRecord(req.status_fd, ShimRecordType::kStartFailed, fork_errno);
    ::_exit(0);
  }
  writeRecord(req.status_fd, ShimRecordType::kStarted, effect);
  bool kill_open = true;
  for (;;) {
    int status = 0;
    const pid_t w = ::waitpid(effect, &status, WNOHANG);
    if (w == effect) {
      writeRecord(req.status_fd, ShimRecordType::kMainExited, status);
      ::_exit(0);
    }
    if (w < 0 && errno != EINTR) ::_exit(1);  // unreachable: the effect is this process's child
    pollfd p[2] = {{sigchld_fd, POLLIN, 0}, {kill_open ? req.kill_fd : -1, POLLIN, 0}};
    // Without a signalfd, the exit is found by polling.
    if (airlock::sys::pollSome(p, 2, sigchld_fd < 0 ? 50 : -1) <= 0) continue;
    if (p[0].revents & POLLIN) {
      signalfd_siginfo info[16];
      (void)airlock::sys::readSome(sigchld_fd, info, sizeof info);
    }
    if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
      char buf[64];
      const ssize_t n = airlock::sys::readSome(req.kill_fd, buf, sizeof buf);
      if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
        // Not reaped yet: the group id is still the effect's.
        ::kill(-effect, SIGKILL);
        ::kill(effect, SIGKILL);  // in case it has not reached setsid
        kill_open = false;
      }
    }
  }
}

// Serves the side-process channel for the sandbox's life: one keeper per
// request. Returns when the host closes the channel (or sends nonsense).
void* sideThread(void* arg) {
  const int sock = static_cast<int>(reinterpret_cast<std::intptr_t>(arg));
  for (;;) {
    Request req;
    if (!readRequest(sock, req, true)) {
      closeRequestFds(req);
      break;
    }
    pthread_mutex_lock(&g_keeper_mu);
    const pid_t keeper = ::fork();
    if (keeper == 0) runKeeper(std::move(req));
    const int fork_errno = errno;
    if (keeper > 0) g_keepers->push_back(keeper);
    pthread_mutex_unlock(&g_keeper_mu);
    if (keeper < 0) writeRecord(req.status_fd, ShimRecordType::kStartFailed, fork_errno);
    closeRequestFds(req);
  }
  ::close(sock);
  return nullptr;
}

int connectControl(const char* name) {
  int sock = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (sock < 0) return -1;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string path = std::string(airlock::oci::kControlDirInSandbox) + "/" + name;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  if (::connect(sock, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(sock);
    return -1;
  }
  return sock;
}

// Reaps whatever has exited (between commands: side processes' keepers).
void reapExited() {
  for (;;) {
    int status = 0;
    const pid_t p = ::waitpid(-1, &status, WNOHANG);
    if (p <= 0) return;
    forgetKeeper(p);
  }
}

[[noreturn]] void runInit(bool egress) {
  (void)::signal(SIGPIPE, SIG_IGN);
  // The egress port is held before the host hears from this shim, so
  // before any command exists; a failure means the sandbox never starts.
  const int egress_listener = egress ? listenEgress() : -1;
  if (egress && egress_listener < 0) {
    writeStr(2, "airlock: the sandbox's init cannot listen on 127.0.0.1:3128 for egress: ");
    writeStr(2, std::strerror(errno));
    writeStr(2, "\n");
    ::_exit(125);
  }
  g_keepers = new std::vector<pid_t>();
  // The side channel first: the host's readiness is the command channel's
  // connection, and by then the side channel is already waiting for it.
  const int side_sock = connectControl(airlock::oci::kSideSocketName);
  const int sock = side_sock < 0 ? -1 : connectControl(airlock::oci::kControlSocketName);
  if (sock < 0) {
    writeStr(2, "airlock: the sandbox's init cannot reach the host\n");
    ::_exit(125);
  }
  // SIGCHLD through a signalfd: a command's exit wakes the loop at once
  // rather than at its next tick. (The command's own mask is reset before
  // it executes.)
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &chld, nullptr);
  const int sigchld_fd = ::signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
  // Started after SIGCHLD is blocked: the relay threads inherit the mask, so
  // a command's exit always reaches the signalfd.
  if (egress && !startDetached(acceptThread, egress_listener, kRelayStack)) {
    writeStr(2, "airlock: the sandbox's init cannot start the egress relay\n");
    ::_exit(125);
  }
  if (!startDetached(sideThread, side_sock, 0)) {
    writeStr(2, "airlock: the sandbox's init cannot start the side-process thread\n");
    ::_exit(125);
  }
  for (;;) {
    // Between commands: reap side processes' keepers as they exit, until
    // the next request (or the host's end) arrives.
    for (;;) {
      pollfd p[2] = {{sock, POLLIN, 0}, {sigchld_fd, POLLIN, 0}};
      if (airlock::sys::pollSome(p, 2, -1) <= 0) continue;
      if (p[1].revents & POLLIN) {
        signalfd_siginfo info[16];
        (void)airlock::sys::readSome(sigchld_fd, info, sizeof info);
        reapExited();
      }
      if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) break;
    }
    Request req;
    if (!readRequest(sock, req)) ::_exit(0);  // the host is gone (or spoke nonsense)
    if (!runCommand(sock, sigchld_fd, req)) ::_exit(0);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (::getpid() == 1 && argc >= 2 && std::strcmp(argv[1], "init") == 0) {
    if (argc == 2) runInit(false);
    if (argc == 3 && std::strcmp(argv[2], "egress") == 0) runInit(true);
  }
  writeStr(2, "usage: airlock-gvisor-shim init [egress] (as pid 1 of a gVisor sandbox only)\n");
  return 2;
}
