// What real programs expect of a sandbox (sandbox/sandbox_baseline.h), as
// commands and the output each must print, the same for every mechanism
// (linux/linux_baseline_test.cpp, oci/gvisor_baseline_test.cpp): a private
// pseudo-terminal that round-trips bytes, netbase's tables, the image's CA
// store, and an /etc holding the baseline's entries and nothing else.
//
// Host-side facts (the CA count, which image entries exist) come from the
// host's own /usr/bin/python3 and file system, never from a login PATH.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <set>
#include <string>

#include "airlock/port/execution_environment.h"
#include "airlock/sandbox/sandbox_baseline.h"
#include "airlock/sys/unique_fd.h"

namespace airlock::testing::baseline {

// `python3 -c code`, found on the image PATH.
inline ExecutionCommand python(std::string code, std::int64_t timeout_seconds = 60) {
  ExecutionCommand c;
  c.argv = {"python3", "-c", std::move(code)};
  c.timeout_seconds = timeout_seconds;
  c.maximum_output_bytes = 1 << 20;
  return c;
}

// A fresh devpts (only ptmx in it, none of the host's terminals), a pty pair with echo off that
// carries bytes both ways (the slave's ONLCR turns "\n" into "\r\n" towards the master), TIOCSTI
// refused on it, and a child started on a new pty (pty.fork) whose output reaches the parent
// through the master.
inline constexpr const char* kPtyScript = R"PY(
import fcntl, os, pty, termios
def read_line(fd):
    out = b""
    while not out.endswith(b"\n"):
        out += os.read(fd, 64)
    return out
print("pts before", sorted(os.listdir("/dev/pts")))
m, s = os.openpty()
print("slave", os.ttyname(s).startswith("/dev/pts/"), os.isatty(s), os.path.exists("/dev/ptmx"))
attrs = termios.tcgetattr(s)
attrs[3] &= ~termios.ECHO
termios.tcsetattr(s, termios.TCSANOW, attrs)
os.write(m, b"ping\n")
print("to slave", read_line(s))
os.write(s, b"pong\n")
print("to master", read_line(m))
try:
    fcntl.ioctl(s, termios.TIOCSTI, b"x")
    print("TIOCSTI allowed")
except OSError:
    print("TIOCSTI refused")
os.close(s)
os.close(m)
pid, fd = pty.fork()
if pid == 0:
    os.write(1, b"child on %s\n" % (b"a pty" if os.isatty(0) and os.isatty(1) else b"no pty"))
    os._exit(0)
print("child", read_line(fd), os.waitpid(pid, 0)[1])
)PY";

inline constexpr const char* kPtyExpected =
    "pts before ['ptmx']\n"
    "slave True True True\n"
    "to slave b'ping\\n'\n"
    "to master b'pong\\r\\n'\n"
    "TIOCSTI refused\n"
    "child b'child on a pty\\r\\n' 0\n";

// A child whose controlling terminal is its pty opens /dev/tty and writes
// there; the parent reads the master until EIO (the child's side closed).
inline constexpr const char* kControllingTerminalScript = R"PY(
import os, pty
pid, fd = pty.fork()
if pid == 0:
    t = os.open("/dev/tty", os.O_RDWR)
    os.write(t, b"child on its terminal\n")
    os._exit(0)
out = b""
while True:
    try:
        chunk = os.read(fd, 1024)
    except OSError:
        break
    if not chunk:
        break
    out += chunk
print("child", os.waitpid(pid, 0)[1], out)
)PY";
inline constexpr const char* kControllingTerminalExpected =
    "child 0 b'child on its terminal\\r\\n'\n";

// The mode and group of a pty's slave: 0620, group tty.
inline constexpr const char* kPtyOwnerScript = R"PY(
import grp, os
m, s = os.openpty()
st = os.stat(os.ttyname(s))
print(oct(st.st_mode & 0o777), grp.getgrgid(st.st_gid).gr_name, st.st_uid == os.getuid())
)PY";
inline constexpr const char* kPtyOwnerExpected = "0o620 tty True\n";

// netbase through nsswitch: /etc/services and /etc/protocols.
inline constexpr const char* kNetdbScript = R"PY(
import socket
print(socket.getservbyname("https"), socket.getservbyname("ssh", "tcp"), socket.getservbyport(53, "udp"),
      socket.getprotobyname("tcp"), socket.getprotobyname("udp"))
)PY";
inline constexpr const char* kNetdbExpected = "443 22 domain 6 17\n";

// Python's default TLS context: the certificates it loaded.
inline constexpr const char* kCaScript =
    "import ssl; print(ssl.create_default_context().cert_store_stats())";

// The same line from the host's Python with an empty environment (no
// SSL_CERT_FILE), or "" when it cannot run.
inline std::string hostCertStoreStats() {
  const std::string cmd = std::string("env -i /usr/bin/python3 -c '") + kCaScript + "' 2>/dev/null";
  std::string out;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[256];
    while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
    ::pclose(p);
  }
  return out;
}

// /etc, the user database, and files that must never be there.
inline constexpr const char* kEtcScript = R"PY(
import grp, os, pwd
print(sorted(os.listdir("/etc")))
print(sorted(os.listdir("/etc/ssl")) if os.path.isdir("/etc/ssl") else [])
for p in ("/etc/shadow", "/etc/gshadow", "/etc/ssl/private", "/etc/sudoers", "/etc/machine-id",
          "/etc/resolv.conf", "/etc/ssh"):
    if os.path.lexists(p):
        print("present", p)
print(pwd.getpwuid(os.getuid()).pw_name, grp.getgrgid(os.getgid()).gr_name, os.readlink("/etc/localtime"))
)PY";

// Python's repr of a sorted list of names.
inline std::string pythonList(const std::set<std::string>& names) {
  std::string out = "[";
  for (const auto& n : names) out += (out.size() > 1 ? ", '" : "'") + n + "'";
  return out + "]";
}

// The names directly in `dir` (e.g. "/etc") that the baseline puts there:
// every generated entry, and every image entry the host has.
inline std::set<std::string> expectedChildren(const std::string& dir) {
  std::set<std::string> out;
  auto add = [&](const std::string& path) {
    if (path.compare(0, dir.size() + 1, dir + "/") != 0) return;
    const std::string rest = path.substr(dir.size() + 1);
    out.insert(rest.substr(0, rest.find('/')));
  };
  for (const auto& e : generatedEtcEntries(1000, 1000)) add(e.path);
  for (const auto& e : defaultImageEtc()) {
    struct stat st {};
    if (::stat(e.c_str(), &st) == 0) add(e);
  }
  return out;
}

inline std::string etcExpected() {
  return pythonList(expectedChildren("/etc")) + "\n" + pythonList(expectedChildren("/etc/ssl")) +
         "\nsandbox sandbox /usr/share/zoneinfo/Etc/UTC\n";
}

// The checks themselves, for any mechanism: `run` executes one command in
// the mechanism's sandbox and returns its result.
using Runner = std::function<ExecutionResult(const ExecutionCommand&)>;

// A pseudo-terminal of the host's, held open while a check runs: with none
// on the host, a sandbox that saw the host's /dev/pts would list only ptmx
// there too, and "only the sandbox's own terminals" could not fail.
class HostPty {
 public:
  HostPty() : master_(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC)) {
    if (master_.valid() && ::grantpt(master_.get()) == 0 && ::unlockpt(master_.get()) == 0)
      if (const char* name = ::ptsname(master_.get())) name_ = name;
  }
  // The slave's path ("/dev/pts/3"); "" when the host could not open one.
  const std::string& name() const { return name_; }

 private:
  sys::UniqueFd master_;
  std::string name_;
};

// Runs `c`, which must exit 0 and print exactly `expected`.
inline void expectPrints(const Runner& run, const ExecutionCommand& c,
                         const std::string& expected) {
  auto r = run(c);
  EXPECT_EQ(r.exit_code, 0) << r.stderr_data;
  EXPECT_EQ(r.stdout_data, expected) << r.stderr_data;
}

// kPtyScript, with a terminal of the host's open meanwhile (it must not be
// among the sandbox's).
inline void expectAPrivatePty(const Runner& run) {
  const HostPty host;
  ASSERT_FALSE(host.name().empty()) << "the host cannot open a pty: " << std::strerror(errno);
  ASSERT_EQ(::access(host.name().c_str(), F_OK), 0) << host.name();
  expectPrints(run, python(kPtyScript), kPtyExpected);
}

// The default TLS context inside loads as many CA certificates as the
// host's own python3 does outside (the host image's store). Skipped, saying
// why, on a host whose image has no CA certificates (scripts/bootstrap
// installs ca-certificates).
inline void expectTheImagesCertificates(const Runner& run) {
  const std::string host = hostCertStoreStats();
  ASSERT_NE(host.find("'x509_ca': "), std::string::npos) << "host python: " << host;
  if (host.find("'x509_ca': 0}") != std::string::npos)
    GTEST_SKIP() << "the host image has no CA certificates to find in the sandbox "
                    "(install ca-certificates): host python says "
                 << host;
  expectPrints(run, python(kCaScript), host);
}

// /etc holds the baseline's entries and nothing of the host's secrets.
inline void expectTheBaselineEtc(const Runner& run) {
  ASSERT_EQ(::access("/etc/shadow", F_OK), 0) << "the host has no /etc/shadow to keep out";
  expectPrints(run, python(kEtcScript), etcExpected());
}

}  // namespace airlock::testing::baseline
