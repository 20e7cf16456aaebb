// What this kernel and this process offer the linux mechanism, for `airlock doctor` and for
// choosing an implementation per kernel generation at start.
//
// Detection only reads /proc and /sys and makes probing syscalls; the
// namespace probe forks short-lived children that call unshare(2) and exit,
// so nothing of this process changes. Never fails: what cannot be probed is
// reported absent with the reason.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace airlock::linux_jail {

struct NamespaceFeature {
  std::string name;          // "user", "pid", "mount", "net", "ipc", "uts", "cgroup"
  bool present = false;      // /proc/self/ns/<entry> exists
  bool can_unshare = false;  // unshare() of it succeeded in a child
  // Whether the unshare needed a new user namespace alongside (unprivileged).
  bool needs_user_namespace = false;
  std::string detail;  // errno text when the probe failed
};

struct CgroupFeatures {
  // The unified (v2) hierarchy, if mounted, and the controllers it has.
  std::string v2_mount;  // "" when none
  std::vector<std::string> v2_controllers;
  // v1 hierarchies by controller ("memory" -> "/sys/fs/cgroup/memory").
  std::vector<std::pair<std::string, std::string>> v1_mounts;

  bool v2HasAll(const std::vector<std::string>& controllers) const;
  bool v1HasAll(const std::vector<std::string>& controllers) const;
  // "v2", "v1", "hybrid" (v1 controllers plus a v2 mount) or "none".
  std::string layout() const;
};

struct KernelFeatures {
  std::vector<NamespaceFeature> namespaces;
  CgroupFeatures cgroup;
  bool seccomp_filter = false;   // SECCOMP_SET_MODE_FILTER is available
  int seccomp_mode = -1;         // this process: 0 none, 1 strict, 2 filter; -1 unknown
  bool openat2 = false;          // the syscall exists (RESOLVE_BENEATH containment)
  int landlock_abi = 0;          // 0 when absent or disabled
  bool running_as_root = false;  // effective uid 0
  bool cap_sys_admin = false;    // in the effective set
  std::string kernel_release;    // uname -r
};

// Probes everything above.
KernelFeatures detectKernelFeatures();

// The controllers the linux mechanism needs in one hierarchy.
const std::vector<std::string>& requiredCgroupControllers();

// One sentence per facility the linux mechanism cannot do without, saying
// what will not work; empty when it can run.
std::vector<std::string> linuxMechanismBlockers(const KernelFeatures& features);
// One sentence per optional facility that is missing, saying what is lost.
std::vector<std::string> linuxMechanismDegradations(const KernelFeatures& features);

}  // namespace airlock::linux_jail
