#include "airlock/sandbox/linux/kernel_features.h"

#include <fcntl.h>
#include <linux/landlock.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "airlock/sys/mountinfo.h"
#include "airlock/sys/proc_status.h"

namespace airlock::linux_jail {
namespace {

struct NamespaceKind {
  const char* name;
  const char* proc_entry;
  int flag;
};

constexpr NamespaceKind kNamespaces[] = {
    {"user", "user", CLONE_NEWUSER},       {"pid", "pid", CLONE_NEWPID},
    {"mount", "mnt", CLONE_NEWNS},         {"net", "net", CLONE_NEWNET},
    {"ipc", "ipc", CLONE_NEWIPC},          {"uts", "uts", CLONE_NEWUTS},
    {"cgroup", "cgroup", CLONE_NEWCGROUP},
};

// unshare(flags) in a forked child; 0 on success, else the child's errno.
// The child makes one syscall and exits, so forking from a threaded
// process is safe here.
int probeUnshare(int flags) {
  pid_t child = ::fork();
  if (child < 0) return errno;
  if (child == 0) {
    int rc = ::unshare(flags);
    ::_exit(rc == 0 ? 0 : (errno & 0xff));
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) return errno;
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return ECHILD;
}

std::string readWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string unescapeMountField(const std::string& field) {
  std::string out;
  for (std::size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size() &&
        std::isdigit(static_cast<unsigned char>(field[i + 1])) &&
        std::isdigit(static_cast<unsigned char>(field[i + 2])) &&
        std::isdigit(static_cast<unsigned char>(field[i + 3]))) {
      out.push_back(static_cast<char>(std::stoi(field.substr(i + 1, 3), nullptr, 8)));
      i += 3;
    } else {
      out.push_back(field[i]);
    }
  }
  return out;
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, sep)) {
    if (!part.empty()) parts.push_back(part);
  }
  return parts;
}

const std::set<std::string>& knownV1Controllers() {
  static const std::set<std::string> kControllers = {
      "blkio",  "cpu",     "cpuacct",  "cpuset",     "devices", "freezer", "hugetlb",
      "memory", "net_cls", "net_prio", "perf_event", "pids",    "rdma",    "misc"};
  return kControllers;
}

CgroupFeatures detectCgroups() {
  CgroupFeatures cg;
  for (const auto& mount : sys::parseMountinfo(readWholeFile("/proc/self/mountinfo"))) {
    const std::string mount_point = unescapeMountField(mount.mount_point);
    const std::string& fstype = mount.fstype;
    if (fstype == "cgroup2" && cg.v2_mount.empty()) {
      cg.v2_mount = mount_point;
      cg.v2_controllers = split(readWholeFile(mount_point + "/cgroup.controllers"), ' ');
      for (auto& c : cg.v2_controllers) {
        c.erase(std::remove(c.begin(), c.end(), '\n'), c.end());
      }
      cg.v2_controllers.erase(std::remove(cg.v2_controllers.begin(), cg.v2_controllers.end(), ""),
                              cg.v2_controllers.end());
    } else if (fstype == "cgroup") {
      for (const auto& option : split(mount.super_options, ',')) {
        if (knownV1Controllers().count(option)) cg.v1_mounts.emplace_back(option, mount_point);
      }
    }
  }
  return cg;
}

bool probeSeccompFilter() {
  // A NULL program is EFAULT when filters are supported, EINVAL when not.
  long rc = ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, nullptr);
  return rc < 0 && errno == EFAULT;
}

bool probeOpenat2() {
#ifdef SYS_openat2
  open_how how{};
  how.flags = O_PATH | O_CLOEXEC | O_DIRECTORY;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
  long fd = ::syscall(SYS_openat2, AT_FDCWD, ".", &how, sizeof how);
  if (fd < 0) return false;
  ::close(static_cast<int>(fd));
  return true;
#else
  return false;
#endif
}

int probeLandlock() {
#ifdef SYS_landlock_create_ruleset
  long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return abi > 0 ? static_cast<int>(abi) : 0;
#else
  return 0;
#endif
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += ", ";
    out += item;
  }
  return out;
}

const char* namespaceConsequence(const std::string& name) {
  if (name == "user") return "commands cannot run as an unprivileged mapped user";
  if (name == "pid") return "sandboxed processes would see and signal host processes";
  if (name == "mount") return "no private root or size-limited tmpfs workspace can be built";
  if (name == "net") return "the network cannot be denied by default";
  if (name == "ipc") return "sandboxes would share System V IPC and message queues with the host";
  if (name == "uts") return "sandboxes would share the host's hostname";
  if (name == "cgroup") return "sandboxes would see the host's cgroup tree";
  return "the sandbox cannot be built";
}

}  // namespace

bool CgroupFeatures::v2HasAll(const std::vector<std::string>& controllers) const {
  if (v2_mount.empty()) return false;
  return std::all_of(controllers.begin(), controllers.end(), [&](const std::string& c) {
    return std::find(v2_controllers.begin(), v2_controllers.end(), c) != v2_controllers.end();
  });
}

bool CgroupFeatures::v1HasAll(const std::vector<std::string>& controllers) const {
  return std::all_of(controllers.begin(), controllers.end(), [&](const std::string& c) {
    return std::any_of(v1_mounts.begin(), v1_mounts.end(),
                       [&](const auto& mount) { return mount.first == c; });
  });
}

std::string CgroupFeatures::layout() const {
  if (!v1_mounts.empty() && !v2_mount.empty()) return "hybrid";
  if (!v1_mounts.empty()) return "v1";
  if (!v2_mount.empty()) return "v2";
  return "none";
}

const std::vector<std::string>& requiredCgroupControllers() {
  static const std::vector<std::string> kRequired = {"memory", "pids", "cpu"};
  return kRequired;
}

KernelFeatures detectKernelFeatures() {
  KernelFeatures f;
  const int user_errno = probeUnshare(CLONE_NEWUSER);
  for (const auto& kind : kNamespaces) {
    NamespaceFeature ns;
    ns.name = kind.name;
    struct stat st {};
    ns.present = ::lstat((std::string("/proc/self/ns/") + kind.proc_entry).c_str(), &st) == 0;
    int err = kind.flag == CLONE_NEWUSER ? user_errno : probeUnshare(kind.flag);
    if (err != 0 && kind.flag != CLONE_NEWUSER && user_errno == 0 &&
        probeUnshare(CLONE_NEWUSER | kind.flag) == 0) {
      ns.needs_user_namespace = true;
      err = 0;
    }
    ns.can_unshare = err == 0;
    if (err != 0) ns.detail = std::strerror(err);
    f.namespaces.push_back(std::move(ns));
  }
  f.cgroup = detectCgroups();
  f.seccomp_filter = probeSeccompFilter();
  const std::string status = readWholeFile("/proc/self/status");
  const std::string seccomp = sys::procStatusField(status, "Seccomp");
  // A field that is missing or not a number leaves the mode unknown (-1).
  int mode = 0;
  const char* const seccomp_end = seccomp.data() + seccomp.size();
  if (auto [end, ec] = std::from_chars(seccomp.data(), seccomp_end, mode);
      ec == std::errc() && end == seccomp_end)
    f.seccomp_mode = mode;
  const std::string cap_eff = sys::procStatusField(status, "CapEff");
  if (!cap_eff.empty()) {
    const unsigned long long caps = std::strtoull(cap_eff.c_str(), nullptr, 16);
    f.cap_sys_admin = (caps >> 21) & 1ULL;  // CAP_SYS_ADMIN
  }
  f.openat2 = probeOpenat2();
  f.landlock_abi = probeLandlock();
  f.running_as_root = ::geteuid() == 0;
  utsname uts{};
  if (::uname(&uts) == 0) f.kernel_release = uts.release;
  return f;
}

std::vector<std::string> linuxMechanismBlockers(const KernelFeatures& f) {
  std::vector<std::string> blockers;
  if (!f.running_as_root && !f.cap_sys_admin) {
    blockers.push_back(
        "not running as root: creating cgroups, mounting workspaces and mapping the sandbox "
        "user need root (or CAP_SYS_ADMIN and CAP_SETUID), so no sandbox can start");
  }
  for (const auto& ns : f.namespaces) {
    if (ns.can_unshare) continue;
    blockers.push_back(ns.name + " namespace unavailable (" +
                       (ns.present ? ns.detail : std::string("not in this kernel")) +
                       "): " + namespaceConsequence(ns.name) + ", so no sandbox can start");
  }
  const auto& required = requiredCgroupControllers();
  if (!f.cgroup.v2HasAll(required) && !f.cgroup.v1HasAll(required)) {
    blockers.push_back("no cgroup hierarchy offers all of " + joined(required) +
                       ": memory, process-count and CPU limits cannot be enforced, so no "
                       "sandbox can start");
  }
  if (!f.seccomp_filter) {
    blockers.push_back(
        "seccomp filters unavailable: the syscall denylist cannot be installed, so no sandbox "
        "can start");
  }
  return blockers;
}

std::vector<std::string> linuxMechanismDegradations(const KernelFeatures& f) {
  std::vector<std::string> lost;
  if (!f.openat2) {
    lost.push_back(
        "openat2 absent: workspace paths are resolved by the component-by-component "
        "O_NOFOLLOW walk instead (still contained, slower)");
  }
  if (f.landlock_abi == 0) {
    lost.push_back(
        "Landlock absent: no second, kernel-enforced filesystem restriction can be layered "
        "inside sandboxes (not required today)");
  }
  if (f.seccomp_mode == 2) {
    lost.push_back(
        "this process already runs under a seccomp filter (a container?): a probe it blocks "
        "reports the facility as absent");
  }
  return lost;
}

}  // namespace airlock::linux_jail
