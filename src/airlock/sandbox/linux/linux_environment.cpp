#include "airlock/sandbox/linux/linux_environment.h"
#include "airlock/sandbox/sandbox_workspace.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <random>

#include "airlock/core/command_validation.h"
#include "airlock/core/ids.h"
#include "airlock/core/timeout_rule.h"
#include "airlock/sandbox/linux/cgroup.h"
#include "airlock/sandbox/linux/control_protocol.h"
#include "airlock/sandbox/linux/init_process.h"
#include "airlock/sandbox/linux/jail_plan.h"
#include "airlock/sandbox/linux/seccomp_policy.h"
#include "airlock/sandbox/linux/side_process.h"
#include "airlock/sys/io.h"
#include "airlock/sys/sha256.h"
#include "airlock/workspace/local_workspace.h"
#include "airlock/workspace/resolve.h"
#include "airlock/workspace/snapshot.h"

namespace airlock::linux_jail {
namespace {

using Clock = std::chrono::steady_clock;
using sys::UniqueFd;

constexpr uid_t kSandboxUid = 1000;  // the command's uid inside the sandbox
constexpr uid_t kUidRangeSize = 65536;
constexpr uid_t kHostUidBase = 0x40000000;  // host uids 2^30 .. 2^31: unused by any distro
constexpr int kUidSlots = 16384;
constexpr auto kKillGrace = std::chrono::seconds(5);
// How often a running command's enforcers are read (cgroup event counters,
// filesystem fullness). Each check is two small reads and three fstatfs.
constexpr auto kWatchInterval = std::chrono::milliseconds(10);

// True when a filesystem has no byte or no inode left (tmpfs reports both).
bool filesystemFull(int fd) {
  struct statfs st {};
  if (fd < 0 || ::fstatfs(fd, &st) != 0) return false;
  return st.f_bavail == 0 || (st.f_files > 0 && st.f_ffree == 0);
}

// Kills what is left in `cg` and removes it. A cgroup whose processes were
// just killed stays busy (EBUSY) until the kernel has finished them, and an
// orphan's init must first be reaped by whoever inherited it: retry for up
// to two seconds, killing again each time, before giving up (the next sweep
// tries again).
void killAndRemove(Cgroup& cg) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (;;) {
    (void)cg.killAll();
    auto r = cg.remove();
    if (r || r.error().sys_errno != EBUSY || std::chrono::steady_clock::now() >= deadline) return;
    ::usleep(1000);
  }
}

Timestamp nowMs() {
  return std::chrono::time_point_cast<std::chrono::milliseconds>(std::chrono::system_clock::now());
}

// flock-held lock file: held while a sandbox lives, so a crashed owner's
// sandboxes are recognisable (their lock can be taken).
enum class LockOpen { kCreate, kExisting };
Result<UniqueFd> lockFile(const std::string& path, LockOpen how, bool wait) {
  int flags = O_RDWR | O_CLOEXEC | O_NOFOLLOW;
  if (how == LockOpen::kCreate) flags |= O_CREAT;
  auto fd = sys::openAt(AT_FDCWD, path.c_str(), flags, 0600);
  if (!fd) return fd;
  if (::flock(fd->get(), LOCK_EX | (wait ? 0 : LOCK_NB)) != 0)
    return failErrno(ErrorCode::kExecutionUnavailable, "flock " + path, errno);
  return fd;
}

Result<void> mkdirs(const std::string& path, mode_t mode) {
  std::string cur;
  for (std::size_t i = 1; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      cur = path.substr(0, i);
      if (::mkdir(cur.c_str(), mode) != 0 && errno != EEXIST)
        return failErrno(ErrorCode::kExecutionUnavailable, "mkdir " + cur, errno);
    }
  }
  return {};
}

bool sendWithFds(int sock, const void* head, std::size_t head_len, const std::string& payload,
                 const int* fds, int nfds) {
  iovec iov[2] = {{const_cast<void*>(head), head_len},
                  {const_cast<char*>(payload.data()), payload.size()}};
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = payload.empty() ? 1 : 2;
  alignas(cmsghdr) char control[CMSG_SPACE(3 * sizeof(int))] = {};
  if (nfds > 0) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(static_cast<std::size_t>(nfds) * sizeof(int));
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(static_cast<std::size_t>(nfds) * sizeof(int));
    std::memcpy(CMSG_DATA(c), fds, static_cast<std::size_t>(nfds) * sizeof(int));
  }
  for (;;) {
    if (::sendmsg(sock, &msg, MSG_NOSIGNAL) >= 0) return true;
    if (errno != EINTR) return false;
  }
}

// Receives one header (and up to three fds) from init.
struct InitReply {
  MessageHeader header{};
  std::vector<UniqueFd> fds;
};
Result<std::optional<InitReply>> receiveReply(int sock) {
  InitReply r;
  iovec iov{&r.header, sizeof r.header};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(3 * sizeof(int))];
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  do {
    n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return std::optional<InitReply>{};
  if (n < 0 && errno == ECONNRESET)
    return fail(ErrorCode::kExecutionUnavailable,
                "sandbox init exited (its memory limit may be too small to start it)");
  if (n < 0) return failErrno(ErrorCode::kExecutionUnavailable, "receive from sandbox init", errno);
  if (n == 0)
    return fail(ErrorCode::kExecutionUnavailable,
                "sandbox init exited (its memory limit may be too small to start it)");
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (std::size_t i = 0; i < count; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
        r.fds.emplace_back(fd);
      }
    }
  }
  if (static_cast<std::size_t>(n) != sizeof r.header)
    return fail(ErrorCode::kExecutionUnavailable, "malformed message from sandbox init");
  return std::optional<InitReply>(std::move(r));
}

struct Sandbox {
  EnvironmentHandle handle;
  ResourceLimits limits;
  std::map<std::string, std::string> environment;
  std::string cgroup_name;
  std::unique_ptr<Cgroup> cgroup;
  UniqueFd lock;
  std::string lock_path;
  UniqueFd uid_lock;
  uid_t host_uid_base = 0;
  UniqueFd pidfd;
  pid_t init_pid = -1;
  UniqueFd control;
  UniqueFd workspace_fd;
  UniqueFd tmp_fd;  // /tmp and /dev/shm, watched for DISK
  UniqueFd shm_fd;
  // Egress (egress_route.h): init's end of the handoff channel until init
  // holds it, then the attachment that serves the service end.
  UniqueFd egress_child_end;
  std::unique_ptr<EgressAttachment> egress;
  std::shared_ptr<workspace::LocalWorkspaceHandle> workspace;  // holds the provenance record
  workspace::Snapshot last_snapshot;
  bool init_dead = false;
  std::mutex exec_mutex;
  // Code mode: the host directory bound at /run/airlock, and the lock that
  // keeps teardown from closing the pidfd or the cgroup under a side
  // process being started (side_process.h).
  std::string capability_dir;
  std::mutex side_mutex;
  // Preallocated for init (it must not allocate after clone).
  std::vector<SetupStep> plan;
  std::vector<char> recv_buffer;
  std::vector<char*> arg_slots;
  std::vector<char*> env_slots;
};

class LinuxEnvironment final : public ExecutionEnvironment {
 public:
  LinuxEnvironment(LinuxEnvironmentOptions options, std::unique_ptr<CgroupDriver> cgroups,
                   SeccompProgram seccomp, std::string image_digest)
      : cgroup_prefix_(cgroupNamePrefix(options.state_dir)),
        options_(std::move(options)),
        cgroups_(std::move(cgroups)),
        seccomp_(std::move(seccomp)),
        image_digest_(std::move(image_digest)) {}

  ~LinuxEnvironment() override {
    std::vector<EnvironmentHandle> live;
    {
      std::lock_guard lk(mu_);
      for (auto& [id, sb] : sandboxes_) live.push_back(sb->handle);
    }
    for (auto& h : live) (void)destroy(h);
  }

  Result<EnvironmentHandle> provision(const EnvironmentSpec& spec) override;
  Result<ExecutionResult> execute(const EnvironmentHandle& handle, const ExecutionCommand& command,
                                  const CancelToken* cancel) override {
    return executeStreaming(handle, command, cancel, {});
  }
  Result<ExecutionResult> executeStreaming(const EnvironmentHandle& handle, const ExecutionCommand& command,
                                           const CancelToken* cancel, const OutputSink& sink) override;
  Result<void> destroy(const EnvironmentHandle& handle) override;
  Result<std::shared_ptr<WorkspaceHandle>> workspace(const EnvironmentHandle& handle) override {
    auto sb = find(handle.environment_id);
    if (!sb) return tl::unexpected(goneError(handle.environment_id));
    if (sb->handle.tenant_id != handle.tenant_id)
      return fail(ErrorCode::kSandboxEscapeSuspected, "environment does not belong to this tenant");
    return std::shared_ptr<WorkspaceHandle>(
        std::make_shared<SandboxWorkspace>(sb->workspace, handle.environment_id));
  }

  // Code mode (side_process.h).
  Result<std::unique_ptr<SideProcess>> startSideProcess(const EnvironmentHandle& handle,
                                                        const SideCommand& command) override;
  Result<UniqueFd> openCapabilityDirectory(const EnvironmentHandle& handle) override;

  // Destroys sandboxes whose owner process is gone (lock file not held).
  void sweepOrphans();

  void shutdown() noexcept override {
    shutting_down_.store(true);
    std::uint64_t one = 1;
    (void)sys::writeAll(shutdown_event_.get(), &one, sizeof one);
  }
  Result<void> initShutdownEvent() {
    shutdown_event_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!shutdown_event_.valid()) return failErrno(ErrorCode::kExecutionUnavailable, "eventfd", errno);
    return {};
  }

 private:
  std::shared_ptr<Sandbox> find(const std::string& id) {
    std::lock_guard lk(mu_);
    auto it = sandboxes_.find(id);
    return it == sandboxes_.end() ? nullptr : it->second;
  }
  Result<void> startInit(Sandbox& sb);
  void teardown(Sandbox& sb);

  std::string cgroup_prefix_;
  LinuxEnvironmentOptions options_;
  std::unique_ptr<CgroupDriver> cgroups_;
  SeccompProgram seccomp_;
  std::string image_digest_;
  // Destroys a sandbox because it reached expires_at, and remembers that,
  // so later calls say "expired" rather than "unknown" (bug-log B41).
  void expire(const EnvironmentHandle& handle) {
    (void)destroy(handle);
    std::lock_guard lk(mu_);
    expired_.push_back(handle.environment_id);
    if (expired_.size() > 4096) expired_.erase(expired_.begin());
  }
  Error goneError(const std::string& id) {
    std::lock_guard lk(mu_);
    if (std::find(expired_.begin(), expired_.end(), id) != expired_.end())
      return Error{ErrorCode::kExecutionRejected, 0, "environment " + id + " has expired"};
    return Error{ErrorCode::kExecutionRejected, 0, "unknown or destroyed environment " + id};
  }

  std::atomic<bool> shutting_down_{false};
  UniqueFd shutdown_event_;  // readable once shutdown() ran; polled by every execute
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<Sandbox>> sandboxes_;
  std::vector<std::string> expired_;  // most recent last, bounded
};

std::string stepName(const std::vector<SetupStep>& plan, int step) {
  static const char* kEarly[] = {"", "become root in the user namespace", "drop supplementary groups",
                                 "become root in the user namespace", "create the cgroup namespace",
                                 "watch for child exits", "open /workspace",
                                 "listen on 127.0.0.1:3128 for egress"};
  if (step < 0 && -step < 8) return kEarly[-step];
  if (step >= 0 && static_cast<std::size_t>(step) < plan.size()) return plan[static_cast<std::size_t>(step)].description;
  return "setup step " + std::to_string(step);
}

Result<EnvironmentHandle> LinuxEnvironment::provision(const EnvironmentSpec& spec) {
  if (shutting_down_.load())
    return fail(ErrorCode::kExecutionUnavailable, "the execution service is shutting down");
  if (spec.image_digest != image_digest_)
    return fail(ErrorCode::kExecutionRejected, "unknown image digest " + spec.image_digest +
                                                   " (this service runs " + image_digest_ + ")");
  if (auto r = checkLimits(spec.limits, options_.ceilings); !r) return tl::unexpected(r.error());
  const bool egress = egressEnabled(spec.egress);
  if (egress && !options_.egress_route)
    return fail(ErrorCode::kExecutionRejected,
                "egress was requested, but this execution service has no egress proxy");

  auto sb = std::make_shared<Sandbox>();
  const Timestamp created = nowMs();
  sb->handle = EnvironmentHandle{newUuidV7(created), spec.tenant_id, spec.run_id, spec.lease_epoch,
                                 created, created + options_.service_hard_cap};
  sb->cgroup_name = cgroup_prefix_ + sb->handle.environment_id;
  sb->limits = spec.limits;
  sb->environment = spec.environment;
  if (egress) addEgressProxyVariables(sb->environment);

  // Everything below is undone by teardown() on any failure.
  struct Guard {
    LinuxEnvironment* self;
    Sandbox* sb;
    bool armed = true;
    ~Guard() {
      if (armed) self->teardown(*sb);
    }
  } guard{this, sb.get()};

  // The lock file is created unnamed (O_TMPFILE), locked, and only then
  // linked into place: a sweeper in another process never sees an unlocked
  // lock file of a live sandbox.
  sb->lock_path = options_.state_dir + "/sandboxes/" + sb->handle.environment_id + ".lock";
  {
    const std::string dir = options_.state_dir + "/sandboxes";
    UniqueFd fd(::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
    if (!fd.valid()) return failErrno(ErrorCode::kExecutionUnavailable, "create lock in " + dir, errno);
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0 ||
        ::linkat(fd.get(), "", AT_FDCWD, sb->lock_path.c_str(), AT_EMPTY_PATH) != 0)
      return failErrno(ErrorCode::kExecutionUnavailable, "lock " + sb->lock_path, errno);
    sb->lock = std::move(fd);
  }

  // A host uid range of our own, so no two sandboxes share a uid.
  std::mt19937 rng(std::random_device{}());
  for (int attempt = 0; attempt < 64 && !sb->uid_lock.valid(); ++attempt) {
    int slot = 1 + static_cast<int>(rng() % (kUidSlots - 1));
    auto l = lockFile(options_.state_dir + "/uids/" + std::to_string(slot) + ".lock",
                      LockOpen::kCreate, false);
    if (l) {
      sb->uid_lock = std::move(*l);
      sb->host_uid_base = kHostUidBase + static_cast<uid_t>(slot) * kUidRangeSize;
    }
  }
  if (!sb->uid_lock.valid()) return fail(ErrorCode::kExecutionUnavailable, "no free sandbox uid range");

  auto cg = cgroups_->create(sb->cgroup_name, spec.limits);
  if (!cg) return tl::unexpected(cg.error());
  sb->cgroup = std::move(*cg);

  // Code mode: the capability directory, owned by the sandbox user's host
  // uid (the broker gives the socket and token file the same owner).
  sb->capability_dir = options_.state_dir + "/cap/" + sb->handle.environment_id;
  if (::mkdir(sb->capability_dir.c_str(), 0755) != 0 ||
      ::chown(sb->capability_dir.c_str(), sb->host_uid_base + kSandboxUid, sb->host_uid_base + kSandboxUid) != 0)
    return failErrno(ErrorCode::kExecutionUnavailable, "create the sandbox's capability directory", errno);

  JailPlanInputs in;
  in.staging_root = options_.state_dir + "/root";
  in.capability_dir = sb->capability_dir;
  in.image_dirs = options_.image_dirs;
  in.image_etc = options_.image_etc;
  in.limits = spec.limits;
  in.sandbox_uid = kSandboxUid;
  in.sandbox_gid = kSandboxUid;
  auto plan = buildJailPlan(in);
  if (!plan) return tl::unexpected(plan.error());
  sb->plan = std::move(*plan);

  UniqueFd egress_service_end;
  if (egress) {
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0)
      return failErrno(ErrorCode::kExecutionUnavailable, "socketpair (egress)", errno);
    egress_service_end.reset(pair[0]);
    sb->egress_child_end.reset(pair[1]);
  }

  if (auto r = startInit(*sb); !r) return tl::unexpected(r.error());

  if (egress) {
    auto attached = options_.egress_route->attachHandoff(sb->handle, spec.egress,
                                                         std::move(egress_service_end));
    if (!attached) return tl::unexpected(attached.error());
    sb->egress = std::move(*attached);
  }

  sb->workspace = workspace::makeLocalWorkspace(
      UniqueFd(::fcntl(sb->workspace_fd.get(), F_DUPFD_CLOEXEC, 0)), sb->host_uid_base + kSandboxUid,
      sb->host_uid_base + kSandboxUid, workspace::CreateAs::kOwner);
  guard.armed = false;
  std::lock_guard lk(mu_);
  sandboxes_[sb->handle.environment_id] = sb;
  return sb->handle;
}

Result<void> LinuxEnvironment::startInit(Sandbox& sb) {
  sb.recv_buffer.resize(kMaxRunPayload);
  sb.arg_slots.resize(kMaxArgs + 1);
  sb.env_slots.resize(kMaxArgs + 1);

  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0)
    return failErrno(ErrorCode::kExecutionUnavailable, "socketpair", errno);
  UniqueFd parent_end(pair[0]);
  UniqueFd child_end(pair[1]);
  const int buf = static_cast<int>(kMaxRunPayload + 4096);
  ::setsockopt(parent_end.get(), SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof buf);
  ::setsockopt(child_end.get(), SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf);

  const sock_fprog prog = seccomp_.program();
  InitContext ctx;
  ctx.plan = &sb.plan;
  ctx.control_fd = child_end.get();
  ctx.egress_fd = sb.egress_child_end.valid() ? sb.egress_child_end.get() : -1;
  ctx.seccomp = &prog;
  ctx.sandbox_uid = kSandboxUid;
  ctx.sandbox_gid = kSandboxUid;
  ctx.recv_buffer = sb.recv_buffer.data();
  ctx.recv_buffer_size = sb.recv_buffer.size();
  ctx.arg_slots = sb.arg_slots.data();
  ctx.env_slots = sb.env_slots.data();
  locateInheritedStrings(ctx);

  int pidfd = -1;
  clone_args args{};
  args.flags = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC |
               CLONE_NEWUTS | CLONE_PIDFD;
  args.pidfd = reinterpret_cast<std::uint64_t>(&pidfd);
  args.exit_signal = SIGCHLD;
  long pid = ::syscall(SYS_clone3, &args, sizeof args);
  if (pid < 0) return failErrno(ErrorCode::kExecutionUnavailable, "clone3 (new namespaces)", errno);
  if (pid == 0) runInit(ctx);  // never returns

  sb.init_pid = static_cast<pid_t>(pid);
  sb.pidfd.reset(pidfd);
  child_end.reset();
  sb.egress_child_end.reset();  // init holds it now
  sb.control = std::move(parent_end);

  const std::string proc = "/proc/" + std::to_string(pid);
  const std::string map = "0 " + std::to_string(sb.host_uid_base) + " " + std::to_string(kUidRangeSize);
  if (auto r = sys::writeFile(AT_FDCWD, (proc + "/uid_map").c_str(), map); !r) return r;
  if (auto r = sys::writeFile(AT_FDCWD, (proc + "/gid_map").c_str(), map); !r) return r;
  if (auto r = sb.cgroup->addProcess(sb.init_pid); !r) return r;
  // Init must survive an OOM in its sandbox to report it; commands reset this.
  (void)sys::writeFile(AT_FDCWD, (proc + "/oom_score_adj").c_str(), "-1000");

  MessageHeader go{};
  go.type = MessageType::kGo;
  if (!sendWithFds(sb.control.get(), &go, sizeof go, {}, nullptr, 0))
    return failErrno(ErrorCode::kExecutionUnavailable, "start sandbox init", errno);

  const auto deadline = Clock::now() + options_.start_budget;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0)
      return fail(ErrorCode::kExecutionUnavailable, "sandbox did not start within the start budget");
    pollfd p{sb.control.get(), POLLIN, 0};
    int rc = ::poll(&p, 1, static_cast<int>(left.count()));
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) continue;
    auto reply = receiveReply(sb.control.get());
    if (!reply) return tl::unexpected(reply.error());
    if (!*reply) continue;
    auto& r = **reply;
    if (r.header.type == MessageType::kSetupFailed)
      return failErrno(ErrorCode::kExecutionUnavailable,
                       "sandbox setup failed at step '" + stepName(sb.plan, r.header.step) + "'",
                       r.header.status);
    if (r.header.type == MessageType::kReady && r.fds.size() == 3) {
      sb.workspace_fd = std::move(r.fds[0]);
      sb.tmp_fd = std::move(r.fds[1]);
      sb.shm_fd = std::move(r.fds[2]);
      return {};
    }
    return fail(ErrorCode::kExecutionUnavailable, "unexpected message from sandbox init");
  }
}

void LinuxEnvironment::teardown(Sandbox& sb) {
  std::lock_guard side(sb.side_mutex);
  if (sb.pidfd.valid()) {
    ::syscall(SYS_pidfd_send_signal, sb.pidfd.get(), SIGKILL, nullptr, 0);
    siginfo_t info{};
    while (::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(sb.pidfd.get()), &info, WEXITED) != 0 &&
           errno == EINTR) {
    }
    sb.pidfd.reset();
  }
  sb.control.reset();
  sb.egress.reset();  // closes the channel and every tunnel opened through it
  sb.egress_child_end.reset();
  sb.workspace.reset();
  sb.workspace_fd.reset();
  sb.tmp_fd.reset();
  sb.shm_fd.reset();
  if (sb.cgroup) {
    // When the pid namespace's init is reaped the kernel has killed and
    // reaped every process in it, so the cgroup is empty; retry briefly for
    // the kernel's own bookkeeping.
    killAndRemove(*sb.cgroup);
    sb.cgroup.reset();
  }
  if (!sb.capability_dir.empty()) removeCapabilityDirectory(sb.capability_dir);
  sb.uid_lock.reset();
  if (sb.lock.valid()) {
    ::unlink(sb.lock_path.c_str());
    sb.lock.reset();
  }
}

Result<void> LinuxEnvironment::destroy(const EnvironmentHandle& handle) {
  std::shared_ptr<Sandbox> sb;
  {
    std::lock_guard lk(mu_);
    auto it = sandboxes_.find(handle.environment_id);
    if (it == sandboxes_.end()) return {};  // idempotent
    sb = it->second;
    sandboxes_.erase(it);
  }
  // Kill first: a command running in another thread ends with init's death.
  if (sb->pidfd.valid()) ::syscall(SYS_pidfd_send_signal, sb->pidfd.get(), SIGKILL, nullptr, 0);
  std::lock_guard exec(sb->exec_mutex);
  teardown(*sb);
  return {};
}

void LinuxEnvironment::sweepOrphans() {
  const std::string dir = options_.state_dir + "/sandboxes";
  std::vector<std::string> live_locked;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      const std::string path = dir + "/" + name;
      if (name.size() < 6 || name.substr(name.size() - 5) != ".lock") continue;
      const std::string id = name.substr(0, name.size() - 5);
      auto l = lockFile(path, LockOpen::kExisting, false);
      if (!l) {
        if (l.error().sys_errno != ENOENT) live_locked.push_back(id);  // its owner is alive
        continue;
      }
      // Still the file we locked? (Its owner may have destroyed the sandbox
      // and unlinked it while we opened it.)
      struct stat by_path {}, by_fd {};
      if (::stat(path.c_str(), &by_path) != 0 || ::fstat(l->get(), &by_fd) != 0 ||
          by_path.st_ino != by_fd.st_ino || by_path.st_dev != by_fd.st_dev)
        continue;
      auto cg = cgroups_->attach(cgroup_prefix_ + id);
      killAndRemove(*cg);
      removeCapabilityDirectory(options_.state_dir + "/cap/" + id);
      ::unlink(path.c_str());
    }
    ::closedir(d);
  }
  for (const auto& name : cgroups_->list(cgroup_prefix_)) {
    const std::string id = name.substr(cgroup_prefix_.size());
    if (std::find(live_locked.begin(), live_locked.end(), id) != live_locked.end()) continue;
    if (::access((dir + "/" + id + ".lock").c_str(), F_OK) == 0) continue;  // just created by a peer
    auto cg = cgroups_->attach(name);
    killAndRemove(*cg);
  }
}

// ---- execute -----------------------------------------------------------------

struct Capture {
  std::string data;
  bool truncated = false;
  UniqueFd fd;
};

Result<ExecutionResult> LinuxEnvironment::executeStreaming(const EnvironmentHandle& handle,
                                                           const ExecutionCommand& command,
                                                           const CancelToken* cancel,
                                                           const OutputSink& sink) {
  if (auto r = validateCommand(command); !r) return tl::unexpected(r.error());
  auto cwd = checkRelativePath(command.working_directory);
  if (!cwd) return fail(ErrorCode::kToolValidationError, cwd.error().context);
  if (shutting_down_.load())
    return fail(ErrorCode::kExecutionUnavailable, "the execution service is shutting down");
  auto sb = find(handle.environment_id);
  if (!sb) return tl::unexpected(goneError(handle.environment_id));
  if (sb->handle.tenant_id != handle.tenant_id || sb->handle.run_id != handle.run_id ||
      sb->handle.lease_epoch != handle.lease_epoch) {
    (void)destroy(sb->handle);
    return fail(ErrorCode::kSandboxEscapeSuspected,
                "handle does not match environment " + handle.environment_id +
                    " (tenant, run or lease epoch differ); the environment was destroyed");
  }
  std::unique_lock exec(sb->exec_mutex, std::try_to_lock);
  if (!exec.owns_lock())
    return fail(ErrorCode::kExecutionRejected, "another command is running in this environment");
  if (sb->init_dead || !sb->control.valid())
    return fail(ErrorCode::kExecutionUnavailable,
                "the sandbox's init has died; destroy it and provision again");
  const auto expires_in = sb->handle.expires_at - nowMs();
  if (expires_in.count() <= 0) {
    exec.unlock();
    expire(sb->handle);
    return fail(ErrorCode::kExecutionRejected, "environment " + handle.environment_id + " has expired");
  }

  // working_directory passes the containment function on the service side
  // before anything runs (spec: sandbox.run_command validation).
  if (!cwd->empty()) {
    auto dir = workspace::openBeneath(sb->workspace_fd.get(), *cwd, O_PATH | O_DIRECTORY);
    if (!dir)
      return fail(ErrorCode::kToolValidationError,
                  "working_directory \"" + *cwd + "\" is not a directory inside the workspace (" +
                      dir.error().message() + ")");
  }

  auto effective = effectiveTimeout(TimeoutInputs{
      options_.service_hard_cap, std::chrono::seconds(sb->limits.wall_clock_seconds), std::nullopt,
      std::chrono::seconds(command.timeout_seconds), options_.service_hard_cap,
      std::chrono::seconds(0)});
  if (!effective) return tl::unexpected(effective.error());

  // Snapshot before, carrying known hashes forward for unchanged files.
  // A workspace the walk cannot take (deeper than its bounds) does not stop
  // the command: the result then carries no listing and says so.
  // Provenance: from here until the command's processes are gone, tool
  // writes are not recorded as TOOL_WRITTEN; on every way out the record
  // learns what the command changed (all of it, or "not sure": then no
  // TOOL_WRITTEN entry survives).
  sb->workspace->beginSandboxCommand();
  struct ProvenanceUpdate {
    workspace::LocalWorkspaceHandle& ws;
    bool done = false;
    void record(const std::vector<FileChange>& changes, bool complete) {
      ws.recordSandboxChanges(changes, complete);
      done = true;
    }
    ~ProvenanceUpdate() {
      if (!done) ws.recordSandboxChanges({}, false);
    }
  } provenance_update{*sb->workspace};
  auto before = workspace::takeSnapshot(sb->workspace_fd.get());
  for (auto& [path, entry] : before ? *before : workspace::Snapshot{}) {
    auto it = sb->last_snapshot.find(path);
    if (it == sb->last_snapshot.end() || !it->second.sha256) continue;
    auto prev = it->second;
    prev.sha256.reset();
    if (prev == entry) entry.sha256 = it->second.sha256;
  }
  sb->cgroup->beginExecution();
  const auto counters_before = sb->cgroup->counters();
  // Which filesystems were already full when the command started: only a
  // filesystem this command fills is its DISK kill.
  const int watched_fs[3] = {sb->workspace_fd.get(), sb->tmp_fd.get(), sb->shm_fd.get()};
  bool full_at_start[3];
  for (int i = 0; i < 3; ++i) full_at_start[i] = filesystemFull(watched_fs[i]);

  // Pipes; our ends are non-blocking.
  auto makePipe = [](UniqueFd& r, UniqueFd& w) -> bool {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) return false;
    r.reset(p[0]);
    w.reset(p[1]);
    return true;
  };
  Capture out, err;
  UniqueFd out_w, err_w, in_r, in_w;
  const bool has_stdin = command.stdin_data.has_value();
  if (!makePipe(out.fd, out_w) || !makePipe(err.fd, err_w) || (has_stdin && !makePipe(in_r, in_w)))
    return failErrno(ErrorCode::kExecutionUnavailable, "pipe", errno);
  ::fcntl(out.fd.get(), F_SETFL, O_NONBLOCK);
  ::fcntl(err.fd.get(), F_SETFL, O_NONBLOCK);
  if (has_stdin) ::fcntl(in_w.get(), F_SETFL, O_NONBLOCK);

  // The request: cwd, argv, environment (PWD follows the working directory).
  std::string payload = *cwd;
  payload.push_back('\0');
  for (const auto& a : command.argv) {
    payload += a;
    payload.push_back('\0');
  }
  std::uint32_t envc = 0;
  for (const auto& [k, v] : sb->environment) {
    if (k == "PWD") continue;
    payload += k + "=" + v;
    payload.push_back('\0');
    ++envc;
  }
  payload += "PWD=" + (cwd->empty() ? std::string("/workspace") : "/workspace/" + *cwd);
  payload.push_back('\0');
  ++envc;
  if (payload.size() > kMaxRunPayload || command.argv.size() > kMaxArgs || envc > kMaxArgs)
    return fail(ErrorCode::kToolValidationError, "command and environment are too large");

  MessageHeader run{};
  run.type = MessageType::kRun;
  run.argc = static_cast<std::uint32_t>(command.argv.size());
  run.envc = envc;
  run.has_stdin = has_stdin ? 1 : 0;
  run.payload_bytes = static_cast<std::uint32_t>(payload.size());
  int fds[3];
  int nfds = 0;
  if (has_stdin) fds[nfds++] = in_r.get();
  fds[nfds++] = out_w.get();
  fds[nfds++] = err_w.get();
  const auto started = Clock::now();
  if (!sendWithFds(sb->control.get(), &run, sizeof run, payload, fds, nfds)) {
    sb->init_dead = true;
    return failErrno(ErrorCode::kExecutionUnavailable, "send command to sandbox init", errno);
  }
  in_r.reset();
  out_w.reset();
  err_w.reset();

  // Event loop: drain output under the cap, feed stdin, watch the deadline,
  // the limits and the cancel token. The command ends when its main process
  // has exited and stdout and stderr have reached end-of-file (so output of
  // background jobs is not lost, and a fork bomb that outlives its shell is
  // still met by its limit), or at a limit, timeout or cancel; then init
  // kills whatever is left and reports the main process's exit status.
  const auto deadline = started + std::min<Clock::duration>(*effective, expires_in);
  const bool expiry_first = expires_in < *effective;
  std::optional<KillReason> reason;
  std::optional<Clock::time_point> end_sent;
  bool main_exited = false;
  std::optional<int> wait_status;
  std::optional<int> start_errno;
  bool init_lost = false;
  std::size_t stdin_off = 0;
  const std::int64_t cap = command.maximum_output_bytes;
  bool capped = false;  // the output cap was crossed: later output is dropped
  char buf[65536];

  auto sendEnd = [&] {
    if (end_sent) return;
    end_sent = Clock::now();
    MessageHeader k{};
    k.type = MessageType::kEnd;
    if (!sendWithFds(sb->control.get(), &k, sizeof k, {}, nullptr, 0)) init_lost = true;
  };
  auto requestKill = [&](KillReason why) {
    if (reason || wait_status) return;
    reason = why;
    sendEnd();
  };
  // The enforcers' own signals: the memory cgroup's OOM-kill counter, the
  // pids cgroup's refused-fork counter, and a filesystem at its size or
  // inode limit. Each is the thing that enforced the limit, never a guess
  // from how the process died.
  std::optional<std::int64_t> cpu_usec;
  auto limitHit = [&]() -> std::optional<KillReason> {
    if (auto now_counters = sb->cgroup->counters(); now_counters && counters_before) {
      if (now_counters->oom_kills > counters_before->oom_kills) return KillReason::kMemory;
      if (now_counters->pids_max_events > counters_before->pids_max_events) return KillReason::kPids;
    }
    for (int i = 0; i < 3; ++i)
      if (!full_at_start[i] && filesystemFull(watched_fs[i])) return KillReason::kDisk;
    return std::nullopt;
  };
  auto next_watch = Clock::now() + kWatchInterval;

  std::optional<Clock::time_point> exited_at;
  while (!init_lost && (!wait_status || out.fd.valid() || err.fd.valid())) {
    const auto now = Clock::now();
    if (exited_at && now >= *exited_at + kKillGrace) {
      // Init reported the exit after killing everything, so the pipes must
      // close; if they do not, stop waiting rather than hang.
      out.fd.reset();
      err.fd.reset();
      break;
    }
    if (main_exited && !out.fd.valid() && !err.fd.valid()) sendEnd();
    if (!reason && now >= deadline) requestKill(expiry_first ? KillReason::kExpired : KillReason::kTimeout);
    if (!reason && !wait_status && now >= next_watch) {
      if (auto hit = limitHit()) requestKill(*hit);
      next_watch = now + kWatchInterval;
    }
    if (end_sent && now >= *end_sent + kKillGrace && !wait_status) {
      // Init did not answer: kill the whole sandbox.
      ::syscall(SYS_pidfd_send_signal, sb->pidfd.get(), SIGKILL, nullptr, 0);
      init_lost = true;
      break;
    }
    pollfd p[7];
    int n = 0;
    int i_ctl = -1, i_out = -1, i_err = -1, i_in = -1, i_cancel = -1, i_stop = -1, i_mem = -1;
    p[n] = {sb->control.get(), POLLIN, 0};
    i_ctl = n++;
    if (out.fd.valid()) { p[n] = {out.fd.get(), POLLIN, 0}; i_out = n++; }
    if (err.fd.valid()) { p[n] = {err.fd.get(), POLLIN, 0}; i_err = n++; }
    if (in_w.valid()) { p[n] = {in_w.get(), POLLOUT, 0}; i_in = n++; }
    if (cancel != nullptr && !reason) { p[n] = {cancel->pollFd(), POLLIN, 0}; i_cancel = n++; }
    if (!reason) { p[n] = {shutdown_event_.get(), POLLIN, 0}; i_stop = n++; }
    if (!reason && sb->cgroup->memoryEventFd() >= 0) {
      p[n] = {sb->cgroup->memoryEventFd(), POLLIN, 0};
      i_mem = n++;
    }
    auto wake = exited_at ? *exited_at + kKillGrace
                : end_sent ? *end_sent + kKillGrace
                          : std::min(deadline, next_watch);
    auto wait_ms = std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count() + 1;
    int rc = ::poll(p, static_cast<nfds_t>(n), static_cast<int>(std::clamp<long long>(wait_ms, 0, 60000)));
    if (rc < 0 && errno != EINTR) return failErrno(ErrorCode::kExecutionUnavailable, "poll", errno);
    if (rc <= 0) continue;

    if (i_cancel >= 0 && (p[i_cancel].revents & POLLIN)) requestKill(KillReason::kCancelled);
    if (i_stop >= 0 && (p[i_stop].revents & POLLIN)) requestKill(KillReason::kServiceShutdown);
    if (i_mem >= 0 && (p[i_mem].revents & POLLIN)) {
      // The memory controller says an OOM happened: read its counters now
      // rather than at the next watch tick.
      sb->cgroup->drainMemoryEvents();
      if (auto hit = limitHit()) requestKill(*hit);
    }
    for (auto [idx, cap_ptr] : {std::pair{i_out, &out}, std::pair{i_err, &err}}) {
      if (idx < 0 || !(p[idx].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Capture& c = *cap_ptr;
      ssize_t got = sys::readSome(c.fd.get(), buf, sizeof buf);
      if (got < 0 && errno == EAGAIN) continue;
      if (got <= 0) {
        c.fd.reset();
        continue;
      }
      if (capped) {
        // Past the cap, until the kill closes the pipes: read and dropped,
        // so this stream (and only a stream that wrote) is truncated.
        c.truncated = true;
        continue;
      }
      const std::int64_t used = static_cast<std::int64_t>(out.data.size() + err.data.size());
      const std::int64_t room = std::max<std::int64_t>(0, cap - used);
      const auto which = &c == &out ? OutputStream::kStdout : OutputStream::kStderr;
      if (got <= room) {
        c.data.append(buf, static_cast<std::size_t>(got));
        if (sink) sink(which, std::string_view(buf, static_cast<std::size_t>(got)));
      } else {
        // Past the cap: keep what fits, kill (bug-log B35, B36). Each flag
        // means "bytes of this stream were dropped": this stream's are; the
        // other's only if it writes before the kill (drained above), so an
        // empty stderr is never reported truncated.
        c.data.append(buf, static_cast<std::size_t>(room));
        if (sink && room > 0) sink(which, std::string_view(buf, static_cast<std::size_t>(room)));
        c.truncated = true;
        capped = true;
        requestKill(KillReason::kOutputLimit);
      }
    }
    if (i_in >= 0 && (p[i_in].revents & (POLLOUT | POLLERR | POLLHUP))) {
      const std::string& data = *command.stdin_data;
      if (stdin_off < data.size()) {
        ssize_t w = ::write(in_w.get(), data.data() + stdin_off, std::min<std::size_t>(data.size() - stdin_off, 65536));
        if (w > 0) stdin_off += static_cast<std::size_t>(w);
        else if (w < 0 && errno != EAGAIN && errno != EINTR) in_w.reset();  // reader gone: drop the rest
      }
      if (in_w.valid() && stdin_off >= data.size()) in_w.reset();  // delivered, then closed
    }
    if (p[i_ctl].revents & (POLLIN | POLLHUP | POLLERR)) {
      auto reply = receiveReply(sb->control.get());
      if (!reply) {
        init_lost = true;
        break;
      }
      if (*reply && (*reply)->header.type == MessageType::kMainExited) {
        main_exited = true;
        in_w.reset();
      } else if (*reply && (*reply)->header.type == MessageType::kExited) {
        wait_status = (*reply)->header.status;
        cpu_usec = (*reply)->header.cpu_usec;
        exited_at = Clock::now();
        in_w.reset();
      } else if (*reply && (*reply)->header.type == MessageType::kRunFailed) {
        start_errno = (*reply)->header.status;
        break;
      }
    }
  }
  const auto finished = Clock::now();
  if (start_errno) {
    return failErrno(ErrorCode::kExecutionUnavailable,
                     *start_errno == EAGAIN
                         ? "the command could not be started: the sandbox's process limit (pids " +
                               std::to_string(sb->limits.pids_max) + ") is reached"
                         : std::string("the command could not be started in the sandbox"),
                     *start_errno);
  }

  if (init_lost) {
    sb->init_dead = true;
    if (!reason)
      return fail(ErrorCode::kExecutionUnavailable,
                  "the sandbox's init died during the command (killed by its memory limit?)");
  }

  ExecutionResult result;
  result.duration_ms = std::chrono::duration_cast<std::chrono::milliseconds>(finished - started).count();
  result.stdout_data = std::move(out.data);
  result.stderr_data = std::move(err.data);
  result.stdout_truncated = out.truncated;
  result.stderr_truncated = err.truncated;

  if (!reason) {
    // A limit hit between the last watch and the exit still counts: a fork
    // bomb that gives up, a writer that stops at ENOSPC, a child the OOM
    // killer took (`sh -c 'python3 big.py'` exits 137 after its child was
    // killed; the model learns MEMORY, not 137).
    reason = limitHit();
  }
  if (auto counters_after = sb->cgroup->counters(); counters_after)
    result.peak_memory_bytes = counters_after->memory_peak_bytes;
  if (cpu_usec) result.cpu_time_ms = *cpu_usec / 1000;
  if (reason) {
    result.killed_by = reason;
    result.timed_out = *reason == KillReason::kTimeout;
  } else if (wait_status && WIFEXITED(*wait_status)) {
    result.exit_code = WEXITSTATUS(*wait_status);
  } else if (wait_status && WIFSIGNALED(*wait_status)) {
    result.exit_code = 128 + WTERMSIG(*wait_status);  // shell convention
  }

  if (!init_lost) {
    // Real data in the workspace cannot exceed its byte limit; a budget of
    // twice that bounds hashing, and sparse files are not read (B32). If a
    // snapshot cannot be taken the command's result still comes back, with
    // files_changed_truncated set and no listing.
    auto after = workspace::takeSnapshot(sb->workspace_fd.get());
    std::optional<workspace::Diff> diff;
    if (before && after) {
      auto d = workspace::diffSnapshots(*before, *after, sb->workspace_fd.get(),
                                        options_.files_changed_listing,
                                        2 * sb->limits.workspace_bytes);
      if (d) diff = std::move(*d);
    }
    if (diff) {
      result.files_changed = std::move(diff->changes);
      result.files_changed_truncated = diff->truncated;
      sb->last_snapshot = std::move(*after);
    } else {
      result.files_changed_truncated = true;
      sb->last_snapshot.clear();
    }
  }
  // Init killed every process of the command before reporting kExited, so
  // nothing can change the workspace after the `after` snapshot.
  provenance_update.record(result.files_changed, !init_lost && !result.files_changed_truncated);
  if (reason == KillReason::kExpired) {
    exec.unlock();
    expire(sb->handle);
  }
  return result;
}

// ---- code mode: side processes and the capability directory ---------------

Result<std::unique_ptr<SideProcess>> LinuxEnvironment::startSideProcess(const EnvironmentHandle& handle,
                                                                        const SideCommand& command) {
  if (shutting_down_.load())
    return fail(ErrorCode::kExecutionUnavailable, "the execution service is shutting down");
  auto sb = find(handle.environment_id);
  if (!sb) return tl::unexpected(goneError(handle.environment_id));
  if (sb->handle.tenant_id != handle.tenant_id)
    return fail(ErrorCode::kExecutionRejected, "environment does not belong to this tenant");
  auto cwd = checkRelativePath(command.working_directory);
  if (!cwd) return fail(ErrorCode::kToolValidationError, cwd.error().context);
  std::lock_guard side(sb->side_mutex);
  if (sb->init_dead || !sb->pidfd.valid() || !sb->cgroup)
    return fail(ErrorCode::kExecutionUnavailable, "the sandbox's init has died; destroy it and provision again");
  if (!cwd->empty()) {
    auto dir = workspace::openBeneath(sb->workspace_fd.get(), *cwd, O_PATH | O_DIRECTORY);
    if (!dir)
      return fail(ErrorCode::kToolValidationError, "working directory \"" + *cwd +
                                                       "\" is not a directory inside the workspace (" +
                                                       dir.error().message() + ")");
  }
  const sock_fprog prog = seccomp_.program();
  SideProcessTarget target;
  target.init_pidfd = sb->pidfd.get();
  target.cgroup = sb->cgroup.get();
  target.seccomp = &prog;
  target.sandbox_uid = kSandboxUid;
  target.sandbox_gid = kSandboxUid;
  target.environment = sb->environment;
  return startSideProcessIn(target, command);
}

Result<UniqueFd> LinuxEnvironment::openCapabilityDirectory(const EnvironmentHandle& handle) {
  auto sb = find(handle.environment_id);
  if (!sb) return tl::unexpected(goneError(handle.environment_id));
  if (sb->handle.tenant_id != handle.tenant_id)
    return fail(ErrorCode::kExecutionRejected, "environment does not belong to this tenant");
  UniqueFd fd(::open(sb->capability_dir.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) return failErrno(ErrorCode::kExecutionUnavailable, "open the capability directory", errno);
  return fd;
}

// ---- image digest --------------------------------------------------------------

void manifestTree(sys::Sha256& h, const std::string& path, int depth) {
  if (depth > 32) return;
  DIR* d = ::opendir(path.c_str());
  if (d == nullptr) return;
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.emplace_back(e->d_name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  for (const auto& n : names) {
    const std::string p = path + "/" + n;
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) continue;
    h.update(p + " " + std::to_string(st.st_mode) + " " + std::to_string(st.st_size) + " " +
             std::to_string(st.st_mtim.tv_sec) + "\n");
    if (S_ISDIR(st.st_mode)) manifestTree(h, p, depth + 1);
  }
}

}  // namespace

std::string cgroupNamePrefix(const std::string& state_dir) {
  std::uint32_t h = 2166136261u;  // FNV-1a
  for (unsigned char c : state_dir) h = (h ^ c) * 16777619u;
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08x", h);
  return std::string("airlock-") + buf + "-";
}

Result<std::string> computeImageDigest(const LinuxEnvironmentOptions& options) {
  static std::mutex mu;
  static std::map<std::string, std::string> cache;
  std::string key;
  for (const auto& d : options.image_dirs) key += "dir " + d + "\n";
  for (const auto& e : options.image_etc) key += "etc " + e + "\n";
  std::lock_guard lk(mu);
  if (auto it = cache.find(key); it != cache.end()) return it->second;

  sys::Sha256 h;
  h.update("airlock-image-manifest v1\n");
  h.update(key);
  // Packaged content: the dpkg database names every installed package and
  // version; files under /usr come from exactly those.
  auto status = sys::readFile(AT_FDCWD, "/var/lib/dpkg/status", 256u << 20);
  if (status) {
    std::vector<std::string> pkgs;
    std::string pkg, ver, arch;
    std::size_t pos = 0;
    const std::string& t = *status;
    while (pos <= t.size()) {
      std::size_t eol = t.find('\n', pos);
      if (eol == std::string::npos) eol = t.size();
      std::string_view line(t.data() + pos, eol - pos);
      if (line.empty()) {
        if (!pkg.empty()) pkgs.push_back(pkg + " " + ver + " " + arch);
        pkg.clear(), ver.clear(), arch.clear();
      } else if (line.rfind("Package: ", 0) == 0) {
        pkg = line.substr(9);
      } else if (line.rfind("Version: ", 0) == 0) {
        ver = line.substr(9);
      } else if (line.rfind("Architecture: ", 0) == 0) {
        arch = line.substr(14);
      }
      pos = eol + 1;
    }
    if (!pkg.empty()) pkgs.push_back(pkg + " " + ver + " " + arch);
    std::sort(pkgs.begin(), pkgs.end());
    for (const auto& p : pkgs) h.update("pkg " + p + "\n");
  }
  // Unpackaged content: /usr/local by stat manifest.
  manifestTree(h, "/usr/local", 0);
  std::string digest = "sha256:" + h.finishHex();
  cache[key] = digest;
  return digest;
}

Result<std::unique_ptr<ExecutionEnvironment>> createLinuxEnvironment(
    const LinuxEnvironmentOptions& options) {
  if (::geteuid() != 0)
    return fail(ErrorCode::kExecutionUnavailable,
                "the linux mechanism needs root (it creates cgroups and maps user namespaces); "
                "run as root or use --mechanism fake");
  // A broken pipe to a command that exited is an error value, not a signal.
  ::signal(SIGPIPE, SIG_IGN);
  // The state directory is traversable (init, running as an unprivileged
  // host uid, must reach the empty mount point root/); the lock directories
  // are private.
  for (auto [sub, mode] : {std::pair{"", 0711}, {"/sandboxes", 0700}, {"/uids", 0700}, {"/root", 0755}, {"/cap", 0711}}) {
    const std::string dir = options.state_dir + sub;
    if (auto r = mkdirs(dir, static_cast<mode_t>(mode)); !r) return tl::unexpected(r.error());
    if (::chmod(dir.c_str(), static_cast<mode_t>(mode)) != 0)
      return failErrno(ErrorCode::kExecutionUnavailable, "chmod " + dir, errno);
  }
  std::shared_ptr<CgroupFs> fs = makeRealCgroupFs();
  auto mountinfo = sys::readFile(AT_FDCWD, "/proc/self/mountinfo");
  if (!mountinfo) return tl::unexpected(mountinfo.error());
  auto driver = makeCgroupDriver(parseCgroupMounts(*mountinfo, *fs), fs);
  if (!driver) return tl::unexpected(driver.error());
  auto seccomp = buildSeccompProgram();
  if (!seccomp) return tl::unexpected(seccomp.error());
  auto digest = computeImageDigest(options);
  if (!digest) return tl::unexpected(digest.error());
  auto env = std::make_unique<LinuxEnvironment>(options, std::move(*driver), std::move(*seccomp),
                                                std::move(*digest));
  if (auto r = env->initShutdownEvent(); !r) return tl::unexpected(r.error());
  env->sweepOrphans();
  return std::unique_ptr<ExecutionEnvironment>(std::move(env));
}

}  // namespace airlock::linux_jail
