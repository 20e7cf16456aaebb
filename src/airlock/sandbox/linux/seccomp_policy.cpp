#include "airlock/sandbox/linux/seccomp_policy.h"

#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <memory>

#include "airlock/sys/io.h"
#include "airlock/sys/unique_fd.h"

namespace airlock::linux_jail {
namespace {

struct CtxDeleter {
  void operator()(scmp_filter_ctx ctx) const { seccomp_release(ctx); }
};
using Ctx = std::unique_ptr<void, CtxDeleter>;

constexpr const char* kDenied[] = {
    "mount",
    "umount",
    "umount2",
    "pivot_root",
    "chroot",
    "unshare",
    "setns",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "move_mount",
    "open_tree",
    "mount_setattr",
    "keyctl",
    "add_key",
    "request_key",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "swapon",
    "swapoff",
    "reboot",
    "acct",
    "quotactl",
    "quotactl_fd",
    "open_by_handle_at",
    "name_to_handle_at",
    "lookup_dcookie",
    "syslog",
    "personality",
    "uselib",
    "vhangup",
    "nfsservctl",
    "fanotify_init",
    "landlock_create_ruleset",
    "pidfd_getfd",
};

}  // namespace

Result<SeccompProgram> buildSeccompProgram() {
  Ctx ctx(seccomp_init(SCMP_ACT_ALLOW));
  if (!ctx) return fail(ErrorCode::kExecutionUnavailable, "seccomp_init failed");
  const auto deny = SCMP_ACT_ERRNO(EPERM);
  for (const char* name : kDenied) {
    int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) continue;  // not on this architecture
    if (int rc = seccomp_rule_add(ctx.get(), deny, nr, 0); rc < 0)
      return failErrno(ErrorCode::kExecutionUnavailable, std::string("seccomp rule ") + name, -rc);
  }
  // clone: refuse namespace-creating flags. clone3 passes flags in memory,
  // which seccomp cannot read, so it reports ENOSYS and libc uses clone.
  for (scmp_datum_t flag : {CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWIPC,
                            CLONE_NEWUTS, CLONE_NEWCGROUP, CLONE_NEWTIME}) {
    if (int rc = seccomp_rule_add(ctx.get(), deny, SCMP_SYS(clone), 1,
                                  SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag));
        rc < 0)
      return failErrno(ErrorCode::kExecutionUnavailable, "seccomp clone rule", -rc);
  }
  // Socket families: only AF_UNIX, AF_INET, AF_INET6 and AF_NETLINK, which
  // the network namespace confines. Others (AF_VSOCK reaches the
  // hypervisor, AF_PACKET, AF_BLUETOOTH, ...) are not namespaced or not
  // needed. Values with high bits set are above AF_NETLINK and refused too.
  const auto no_family = SCMP_ACT_ERRNO(EAFNOSUPPORT);
  for (int nr : {SCMP_SYS(socket), SCMP_SYS(socketpair)}) {
    if (int rc = seccomp_rule_add(ctx.get(), no_family, nr, 1, SCMP_A0(SCMP_CMP_GT, AF_NETLINK));
        rc < 0)
      return failErrno(ErrorCode::kExecutionUnavailable, "seccomp socket rule", -rc);
    for (scmp_datum_t family = 0; family < AF_NETLINK; ++family) {
      if (family == AF_UNIX || family == AF_INET || family == AF_INET6) continue;
      if (int rc = seccomp_rule_add(ctx.get(), no_family, nr, 1, SCMP_A0(SCMP_CMP_EQ, family));
          rc < 0)
        return failErrno(ErrorCode::kExecutionUnavailable, "seccomp socket rule", -rc);
    }
  }
  int clone3 = seccomp_syscall_resolve_name("clone3");
  if (clone3 != __NR_SCMP_ERROR) seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(ENOSYS), clone3, 0);
  for (unsigned long req :
       {static_cast<unsigned long>(TIOCSTI), static_cast<unsigned long>(TIOCLINUX)}) {
    if (int rc = seccomp_rule_add(ctx.get(), deny, SCMP_SYS(ioctl), 1,
                                  SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffUL, req));
        rc < 0)
      return failErrno(ErrorCode::kExecutionUnavailable, "seccomp ioctl rule", -rc);
  }

  // Export through a memfd (libseccomp 2.5 exports to an fd).
  int raw = ::memfd_create("airlock-seccomp", MFD_CLOEXEC);
  if (raw < 0) return failErrno(ErrorCode::kExecutionUnavailable, "memfd_create", errno);
  sys::UniqueFd mem(raw);
  if (int rc = seccomp_export_bpf(ctx.get(), mem.get()); rc < 0)
    return failErrno(ErrorCode::kExecutionUnavailable, "seccomp_export_bpf", -rc);
  off_t size = ::lseek(mem.get(), 0, SEEK_END);
  if (size <= 0 || size % static_cast<off_t>(sizeof(sock_filter)) != 0)
    return fail(ErrorCode::kExecutionUnavailable, "seccomp export produced no program");
  SeccompProgram out;
  out.instructions.resize(static_cast<std::size_t>(size) / sizeof(sock_filter));
  if (::pread(mem.get(), out.instructions.data(), static_cast<std::size_t>(size), 0) != size)
    return failErrno(ErrorCode::kExecutionUnavailable, "read seccomp program", errno);
  return out;
}

}  // namespace airlock::linux_jail
