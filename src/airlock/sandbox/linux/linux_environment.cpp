#include "airlock/sandbox/linux/linux_environment.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
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
#include "airlock/sandbox/host/cgroup.h"
#include "airlock/sandbox/host/command_admission.h"
#include "airlock/sandbox/host/command_supervisor.h"
#include "airlock/sandbox/host/hosted_environment.h"
#include "airlock/sandbox/host/sandbox_registry.h"
#include "airlock/sandbox/host/sandbox_state.h"
#include "airlock/sandbox/host/workspace_scan.h"
#include "airlock/sandbox/linux/control_protocol.h"
#include "airlock/sandbox/linux/init_process.h"
#include "airlock/sandbox/linux/jail_plan.h"
#include "airlock/sandbox/linux/seccomp_policy.h"
#include "airlock/sandbox/linux/side_process.h"
#include "airlock/sandbox/sandbox_workspace.h"
#include "airlock/sys/fd_passing.h"
#include "airlock/sys/io.h"
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

// A uid range's lock file, created if absent and held (flock, not waiting)
// while a sandbox uses the range.
Result<UniqueFd> lockUidSlot(const std::string& path) {
  auto fd = sys::openAt(AT_FDCWD, path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_CREAT, 0600);
  if (!fd) return fd;
  if (::flock(fd->get(), LOCK_EX | LOCK_NB) != 0)
    return failErrno(ErrorCode::kExecutionUnavailable, "flock " + path, errno);
  return fd;
}

bool sendWithFds(int sock, const void* head, std::size_t head_len, const std::string& payload,
                 const int* fds, int nfds) {
  iovec iov[2] = {{const_cast<void*>(head), head_len},
                  {const_cast<char*>(payload.data()), payload.size()}};
  return sys::sendWithFds(sock, iov, payload.empty() ? 1 : 2, fds, nfds) >= 0;
}

// Receives one header (and up to three fds) from init, without waiting.
struct InitReply {
  MessageHeader header{};
  std::vector<UniqueFd> fds;
};
// What one receive found: nothing yet, a reply, or init's end of the
// channel closed (init has gone, or is going).
struct InitReceive {
  enum class State { kNothing, kReply, kClosed } state = State::kNothing;
  InitReply reply;
};
constexpr const char* kInitExited = "sandbox init exited";

Result<InitReceive> receiveReply(int sock) {
  InitReceive got;
  iovec iov{&got.reply.header, sizeof got.reply.header};
  sys::ReceivedFds passed;
  const ssize_t n = sys::receiveWithFds(sock, &iov, 1, 3, passed, MSG_DONTWAIT);
  for (int i = 0; i < passed.count; ++i) got.reply.fds.emplace_back(passed.fds[i]);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return got;
  if ((n < 0 && errno == ECONNRESET) || n == 0) {
    got.state = InitReceive::State::kClosed;
    return got;
  }
  if (n < 0) return failErrno(ErrorCode::kExecutionUnavailable, "receive from sandbox init", errno);
  if (static_cast<std::size_t>(n) != sizeof got.reply.header || passed.truncated)
    return fail(ErrorCode::kExecutionUnavailable, "malformed message from sandbox init");
  got.state = InitReceive::State::kReply;
  return got;
}

// Says how init ended after its end of the channel closed during set-up:
// its exit status or signal, and whether its cgroup saw an OOM kill. The
// process is left to be reaped by teardown (WNOWAIT).
std::string describeInitExit(int pidfd, host::Cgroup* cgroup) {
  pollfd p{pidfd, POLLIN, 0};
  (void)sys::pollSome(&p, 1, 1000);  // the channel closes a moment before the exit is seen
  siginfo_t info{};
  if (::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd), &info,
               WEXITED | WNOHANG | WNOWAIT) != 0 ||
      info.si_pid == 0)
    return std::string(kInitExited) + " (it closed its channel and is still running)";
  if (info.si_code == CLD_EXITED)
    return std::string(kInitExited) + " during set-up with status " +
           std::to_string(info.si_status);
  const char* name = ::sigabbrev_np(info.si_status);
  std::string text = std::string(kInitExited) + " during set-up, killed by signal " +
                     std::to_string(info.si_status) + " (SIG" + (name ? name : "?") + ")";
  if (cgroup != nullptr) {
    if (auto c = cgroup->counters(); c && c->oom_kills > 0)
      text += ", by the sandbox's memory limit (memory_bytes may be too small to start it)";
  }
  return text;
}

struct Sandbox : host::SandboxRecord {
  UniqueFd uid_lock;
  uid_t host_uid_base = 0;
  UniqueFd pidfd;
  pid_t init_pid = -1;
  UniqueFd shm_fd;  // /dev/shm, watched for DISK with tmp_fd
  // Egress (egress_route.h): init's end of the handoff channel until init
  // holds it, then the attachment that serves the service end.
  UniqueFd egress_child_end;
  std::unique_ptr<EgressAttachment> egress;
  // Preallocated for init (it must not allocate after clone).
  std::vector<SetupStep> plan;
  std::vector<char> recv_buffer;
  std::vector<char*> arg_slots;
  std::vector<char*> env_slots;
};

class LinuxEnvironment final : public host::HostedEnvironment<Sandbox> {
 public:
  LinuxEnvironment(LinuxEnvironmentOptions options, std::unique_ptr<host::CgroupDriver> cgroups,
                   SeccompProgram seccomp, std::vector<std::shared_ptr<const SandboxImage>> images)
      : HostedEnvironment({options.service_hard_cap, std::move(images), options.ceilings,
                           options.egress_route != nullptr, cgroupNamePrefix(options.state_dir),
                           options.node_name, options.clock}),
        cgroup_prefix_(cgroupNamePrefix(options.state_dir)),
        options_(std::move(options)),
        cgroups_(std::move(cgroups)),
        seccomp_(std::move(seccomp)) {}

  ~LinuxEnvironment() override { destroyAll(); }

  // Destroys sandboxes whose owner process is gone (lock file not held).
  void sweepOrphans();

 private:
  // The state file, a host uid range, the cgroup and the capability
  // directory, then init cloned into its namespaces (startInit).
  Result<void> setUp(Sandbox& sb, const EnvironmentSpec& spec, bool egress) override;
  // Init's pid namespace killed, the cgroup removed, the state dropped.
  void teardown(Sandbox& sb) override;
  // kRun over init's control socket, supervised until kExited.
  Result<ExecutionResult> runCommand(const CommandRun& run) override;
  // Init killed at once, teardown once a running command has returned.
  void destroyTaken(std::shared_ptr<Sandbox> sb) override;
  // Code mode: a process entered into init's namespaces (side_process.h).
  Result<std::unique_ptr<SideProcess>> launchSideProcess(const std::shared_ptr<Sandbox>& sb,
                                                         const SideCommand& command) override;
  Result<void> startInit(Sandbox& sb);

  std::string cgroup_prefix_;
  LinuxEnvironmentOptions options_;
  std::unique_ptr<host::CgroupDriver> cgroups_;
  SeccompProgram seccomp_;
};

std::string stepName(const std::vector<SetupStep>& plan, int step) {
  static const char* kEarly[] = {"",
                                 "become root in the user namespace",
                                 "drop supplementary groups",
                                 "become root in the user namespace",
                                 "create the cgroup namespace",
                                 "watch for child exits",
                                 "open /workspace",
                                 "listen on 127.0.0.1:3128 for egress"};
  if (step < 0 && -step < 8) return kEarly[-step];
  if (step >= 0 && static_cast<std::size_t>(step) < plan.size())
    return plan[static_cast<std::size_t>(step)].description;
  return "setup step " + std::to_string(step);
}

Result<void> LinuxEnvironment::setUp(Sandbox& sb, const EnvironmentSpec& spec, bool egress) {
  // The state file first: a sweeper finds everything created after it.
  auto state = host::SandboxStateFile::create(options_.state_dir + "/sandboxes",
                                              {sb.handle.environment_id, sb.cgroup_name});
  if (!state) return tl::unexpected(state.error());
  sb.state = std::move(*state);

  // A host uid range of our own, so no two sandboxes share a uid.
  std::mt19937 rng(std::random_device{}());
  for (int attempt = 0; attempt < 64 && !sb.uid_lock.valid(); ++attempt) {
    int slot = 1 + static_cast<int>(rng() % (kUidSlots - 1));
    auto l = lockUidSlot(options_.state_dir + "/uids/" + std::to_string(slot) + ".lock");
    if (l) {
      sb.uid_lock = std::move(*l);
      sb.host_uid_base = kHostUidBase + static_cast<uid_t>(slot) * kUidRangeSize;
    }
  }
  if (!sb.uid_lock.valid())
    return fail(ErrorCode::kExecutionUnavailable, "no free sandbox uid range");

  // The memory limit holds the commands only: init, a clone of the service
  // with its pages, must never be what an OOM at the limit takes.
  auto cg = cgroups_->create(sb.cgroup_name, spec.limits, host::MemoryLayout::kCommandsApart);
  if (!cg) return tl::unexpected(cg.error());
  sb.cgroup = std::move(*cg);

  // Code mode: the capability directory, owned by the sandbox user's host
  // uid (the broker gives the socket and token file the same owner).
  sb.capability_dir = options_.state_dir + "/cap/" + sb.handle.environment_id;
  if (::mkdir(sb.capability_dir.c_str(), 0755) != 0 ||
      ::chown(sb.capability_dir.c_str(), sb.host_uid_base + kSandboxUid,
              sb.host_uid_base + kSandboxUid) != 0)
    return failErrno(ErrorCode::kExecutionUnavailable, "create the sandbox's capability directory",
                     errno);

  JailPlanInputs in;
  in.staging_root = options_.state_dir + "/root";
  in.capability_dir = sb.capability_dir;
  in.image = sb.image;
  in.limits = spec.limits;
  in.sandbox_uid = kSandboxUid;
  in.sandbox_gid = kSandboxUid;
  auto plan = buildJailPlan(in);
  if (!plan) return tl::unexpected(plan.error());
  sb.plan = std::move(*plan);

  UniqueFd egress_service_end;
  if (egress) {
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0)
      return failErrno(ErrorCode::kExecutionUnavailable, "socketpair (egress)", errno);
    egress_service_end.reset(pair[0]);
    sb.egress_child_end.reset(pair[1]);
  }

  if (auto r = startInit(sb); !r) return tl::unexpected(r.error());

  if (egress) {
    auto attached =
        options_.egress_route->attachHandoff(sb.handle, spec.egress, std::move(egress_service_end));
    if (!attached) return tl::unexpected(attached.error());
    sb.egress = std::move(*attached);
  }

  sb.workspace = workspace::makeLocalWorkspace(
      UniqueFd(::fcntl(sb.workspace_fd.get(), F_DUPFD_CLOEXEC, 0)), sb.host_uid_base + kSandboxUid,
      sb.host_uid_base + kSandboxUid, workspace::CreateAs::kOwner);
  return {};
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

  auto command_entry = sb.cgroup->openCommandEntry();
  if (!command_entry) return tl::unexpected(command_entry.error());

  const sock_fprog prog = seccomp_.program();
  InitContext ctx;
  ctx.command_cgroup_fd = command_entry->get();
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
  command_entry->reset();       // and this one
  sb.control = std::move(parent_end);

  const std::string proc = "/proc/" + std::to_string(pid);
  const std::string map =
      "0 " + std::to_string(sb.host_uid_base) + " " + std::to_string(kUidRangeSize);
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
      return fail(ErrorCode::kExecutionUnavailable,
                  "sandbox did not start within the start budget");
    pollfd p{sb.control.get(), POLLIN, 0};
    // EINTR is 0 here too: the loop recomputes what is left and polls again.
    if (sys::pollSome(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    auto got = receiveReply(sb.control.get());
    if (!got) return tl::unexpected(got.error());
    if (got->state == InitReceive::State::kClosed)
      return fail(ErrorCode::kExecutionUnavailable,
                  describeInitExit(sb.pidfd.get(), sb.cgroup.get()));
    if (got->state == InitReceive::State::kNothing) continue;
    auto& r = got->reply;
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
    while (::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(sb.pidfd.get()), &info,
                    WEXITED) != 0 &&
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
    host::killAndRemove(*sb.cgroup);
    sb.cgroup.reset();
  }
  if (!sb.capability_dir.empty()) removeCapabilityDirectory(sb.capability_dir);
  sb.uid_lock.reset();
  sb.state.remove();
}

void LinuxEnvironment::destroyTaken(std::shared_ptr<Sandbox> sb) {
  // Kill first: a command running in another thread ends with init's death,
  // with its reason and the output it had written.
  if (sb->pidfd.valid()) ::syscall(SYS_pidfd_send_signal, sb->pidfd.get(), SIGKILL, nullptr, 0);
  std::lock_guard exec(sb->command_mutex);
  teardown(*sb);
}

void LinuxEnvironment::sweepOrphans() {
  const std::string cap_dir = options_.state_dir + "/cap/";
  host::sweepOrphans({options_.state_dir + "/sandboxes", cgroups_.get(), cgroup_prefix_,
                      sandboxes_.ids(),
                      [&](const std::string& id) { removeCapabilityDirectory(cap_dir + id); }});
}

// ---- execute -----------------------------------------------------------------

// The kRun request (control_protocol.h): cwd, argv, the environment (PWD
// follows the working directory). ToolValidationError past init's bounds.
struct RunRequest {
  MessageHeader header{};
  std::string payload;
};
Result<RunRequest> runRequest(const std::string& cwd, const std::vector<std::string>& argv,
                              const std::vector<std::string>& env) {
  RunRequest r;
  auto field = [&](const std::string& f) {
    r.payload += f;
    r.payload.push_back('\0');
  };
  field(cwd);
  for (const auto& a : argv) field(a);
  for (const auto& e : env) field(e);
  if (r.payload.size() > kMaxRunPayload || argv.size() > kMaxArgs || env.size() > kMaxArgs)
    return fail(ErrorCode::kToolValidationError, "command and environment are too large");
  r.header.type = MessageType::kRun;
  r.header.argc = static_cast<std::uint32_t>(argv.size());
  r.header.envc = static_cast<std::uint32_t>(env.size());
  r.header.payload_bytes = static_cast<std::uint32_t>(r.payload.size());
  return r;
}

// One command through init's control socket: kRun with the pipe ends, then
// kMainExited, kEnd, kExited (or kRunFailed). Init kills every process of
// the command (not the side processes) before it answers kEnd, so after
// kExited nothing of the command can change the workspace.
class InitChannel final : public host::CommandChannel {
 public:
  InitChannel(Sandbox& sb, RunRequest request) : sb_(sb), request_(std::move(request)) {}

  Result<void> start(host::SandboxPipeEnds ends) override {
    int fds[3];
    int nfds = 0;
    if (ends.stdin_read.valid()) fds[nfds++] = ends.stdin_read.get();
    fds[nfds++] = ends.stdout_write.get();
    fds[nfds++] = ends.stderr_write.get();
    request_.header.has_stdin = ends.stdin_read.valid() ? 1 : 0;
    if (!sendWithFds(sb_.control.get(), &request_.header, sizeof request_.header, request_.payload,
                     fds, nfds)) {
      const int e = errno;
      lose("sending a command to its init failed");
      return failErrno(ErrorCode::kExecutionUnavailable, "send command to sandbox init", e);
    }
    return {};
  }
  int eventFd() const noexcept override { return sb_.control.get(); }
  bool readEvents(std::vector<host::ChannelEvent>& events) override {
    using Kind = host::ChannelEvent::Kind;
    for (;;) {
      auto got = receiveReply(sb_.control.get());
      if (!got || got->state == InitReceive::State::kClosed) {
        lose("its init closed the control socket");
        return false;
      }
      if (got->state == InitReceive::State::kNothing) return true;
      const MessageHeader& h = got->reply.header;
      if (h.type == MessageType::kMainExited) events.push_back({Kind::kMainExited, h.status});
      if (h.type == MessageType::kExited) events.push_back({Kind::kAllGone, h.status, h.cpu_usec});
      if (h.type == MessageType::kRunFailed)
        events.push_back({Kind::kStartFailed, std::nullopt, std::nullopt, h.status});
    }
  }
  bool stop() override {
    MessageHeader end{};
    end.type = MessageType::kEnd;
    if (sendWithFds(sb_.control.get(), &end, sizeof end, {}, nullptr, 0)) return true;
    lose("its init did not take the end of a command");
    return false;
  }
  void abandon() noexcept override {
    // Init did not answer: the whole sandbox goes.
    ::syscall(SYS_pidfd_send_signal, sb_.pidfd.get(), SIGKILL, nullptr, 0);
    lose("its init did not answer and was killed");
  }
  bool lost() const noexcept override { return lost_; }

 private:
  // The sandbox is unusable from here: its lifecycle is told why.
  void lose(const char* why) noexcept {
    lost_ = true;
    sb_.life->markLost(why);
  }

  Sandbox& sb_;
  bool lost_ = false;
  RunRequest request_;
};

// One command through init (InitChannel), DISK on /workspace, /tmp and
// /dev/shm.
Result<ExecutionResult> LinuxEnvironment::runCommand(const CommandRun& run) {
  Sandbox& sb = *run.admitted.sandbox;
  const std::string& cwd = run.admitted.cwd;
  auto request =
      runRequest(cwd, run.command.argv,
                 host::commandEnvironment(sb.environment, run.command.env_additions, cwd));
  if (!request) return tl::unexpected(request.error());
  InitChannel channel(sb, std::move(*request));
  return superviseAdmitted(run, channel,
                           {{sb.workspace_fd.get(), sb.tmp_fd.get(), sb.shm_fd.get()},
                            {},
                            options_.files_changed_listing,
                            {}});
}

// ---- code mode: side processes and the capability directory ---------------

Result<std::unique_ptr<SideProcess>> LinuxEnvironment::launchSideProcess(
    const std::shared_ptr<Sandbox>& sb, const SideCommand& command) {
  auto cwd = checkRelativePath(command.working_directory);
  if (!cwd) return fail(ErrorCode::kToolValidationError, cwd.error().context);
  std::lock_guard side(sb->side_mutex);
  // A destroy that began since the start was let in has closed, or is
  // waiting to close, what this uses.
  if (auto usable = sb->life->checkUsable(); !usable) return tl::unexpected(usable.error());
  if (auto r = host::checkWorkingDirectory(sb->workspace_fd.get(), *cwd); !r)
    return tl::unexpected(r.error());
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

}  // namespace

std::string cgroupNamePrefix(const std::string& state_dir) {
  return host::cgroupPrefixFor("airlock-", state_dir);
}

Result<std::unique_ptr<ExecutionEnvironment>> createLinuxEnvironment(
    const LinuxEnvironmentOptions& options) {
  if (::geteuid() != 0)
    return fail(ErrorCode::kExecutionUnavailable,
                "the linux mechanism needs root (it creates cgroups and maps user namespaces); "
                "run as root or use --mechanism fake");
  // A broken pipe to a command that exited is an error value, not a signal.
  (void)::signal(SIGPIPE, SIG_IGN);
  // The state directory is traversable (init, running as an unprivileged
  // host uid, must reach the empty mount point root/); the lock directories
  // are private.
  for (auto [sub, mode] : {std::pair{"", 0711},
                           {"/sandboxes", 0700},
                           {"/uids", 0700},
                           {"/root", 0755},
                           {"/cap", 0711}}) {
    if (auto r = host::makeDirectories(options.state_dir + sub, static_cast<mode_t>(mode)); !r)
      return tl::unexpected(r.error());
  }
  // ... and so is every directory above it.
  if (auto r = checkSearchableByAll(options.state_dir + "/root"); !r) {
    Error error = r.error();
    error.context = "the state directory " + options.state_dir + ": " + error.context;
    return tl::unexpected(error);
  }
  std::shared_ptr<host::CgroupFs> fs = host::makeRealCgroupFs();
  auto mountinfo = sys::readFile(AT_FDCWD, "/proc/self/mountinfo");
  if (!mountinfo) return tl::unexpected(mountinfo.error());
  auto driver = host::makeCgroupDriver(host::parseCgroupMounts(*mountinfo, *fs), fs);
  if (!driver) return tl::unexpected(driver.error());
  auto seccomp = buildSeccompProgram();
  if (!seccomp) return tl::unexpected(seccomp.error());
  auto images = mechanismImages(computeImageDigest(options), options);
  if (!images) return tl::unexpected(images.error());
  for (const auto& image : options.images)
    if (auto r = checkReachableByAnyUser(image); !r) return tl::unexpected(r.error());
  auto env = std::make_unique<LinuxEnvironment>(options, std::move(*driver), std::move(*seccomp),
                                                std::move(*images));
  if (auto r = env->initHost(); !r) return tl::unexpected(r.error());
  env->sweepOrphans();
  return std::unique_ptr<ExecutionEnvironment>(std::move(env));
}

}  // namespace airlock::linux_jail
