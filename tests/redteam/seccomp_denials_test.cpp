// Red-team regression: the seccomp filter and the jail refuse the kernel
// primitives the red-team cases name, on every command in a sandbox, not only the
// first (red-team cases B14 ptrace / process_vm_*, B16 policy tampered before a later
// exec, B17 TIOCSTI/TIOCLINUX, B19 io_uring, B20 userfaultfd, B21 keyrings).
//
// The probe is a Python program run with the image's python3; it calls each
// syscall through libc's syscall(2) and prints "name rc errno". The filter
// answers EPERM (ENOSYS for clone3), so each line must show rc -1 and that
// errno; anything else means the primitive reached the kernel.
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <initializer_list>
#include <map>
#include <sstream>
#include <string>

#include "../sandbox/linux/linux_test_support.h"

namespace airlock::testing {
namespace {

constexpr const char* kProbe = R"PY(
import ctypes, os, errno
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(name, nr, *args):
    ctypes.set_errno(0)
    rc = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    print(name, rc, ctypes.get_errno(), flush=True)
params = ctypes.create_string_buffer(120)
call("io_uring_setup", 425, 8, params)
call("io_uring_enter", 426, 0, 0, 0, 0, 0, 0)
call("io_uring_register", 427, 0, 0, 0, 0)
call("userfaultfd", 323, 0)
call("userfaultfd_user_mode_only", 323, 1)
call("keyctl_get_session", 250, 0, -3, 0)
call("keyctl_join_new_session", 250, 1, 0)
call("add_key", 248, b"user", b"rt", b"x", 1, -3)
call("request_key", 249, b"user", b"rt", 0, 0)
call("ptrace_traceme", 101, 0, 0, 0, 0)
call("ptrace_attach_init", 101, 16, 1, 0, 0)
call("ptrace_seize_init", 101, 0x4206, 1, 0, 0)
buf = ctypes.create_string_buffer(8)
iov_local = (ctypes.c_void_p * 2)(ctypes.cast(buf, ctypes.c_void_p), 8)
iov_remote = (ctypes.c_void_p * 2)(0x400000, 8)
call("process_vm_readv", 310, 1, iov_local, 1, iov_remote, 1, 0)
call("process_vm_writev", 311, 1, iov_local, 1, iov_remote, 1, 0)
call("unshare_user", 272, 0x10000000)
call("unshare_mount", 272, 0x00020000)
call("setns", 308, 0, 0)
call("clone_newuser", 56, 0x10000000 | 17, 0, 0, 0, 0)
c = b"#"
call("tiocsti_fd0", 16, 0, 0x5412, c)
call("tiocsti_fd1_highbits", 16, 1, 0x100005412, c)
sub = ctypes.create_string_buffer(b"\x03")
call("tioclinux_fd0", 16, 0, 0x541C, sub)
call("bpf", 321, 0, 0, 0)
call("perf_event_open", 298, 0, 0, -1, -1, 0)
call("mount", 165, b"none", b"/tmp", b"tmpfs", 0, 0)
call("open_tree", 428, -100, b"/", 1)
call("fsopen", 430, b"tmpfs", 0)
call("kcmp", 312, 1, 1, 0, 0, 0)
ca = ctypes.create_string_buffer(88)
ctypes.memmove(ca, (0x10000000).to_bytes(8, "little"), 8)
call("clone3_newuser", 435, ca, 88)
for path in ("/dev/userfaultfd", "/dev/tty", "/dev/console", "/proc/1/mem", "/proc/1/environ", "/proc/1/exe"):
    try:
        os.close(os.open(path, os.O_RDONLY)); print("open:" + path, 0, 0)
    except OSError as e:
        print("open:" + path, -1, e.errno)
)PY";

std::map<std::string, std::pair<long, int>> parse(const std::string& out) {
  std::map<std::string, std::pair<long, int>> m;
  std::istringstream in(out);
  std::string name;
  long rc;
  int err;
  while (in >> name >> rc >> err) m[name] = {rc, err};
  return m;
}

class RedteamSeccompTest : public SandboxTest {
 protected:
  // Every probe line whose name starts with one of `prefixes` shows a refusal
  // (at least one line per prefix); with no prefixes, every line.
  void expectRefused(const ExecutionResult& r, const char* which,
                     std::initializer_list<const char*> prefixes = {}) {
    ASSERT_EQ(r.exit_code, 0) << which << ": " << r.stderr_data;
    auto m = parse(r.stdout_data);
    ASSERT_GE(m.size(), 30u) << which << ": probe did not run to the end:\n" << r.stdout_data;
    for (const char* prefix : prefixes) {
      EXPECT_TRUE(std::any_of(m.begin(), m.end(),
                              [&](const auto& e) { return e.first.rfind(prefix, 0) == 0; }))
          << which << ": the probe has no line for " << prefix;
    }
    for (const auto& [name, v] : m) {
      if (prefixes.size() != 0 &&
          std::none_of(prefixes.begin(), prefixes.end(),
                       [&](const char* p) { return name.rfind(p, 0) == 0; }))
        continue;
      EXPECT_EQ(v.first, -1) << which << ": " << name << " succeeded inside the sandbox";
      if (name == "clone3_newuser") {
        EXPECT_EQ(v.second, ENOSYS) << which << ": " << name;
      } else if (name == "open:/dev/tty") {
        // Present (programs on the sandbox's own ptys use it), but a command
        // has no controlling terminal: nothing of the host's to reach.
        EXPECT_EQ(v.second, ENXIO) << which << ": " << name << " reached a terminal";
      } else if (name.rfind("open:/dev/", 0) == 0) {
        EXPECT_EQ(v.second, ENOENT) << which << ": " << name << " exists in the sandbox's /dev";
      } else if (name.rfind("open:/proc/1/", 0) == 0) {
        EXPECT_EQ(v.second, EACCES) << which << ": " << name;
      } else {
        EXPECT_EQ(v.second, EPERM) << which << ": " << name << " was not refused by the filter";
      }
    }
  }
};

ExecutionCommand probe() {
  ExecutionCommand c;
  c.argv = {"python3", "-c", kProbe};
  c.timeout_seconds = 60;
  c.maximum_output_bytes = 1 << 20;
  return c;
}

// B14: ptrace in every form and process_vm_* are refused, and init's memory
// cannot be opened: nothing can attach to a process joining the sandbox.
TEST_F(RedteamSeccompTest, B14_PtraceAndCrossProcessMemoryAreRefused) {
  expectRefused(run(probe()), "B14", {"ptrace_", "process_vm_", "kcmp", "open:/proc/1/mem"});
}

// B17: TIOCSTI and TIOCLINUX are refused on every fd, including a request
// number with high bits set (the ioctl argument is checked as 32 bits).
TEST_F(RedteamSeccompTest, B17_TerminalInjectionIoctlsAreRefused) {
  expectRefused(run(probe()), "B17",
                {"tiocsti_", "tioclinux_", "open:/dev/tty", "open:/dev/console"});
}

// B19: io_uring cannot be set up, entered or registered.
TEST_F(RedteamSeccompTest, B19_IoUringIsRefused) {
  expectRefused(run(probe()), "B19", {"io_uring_"});
}

// B20: userfaultfd is refused in both modes and /dev/userfaultfd is absent.
TEST_F(RedteamSeccompTest, B20_UserfaultfdIsUnavailable) {
  expectRefused(run(probe()), "B20", {"userfaultfd", "open:/dev/userfaultfd"});
}

// Namespaces, mounts, bpf and perf (red-team cases B15 and B16 rely
// on them): unshare, setns, clone and clone3 with namespace flags, mount,
// the new mount API, bpf and perf_event_open are all refused.
TEST_F(RedteamSeccompTest, NamespaceMountBpfAndPerfAreRefused) {
  expectRefused(run(probe()), "jail primitives",
                {"unshare_", "setns", "clone_newuser", "clone3_newuser", "mount", "open_tree",
                 "fsopen", "bpf", "perf_event_open"});
}

// Every primitive of the probe at once, as a catch-all for lines added later.
TEST_F(RedteamSeccompTest, EveryProbedPrimitiveIsRefused) {
  expectRefused(run(probe()), "first exec");
}

// B16: a command that tries to tamper with whatever policy it can find does
// not weaken the filter of the next command in the same sandbox.
TEST_F(RedteamSeccompTest, B16_FilterStillAppliesToALaterCommandAfterTampering) {
  // Everything the sandbox can see except the read-only image and /proc:
  // try to empty any file that looks like policy, a filter or a helper.
  auto tamper = run(
      shell("find / -xdev \\( -path /proc -o -path /usr \\) -prune -o -type f -print 2>/dev/null | "
            "while read -r f; do : > \"$f\" 2>/dev/null; done; "
            "for d in /etc /dev /dev/shm /tmp /workspace; do "
            "  find \"$d\" -xdev -type f 2>/dev/null | while read -r f; do : > \"$f\" 2>/dev/null; "
            "done; done; "
            "echo tampered"));
  EXPECT_EQ(tamper.stdout_data, "tampered\n") << tamper.stderr_data;
  expectRefused(run(probe()), "second exec");
  expectRefused(run(probe()), "third exec");
}

// B21: the keyring syscalls are refused, and a canary key in the service's own session keyring is
// neither listed in the sandbox's /proc/keys nor changed by the sandbox.
TEST_F(RedteamSeccompTest, B21_ServiceKeyringCanaryIsInvisibleAndUnchanged) {
  expectRefused(run(probe()), "B21", {"keyctl_", "add_key", "request_key"});
  // A fresh session keyring for this test process only, then the canary.
  ASSERT_GE(::syscall(SYS_keyctl, 1 /*JOIN_SESSION_KEYRING*/, "airlock-redteam"), 0);
  const long key = ::syscall(SYS_add_key, "user", "airlock-redteam-canary", "canary-payload", 14,
                             -3 /*KEY_SPEC_SESSION_KEYRING*/);
  ASSERT_GT(key, 0);
  // A sandbox provisioned after the key exists (init is cloned from us).
  auto h = env_->provision(linuxSpec(options_));
  ASSERT_TRUE(h) << h.error().message();
  auto r = env_->execute(*h, shell("cat /proc/keys /proc/key-users 2>/dev/null; echo end"));
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->stdout_data.find("airlock-redteam-canary"), std::string::npos) << r->stdout_data;
  EXPECT_TRUE(env_->destroy(*h));
  char payload[32] = {};
  EXPECT_EQ(::syscall(SYS_keyctl, 11 /*KEYCTL_READ*/, key, payload, sizeof payload), 14);
  EXPECT_STREQ(payload, "canary-payload");
  ::syscall(SYS_keyctl, 3 /*KEYCTL_REVOKE*/, key);
}

}  // namespace
}  // namespace airlock::testing
