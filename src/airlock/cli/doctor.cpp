#include "airlock/cli/doctor.h"

#include <unistd.h>

#include <string_view>

#include "airlock/cli/summary.h"
#if AIRLOCK_HAVE_LINUX_MECHANISM
#include "airlock/sandbox/linux/linux_environment.h"
#endif
#if AIRLOCK_HAVE_GVISOR_MECHANISM
#include <chrono>
#include <filesystem>

#include "airlock/sandbox/oci/gvisor_environment.h"
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

#if AIRLOCK_HAVE_GVISOR_MECHANISM
// The gvisor mechanism: is runsc installed, and does a sandbox actually run
// `true` on this machine (a real probe: runsc's platforms fail in ways only
// starting one shows, e.g. KVM hanging under a paravirtual host).
std::string gvisorReport() {
  std::string out = "airlock doctor: the gvisor mechanism on this machine\n";
  gvisor::GvisorEnvironmentOptions options;
  char tmpl[] = "/tmp/airlock-doctor-XXXXXX";
  const char* dir = ::mkdtemp(tmpl);
  if (dir != nullptr) options.state_dir = dir;
  out += row("runsc", ::access(options.runsc_path.c_str(), X_OK) == 0 ? options.runsc_path
                                                                      : "not installed");
  out += row("runsc platform", options.platform);
  std::string verdict;
  if (auto why = gvisor::gvisorUnavailable(options)) {
    verdict = "result: the gvisor mechanism cannot run here (" + *why + ")\n";
  } else {
    const auto t0 = std::chrono::steady_clock::now();
    auto probe = gvisor::probeGvisor(options);
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
            .count();
    out += row("probe sandbox",
               probe ? "ran `true` in " + std::to_string(ms) + " ms (provision, execute, destroy)"
                     : "failed: " + probe.error().message());
    verdict = probe ? "result: the gvisor mechanism can run here\n"
                    : "result: the gvisor mechanism cannot run here\n";
  }
  if (dir != nullptr) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  return out + verdict;
}
#endif

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
  auto digest = airlock::computeImageDigest(options);
  report +=
      "image: " + (digest ? *digest : "unavailable (" + digest.error().message() + ")") + "\n";
#endif
#if AIRLOCK_HAVE_GVISOR_MECHANISM
  // Reported after the linux verdict; the exit status stays the linux one.
  report += gvisorReport();
#endif
  writeOut(STDOUT_FILENO, report);
  return linux_jail::linuxMechanismBlockers(features).empty() ? 0 : 1;
}

}  // namespace airlock::cli
