// The seccomp filter applied to every command in a linux sandbox
// (red-team cases B14, B16, B17, B19, B20, B21). Built once in the
// service with libseccomp and exported as a BPF program; init installs it in
// each command after no_new_privs, so the sandbox can never change it.
//
// Default action: allow. Denied with EPERM: the mount family and new mount
// API, pivot_root, chroot, unshare, setns, namespace-creating clone flags,
// keyctl/add_key/request_key, bpf, perf_event_open, userfaultfd, io_uring_*,
// ptrace, process_vm_readv/writev, kcmp, kexec_*, module loading, swapon/off,
// reboot, acct, quotactl, open_by_handle_at, ioctl TIOCSTI and TIOCLINUX
// (refused on the sandbox's own pseudo-terminals too; everything else a pty
// needs, TIOCGPTN, TIOCSPTLCK, TIOCGPTPEER, TIOCSCTTY and termios, is allowed).
// socket/socketpair outside AF_UNIX, AF_INET, AF_INET6 and AF_NETLINK get
// EAFNOSUPPORT (AF_VSOCK is not confined by the network namespace).
// clone3 returns ENOSYS (libc falls back to clone, whose flags can be
// checked). Other architectures' syscall tables are killed.
#pragma once

#include <linux/filter.h>

#include <vector>

#include "airlock/core/error.h"

namespace airlock::linux_jail {

struct SeccompProgram {
  std::vector<sock_filter> instructions;
  sock_fprog program() const {
    return sock_fprog{static_cast<unsigned short>(instructions.size()),
                      const_cast<sock_filter*>(instructions.data())};
  }
};

Result<SeccompProgram> buildSeccompProgram();

}  // namespace airlock::linux_jail
