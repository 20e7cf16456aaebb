#include "airlock/sandbox/oci/gvisor_environment.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "airlock/core/command_validation.h"
#include "airlock/core/ids.h"
#include "airlock/sandbox/host/cgroup.h"
#include "airlock/sandbox/host/command_admission.h"
#include "airlock/sandbox/host/command_supervisor.h"
#include "airlock/sandbox/host/hosted_environment.h"
#include "airlock/sandbox/host/sandbox_registry.h"
#include "airlock/sandbox/host/sandbox_state.h"
#include "airlock/sandbox/host/workspace_scan.h"
#include "airlock/sandbox/oci/gvisor_memory.h"
#include "airlock/sandbox/oci/oci_bundle.h"
#include "airlock/sandbox/oci/shim_protocol.h"
#include "airlock/sandbox/piped_side_process.h"
#include "airlock/sandbox/sandbox_workspace.h"
#include "airlock/sys/fd_passing.h"
#include "airlock/sys/io.h"
#include "airlock/sys/proc_status.h"
#include "airlock/workspace/local_workspace.h"
#include "airlock/workspace/resolve.h"
#include "airlock/workspace/snapshot.h"

#ifndef AIRLOCK_GVISOR_SHIM_BUILD_PATH
#define AIRLOCK_GVISOR_SHIM_BUILD_PATH ""
#endif

namespace airlock::gvisor {
namespace {

using Clock = std::chrono::steady_clock;
using host::Cgroup;
using host::CgroupDriver;
using sys::UniqueFd;

constexpr std::size_t kMaxRequestBytes = 8u << 20;  // the shim's bound

// The rootfs of one image, shared by its sandboxes: rootfs/<digest's hex>
// under the state directory.
std::string rootfsDirectory(const std::string& state_dir, const SandboxImage& image) {
  return state_dir + "/rootfs/" + image.digest.substr(image.digest.find(':') + 1);
}

// The host's cgroup limits for a sandbox: the command's memory plus the
// sentry's allowance; a pids backstop for the sandbox's host threads. The
// command's processes (at most pids_max plus the refusal spare, gVisor's
// RLIMIT_NPROC) each have a ptrace stub with a thread for every sentry
// thread that ran it: a fork bomb at pids_max 32 was measured at up to 1,180
// host tasks, and the sentry dies when it cannot create a stub (it was at
// 16 * pids_max + 1024 = 1,536, and about one fork bomb in 50 lost its
// sandbox there).
ResourceLimits hostLimits(const ResourceLimits& l) {
  ResourceLimits h = l;
  h.memory_bytes = l.memory_bytes + kSentryMemoryAllowance;
  h.pids_max = 32 * (l.pids_max + oci::kPidsRefusalSpare) + 1024;
  return h;
}

// A listening UNIX stream socket at <dir>/<name> (close-on-exec,
// non-blocking). A path longer than sun_path is bound through
// /proc/self/fd/<dir fd>/<name>, so a deep state directory still works.
Result<UniqueFd> listenUnixIn(const std::string& dir, const char* name, int backlog) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::string path = dir + "/" + name;
  UniqueFd dir_fd;
  if (path.size() + 1 > sizeof addr.sun_path) {
    dir_fd.reset(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
    if (!dir_fd.valid()) return failErrno(ErrorCode::kExecutionUnavailable, "open " + dir, errno);
    path = "/proc/self/fd/" + std::to_string(dir_fd.get()) + "/" + name;
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid() || ::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(fd.get(), backlog) != 0)
    return failErrno(ErrorCode::kExecutionUnavailable, "listen on " + dir + "/" + name, errno);
  return fd;
}

// Whether a process is traced by another (the mark of a ptrace stub: the
// processes the sandbox's code runs in, each traced by a sentry thread), and
// its parent; nullopt when it is gone or its status does not parse.
struct TraceState {
  bool traced = false;
  pid_t parent = 0;
};
std::optional<TraceState> traceStateOf(pid_t pid) {
  auto status = sys::readProcStatus(pid);
  if (!status) return std::nullopt;
  const std::string tracer = sys::procStatusField(*status, "TracerPid");
  const std::string ppid = sys::procStatusField(*status, "PPid");
  TraceState st;
  if (std::from_chars(ppid.data(), ppid.data() + ppid.size(), st.parent).ec != std::errc() ||
      tracer.empty())
    return std::nullopt;
  st.traced = tracer != "0";
  return st;
}

// Moves the sandbox's first ptrace stub into the commands' memory cgroup
// (gvisor_memory.h). The first stub (the sentry's child) forks every later
// one, so each stub made after the move, the commands' among them, starts
// there, while those made before it stay at the sandbox level: the shim's,
// which must still create threads to run a MEMORY kill while the command
// waits at the commands' limit (a failed creation panics the sentry). Run
// after the start and, until it has moved the first stub, before each
// command. Best effort: a stub left behind is charged to the sandbox's
// limit. True once the first stub is in the commands' cgroup (or there is
// no such cgroup): nothing more to adopt.
bool adoptApplication(Cgroup& cgroup) {
  const std::string dir = cgroup.memoryDirectory();
  if (dir == cgroup.commandsMemoryDirectory()) return true;
  auto procs = sys::readFile(AT_FDCWD, (dir + "/cgroup.procs").c_str());
  if (!procs) return false;
  for (pid_t pid : host::parsePids(*procs)) {
    auto stub = traceStateOf(pid);
    if (!stub || !stub->traced) continue;
    auto parent = traceStateOf(stub->parent);
    if (parent && !parent->traced && cgroup.addCommandProcess(pid)) return true;
  }
  return false;
}

// A sandbox's side-process keepers: those not yet seen to end, and how many
// ever started.
struct Keepers {
  std::atomic<int> live{0};
  std::atomic<long> started{0};
};

struct Child {
  pid_t pid = -1;
  UniqueFd pidfd;
};

struct Sandbox : host::SandboxRecord {
  std::string dir;  // <state>/sandboxes/<id>
  std::string container_id;
  SandboxMemory memory;  // v1: the per-command limits
  // The side processes' keepers (ApplicationStubs).
  std::shared_ptr<Keepers> live_keepers = std::make_shared<Keepers>();
  bool stubs_adopted =
      false;    // adoptApplication has moved the first stub (by setUp, then under command_mutex)
  Child runsc;  // `runsc run`, our child for the sandbox's life
  UniqueFd listen_fd;
  // Code mode: the side-process channel (shim_protocol.h); side_mutex
  // orders requests on it and keeps destroy from closing it under a start.
  // The capability directory is <dir>/cap, owned by uid 1000.
  UniqueFd side_listen_fd;
  UniqueFd side;
  // Egress (egress_route.h): the proxy's hold on <dir>/egress/sock; null
  // for a sandbox without egress.
  std::unique_ptr<EgressAttachment> egress;
  std::string control_buffer;
};

// Starts argv with stdin /dev/null and stdout+stderr to out_fd, already a
// member of `cgroup` (when given) before it executes anything.
Result<Child> spawnInCgroup(const std::vector<std::string>& args, int out_fd, Cgroup* cgroup) {
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  int sync[2];
  if (::pipe2(sync, O_CLOEXEC) != 0)
    return failErrno(ErrorCode::kExecutionUnavailable, "pipe", errno);
  UniqueFd sync_r(sync[0]), sync_w(sync[1]);
  const int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  UniqueFd null_guard(null_fd);
  if (null_fd < 0) return failErrno(ErrorCode::kExecutionUnavailable, "open /dev/null", errno);
  const pid_t pid = ::fork();
  if (pid < 0) return failErrno(ErrorCode::kExecutionUnavailable, "fork", errno);
  if (pid == 0) {
    // Only async-signal-safe calls between fork and exec.
    char go = 0;
    ::close(sync[1]);
    if (::read(sync[0], &go, 1) != 1) ::_exit(126);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    (void)::signal(SIGPIPE, SIG_DFL);
    if (::dup2(null_fd, 0) < 0 || ::dup2(out_fd, 1) < 0 || ::dup2(out_fd, 2) < 0) ::_exit(126);
    ::syscall(SYS_close_range, 3U, ~0U, 0U);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  Child child;
  child.pid = pid;
  child.pidfd.reset(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  if (cgroup != nullptr) {
    if (auto r = cgroup->addProcess(pid); !r) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      return tl::unexpected(r.error());
    }
  }
  char go = 1;
  if (::write(sync_w.get(), &go, 1) != 1) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return failErrno(ErrorCode::kExecutionUnavailable, "start runsc", errno);
  }
  return child;
}

std::string tailOf(const std::string& path) {
  auto text = sys::readFile(AT_FDCWD, path.c_str(), 1 << 20);
  if (!text) return {};
  std::string t = *text;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  if (auto nl = t.rfind('\n'); nl != std::string::npos) t = t.substr(nl + 1);
  if (t.size() > 400) t = t.substr(t.size() - 400);
  return t;
}

// A request on a stream socket: the first sendmsg carries the fds, the rest
// of a large request follows; a full socket is waited on for up to 5 s.
bool sendWithFds(int sock, const std::string& data, const int* fds, int nfds) {
  std::size_t off = 0;
  while (off < data.size()) {
    const iovec iov{const_cast<char*>(data.data() + off), data.size() - off};
    const ssize_t n = sys::sendWithFds(sock, &iov, 1, fds, off == 0 ? nfds : 0);
    if (n < 0 && errno == EAGAIN) {
      pollfd p{sock, POLLOUT, 0};
      if (sys::pollSome(&p, 1, 5000) <= 0) return false;
      continue;
    }
    if (n <= 0) return false;
    off += static_cast<std::size_t>(n);
  }
  return true;
}

// One request to the shim (shim_protocol.h): u32 length, then the
// NUL-terminated fields process limit, working directory, argc, argv...,
// envc, env..., and for a side process on a terminal its rows and columns.
// ToolValidationError past the shim's bound.
Result<std::string> shimRequest(std::int64_t nproc, const std::string& cwd,
                                const std::vector<std::string>& argv,
                                const std::vector<std::string>& env,
                                const std::optional<TerminalSize>& terminal = std::nullopt) {
  std::string request(4, '\0');
  auto field = [&](const std::string& f) {
    request += f;
    request.push_back('\0');
  };
  field(std::to_string(nproc));
  field(cwd);
  field(std::to_string(argv.size()));
  for (const auto& a : argv) field(a);
  field(std::to_string(env.size()));
  for (const auto& e : env) field(e);
  if (terminal) {
    field(std::to_string(terminal->rows));
    field(std::to_string(terminal->columns));
  }
  if (request.size() - 4 > kMaxRequestBytes)
    return fail(ErrorCode::kToolValidationError, "command and environment are too large");
  const std::uint32_t len = static_cast<std::uint32_t>(request.size() - 4);
  std::memcpy(request.data(), &len, 4);
  return request;
}

// A side process in a gVisor sandbox: its keeper (gvisor_shim.cpp) reports
// on the status pipe and kills the effect's group when the kill pipe closes.
// On a terminal the keeper relays between the terminal and the stdio pipes,
// so the pipes' half (PipedSideProcess) is the same; resizes travel on the
// kill pipe.
class GvisorSideProcess final : public PipedSideProcess {
 public:
  enum class OnTerminal : bool { kNo, kYes };
  GvisorSideProcess(UniqueFd in, UniqueFd out, UniqueFd err, UniqueFd status, UniqueFd kill,
                    std::shared_ptr<Keepers> live_keepers, OnTerminal terminal)
      : PipedSideProcess(std::move(in), std::move(out), std::move(err)),
        status_(std::move(status)),
        kill_(std::move(kill)),
        live_keepers_(std::move(live_keepers)),
        terminal_(terminal) {
    ::fcntl(status_.get(), F_SETFL, O_NONBLOCK);
    // A resize never waits for the keeper: a full pipe refuses it.
    ::fcntl(kill_.get(), F_SETFL, O_NONBLOCK);
    ++live_keepers_->live;
    ++live_keepers_->started;
  }
  ~GvisorSideProcess() override {
    killGroup();
    closePipes();
    if (!exited_) --live_keepers_->live;
  }
  int exitFd() const noexcept override { return status_.get(); }
  std::optional<int> exitStatus() override {
    if (exited_) return status_value_;
    char buf[oci::kShimRecordBytes];
    while (pending_.size() < oci::kShimRecordBytes) {
      const ssize_t n = sys::readSome(status_.get(), buf, oci::kShimRecordBytes - pending_.size());
      if (n < 0 && errno == EAGAIN) return std::nullopt;
      if (n <= 0) break;
      pending_.append(buf, static_cast<std::size_t>(n));
    }
    // Untrusted bytes: anything but kMainExited (end-of-file: the keeper
    // was killed with the sandbox's command or the sandbox) counts as killed.
    auto decoded = oci::decodeShimRecords(pending_);
    status_value_ = SIGKILL;
    if (!decoded.records.empty() && decoded.records[0].type == oci::ShimRecordType::kMainExited &&
        decoded.records[0].value >= 0 && decoded.records[0].value <= 0xffff)
      status_value_ = static_cast<int>(decoded.records[0].value);
    exited_ = true;
    --live_keepers_->live;
    return status_value_;
  }
  Result<void> resizeTerminal(const TerminalSize& size) override {
    if (terminal_ == OnTerminal::kNo)
      return fail(ErrorCode::kToolValidationError, "this process was not started with a terminal");
    if (auto r = checkTerminalSize(size); !r) return r;
    std::lock_guard lk(kill_mu_);
    if (exited_ || !kill_.valid())
      return fail(ErrorCode::kExecutionRejected,
                  "the process has ended (or was killed): its terminal is gone");
    char record[oci::kResizeRecordBytes];
    oci::encodeTerminalResize({size.rows, size.columns}, record);
    const ssize_t n = ::write(kill_.get(), record, sizeof record);  // atomic: under PIPE_BUF
    if (n == static_cast<ssize_t>(sizeof record)) return {};
    if (n < 0 && errno == EAGAIN)
      return fail(ErrorCode::kExecutionRejected,
                  "the terminal's keeper is not taking resizes (too many are pending)");
    return fail(ErrorCode::kExecutionRejected, "the process has ended: its terminal is gone");
  }
  // Closing the kill pipe is the kill: the keeper SIGKILLs the group while
  // it has not reaped the effect, so the group id is still the effect's;
  // once reaped, nothing is sent (as linux). On a terminal it kills every
  // process of the session, and reaps the effect only once none is left.
  void killGroup() noexcept override {
    std::lock_guard lk(kill_mu_);
    kill_.reset();
  }

 private:
  UniqueFd status_;
  std::string pending_;              // a partial record
  std::atomic<bool> exited_{false};  // set by exitStatus, read by resizeTerminal too
  int status_value_ = 0;
  std::mutex kill_mu_;
  UniqueFd kill_;
  std::shared_ptr<Keepers> live_keepers_;
  OnTerminal terminal_;
};

class GvisorEnvironment final : public host::HostedEnvironment<Sandbox> {
 public:
  GvisorEnvironment(GvisorEnvironmentOptions options, std::unique_ptr<CgroupDriver> cgroups,
                    std::vector<std::shared_ptr<const SandboxImage>> images)
      : HostedEnvironment({options.service_hard_cap, std::move(images), options.ceilings,
                           options.egress_route != nullptr,
                           host::cgroupPrefixFor("airlock-gv-", options.state_dir),
                           options.node_name, options.clock}),
        cgroup_prefix_(host::cgroupPrefixFor("airlock-gv-", options.state_dir)),
        options_(std::move(options)),
        cgroups_(std::move(cgroups)) {}

  ~GvisorEnvironment() override {
    destroyAll();
    // Every teardown handed to the worker finishes before the adapter goes.
    {
      std::lock_guard lk(teardown_mu_);
      teardown_stop_ = true;
    }
    teardown_cv_.notify_all();
    if (teardown_worker_.joinable()) teardown_worker_.join();
  }

  void sweepOrphans();

 private:
  // Each hook of HostedEnvironment with the helpers it uses.

  // The sandbox directory, the shim's sockets, the bundle, then runsc create
  // and start, waiting for the shim's connection.
  Result<void> setUp(Sandbox& sb, const EnvironmentSpec& spec, bool egress) override;
  Result<void> start(Sandbox& sb);
  std::vector<std::string> runscArgs() const {
    return {options_.runsc_path, "--platform=" + options_.platform, "--network=none",
            "--host-uds=open", "--ignore-cgroups"};
  }

  // One request to the shim, supervised until kDone (ShimChannel).
  Result<ExecutionResult> runCommand(const CommandRun& run) override;
  // Code mode: a request on the shim's side channel, kept by a keeper.
  Result<std::unique_ptr<SideProcess>> launchSideProcess(const std::shared_ptr<Sandbox>& sb,
                                                         const SideCommand& command) override;

  // The cgroup killed, runsc reaped, the mounts and directory removed.
  void teardown(Sandbox& sb) override;
  // Removes what a sandbox directory holds, whoever created it.
  void eraseSandboxDir(const std::string& dir);
  // Killed at once; the slow teardown goes to the teardown worker.
  void destroyTaken(std::shared_ptr<Sandbox> sb) override;
  // Hands a killed sandbox to the teardown worker (started on first use).
  void enqueueTeardown(std::shared_ptr<Sandbox> sb) {
    std::lock_guard lk(teardown_mu_);
    teardown_queue_.push_back(std::move(sb));
    if (!teardown_worker_.joinable()) teardown_worker_ = std::thread([this] { teardownLoop(); });
    teardown_cv_.notify_one();
  }
  void teardownLoop() {
    std::unique_lock lk(teardown_mu_);
    for (;;) {
      teardown_cv_.wait(lk, [&] { return teardown_stop_ || !teardown_queue_.empty(); });
      if (teardown_queue_.empty()) return;  // stopping, and nothing is pending
      auto sb = std::move(teardown_queue_.front());
      teardown_queue_.erase(teardown_queue_.begin());
      lk.unlock();
      teardown(*sb);
      sb.reset();
      lk.lock();
    }
  }

  std::string cgroup_prefix_;
  GvisorEnvironmentOptions options_;
  std::unique_ptr<CgroupDriver> cgroups_;
  // Destroyed sandboxes (already killed) waiting for the rest of teardown.
  std::mutex teardown_mu_;
  std::condition_variable teardown_cv_;
  std::vector<std::shared_ptr<Sandbox>> teardown_queue_;
  bool teardown_stop_ = false;
  std::thread teardown_worker_;
};

// The sandbox's directory under the state directory: its state file first
// (sandbox_state.h: a sweeper never sees a directory without one), the
// subdirectories, and the workspace and /tmp tmpfs mounts with the
// sandbox's limits. teardown() undoes what was done.
Result<void> prepareSandboxDir(Sandbox& sb, const std::string& sandboxes_dir,
                               const ResourceLimits& l) {
  auto state =
      host::SandboxStateFile::create(sandboxes_dir, {sb.handle.environment_id, sb.cgroup_name});
  if (!state) return tl::unexpected(state.error());
  sb.state = std::move(*state);
  for (auto [sub, mode] : {std::pair{"", 0700},
                           {"/workspace", 0755},
                           {"/tmp", 0755},
                           {"/ctl", 0700},
                           {"/cap", 0755},
                           {"/runsc", 0700},
                           {"/bundle", 0700}})
    if (auto r = host::makeDirectories(sb.dir + sub, static_cast<mode_t>(mode)); !r)
      return tl::unexpected(r.error());
  // The capability directory belongs to the sandbox user (no user
  // namespace here: uid 1000 inside is uid 1000 on the host, and the host
  // user of that number cannot reach it under the 0700 sandbox directory);
  // the broker gives its socket and token file the same owner.
  sb.capability_dir = sb.dir + "/cap";
  if (::chown(sb.capability_dir.c_str(), oci::kSandboxUid, oci::kSandboxGid) != 0)
    return failErrno(ErrorCode::kExecutionUnavailable, "chown the capability directory", errno);

  // The workspace and /tmp: host tmpfs mounts with the sandbox's limits.
  const std::string size =
      "size=" + std::to_string(l.workspace_bytes) + ",nr_inodes=" + std::to_string(l.inodes_max);
  const std::string ws_opts = size + ",mode=0755,uid=" + std::to_string(oci::kSandboxUid) +
                              ",gid=" + std::to_string(oci::kSandboxGid);
  if (::mount("tmpfs", (sb.dir + "/workspace").c_str(), "tmpfs", MS_NOSUID | MS_NODEV,
              ws_opts.c_str()) != 0)
    return failErrno(ErrorCode::kExecutionUnavailable, "mount the workspace tmpfs", errno);
  if (::mount("tmpfs", (sb.dir + "/tmp").c_str(), "tmpfs", MS_NOSUID | MS_NODEV,
              (size + ",mode=1777").c_str()) != 0)
    return failErrno(ErrorCode::kExecutionUnavailable, "mount the /tmp tmpfs", errno);
  sb.workspace_fd.reset(
      ::open((sb.dir + "/workspace").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
  sb.tmp_fd.reset(
      ::open((sb.dir + "/tmp").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
  if (!sb.workspace_fd.valid() || !sb.tmp_fd.valid())
    return failErrno(ErrorCode::kExecutionUnavailable, "open the workspace", errno);
  return {};
}

Result<void> GvisorEnvironment::setUp(Sandbox& sb, const EnvironmentSpec& spec, bool egress) {
  const std::string& id = sb.handle.environment_id;
  sb.dir = options_.state_dir + "/sandboxes/" + id;
  sb.container_id = "airlock-gv-" + id;

  if (auto r = prepareSandboxDir(sb, options_.state_dir + "/sandboxes", spec.limits); !r)
    return tl::unexpected(r.error());

  // The control socket the shim connects to.
  {
    auto listener = listenUnixIn(sb.dir + "/ctl", oci::kControlSocketName, 1);
    if (!listener) return tl::unexpected(listener.error());
    sb.listen_fd = std::move(*listener);
    auto side = listenUnixIn(sb.dir + "/ctl", oci::kSideSocketName, 1);
    if (!side) return tl::unexpected(side.error());
    sb.side_listen_fd = std::move(*side);
  }
  // The egress socket, only with egress: its directory is root's (0700),
  // like the control directory, so only the shim (uid 0 inside) reaches it.
  UniqueFd egress_listener;
  if (egress) {
    if (auto r = host::makeDirectories(sb.dir + "/egress", 0700); !r)
      return tl::unexpected(r.error());
    auto listener = listenUnixIn(sb.dir + "/egress", oci::kEgressSocketName, 128);
    if (!listener) return tl::unexpected(listener.error());
    egress_listener = std::move(*listener);
  }

  // v1: the command's stubs get a memory cgroup of their own below the
  // sandbox's (gvisor_memory.h); v2 keeps the one fixed limit.
  const bool v1 = cgroups_->version() == "v1";
  auto cg =
      cgroups_->create(sb.cgroup_name, hostLimits(spec.limits),
                       v1 ? host::MemoryLayout::kCommandsApart : host::MemoryLayout::kOneGroup);
  if (!cg) return tl::unexpected(cg.error());
  sb.cgroup = std::move(*cg);
  if (v1) {
    // At a limit the sandbox waits instead of losing its sentry or a stub.
    for (const std::string& dir :
         {sb.cgroup->memoryDirectory(), sb.cgroup->commandsMemoryDirectory()})
      (void)sys::writeFile(AT_FDCWD, (dir + "/memory.oom_control").c_str(), "1");
    sb.memory = SandboxMemory(sb.cgroup->memoryDirectory(), sb.cgroup->commandsMemoryDirectory(),
                              spec.limits.memory_bytes);
  }

  oci::BundleInputs in;
  in.rootfs_dir = rootfsDirectory(options_.state_dir, *sb.image);
  in.image = sb.image;
  in.workspace_dir = sb.dir + "/workspace";
  in.tmp_dir = sb.dir + "/tmp";
  in.shim_path = options_.shim_path.empty() ? defaultShimPath() : options_.shim_path;
  in.control_dir = sb.dir + "/ctl";
  if (egress) in.egress_dir = sb.dir + "/egress";
  in.capability_dir = sb.capability_dir;
  in.limits = spec.limits;
  auto config = oci::makeConfig(in);
  if (!config) return tl::unexpected(config.error());
  {
    const std::string text = config->dump(1);
    UniqueFd fd(::open((sb.dir + "/bundle/config.json").c_str(),
                       O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (!fd.valid() || !sys::writeAll(fd.get(), text.data(), text.size()))
      return failErrno(ErrorCode::kExecutionUnavailable, "write the OCI bundle", errno);
  }

  // Attached before the sandbox starts: a policy that does not compile
  // refuses the provision without starting anything.
  if (egress) {
    auto attached =
        options_.egress_route->attachListener(sb.handle, spec.egress, std::move(egress_listener));
    if (!attached) return tl::unexpected(attached.error());
    sb.egress = std::move(*attached);
  }

  if (auto r = start(sb); !r) return tl::unexpected(r.error());
  sb.stubs_adopted = adoptApplication(*sb.cgroup);

  sb.workspace = workspace::makeLocalWorkspace(
      UniqueFd(::fcntl(sb.workspace_fd.get(), F_DUPFD_CLOEXEC, 0)), oci::kSandboxUid,
      oci::kSandboxGid, workspace::CreateAs::kService);
  return {};
}

Result<void> GvisorEnvironment::start(Sandbox& sb) {
  const std::string log_path = sb.dir + "/runsc.log";
  UniqueFd log(::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (!log.valid()) return failErrno(ErrorCode::kExecutionUnavailable, "create runsc log", errno);
  // `runsc run` in the foreground: it stays the container's parent for the
  // sandbox's life (a member of the cgroup, killed with it). Readiness is
  // the shim's connection, not runsc's exit: `run --detach` was measured
  // about 50 ms slower to return than the container takes to start.
  auto args = runscArgs();
  args.insert(args.begin() + 1, {"--root", sb.dir + "/runsc"});
  for (const char* a : {"run", "--bundle"}) args.emplace_back(a);
  args.push_back(sb.dir + "/bundle");
  args.push_back(sb.container_id);
  auto child = spawnInCgroup(args, log.get(), sb.cgroup.get());
  if (!child) return tl::unexpected(child.error());
  sb.runsc = std::move(*child);
  log.reset();
  const auto deadline = Clock::now() + options_.start_budget;
  for (;;) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0)
      return fail(ErrorCode::kExecutionUnavailable,
                  "the sandbox did not start within the start budget");
    pollfd p[2] = {{sb.listen_fd.get(), POLLIN, 0}, {sb.runsc.pidfd.get(), POLLIN, 0}};
    if (::poll(p, 2, static_cast<int>(std::min<long long>(left, 1000))) <= 0) continue;
    if (p[0].revents & POLLIN) {
      int fd = ::accept4(sb.listen_fd.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) continue;
      sb.control.reset(fd);
      sb.listen_fd.reset();  // only the shim may ever connect
      // The shim connected its side channel just before (gvisor_shim.cpp):
      // it is already queued.
      pollfd sp{sb.side_listen_fd.get(), POLLIN, 0};
      const int side =
          ::poll(&sp, 1, static_cast<int>(std::clamp<long long>(left, 1, 5000))) == 1
              ? ::accept4(sb.side_listen_fd.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK)
              : -1;
      if (side < 0)
        return fail(ErrorCode::kExecutionUnavailable,
                    "the sandbox's init did not open its side-process channel");
      sb.side.reset(side);
      sb.side_listen_fd.reset();
      return {};
    }
    if (p[1].revents & POLLIN) {
      // runsc ended before the shim connected: the sandbox did not start.
      ::waitpid(sb.runsc.pid, nullptr, 0);
      sb.runsc.pid = -1;
      std::string why = tailOf(log_path);
      return fail(ErrorCode::kExecutionUnavailable,
                  "runsc could not start the sandbox" + (why.empty() ? std::string() : ": " + why));
    }
  }
}

void GvisorEnvironment::eraseSandboxDir(const std::string& dir) {
  for (const char* m : {"/workspace", "/tmp"}) {
    const std::string p = dir + m;
    while (::umount2(p.c_str(), MNT_DETACH) == 0) {
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

void GvisorEnvironment::teardown(Sandbox& sb) {
  sb.control.reset();
  sb.listen_fd.reset();
  {
    std::lock_guard side(sb.side_mutex);
    sb.side.reset();
    sb.side_listen_fd.reset();
  }
  sb.egress.reset();
  // SIGKILL the sentry, gofer, stubs and runsc itself: the sandbox ends at
  // once. runsc is our child: reap it, so no zombie stays in the cgroup.
  if (sb.cgroup) (void)sb.cgroup->killAll();
  if (sb.runsc.pid > 0) {
    ::kill(sb.runsc.pid, SIGKILL);
    while (::waitpid(sb.runsc.pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    sb.runsc.pid = -1;
  }
  if (sb.cgroup) {
    host::killAndRemove(*sb.cgroup);  // retried until the kernel has finished the killed
    sb.cgroup.reset();
  }
  sb.workspace.reset();
  sb.workspace_fd.reset();
  sb.tmp_fd.reset();
  if (!sb.dir.empty()) eraseSandboxDir(sb.dir);
  sb.state.remove();
}

void GvisorEnvironment::destroyTaken(std::shared_ptr<Sandbox> sb) {
  // Kill first: a command running in another thread sees its sandbox end
  // (with its reason and the output it had written), and nothing of the
  // sandbox runs after destroy returns.
  if (sb->cgroup) (void)sb->cgroup->killAll();
  std::lock_guard exec(sb->command_mutex);
  // The workspace port stops working now; reaping, unmounting and removing
  // the directory and cgroup (tens of milliseconds while the kernel frees
  // the sentry) happen on the teardown worker.
  sb->workspace.reset();
  sb->control.reset();
  {
    // A start in progress finishes first (the sandbox is dead: it fails).
    std::lock_guard side(sb->side_mutex);
    sb->side.reset();
  }
  // The proxy stops accepting for this sandbox and closes its tunnels now.
  sb->egress.reset();
  enqueueTeardown(std::move(sb));
}

// ---- code mode: side processes and the capability directory ---------------

Result<std::unique_ptr<SideProcess>> GvisorEnvironment::launchSideProcess(
    const std::shared_ptr<Sandbox>& sb, const SideCommand& command) {
  auto prepared = prepareSideCommand(sb->environment, command);
  if (!prepared) return tl::unexpected(prepared.error());
  if (command.terminal)
    if (auto r = checkTerminalSize(*command.terminal); !r) return tl::unexpected(r.error());
  auto request = shimRequest(sb->limits.pids_max, prepared->working_directory, command.argv,
                             prepared->env, command.terminal);
  if (!request) return tl::unexpected(request.error());
  // A terminal always has an input: what writeStdin types.
  const bool with_stdin = command.with_stdin || command.terminal.has_value();
  auto pipes = makeSidePipes(with_stdin);
  if (!pipes) return tl::unexpected(pipes.error());
  UniqueFd status_r, status_w, kill_r, kill_w;
  if (auto r = makePipe(status_r, status_w); !r) return tl::unexpected(r.error());
  if (auto r = makePipe(kill_r, kill_w); !r) return tl::unexpected(r.error());
  {
    std::lock_guard side(sb->side_mutex);
    // A destroy that began since the start was let in has closed, or is
    // waiting to close, the side channel.
    if (auto usable = sb->life->checkUsable(); !usable) return tl::unexpected(usable.error());
    if (auto r = host::checkWorkingDirectory(sb->workspace_fd.get(), prepared->working_directory);
        !r)
      return tl::unexpected(r.error());
    int fds[oci::kSideFdsMax] = {pipes->stdout_write.get(), pipes->stderr_write.get(),
                                 status_w.get(), kill_r.get(), pipes->stdin_read.get()};
    const int nfds = with_stdin ? oci::kSideFdsMax : oci::kSideFdsMin;
    if (!sendWithFds(sb->side.get(), *request, fds, nfds)) {
      const int e = errno;
      sb->side.reset();  // a request cut short leaves the stream unusable
      sb->life->markLost("its side-process channel failed");
      return failErrno(ErrorCode::kExecutionUnavailable,
                       "send the side process to the sandbox (its init has died?)", e);
    }
  }
  // The sandbox holds its ends now; the host keeps none of them, so each
  // pipe's end-of-file is the sandbox's.
  pipes->stdin_read.reset();
  pipes->stdout_write.reset();
  pipes->stderr_write.reset();
  status_w.reset();
  kill_r.reset();

  // The keeper's first record: kStarted, or why not. A dead sandbox closes
  // the pipe; kill_w closing on a failure return kills whatever started.
  char buf[oci::kShimRecordBytes];
  pollfd p{status_r.get(), POLLIN, 0};
  int rc;
  do {
    rc = ::poll(&p, 1, 10000);
  } while (rc < 0 && errno == EINTR);
  const ssize_t n = rc > 0 ? sys::readFull(status_r.get(), buf, sizeof buf) : -1;
  auto decoded = oci::decodeShimRecords(
      std::string_view(buf, n > 0 ? static_cast<std::size_t>(n) : std::size_t{0}));
  if (decoded.records.empty() || (decoded.records[0].type != oci::ShimRecordType::kStarted &&
                                  decoded.records[0].type != oci::ShimRecordType::kStartFailed))
    return fail(ErrorCode::kExecutionUnavailable,
                "the side process did not start (the sandbox's init did not answer)");
  if (decoded.records[0].type == oci::ShimRecordType::kStartFailed) {
    const int e = static_cast<int>(decoded.records[0].value);
    if (e == EAGAIN)
      return fail(ErrorCode::kExecutionUnavailable,
                  "the side process could not be started: the sandbox's process limit is reached");
    return failErrno(ErrorCode::kExecutionUnavailable,
                     command.terminal ? "side process: fork, or open its terminal, in the sandbox"
                                      : "side process: fork in the sandbox",
                     e);
  }
  return std::unique_ptr<SideProcess>(std::make_unique<GvisorSideProcess>(
      std::move(pipes->stdin_write), std::move(pipes->stdout_read), std::move(pipes->stderr_read),
      std::move(status_r), std::move(kill_w), sb->live_keepers,
      command.terminal ? GvisorSideProcess::OnTerminal::kYes : GvisorSideProcess::OnTerminal::kNo));
}

void GvisorEnvironment::sweepOrphans() {
  const std::string dir = options_.state_dir + "/sandboxes";
  host::sweepOrphans({dir, cgroups_.get(), cgroup_prefix_, sandboxes_.ids(),
                      [&](const std::string& id) { eraseSandboxDir(dir + "/" + id); }});
}

// ---- execute -----------------------------------------------------------------

// MEMORY from the sandbox's per-command limit (SandboxMemory), and the
// result's peak_memory_bytes: the command's own, not the sentry's. Listed
// before the cgroup's own source, whose peak is then not used.
class CommandMemoryLimit final : public host::LimitSource {
 public:
  CommandMemoryLimit(SandboxMemory& memory, Cgroup& cgroup) : memory_(memory), cgroup_(cgroup) {}
  std::optional<KillReason> hit() override {
    if (memory_.underOom()) return KillReason::kMemory;
    return std::nullopt;
  }
  std::optional<std::int64_t> peakMemoryBytes() override {
    auto c = cgroup_.counters();
    return memory_.commandPeak(c ? c->memory_peak_bytes : std::nullopt);
  }

 private:
  SandboxMemory& memory_;
  Cgroup& cgroup_;
};

// Why a sandbox whose MEMORY kill the shim never finished is gone: the
// sentry itself waited at the sandbox's limit (gvisor_memory.h: memory the
// sentry fills for the command, such as one read(2) into more new memory
// than the room, cannot be stopped there).
constexpr const char* kLostAtTheMemoryLimit =
    "the sentry was lost at the sandbox's memory limit (it waited there, or died) during the last "
    "command's MEMORY kill";

// One command through the shim's control stream (shim_protocol.h): the
// request with the pipe ends, then kStarted, kMainExited, the stop byte,
// kDone. It is also the limit source of the sandbox's own enforcers: a v1
// memory cgroup stalled at its limit (under_oom), and the shim's report of
// the command at its process limit (gVisor's RLIMIT_NPROC).
class ShimChannel final : public host::CommandChannel, public host::LimitSource {
 public:
  ShimChannel(Sandbox& sb, std::string request) : sb_(sb), request_(std::move(request)) {}

  Result<void> start(host::SandboxPipeEnds ends) override {
    UniqueFd stdin_read = std::move(ends.stdin_read);
    if (!stdin_read.valid()) {
      // No stdin: the shim still takes three fds; this one reads end-of-file.
      int p[2];
      if (::pipe2(p, O_CLOEXEC) != 0)
        return failErrno(ErrorCode::kExecutionUnavailable, "pipe", errno);
      stdin_read.reset(p[0]);
      ::close(p[1]);
    }
    const int fds[3] = {stdin_read.get(), ends.stdout_write.get(), ends.stderr_write.get()};
    sb_.control_buffer.clear();
    if (!sendWithFds(sb_.control.get(), request_, fds, 3)) {
      const int e = errno;
      lose();
      return failErrno(ErrorCode::kExecutionUnavailable, "send the command to the sandbox", e);
    }
    return {};
  }
  int eventFd() const noexcept override { return sb_.control.get(); }
  bool readEvents(std::vector<host::ChannelEvent>& events) override;
  void noteKill(KillReason why) noexcept override {
    // Room for the sentry to run the kill.
    if (why == KillReason::kMemory) sb_.memory.raiseForKill();
  }
  bool stop() override {
    const char stop = oci::kStopByte;
    if (::send(sb_.control.get(), &stop, 1, MSG_NOSIGNAL) == 1) return true;
    lose();
    return false;
  }
  void abandon() noexcept override {
    lose();  // the shim did not answer: the sandbox is unusable
    if (sb_.cgroup) (void)sb_.cgroup->killAll();
  }
  bool lost() const noexcept override { return lost_; }

  std::optional<KillReason> hit() override {
    if (shim_pids_) return KillReason::kPids;
    return std::nullopt;
  }

 private:
  // The sandbox is unusable from here. Lost while a MEMORY kill was under
  // way (the shim silent, its stream closed, a send refused: the sentry
  // waited or died at the limit), the next call says so.
  void lose() noexcept {
    lost_ = true;
    sb_.life->markLost(sb_.memory.killPending() ? kLostAtTheMemoryLimit : "");
  }

  Sandbox& sb_;
  bool lost_ = false;
  std::string request_;
  bool shim_pids_ = false;
};

bool ShimChannel::readEvents(std::vector<host::ChannelEvent>& events) {
  using Kind = host::ChannelEvent::Kind;
  char buf[4096];
  for (;;) {
    const ssize_t got = ::recv(sb_.control.get(), buf, sizeof buf, MSG_DONTWAIT);
    if (got < 0 && (errno == EAGAIN || errno == EINTR)) return true;
    if (got <= 0) break;
    sb_.control_buffer.append(buf, static_cast<std::size_t>(got));
    auto decoded = oci::decodeShimRecords(sb_.control_buffer);
    sb_.control_buffer.erase(0, decoded.consumed);
    for (const auto& rec : decoded.records) {
      const int value = static_cast<int>(rec.value);
      if (rec.type == oci::ShimRecordType::kStartFailed)
        events.push_back({Kind::kStartFailed, std::nullopt, std::nullopt, value});
      if (rec.type == oci::ShimRecordType::kMainExited)
        events.push_back({Kind::kMainExited, value});
      if (rec.type == oci::ShimRecordType::kKilling) sb_.memory.killSent();
      if (rec.type == oci::ShimRecordType::kDone)
        events.push_back({Kind::kAllGone, std::nullopt, rec.value});
      if (rec.type == oci::ShimRecordType::kPidsLimit) {
        shim_pids_ = true;
        events.push_back({Kind::kLimit, std::nullopt, std::nullopt, 0, KillReason::kPids});
      }
    }
    if (decoded.malformed) break;  // untrusted bytes: stop reading the stream
  }
  lose();
  return false;
}

// PIDS seen from the host, beside the shim's count: the command's stubs
// (the commands' memory cgroup: the first stub and one per address space in
// use) are kept for reuse when their process ends, so their number only
// grows, and it grows only while every kept stub is in use. It passing
// pids_max + 1 plus the side processes' keepers alive during this command
// (the first stub, and one for a keeper still starting, aside) means that
// the sandbox held more processes than pids_max at once. The shim samples
// its count inside the sandbox, where a fork bomb can starve it of CPU
// until the bomb has met RLIMIT_NPROC and collapsed (about 1 bomb in 60 at
// pids_max 32); this count cannot be missed between two looks. Only where
// fewer stubs than that were kept when the command started.
class ApplicationStubs final : public host::LimitSource {
 public:
  ApplicationStubs(const Cgroup& cgroup, std::int64_t pids_max,
                   std::shared_ptr<Keepers> live_keepers)
      : procs_(cgroup.commandsMemoryDirectory() + "/cgroup.procs"),
        pids_max_(pids_max),
        live_keepers_(std::move(live_keepers)) {
    // Every keeper alive at some moment of the command is allowed for: those
    // alive at its start and every one started since.
    keepers_at_start_ = live_keepers_->live.load() - live_keepers_->started.load();
    armed_ = cgroup.commandsMemoryDirectory() != cgroup.memoryDirectory() && count() < threshold();
  }
  std::optional<KillReason> hit() override {
    if (armed_ && count() >= threshold()) return KillReason::kPids;
    return std::nullopt;
  }

 private:
  std::int64_t threshold() const {
    return pids_max_ + 2 + std::max<long>(0, keepers_at_start_ + live_keepers_->started.load());
  }
  std::int64_t count() const {
    auto text = sys::readFile(AT_FDCWD, procs_.c_str(), 1 << 20);
    if (!text) return 0;
    return std::count(text->begin(), text->end(), '\n');
  }
  std::string procs_;
  std::int64_t pids_max_;
  std::shared_ptr<Keepers> live_keepers_;
  long keepers_at_start_ = 0;  // live minus started, at the start
  bool armed_ = false;
};

// One command through the shim (ShimChannel, also a limit source), DISK on
// the workspace and /tmp, and the per-command memory limit (SandboxMemory),
// ended whatever the command's outcome.
Result<ExecutionResult> GvisorEnvironment::runCommand(const CommandRun& run) {
  Sandbox& sb = *run.admitted.sandbox;
  const std::string& cwd = run.admitted.cwd;
  // The request, checked before anything changes.
  auto request =
      shimRequest(sb.limits.pids_max, cwd, run.command.argv,
                  host::commandEnvironment(sb.environment, run.command.env_additions, cwd));
  if (!request) return tl::unexpected(request.error());
  if (!sb.stubs_adopted) sb.stubs_adopted = adoptApplication(*sb.cgroup);
  if (auto r = sb.memory.beginCommand(); !r) return tl::unexpected(r.error());
  ShimChannel channel(sb, std::move(*request));
  CommandMemoryLimit memory(sb.memory, *sb.cgroup);
  ApplicationStubs stubs(*sb.cgroup, sb.limits.pids_max, sb.live_keepers);
  bool ended = false;
  auto result = superviseAdmitted(run, channel,
                                  {{sb.workspace_fd.get(), sb.tmp_fd.get()},
                                   {&channel, &stubs},
                                   options_.files_changed_listing,
                                   [&sb, &ended](const ExecutionResult&) {
                                     sb.memory.endCommand();
                                     ended = true;
                                   },
                                   {&memory}});
  if (!ended) sb.memory.endCommand();
  return result;
}

Result<std::unique_ptr<GvisorEnvironment>> make(const GvisorEnvironmentOptions& options) {
  if (auto why = gvisorUnavailable(options))
    return fail(ErrorCode::kExecutionUnavailable, "the gvisor mechanism cannot run here: " + *why);
  (void)::signal(SIGPIPE, SIG_IGN);
  for (auto [sub, mode] : {std::pair{"", 0711}, {"/sandboxes", 0700}})
    if (auto r = host::makeDirectories(options.state_dir + sub, static_cast<mode_t>(mode)); !r)
      return tl::unexpected(r.error());
  std::shared_ptr<host::CgroupFs> fs = host::makeRealCgroupFs();
  auto mountinfo = sys::readFile(AT_FDCWD, "/proc/self/mountinfo");
  if (!mountinfo) return tl::unexpected(mountinfo.error());
  auto mounts = host::parseCgroupMounts(*mountinfo, *fs);
  auto driver = host::makeCgroupDriver(mounts, fs);
  if (!driver) return tl::unexpected(driver.error());
  auto images = mechanismImages(computeImageDigest(options), options);
  if (!images) return tl::unexpected(images.error());
  if (auto r = host::makeDirectories(options.state_dir + "/rootfs", 0755); !r)
    return tl::unexpected(r.error());
  for (const auto& image : *images)
    if (auto r = oci::prepareRootfs(rootfsDirectory(options.state_dir, *image), *image); !r)
      return tl::unexpected(r.error());
  auto env = std::make_unique<GvisorEnvironment>(options, std::move(*driver), std::move(*images));
  if (auto r = env->initHost(); !r) return tl::unexpected(r.error());
  env->sweepOrphans();
  return env;
}

}  // namespace

std::string defaultShimPath() {
  char self[4096];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    std::string dir(self, static_cast<std::size_t>(n));
    dir = dir.substr(0, dir.rfind('/'));
    std::string beside = dir + "/airlock-gvisor-shim";
    if (::access(beside.c_str(), X_OK) == 0) return beside;
  }
  return AIRLOCK_GVISOR_SHIM_BUILD_PATH;
}

std::optional<std::string> gvisorUnavailable(const GvisorEnvironmentOptions& options) {
  if (::geteuid() != 0)
    return "the gvisor mechanism needs root (it mounts tmpfs and creates cgroups)";
  if (::access(options.runsc_path.c_str(), X_OK) != 0)
    return "runsc is not installed at " + options.runsc_path + " (Debian package runsc)";
  const std::string shim = options.shim_path.empty() ? defaultShimPath() : options.shim_path;
  if (shim.empty() || ::access(shim.c_str(), X_OK) != 0)
    return "the in-sandbox shim airlock-gvisor-shim is missing" +
           (shim.empty() ? std::string() : " at " + shim);
  return std::nullopt;
}

Result<std::unique_ptr<ExecutionEnvironment>> createGvisorEnvironment(
    const GvisorEnvironmentOptions& options) {
  auto env = make(options);
  if (!env) return tl::unexpected(env.error());
  return std::unique_ptr<ExecutionEnvironment>(std::move(*env));
}

Result<std::string> gvisorImageDigest(const GvisorEnvironmentOptions& options) {
  return computeImageDigest(options);
}

Result<void> probeGvisor(const GvisorEnvironmentOptions& options) {
  auto env = createGvisorEnvironment(options);
  if (!env) return tl::unexpected(env.error());
  auto digest = gvisorImageDigest(options);
  if (!digest) return tl::unexpected(digest.error());
  EnvironmentSpec spec;
  spec.tenant_id = "doctor";
  spec.run_id = "doctor";
  spec.lease_epoch = 1;
  spec.image_digest = *digest;
  spec.limits = defaultLimits();
  spec.environment = {{"PATH", "/usr/local/bin:/usr/bin:/bin"}};
  auto handle = (*env)->provision(spec);
  if (!handle) return tl::unexpected(handle.error());
  ExecutionCommand cmd;
  cmd.argv = {"true"};
  cmd.timeout_seconds = 30;
  cmd.maximum_output_bytes = 4096;
  auto result = (*env)->execute(*handle, cmd);
  (void)(*env)->destroy(*handle);
  if (!result) return tl::unexpected(result.error());
  if (result->exit_code != 0)
    return fail(ErrorCode::kExecutionUnavailable, "`true` did not exit 0 inside a gVisor sandbox");
  return {};
}

}  // namespace airlock::gvisor
