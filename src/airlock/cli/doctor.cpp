#include "airlock/cli/doctor.h"

#include <unistd.h>

#include <string_view>

#include "airlock/sys/io.h"
#if AIRLOCK_HAVE_LINUX_MECHANISM
#include "airlock/sandbox/linux/linux_environment.h"
#endif

namespace airlock::cli {
namespace {

std::string row(std::string_view label, std::string_view value) {
  std::string line = "  ";
  line += label;
  line += ' ';
  line.append(label.size() < 26 ? 26 - label.size() : 1, '.');
  line += ' ';
  line += value;
  line += '\n';
  return line;
}

std::string list(const std::vector<std::string>& items) {
  if (items.empty()) return "none";
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += ", ";
    out += item;
  }
  return out;
}

std::string cgroupSummary(const linux_jail::CgroupFeatures& cg) {
  std::vector<std::string> v1;
  for (const auto& [controller, mount] : cg.v1_mounts) v1.push_back(controller);
  std::string text = cg.layout();
  if (!v1.empty()) text += "; v1 controllers: " + list(v1);
  if (!cg.v2_mount.empty()) {
    text += "; v2 at " + cg.v2_mount + " with controllers: " + list(cg.v2_controllers);
  }
  const auto& required = linux_jail::requiredCgroupControllers();
  if (cg.v2HasAll(required)) {
    text += " (Airlock uses v2)";
  } else if (cg.v1HasAll(required)) {
    text += " (Airlock uses v1)";
  }
  return text;
}

}  // namespace

std::string formatDoctorReport(const linux_jail::KernelFeatures& f) {
  std::string out = "airlock doctor: the linux mechanism on this machine";
  if (!f.kernel_release.empty()) out += " (kernel " + f.kernel_release + ")";
  out += "\n";
  out += row("running as root", f.running_as_root ? "yes"
                                : f.cap_sys_admin ? "no (has CAP_SYS_ADMIN)"
                                                  : "no");
  for (const auto& ns : f.namespaces) {
    std::string value;
    if (ns.can_unshare) {
      value = ns.needs_user_namespace ? "present (inside a user namespace)" : "present";
    } else if (ns.present) {
      value = "absent (unshare: " + ns.detail + ")";
    } else {
      value = "absent";
    }
    out += row(ns.name + " namespace", value);
  }
  out += row("cgroup", cgroupSummary(f.cgroup));
  std::string seccomp = f.seccomp_filter ? "present" : "absent";
  if (f.seccomp_mode >= 0)
    seccomp += " (this process: mode " + std::to_string(f.seccomp_mode) + ")";
  out += row("seccomp filter", seccomp);
  out += row("openat2", f.openat2 ? "present" : "absent");
  out += row("landlock", f.landlock_abi > 0 ? "present (ABI " + std::to_string(f.landlock_abi) + ")"
                                            : "absent");

  const auto blockers = linux_jail::linuxMechanismBlockers(f);
  const auto degradations = linux_jail::linuxMechanismDegradations(f);
  for (const auto& line : blockers) out += "missing: " + line + "\n";
  for (const auto& line : degradations) out += "note: " + line + "\n";
  out += blockers.empty() ? "result: the linux mechanism can run here\n"
                          : "result: the linux mechanism cannot run here\n";
  return out;
}

int runDoctor() {
  const auto features = linux_jail::detectKernelFeatures();
  std::string report = formatDoctorReport(features);
#if AIRLOCK_HAVE_LINUX_MECHANISM
  // The image the linux mechanism runs: the host's /usr and the image-owned
  // /etc entries, named by the digest of their canonical manifest.
  linux_jail::LinuxEnvironmentOptions options;
  auto digest = linux_jail::computeImageDigest(options);
  report += "image: " + (digest ? *digest : "unavailable (" + digest.error().message() + ")") + "\n";
#endif
  (void)sys::writeAll(STDOUT_FILENO, report.data(), report.size());
  return linux_jail::linuxMechanismBlockers(features).empty() ? 0 : 1;
}

}  // namespace airlock::cli
