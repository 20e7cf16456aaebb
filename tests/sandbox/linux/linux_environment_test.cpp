// The linux mechanism on the real kernel: isolation properties the foundation
// issue names (non-root, loopback only, no route to the host, no credential),
// real programs (gcc, CPython's regression tests), and lifecycle (timeouts
// kill the whole tree, nothing survives a command or a destroy).
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <set>
#include <sstream>
#include <vector>

#include "../../support/sandbox_cgroups.h"
#include "airlock/core/ids.h"
#include "airlock/sys/sha256.h"
#include "airlock/sys/unique_fd.h"
#include "linux_test_support.h"

namespace airlock::testing {
namespace {

class LinuxEnvironmentTest : public SandboxTest {};

TEST_F(LinuxEnvironmentTest, ANamedNodesEnvironmentIdsCarryItsName) {
  EXPECT_EQ(environmentIdNode(handle_.environment_id), std::optional<std::string_view>(""))
      << handle_.environment_id;
  TempStateDir state;
  auto options = testOptions(state.path());
  options.node_name = "exec-3";
  auto env = linux_jail::createLinuxEnvironment(options);
  ASSERT_TRUE(env) << env.error().message();
  auto handle = (*env)->provision(linuxSpec(options));
  ASSERT_TRUE(handle) << handle.error().message();
  EXPECT_EQ(environmentIdNode(handle->environment_id), std::optional<std::string_view>("exec-3"))
      << handle->environment_id;
  ExecutionCommand command;
  command.argv = {"true"};
  command.timeout_seconds = 30;
  command.maximum_output_bytes = 1024;
  auto ran = (*env)->execute(*handle, command);
  ASSERT_TRUE(ran) << ran.error().message();
  EXPECT_EQ(ran->exit_code, 0) << "the sandbox of a named node works as any other";
  EXPECT_TRUE((*env)->destroy(*handle));
}

// The options' clock is the one created_at, expires_at and the expiry
// check read: moved past expires_at, the next command finds the sandbox
// expired (and destroyed) without anyone waiting for it.
TEST_F(LinuxEnvironmentTest, AnInjectedClockPastExpiresAtExpiresTheSandbox) {
  TempStateDir state;
  auto options = testOptions(state.path());
  auto now = std::make_shared<std::atomic<std::int64_t>>(1'700'000'000'000);
  options.clock = [now] { return Timestamp{std::chrono::milliseconds(now->load())}; };
  auto env = linux_jail::createLinuxEnvironment(options);
  ASSERT_TRUE(env) << env.error().message();
  auto handle = (*env)->provision(linuxSpec(options));
  ASSERT_TRUE(handle) << handle.error().message();
  EXPECT_EQ(handle->created_at, Timestamp{std::chrono::milliseconds(1'700'000'000'000)});
  EXPECT_EQ(handle->expires_at, handle->created_at + options.service_hard_cap);
  ExecutionCommand command;
  command.argv = {"true"};
  command.timeout_seconds = 30;
  command.maximum_output_bytes = 1024;
  auto ran = (*env)->execute(*handle, command);
  ASSERT_TRUE(ran) << ran.error().message();
  EXPECT_EQ(ran->exit_code, 0);
  now->store(now->load() + std::chrono::milliseconds(options.service_hard_cap).count());
  auto expired = (*env)->execute(*handle, command);
  ASSERT_FALSE(expired);
  EXPECT_EQ(expired.error().code, ErrorCode::kEnvironmentGone);
  EXPECT_NE(expired.error().context.find("has expired"), std::string::npos)
      << expired.error().context;
  auto again = (*env)->workspace(*handle);
  ASSERT_FALSE(again) << "the expired sandbox was destroyed";
  EXPECT_EQ(again.error().code, ErrorCode::kEnvironmentGone);
}

TEST_F(LinuxEnvironmentTest, CommandRunsAsNonRootUser) {
  auto r = run(shell("id -u; id -g"));
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.stdout_data, "1000\n1000\n");
}

TEST_F(LinuxEnvironmentTest, CommandHasNoCapabilitiesAndNoNewPrivs) {
  auto r = run(shell("grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status"));
  EXPECT_NE(r.stdout_data.find("CapEff:\t0000000000000000"), std::string::npos) << r.stdout_data;
  EXPECT_NE(r.stdout_data.find("CapBnd:\t0000000000000000"), std::string::npos);
  EXPECT_NE(r.stdout_data.find("NoNewPrivs:\t1"), std::string::npos);
  EXPECT_NE(r.stdout_data.find("Seccomp:\t2"), std::string::npos);
}

TEST_F(LinuxEnvironmentTest, OnlyLoopbackInterfaceExists) {
  auto r = run(shell("cat /proc/net/dev"));
  ASSERT_EQ(r.exit_code, 0);
  std::istringstream in(r.stdout_data);
  std::string line;
  std::set<std::string> ifaces;
  while (std::getline(in, line)) {
    auto colon = line.find(':');
    if (colon == std::string::npos || line.find('|') != std::string::npos) continue;
    auto name = line.substr(0, colon);
    name.erase(0, name.find_first_not_of(' '));
    ifaces.insert(name);
  }
  EXPECT_EQ(ifaces, std::set<std::string>{"lo"});
}

// A listener on this host's own non-loopback address: the sandbox must not
// reach it (its network namespace has only lo).
TEST_F(LinuxEnvironmentTest, CannotConnectToHostNonLoopbackAddress) {
  ifaddrs* list = nullptr;
  ASSERT_EQ(::getifaddrs(&list), 0);
  std::string address;
  for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    auto* in = reinterpret_cast<sockaddr_in*>(a->ifa_addr);
    if ((ntohl(in->sin_addr.s_addr) >> 24) == 127) continue;
    char buf[INET_ADDRSTRLEN];
    address = ::inet_ntop(AF_INET, &in->sin_addr, buf, sizeof buf);
    break;
  }
  ::freeifaddrs(list);
  if (address.empty()) GTEST_SKIP() << "this host has no non-loopback IPv4 address to listen on";

  sys::UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  ASSERT_EQ(::inet_pton(AF_INET, address.c_str(), &addr.sin_addr), 1);
  ASSERT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener.get(), 8), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);

  // The host side can reach its own listener (the probe is meaningful).
  {
    sys::UniqueFd probe(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    ASSERT_EQ(::connect(probe.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    sys::UniqueFd accepted(::accept(listener.get(), nullptr, nullptr));
    ASSERT_TRUE(accepted.valid());
  }

  auto r =
      run(shell("exec python3 -c 'import socket,sys\n"
                "try:\n"
                "  socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3)\n"
                "  print(\"connected\")\n"
                "except OSError as e:\n"
                "  print(\"refused\", e.errno)\n"
                "  sys.exit(1)' " +
                address + " " + std::to_string(port)));
  EXPECT_EQ(r.exit_code, 1) << r.stdout_data << r.stderr_data;
  EXPECT_EQ(r.stdout_data.find("connected"), std::string::npos);
  sys::UniqueFd none(::accept(listener.get(), nullptr, nullptr));
  EXPECT_FALSE(none.valid()) << "a connection from the sandbox reached the host listener";
}

TEST_F(LinuxEnvironmentTest, WallClockTimeoutKillsTheWholeTreeAndKeepsPartialOutput) {
  auto c = shell(
      "echo started; (setsid sh -c 'trap \"\" TERM HUP; while :; do sleep 1; done' &); sleep 60",
      2);
  auto r = run(c);
  EXPECT_EQ(r.killed_by, KillReason::kTimeout);
  EXPECT_TRUE(r.timed_out);
  EXPECT_FALSE(r.exit_code.has_value());
  EXPECT_EQ(r.stdout_data, "started\n");
  EXPECT_GE(r.duration_ms, 2000);
  EXPECT_LT(r.duration_ms, 10000);
  // Nothing from the killed command is left in the sandbox.
  auto ps = run(shell("for p in /proc/[0-9]*; do cat $p/comm; done"));
  EXPECT_EQ(ps.stdout_data.find("sleep"), std::string::npos) << ps.stdout_data;
}

TEST_F(LinuxEnvironmentTest, BackgroundProcessesDoNotOutliveTheirCommand) {
  auto first = run(shell("setsid sleep 300 >/dev/null 2>&1 & echo spawned"));
  EXPECT_EQ(first.exit_code, 0);
  EXPECT_EQ(first.stdout_data, "spawned\n");
  auto ps = run(shell("for p in /proc/[0-9]*; do cat $p/comm; done"));
  EXPECT_EQ(ps.stdout_data.find("sleep"), std::string::npos) << ps.stdout_data;
}

// The command ends when its main process has exited and stdout and stderr
// are at end-of-file: output a background job writes after the shell has
// exited is part of the result, not lost.
TEST_F(LinuxEnvironmentTest, OutputOfABackgroundJobAfterTheMainProcessExitedIsKept) {
  auto r = run(shell("echo early; (sleep 0.3; echo late) & exit 3"));
  EXPECT_EQ(r.exit_code, 3) << "the main process's exit status is the result";
  EXPECT_FALSE(r.killed_by.has_value());
  EXPECT_EQ(r.stdout_data, "early\nlate\n");
}

// A background process that keeps stdout open past the shell's exit is
// waited for until the output grace or (here, sooner) the timeout: the
// command ends with the shell's exit code, not TIMEOUT, names the streams
// held open, and nothing of it survives.
TEST_F(LinuxEnvironmentTest, BackgroundProcessHoldingStdoutEndsWithTheExitCode) {
  auto r = run(shell("echo started; sleep 300 & exit 5", 1));
  EXPECT_EQ(r.killed_by, std::nullopt);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 5);
  EXPECT_EQ(r.output_held_open, (std::vector<std::string>{"stdout", "stderr"}));
  EXPECT_EQ(r.stdout_data, "started\n");
  auto ps = run(shell("for p in /proc/[0-9]*; do cat $p/comm; done"));
  EXPECT_EQ(ps.stdout_data.find("sleep"), std::string::npos) << ps.stdout_data;
}

TEST_F(LinuxEnvironmentTest, StdinIsDeliveredThenClosed) {
  auto c = shell("wc -c");
  c.stdin_data = std::string(1 << 20, 'x');
  auto r = run(c);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.stdout_data, "1048576\n");
}

TEST_F(LinuxEnvironmentTest, NoStdinMeansImmediateEndOfFile) {
  auto c = shell("cat; echo eof");
  auto r = run(c);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.stdout_data, "eof\n");
}

TEST_F(LinuxEnvironmentTest, OutputPastTheCapIsTruncatedAndKilled) {
  auto c = shell("head -c 100000 /dev/zero; sleep 60");
  c.maximum_output_bytes = 4096;
  auto r = run(c);
  EXPECT_EQ(r.stdout_data.size(), 4096u);
  EXPECT_TRUE(r.stdout_truncated);
  // stdout alone crossed the cap: stderr wrote nothing, so lost nothing.
  EXPECT_EQ(r.stderr_data, "");
  EXPECT_FALSE(r.stderr_truncated);
  EXPECT_EQ(r.killed_by, KillReason::kOutputLimit);
  EXPECT_FALSE(r.exit_code.has_value());
}

TEST_F(LinuxEnvironmentTest, OutputExactlyAtTheCapIsNotTruncated) {
  auto c = shell("head -c 4096 /dev/zero");
  c.maximum_output_bytes = 4096;
  auto r = run(c);
  EXPECT_EQ(r.stdout_data.size(), 4096u);
  EXPECT_FALSE(r.stdout_truncated);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_FALSE(r.killed_by.has_value());
}

TEST_F(LinuxEnvironmentTest, CancelledTokenEndsTheCommandAsCancelled) {
  auto token = CancelToken::create();
  ASSERT_TRUE(token);
  token->cancel();
  auto r = env_->execute(handle_, shell("echo begun; sleep 60"), &*token);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->killed_by, KillReason::kCancelled);
  EXPECT_FALSE(r->timed_out);
  EXPECT_FALSE(r->exit_code.has_value());
}

TEST_F(LinuxEnvironmentTest, CompilesAndRunsACProgram) {
  auto ws = env_->workspace(handle_);
  ASSERT_TRUE(ws);
  ASSERT_TRUE((*ws)->write(
      "hello.c",
      "#include <stdio.h>\nint main(void){printf(\"hello from c %d\\n\", 6*7);return 0;}\n"));
  auto r = run(shell("gcc -O0 -o hello hello.c && ./hello"));
  EXPECT_EQ(r.exit_code, 0) << r.stderr_data;
  EXPECT_EQ(r.stdout_data, "hello from c 42\n");
  bool saw_binary = false;
  for (const auto& f : r.files_changed)
    saw_binary |= (f.path == "hello" && f.change == ChangeKind::kCreated);
  EXPECT_TRUE(saw_binary);
}

TEST_F(LinuxEnvironmentTest, CPythonRegressionTestsPass) {
  if (::access("/usr/lib/python3.11/test/test_json/__init__.py", F_OK) != 0)
    GTEST_SKIP() << "libpython3.11-testsuite is not installed (scripts/bootstrap installs it)";
  ExecutionCommand c;
  c.argv = {"python3", "-m", "test", "test_json", "test_re"};
  c.timeout_seconds = 600;
  c.maximum_output_bytes = 4 << 20;
  auto r = run(c);
  EXPECT_EQ(r.exit_code, 0) << r.stdout_data.substr(
                                   r.stdout_data.size() > 4000 ? r.stdout_data.size() - 4000 : 0)
                            << r.stderr_data;
  EXPECT_NE(r.stdout_data.find("SUCCESS"), std::string::npos);
}

TEST_F(LinuxEnvironmentTest, Argv0IsNeverResolvedInTheWorkspace) {
  auto ws = env_->workspace(handle_);
  ASSERT_TRUE(ws);
  ASSERT_TRUE((*ws)->write("python3", "#!/bin/sh\necho shadowed\n"));
  auto r = run(shell("chmod +x python3 && exec python3 -c 'print(1)'"));
  // sh -c itself finds python3 on PATH, which never contains the workspace.
  EXPECT_EQ(r.stdout_data, "1\n");
  ExecutionCommand direct;
  direct.argv = {"python3", "-c", "print(2)"};
  direct.timeout_seconds = 30;
  direct.maximum_output_bytes = 1024;
  EXPECT_EQ(run(direct).stdout_data, "2\n");
}

TEST_F(LinuxEnvironmentTest, UnknownProgramExits127) {
  ExecutionCommand c;
  c.argv = {"no-such-program-airlock"};
  c.timeout_seconds = 10;
  c.maximum_output_bytes = 1024;
  auto r = run(c);
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_NE(r.stderr_data.find("no-such-program-airlock"), std::string::npos);
}

TEST_F(LinuxEnvironmentTest, NamespaceCreationIsRefused) {
  auto r = run(shell("unshare -U true && echo escaped"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.stdout_data.find("escaped"), std::string::npos);
}

TEST_F(LinuxEnvironmentTest, SandboxSeesItsOwnPidNamespaceOnly) {
  auto r = run(shell("cat /proc/1/comm; ls /proc | grep -c '^[0-9]'"));
  EXPECT_EQ(r.stdout_data.substr(0, r.stdout_data.find('\n')), "airlock-init");
  // init, sh, ls and grep at most.
  EXPECT_LE(std::stoi(r.stdout_data.substr(r.stdout_data.find('\n') + 1)), 5);
}

TEST_F(LinuxEnvironmentTest, RootFilesystemAndImageAreReadOnly) {
  auto r =
      run(shell("touch /usr/airlock-probe 2>&1; touch /etc/airlock-probe 2>&1; touch "
                "/airlock-probe 2>&1; echo done"));
  EXPECT_EQ(r.stdout_data.find("done"), r.stdout_data.size() - 5);
  EXPECT_NE(::access("/usr/airlock-probe", F_OK), 0);
}

TEST_F(LinuxEnvironmentTest, MemoryLimitKillIsReportedAsMemory) {
  ASSERT_TRUE(env_->destroy(handle_));
  auto spec = linuxSpec(options_);
  spec.limits.memory_bytes = 64 << 20;
  auto h = env_->provision(spec);
  ASSERT_TRUE(h) << h.error().message();
  handle_ = *h;
  auto r = run(shell("echo before; python3 -c 'x = bytearray(512 << 20); print(len(x))'"));
  EXPECT_EQ(r.killed_by, KillReason::kMemory) << r.stderr_data;
  EXPECT_FALSE(r.exit_code.has_value());
  EXPECT_EQ(r.stdout_data, "before\n");
}

// Init is a clone of the service, so it carries the service's resident
// pages; a service's RSS is often larger than a sandbox's memory limit.
// Here the test process makes itself that big before provisioning: every
// OOM at the limit must still take the command, never init, and the
// sandbox must stay usable after twenty of them (where the service may not
// lower init's oom_score_adj, without CAP_SYS_RESOURCE, only the cgroup
// layout protects it).
TEST_F(LinuxEnvironmentTest, MemoryKillsNeverTakeInitWhateverItInherited) {
  static std::vector<char> ballast;
  ballast.assign(160u << 20, 1);  // resident in this process and so in init
  reprovision([](ResourceLimits& l) { l.memory_bytes = 32 << 20; });
  for (int i = 0; i < 20; ++i) {
    auto r = run(shell("python3 -c 'x = bytearray(256 << 20); print(len(x))'"));
    ASSERT_EQ(r.killed_by, KillReason::kMemory) << "kill " << i << ": " << r.stderr_data;
    ASSERT_TRUE(r.peak_memory_bytes.has_value());
    EXPECT_LE(*r.peak_memory_bytes, 32 << 20) << "kill " << i;
  }
  auto after = run(shell("grep VmRSS /proc/1/status >/dev/null && echo alive"));
  EXPECT_EQ(after.exit_code, 0) << after.stderr_data;
  EXPECT_EQ(after.stdout_data, "alive\n");
  ballast.clear();
  ballast.shrink_to_fit();
}

// Socket buffers are memory too: connections a command fills and never
// reads may not queue more than its memory limit (on cgroup v1 only once
// the TCP limit is set; v2 charges them to memory.max).
TEST_F(LinuxEnvironmentTest, QueuedTcpBuffersStayWithinTheMemoryLimit) {
  reprovision([](ResourceLimits& l) { l.memory_bytes = 64 << 20; });
  const char* hoard = R"PY(
import socket
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(1024)
total, conns = 0, []
for i in range(120):
    try:
        c = socket.create_connection(srv.getsockname(), timeout=2)
        s, _ = srv.accept()
    except OSError:
        break
    conns.append((c, s))
    c.setblocking(False)
    try:
        while True:
            total += c.send(b"x" * 65536)
    except OSError:
        pass
print(total >> 20)
)PY";
  auto r = run(ExecutionCommand{{"python3", "-c", hoard}, ".", 60, std::nullopt, 1 << 20});
  ASSERT_FALSE(r.stdout_data.empty()) << r.stderr_data;
  const long queued_mib = std::stol(r.stdout_data);
  EXPECT_LE(queued_mib, 2 * 64) << "MiB queued in TCP buffers under a 64 MiB limit";
  EXPECT_GT(queued_mib, 0);
}

TEST(LinuxEnvironmentLifecycle, DestroyRemovesCgroupAndLockAndIsIdempotent) {
  if (auto why = linuxJailUnavailable()) GTEST_SKIP() << *why;
  TempStateDir state;
  auto options = testOptions(state.path());
  auto env = linux_jail::createLinuxEnvironment(options);
  ASSERT_TRUE(env) << env.error().message();
  auto h = (*env)->provision(linuxSpec(options));
  ASSERT_TRUE(h) << h.error().message();
  const std::string lock = state.path() + "/sandboxes/" + h->environment_id + ".lock";
  EXPECT_EQ(::access(lock.c_str(), F_OK), 0);
  ASSERT_TRUE((*env)->destroy(*h));
  ASSERT_TRUE((*env)->destroy(*h));
  EXPECT_NE(::access(lock.c_str(), F_OK), 0);
  for (const auto& dir : sandboxCgroupCandidates())
    EXPECT_EQ(baseName(dir).find(h->environment_id), std::string::npos)
        << "cgroup left behind: " << dir;
  auto r = (*env)->execute(*h, shell("true"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kEnvironmentGone);
}

TEST(LinuxEnvironmentLifecycle, ForeignTenantHandleIsRefused) {
  if (auto why = linuxJailUnavailable()) GTEST_SKIP() << *why;
  TempStateDir state;
  auto options = testOptions(state.path());
  auto env = linux_jail::createLinuxEnvironment(options);
  ASSERT_TRUE(env);
  auto h = (*env)->provision(linuxSpec(options, "tenant-a"));
  ASSERT_TRUE(h);
  auto forged = *h;
  forged.tenant_id = "tenant-b";
  auto r = (*env)->execute(forged, shell("true"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kSandboxEscapeSuspected);
  EXPECT_TRUE((*env)->destroy(*h));
}

TEST(LinuxEnvironmentLifecycle, BadImageDigestAndLimitsAreRejectedBeforeAnythingIsCreated) {
  if (auto why = linuxJailUnavailable()) GTEST_SKIP() << *why;
  TempStateDir state;
  auto options = testOptions(state.path());
  auto env = linux_jail::createLinuxEnvironment(options);
  ASSERT_TRUE(env);
  auto spec = linuxSpec(options);
  spec.image_digest = "sha256:" + std::string(64, 'a');
  auto r = (*env)->provision(spec);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kExecutionRejected);
  spec = linuxSpec(options);
  spec.limits.pids_max = 1'000'000;
  r = (*env)->provision(spec);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kExecutionRejected);
  EXPECT_TRUE(std::filesystem::is_empty(state.path() + "/sandboxes"));
}

}  // namespace
}  // namespace airlock::testing

namespace airlock::testing {
namespace {

// Red-team case B32: an exabyte sparse file is listed without hashing its holes,
// and the command's result comes back promptly.
// The host pids of every process in the sandbox's cgroup (its init, when
// no command runs), found through /proc/<pid>/cgroup.
std::vector<pid_t> sandboxProcesses(const std::string& environment_id) {
  std::vector<pid_t> pids;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "cgroup");
    const std::string cgroups((std::istreambuf_iterator<char>(in)), {});
    if (cgroups.find(environment_id) != std::string::npos) pids.push_back(std::stoi(name));
  }
  return pids;
}

// Kills `pid` and waits (on its pidfd) until it has exited.
void killAndWait(pid_t pid) {
  sys::UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  if (!pidfd.valid()) return;  // already gone
  ASSERT_EQ(::syscall(SYS_pidfd_send_signal, pidfd.get(), SIGKILL, nullptr, 0), 0);
  pollfd p{pidfd.get(), POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 10000), 1) << "pid " << pid << " outlived SIGKILL";
}

// The sandbox's lifecycle (sandbox/host/sandbox_lifecycle.h): once its init
// is gone, the command that finds it reports the loss, and every later
// command, side process and capability channel is refused with the one
// error naming why, until it is destroyed.
TEST_F(LinuxEnvironmentTest, ASandboxWhoseInitDiedRefusesEveryCallNamingWhy) {
  const auto pids = sandboxProcesses(handle_.environment_id);
  ASSERT_FALSE(pids.empty()) << "no process of " << handle_.environment_id << " found";
  for (pid_t pid : pids) killAndWait(pid);
  ExecutionCommand c = shell("echo alive", 10);
  auto first = env_->execute(handle_, c);  // finds init gone
  if (first) {
    EXPECT_NE(first->stdout_data, "alive\n");
  }
  auto again = env_->execute(handle_, c);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, ErrorCode::kExecutionUnavailable);
  const std::string& why = again.error().context;
  EXPECT_EQ(why.rfind("the sandbox has died (", 0), 0u) << why;
  EXPECT_NE(why.find("its init"), std::string::npos) << why;
  EXPECT_NE(why.find("); destroy it and provision again"), std::string::npos) << why;
  SideCommand side;
  side.argv = {"true"};
  auto started = env_->startSideProcess(handle_, side);
  ASSERT_FALSE(started);
  EXPECT_EQ(started.error().context, why);
  auto channel = env_->openCapabilityChannel(handle_);
  ASSERT_FALSE(channel);
  EXPECT_EQ(channel.error().context, why);
  ASSERT_TRUE(env_->destroy(handle_));
  auto gone = env_->execute(handle_, c);
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().code, ErrorCode::kEnvironmentGone);
}

// The children of this process that are zombies (exited, not reaped).
int zombieChildren() {
  int count = 0;
  const std::string self = std::to_string(::getpid());
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 1));
    std::string state, ppid;
    rest >> state >> ppid;
    if (state == "Z" && ppid == self) ++count;
  }
  return count;
}

// A side process whose exit has been read leaves no zombie behind while its
// handle lives on (a job keeps its record until its environment goes).
TEST_F(LinuxEnvironmentTest, AnEndedSideProcessLeavesNoZombieWhileItsHandleLives) {
  const int before = zombieChildren();
  SideCommand side;
  side.argv = {"true"};
  auto started = env_->startSideProcess(handle_, side);
  ASSERT_TRUE(started) << started.error().message();
  SidePumpHooks hooks;
  hooks.output = [](bool, std::string_view) {};
  const SidePumpOutcome outcome = (*started)->pump(hooks);
  ASSERT_EQ(outcome.end, SidePumpEnd::kFinished);
  ASSERT_TRUE((*started)->exitStatus().has_value());
  EXPECT_EQ(zombieChildren(), before);
  started->reset();
  EXPECT_EQ(zombieChildren(), before);
}

TEST_F(LinuxEnvironmentTest, SparseFileIsListedWithoutReadingItsHoles) {
  auto r = run(shell("truncate -s 4E sparse.bin && echo hi > small.txt", 20));
  ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
  ASSERT_EQ(r.files_changed.size(), 2u);
  EXPECT_EQ(r.files_changed[0].path, "small.txt");
  EXPECT_TRUE(r.files_changed[0].sha256.has_value());
  EXPECT_EQ(r.files_changed[1].path, "sparse.bin");
  EXPECT_EQ(r.files_changed[1].size_bytes, std::int64_t{4} << 60);
  EXPECT_FALSE(r.files_changed[1].sha256.has_value());
}

// The pids limit bounds a command's tree; what a command leaves is killed
// when it ends, so the next command starts with the whole budget.
TEST_F(LinuxEnvironmentTest, PidsBudgetIsFreshForEachCommand) {
  ASSERT_TRUE(env_->destroy(handle_));
  auto spec = linuxSpec(options_);
  spec.limits.pids_max = 8;
  auto h = env_->provision(spec);
  ASSERT_TRUE(h) << h.error().message();
  handle_ = *h;
  auto r = run(shell(
      "i=0; while [ $i -lt 20 ]; do sleep 30 2>/dev/null & i=$((i+1)); done; echo spawned", 5));
  EXPECT_NE(r.stderr_data.find("fork"), std::string::npos) << r.stderr_data;
  auto after = run(shell("sleep 0 & sleep 0 & sleep 0 & wait; echo still usable"));
  EXPECT_EQ(after.exit_code, 0) << after.stderr_data;
  EXPECT_EQ(after.stdout_data, "still usable\n");
}

}  // namespace
}  // namespace airlock::testing

namespace airlock::testing {
namespace {

// Each limit is reported by the thing that enforced it.
class LinuxLimitsTest : public LinuxEnvironmentTest {};

TEST_F(LinuxLimitsTest, ForkBombIsKilledWithPids) {
  reprovision([](ResourceLimits& l) { l.pids_max = 32; });
  auto r = run(shell("echo bomb; f(){ f | f & }; f; sleep 20", 30));
  EXPECT_EQ(r.killed_by, KillReason::kPids) << r.stderr_data;
  EXPECT_FALSE(r.exit_code.has_value());
  EXPECT_EQ(r.stdout_data, "bomb\n");
  EXPECT_LT(r.duration_ms, 20000);
}

TEST_F(LinuxLimitsTest, DiskFillerIsKilledWithDisk) {
  reprovision([](ResourceLimits& l) { l.workspace_bytes = 8 << 20; });
  auto r = run(shell("echo filling; yes > f; sleep 20", 30));
  EXPECT_EQ(r.killed_by, KillReason::kDisk) << r.stderr_data;
  EXPECT_FALSE(r.exit_code.has_value());
  EXPECT_EQ(r.stdout_data, "filling\n");
  ASSERT_EQ(r.files_changed.size(), 1u);
  EXPECT_EQ(r.files_changed[0].size_bytes, 8 << 20);
}

TEST_F(LinuxLimitsTest, FileCountFillerIsKilledWithDisk) {
  reprovision([](ResourceLimits& l) { l.inodes_max = 200; });
  auto r = run(shell("i=0; while touch f$i 2>/dev/null; do i=$((i+1)); done; sleep 20", 30));
  EXPECT_EQ(r.killed_by, KillReason::kDisk) << r.stderr_data;
  EXPECT_FALSE(r.exit_code.has_value());
  EXPECT_EQ(r.files_changed.size(), 199u);  // the workspace root is one inode
}

TEST_F(LinuxLimitsTest, TmpFillerIsKilledWithDisk) {
  reprovision([](ResourceLimits& l) { l.workspace_bytes = 8 << 20; });
  auto r = run(shell("yes > /tmp/f; sleep 20", 30));
  EXPECT_EQ(r.killed_by, KillReason::kDisk) << r.stderr_data;
}

TEST_F(LinuxLimitsTest, AccountingIsPerExecution) {
  auto big = run(shell("exec python3 -c 'b = bytearray(200 << 20); print(len(b))'"));
  ASSERT_EQ(big.exit_code, 0) << big.stderr_data;
  ASSERT_TRUE(big.peak_memory_bytes.has_value());
  EXPECT_GE(*big.peak_memory_bytes, 200 << 20);
  ASSERT_TRUE(big.cpu_time_ms.has_value());
  auto spin =
      run(shell("exec python3 -c 'import time\nt=time.process_time()\nwhile time.process_time()-t "
                "< 0.3: pass'"));
  ASSERT_TRUE(spin.cpu_time_ms.has_value());
  EXPECT_GE(*spin.cpu_time_ms, 300);
  auto small = run(shell("true"));
  ASSERT_TRUE(small.peak_memory_bytes.has_value());
  EXPECT_LT(*small.peak_memory_bytes, 64 << 20) << "the previous command's peak carried over";
  ASSERT_TRUE(small.cpu_time_ms.has_value());
  EXPECT_LT(*small.cpu_time_ms, 300) << "the previous command's CPU time carried over";
}

}  // namespace
}  // namespace airlock::testing

// (Included here, beside the one test that needs them.)
#include <fstream>

#include "airlock/workspace/local_workspace.h"

namespace airlock::testing {
namespace {

// The workspace's provenance record. The handle's own write is
// TOOL_WRITTEN; what a command creates or modifies is SANDBOX_WRITTEN
// (learned from files_changed); copy-in and unseen paths are UNKNOWN.
TEST_F(LinuxEnvironmentTest, ProvenanceFollowsWhoWroteTheFile) {
  auto ws = env_->workspace(handle_);
  ASSERT_TRUE(ws) << ws.error().message();
  WorkspaceHandle& w = **ws;

  const auto seed = std::filesystem::temp_directory_path() /
                    ("airlock-provenance-seed-" + std::to_string(::getpid()));
  std::filesystem::remove_all(seed);
  std::filesystem::create_directories(seed / "in");
  { std::ofstream(seed / "in" / "seed.txt") << "seed"; }
  auto copied = workspace::copyInDirectory(seed.string(), w);
  std::filesystem::remove_all(seed);
  ASSERT_TRUE(copied) << copied.error().message();

  ASSERT_TRUE(w.write("a.txt", "tool\n"));
  ASSERT_TRUE(w.write("kept.txt", "tool\n"));
  EXPECT_EQ(*w.provenance("a.txt"), WorkspaceProvenance::kToolWritten);

  auto r = run(shell("echo x > b.txt; echo y >> a.txt"));
  ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
  EXPECT_EQ(*w.provenance("b.txt"), WorkspaceProvenance::kSandboxWritten);
  EXPECT_EQ(*w.provenance("a.txt"), WorkspaceProvenance::kSandboxWritten);
  EXPECT_EQ(*w.read("a.txt"), "tool\ny\n");
  EXPECT_EQ(*w.provenance("kept.txt"), WorkspaceProvenance::kToolWritten);
  EXPECT_EQ(*w.provenance("c.txt"), WorkspaceProvenance::kUnknown);
  EXPECT_EQ(*w.provenance("in/seed.txt"), WorkspaceProvenance::kUnknown);
  EXPECT_STREQ(workspaceProvenanceName(*w.provenance("b.txt")), "sandbox_written");

  // Deleted by a command: the record is dropped. A write through a
  // symlink the sandbox planted is not TOOL_WRITTEN under the link's name.
  auto del = run(shell("rm kept.txt; mkdir real; ln -s real link"));
  ASSERT_EQ(del.exit_code, 0) << del.stderr_data;
  EXPECT_EQ(*w.provenance("kept.txt"), WorkspaceProvenance::kUnknown);
  ASSERT_TRUE(w.write("link/t.txt", "tool\n"));
  EXPECT_EQ(*w.provenance("link/t.txt"), WorkspaceProvenance::kUnknown);

  auto escape = w.provenance("../etc/passwd");
  ASSERT_FALSE(escape);
  EXPECT_EQ(escape.error().code, ErrorCode::kWorkspaceEscape);

  ASSERT_TRUE(env_->destroy(handle_));
  auto gone = w.provenance("a.txt");
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().code, ErrorCode::kExecutionRejected);
  auto h = env_->provision(linuxSpec(options_));
  ASSERT_TRUE(h) << h.error().message();
  handle_ = *h;
}

}  // namespace
}  // namespace airlock::testing

namespace airlock::testing {
namespace {

// Sandboxes are cloned from a multi-threaded service. Sixteen threads that
// provision, execute and destroy at once (while allocating, so glibc's
// locks are often held at the moment of a clone) must all finish: a
// sandbox's init may not depend on a lock another thread held when it was
// cloned. Each execute carries a watchdog (SandboxTest::run's idea): a hang
// destroys the sandbox and fails the test instead of hanging it.
TEST(LinuxEnvironmentConcurrency, ConcurrentProvisionAndExecuteNeverHang) {
  if (auto why = linuxJailUnavailable()) GTEST_SKIP() << *why;
  TempStateDir state;
  auto options = testOptions(state.path());
  auto env = linux_jail::createLinuxEnvironment(options);
  ASSERT_TRUE(env) << env.error().message();
  constexpr int kThreads = 16, kRounds = 6;
  std::atomic<int> ok{0}, hung{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int round = 0; round < kRounds; ++round) {
        auto h = (*env)->provision(linuxSpec(options));
        if (!h) {
          ADD_FAILURE() << "provision: " << h.error().message();
          ++failed;
          continue;
        }
        std::vector<std::string> churn;  // keep malloc busy across clones
        for (int i = 0; i < 200; ++i) churn.emplace_back(std::string(100 + i, 'x'));
        auto r = (*env)->execute(*h, shell("echo ran", 20));
        if (r && r->stdout_data == "ran\n") {
          ++ok;
        } else if (r && r->killed_by == KillReason::kTimeout) {
          ++hung;
        } else {
          ADD_FAILURE() << "execute: " << (r ? r->stderr_data : r.error().message());
          ++failed;
        }
        (void)(*env)->destroy(*h);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(hung.load(), 0) << "commands never started (init hung)";
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(ok.load(), kThreads * kRounds);
}

}  // namespace
}  // namespace airlock::testing

namespace airlock::testing {
namespace {

// The workspace view forwards openExport (artifact export streams through
// it) while the sandbox lives, and refuses once it is destroyed; a stream
// opened before the destroy still reads its bytes, and they match the
// digest measured at open.
TEST_F(LinuxEnvironmentTest, WorkspaceExportOpensWhileTheSandboxLivesOnly) {
  auto ws = env_->workspace(handle_);
  ASSERT_TRUE(ws) << ws.error().message();
  ASSERT_TRUE((*ws)->write("out/report.txt", "report bytes"));
  auto opened = (*ws)->openExport("out/report.txt", 1 << 20);
  ASSERT_TRUE(opened) << opened.error().message();
  EXPECT_EQ(opened->size_bytes, 12);
  EXPECT_EQ(opened->filename, "report.txt");
  EXPECT_EQ(opened->sha256, sys::sha256Hex("report bytes"));
  auto too_large = (*ws)->openExport("out/report.txt", 4);
  ASSERT_FALSE(too_large);
  EXPECT_EQ(too_large.error().code, ErrorCode::kExecutionRejected);
  ASSERT_TRUE(env_->destroy(handle_));
  std::string read;
  char buf[5];
  for (;;) {
    auto n = opened->reader->read(buf, sizeof buf);
    ASSERT_TRUE(n) << n.error().message();
    if (*n == 0) break;
    read.append(buf, *n);
  }
  EXPECT_EQ(read, "report bytes");
  auto after = (*ws)->openExport("out/report.txt", 1 << 20);
  ASSERT_FALSE(after);
  EXPECT_EQ(after.error().code, ErrorCode::kExecutionRejected);
}

}  // namespace
}  // namespace airlock::testing
