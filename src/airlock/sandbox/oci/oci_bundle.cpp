#include "airlock/sandbox/oci/oci_bundle.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "airlock/port/execution_environment.h"
#include "airlock/sandbox/sandbox_baseline.h"
#include "airlock/sys/io.h"
#include "airlock/sys/unique_fd.h"

namespace airlock::oci {
namespace {

using nlohmann::json;

bool cleanAbsolute(const std::string& p) {
  if (p.empty() || p[0] != '/') return false;
  std::size_t start = 1;
  while (start <= p.size()) {
    std::size_t end = p.find('/', start);
    if (end == std::string::npos) end = p.size();
    const std::string_view comp(p.data() + start, end - start);
    if (comp == "..") return false;
    start = end + 1;
  }
  return p.find('\0') == std::string::npos;
}

json bindMount(const std::string& destination, const std::string& source, bool read_only) {
  json opts = json::array({"rbind", read_only ? "ro" : "rw", "nosuid", "nodev"});
  return json{
      {"destination", destination}, {"type", "bind"}, {"source", source}, {"options", opts}};
}

Result<void> makeDir(const std::string& path, mode_t mode) {
  if (::mkdir(path.c_str(), mode) != 0 && errno != EEXIST)
    return failErrno(ErrorCode::kExecutionUnavailable, "mkdir " + path, errno);
  if (::chmod(path.c_str(), mode) != 0)
    return failErrno(ErrorCode::kExecutionUnavailable, "chmod " + path, errno);
  return {};
}

// A symbolic link at `path` with text `target`; an existing one with other
// text (or another file there) is replaced.
Result<void> makeLink(const std::string& path, const std::string& target) {
  char existing[256];
  ssize_t m = ::readlink(path.c_str(), existing, sizeof existing - 1);
  if (m >= 0 && target == std::string_view(existing, static_cast<std::size_t>(m))) return {};
  ::unlink(path.c_str());
  if (::symlink(target.c_str(), path.c_str()) != 0)
    return failErrno(ErrorCode::kExecutionUnavailable, "symlink " + path, errno);
  return {};
}

// Options of a devpts mount in the OCI form: kDevptsOptions split at commas,
// after nosuid and noexec.
json devptsOptions() {
  json opts = json::array({"nosuid", "noexec"});
  const std::string_view all = kDevptsOptions;
  for (std::size_t start = 0; start <= all.size();) {
    std::size_t comma = all.find(',', start);
    if (comma == std::string_view::npos) comma = all.size();
    opts.push_back(std::string(all.substr(start, comma - start)));
    start = comma + 1;
  }
  return opts;
}

Result<void> makeFile(const std::string& path, const std::string& contents, mode_t mode) {
  // Written beside and renamed, so a concurrent reader sees old or new bytes.
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  sys::UniqueFd fd(
      ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode));
  if (!fd.valid()) return failErrno(ErrorCode::kExecutionUnavailable, "create " + tmp, errno);
  if (!sys::writeAll(fd.get(), contents.data(), contents.size()))
    return failErrno(ErrorCode::kExecutionUnavailable, "write " + tmp, errno);
  ::fchmod(fd.get(), mode);
  fd.reset();
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    return failErrno(ErrorCode::kExecutionUnavailable, "rename " + tmp, errno);
  return {};
}

}  // namespace

Result<json> makeConfig(const BundleInputs& in) {
  for (const std::string* p :
       {&in.rootfs_dir, &in.workspace_dir, &in.tmp_dir, &in.shim_path, &in.control_dir})
    if (!cleanAbsolute(*p))
      return fail(ErrorCode::kExecutionRejected,
                  "bundle path \"" + *p + "\" is not a clean absolute path");
  for (const std::string* p : {&in.egress_dir, &in.capability_dir})
    if (!p->empty() && !cleanAbsolute(*p))
      return fail(ErrorCode::kExecutionRejected,
                  "bundle path \"" + *p + "\" is not a clean absolute path");
  if (!in.image) return fail(ErrorCode::kExecutionRejected, "the bundle has no image");
  for (const auto& e : in.image->entries) {
    const bool bound = e.kind != ImageEntry::Kind::kSymlink;
    for (const std::string* p : {&e.path, bound ? &e.source : &e.path})
      if (!cleanAbsolute(*p))
        return fail(ErrorCode::kExecutionRejected,
                    "image path \"" + *p + "\" is not a clean absolute path");
  }
  const auto& l = in.limits;
  if (l.cpu_millicores <= 0 || l.memory_bytes <= 0 || l.pids_max <= 0 || l.workspace_bytes <= 0 ||
      l.inodes_max <= 0)
    return fail(ErrorCode::kExecutionRejected, "bundle limits must be positive");

  json mounts = json::array();
  mounts.push_back({{"destination", "/proc"}, {"type", "proc"}, {"source", "proc"}});
  mounts.push_back({{"destination", "/dev"},
                    {"type", "tmpfs"},
                    {"source", "tmpfs"},
                    {"options", json::array({"nosuid", "strictatime", "mode=755"})}});
  mounts.push_back({{"destination", "/dev/pts"},
                    {"type", "devpts"},
                    {"source", "devpts"},
                    {"options", devptsOptions()}});
  mounts.push_back({{"destination", "/dev/shm"},
                    {"type", "tmpfs"},
                    {"source", "shm"},
                    {"options", json::array({"nosuid", "noexec", "nodev", "mode=1777"})}});
  for (const auto& e : in.image->entries)
    if (e.kind != ImageEntry::Kind::kSymlink) mounts.push_back(bindMount(e.path, e.source, true));
  mounts.push_back(bindMount("/workspace", in.workspace_dir, false));
  mounts.push_back(bindMount("/tmp", in.tmp_dir, false));
  mounts.push_back(bindMount(kShimPathInSandbox, in.shim_path, true));
  mounts.push_back(bindMount(kControlDirInSandbox, in.control_dir, false));
  // No egress: no directory, so nothing in the sandbox can reach a proxy.
  if (!in.egress_dir.empty())
    mounts.push_back(bindMount(kEgressDirInSandbox, in.egress_dir, false));
  // Read-only: connect() reaches the broker's socket through it
  // (--host-uds=open), and nothing in it can be replaced from inside.
  if (!in.capability_dir.empty())
    mounts.push_back(bindMount(std::string(kCapabilityDirInSandbox), in.capability_dir, true));
  json args = json::array({kShimPathInSandbox, "init"});
  if (!in.egress_dir.empty()) args.push_back("egress");

  const json rlimits = json::array({
      {{"type", "RLIMIT_CORE"}, {"hard", 0}, {"soft", 0}},
      {{"type", "RLIMIT_NOFILE"}, {"hard", kNofileLimit}, {"soft", kNofileLimit}},
  });

  // What the shim needs to start commands as uid 1000 and kill them.
  const json kInitCaps = json::array({"CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP"});
  json config = {
      {"ociVersion", "1.0.2"},
      {"process",
       {{"terminal", false},
        {"user", {{"uid", 0}, {"gid", 0}}},
        {"args", args},
        {"env", json::array({"PATH=/usr/local/bin:/usr/bin:/bin"})},
        {"cwd", "/"},
        {"capabilities",
         {{"bounding", kInitCaps},
          {"effective", kInitCaps},
          {"inheritable", json::array()},
          {"permitted", kInitCaps},
          {"ambient", json::array()}}},
        {"noNewPrivileges", true},
        {"rlimits", rlimits}}},
      {"root", {{"path", in.rootfs_dir}, {"readonly", true}}},
      {"hostname", "sandbox"},
      {"mounts", mounts},
      {"linux",
       {{"namespaces", json::array({{{"type", "pid"}},
                                    {{"type", "network"}},
                                    {{"type", "ipc"}},
                                    {{"type", "uts"}},
                                    {{"type", "mount"}}})},
        {"resources",
         {{"memory", {{"limit", l.memory_bytes}, {"swap", l.memory_bytes}}},
          {"pids", {{"limit", l.pids_max}}},
          {"cpu", {{"period", 100000}, {"quota", l.cpu_millicores * 100}}}}},
        {"maskedPaths",
         json::array({"/proc/kcore", "/proc/keys", "/proc/timer_list", "/sys/firmware"})},
        {"readonlyPaths",
         json::array({"/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus"})}}},
  };
  return config;
}

Result<void> prepareRootfs(const std::string& dir, const SandboxImage& image) {
  if (auto r = makeDir(dir, 0755); !r) return r;
  for (const char* sub :
       {"/proc", "/dev", "/tmp", "/workspace", "/etc", "/root", "/.airlock", "/run"})
    if (auto r = makeDir(dir + sub, sub == std::string("/root") ? 0700 : 0755); !r) return r;
  if (auto r = makeDir(dir + std::string(kCapabilityDirInSandbox), 0755); !r) return r;
  if (auto r = makeDir(dir + kControlDirInSandbox, 0700); !r) return r;
  if (auto r = makeDir(dir + kEgressDirInSandbox, 0700); !r) return r;
  if (auto r = makeFile(dir + kShimPathInSandbox, "", 0555); !r) return r;
  for (const auto& e : image.entries) {
    // Parents first (/etc/ssl for /etc/ssl/certs, /opt for /opt/tool).
    for (std::size_t slash = e.path.find('/', 1); slash != std::string::npos;
         slash = e.path.find('/', slash + 1))
      if (auto r = makeDir(dir + e.path.substr(0, slash), 0755); !r) return r;
    const std::string path = dir + e.path;
    Result<void> r{};
    switch (e.kind) {
      case ImageEntry::Kind::kDirectory:
        r = makeDir(path, 0755);
        break;
      case ImageEntry::Kind::kFile:
        if (::access(path.c_str(), F_OK) != 0) r = makeFile(path, "", 0444);
        break;
      case ImageEntry::Kind::kSymlink:
        r = makeLink(path, e.source);
        break;
    }
    if (!r) return r;
  }
  for (const auto& e : generatedEtcEntries(kSandboxUid, kSandboxGid)) {
    auto r =
        e.symlink ? makeLink(dir + e.path, e.contents) : makeFile(dir + e.path, e.contents, 0644);
    if (!r) return r;
  }
  return {};
}

}  // namespace airlock::oci
