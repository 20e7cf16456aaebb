// Red-team regression: what a command can learn about the service through
// /proc, its environment and its file descriptors (red-team cases B12 leaked fds and
// working directory, B22 /proc leaks, B23 inherited environment, B24 secrets
// in PID 1's environment, B13 the host binary through /proc/1/exe).
//
// The service process (this test) plants canaries in its own environment
// before the sandbox's init is cloned from it; none may reach the command.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <initializer_list>
#include <sstream>
#include <string>

#include "../sandbox/linux/linux_test_support.h"

namespace airlock::testing {
namespace {

constexpr const char* kCanary = "rt-canary-7f3a91";

// Prints "<entry> <errno>" for /proc/1/<entry> (0 when it opened).
ExecutionCommand python3Probe() {
  ExecutionCommand c;
  c.argv = {"python3", "-c",
            "import os\n"
            "for e in ('environ', 'mem', 'exe', 'root', 'cwd', 'fd', 'maps', 'auxv'):\n"
            "    try:\n"
            "        os.close(os.open('/proc/1/' + e, os.O_RDONLY)); print(e, 0)\n"
            "    except OSError as x:\n"
            "        print(e, x.errno)\n"};
  c.timeout_seconds = 30;
  c.maximum_output_bytes = 1 << 16;
  return c;
}

class RedteamProcEnvTest : public SandboxTest {
 protected:
  static constexpr const char* kNames[] = {"AWS_SECRET_ACCESS_KEY",
                                           "SANDBOX_API_TOKEN",
                                           "AIRLOCK_SERVICE_TOKEN",
                                           "KUBECONFIG",
                                           "DOCKER_HOST",
                                           "SSH_AUTH_SOCK",
                                           "HTTP_PROXY"};
  void SetUp() override {
    // Credentials a service might hold, set before init is cloned from us.
    for (const char* name : kNames)
      ASSERT_EQ(::setenv(name, (std::string(kCanary) + "-" + name).c_str(), 1), 0);
    SandboxTest::SetUp();
  }
  void TearDown() override {
    SandboxTest::TearDown();
    for (const char* name : kNames) ::unsetenv(name);
  }
};

// B23, B24: no canary in the command's environment, nor in any environ or
// cmdline under /proc (every process, every thread), nor through python.
TEST_F(RedteamProcEnvTest, B23_NoServiceEnvironmentReachesTheCommand) {
  auto r = run(
      shell("env; cat /proc/self/environ; "
            "for f in /proc/[0-9]*/environ /proc/[0-9]*/task/*/environ /proc/[0-9]*/cmdline; do "
            "  cat \"$f\" 2>/dev/null; done | tr '\\0' '\\n'; "
            "python3 -c 'import os; print(dict(os.environ))'"));
  EXPECT_EQ(r.exit_code, 0) << r.stderr_data;
  EXPECT_NE(r.stdout_data.find("PATH="), std::string::npos) << "the probe did not run";
  EXPECT_EQ(r.stdout_data.find(kCanary), std::string::npos) << r.stdout_data;
  for (const char* name : {"AWS_SECRET_ACCESS_KEY", "SANDBOX_API_TOKEN", "KUBECONFIG",
                           "DOCKER_HOST", "SSH_AUTH_SOCK", "HTTP_PROXY"})
    EXPECT_EQ(r.stdout_data.find(std::string(name) + "="), std::string::npos) << name;
}

// The sandbox's init is a clone of the service: each /proc/1 entry named
// must refuse the command with EACCES.
class RedteamInitOpaque : public RedteamProcEnvTest {
 protected:
  void expectRefused(std::initializer_list<const char*> entries) {
    auto r = run(python3Probe());
    EXPECT_EQ(r.exit_code, 0) << r.stderr_data;
    for (const char* entry : entries) {
      EXPECT_NE(r.stdout_data.find(std::string(entry) + " 13\n"), std::string::npos)
          << "/proc/1/" << entry << " is not EACCES:\n"
          << r.stdout_data;
    }
  }
};

// B13: the host binary cannot be reached, read or rewritten through
// /proc/<pid>/exe, nor through init's root, cwd or fds.
TEST_F(RedteamInitOpaque, B13_HostBinaryIsUnreachableThroughProcExe) {
  expectRefused({"exe", "root", "cwd", "fd"});
  auto w =
      run(shell("for p in /proc/[0-9]*; do if (true > $p/exe) 2>/dev/null; then echo wrote $p; fi; "
                "done; echo done"));
  EXPECT_EQ(w.stdout_data, "done\n");
}

// B14: init's memory and layout cannot be read (ptrace itself: seccomp B14).
TEST_F(RedteamInitOpaque, B14_InitMemoryCannotBeReadOrMapped) {
  expectRefused({"mem", "maps", "auxv"});
}

// B24: init's environment is unreadable (and holds nothing: B23).
TEST_F(RedteamInitOpaque, B24_InitEnvironmentIsUnreadable) {
  expectRefused({"environ"});
}

// B12: the command holds exactly fds 0-2 (no host directory, no control
// socket, no workspace fd), and no fd or cwd reaches a host path. The command
// is python3 itself (no shell, whose pipelines hold fds of their own).
TEST_F(RedteamProcEnvTest, B12_CommandHoldsOnlyStdioAndNoHostDirectory) {
  ExecutionCommand c;
  c.argv = {"python3", "-c",
            "import os\n"
            "me = '/proc/%d/fd' % os.getpid()\n"
            "fds = []\n"
            "for name in sorted(os.listdir('/proc/self/fd'), key=int):\n"
            "    try:\n"
            "        target = os.readlink('/proc/self/fd/' + name)\n"
            "    except OSError:\n"
            "        continue  # the listing's own fd, already closed\n"
            "    if target != me:\n"
            "        fds.append(name + '=' + target.split(':')[0])\n"
            "print(' '.join(fds))\n"
            "print(os.readlink('/proc/self/cwd'))\n"
            "print(os.readlink('/proc/self/root'))\n"
            "print(' '.join(sorted(os.listdir('/proc/self/root/..'))))\n"};
  c.timeout_seconds = 30;
  c.maximum_output_bytes = 1 << 16;
  auto r = run(c);
  std::istringstream in(r.stdout_data);
  std::string fds, cwd, root, parent;
  std::getline(in, fds);
  std::getline(in, cwd);
  std::getline(in, root);
  std::getline(in, parent);
  EXPECT_EQ(fds, "0=/dev/null 1=pipe 2=pipe") << r.stdout_data << r.stderr_data;
  EXPECT_EQ(cwd, "/workspace");
  EXPECT_EQ(root, "/");
  // The sandbox root's parent is itself: the listing is the jail's root
  // (run/ holds only the read-only capability directory, docs/capabilities.md).
  EXPECT_EQ(parent, "bin dev etc lib lib32 lib64 proc run sbin tmp usr workspace") << parent;
}

// B12: working directories that name a host handle are rejected before
// anything runs.
TEST_F(RedteamProcEnvTest, B12_WorkingDirectoryCannotNameAHostHandle) {
  for (const char* wd :
       {"/proc/self/fd/3", "/proc/1/cwd", "/proc/self/root/..", "../..", "a/../..", "/"}) {
    auto c = shell("pwd");
    c.working_directory = wd;
    auto r = env_->execute(handle_, c);
    ASSERT_FALSE(r) << wd << " was accepted; the command ran in " << r->stdout_data;
    EXPECT_TRUE(r.error().code == ErrorCode::kToolValidationError ||
                r.error().code == ErrorCode::kWorkspaceEscape)
        << wd << ": " << r.error().message();
  }
}

// B22: the command sees its own pid namespace, cgroup namespace and hostname.
TEST_F(RedteamProcEnvTest, B22_ProcShowsOnlyTheSandbox) {
  auto r =
      run(shell("cat /proc/self/cgroup | cut -d: -f3 | sort -u | tr '\\n' ' '; echo; "
                "cat /proc/sys/kernel/hostname; "
                "for p in /proc/[0-9]*; do cat $p/comm; done | sort | tr '\\n' ' '"));
  std::istringstream in(r.stdout_data);
  std::string cgroups, hostname, comms;
  std::getline(in, cgroups);
  std::getline(in, hostname);
  std::getline(in, comms);
  // Paths are relative to the sandbox's cgroup namespace: its root, or the
  // commands' child below it (the memory limit's own cgroup); nothing of
  // the host's hierarchy.
  std::istringstream paths(cgroups);
  std::string path;
  int seen = 0;
  while (paths >> path) {
    ++seen;
    EXPECT_TRUE(path == "/" || path == "/commands")
        << "the cgroup path of the sandbox is visible: " << cgroups;
  }
  EXPECT_GE(seen, 1) << cgroups;
  EXPECT_EQ(hostname, "sandbox");
  // init, sh, and the short-lived cat/sort/tr of this pipeline only.
  EXPECT_NE(comms.find("airlock-init"), std::string::npos) << comms;
  for (const char* foreign : {"systemd", "sshd", "redteam_tests", "bash", "kthreadd"})
    EXPECT_EQ(comms.find(foreign), std::string::npos) << foreign << " visible: " << comms;
}

}  // namespace
}  // namespace airlock::testing
