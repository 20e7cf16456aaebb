#include "airlock/sandbox/linux/jail_plan.h"

#include <fcntl.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include "airlock/sandbox/sandbox_baseline.h"
#include "airlock/sys/io.h"

namespace airlock::linux_jail {
namespace {

using Kind = SetupStep::Kind;

SetupStep step(Kind kind, std::string description) {
  SetupStep s{kind, std::move(description), {}, {}, {}, 0, 0};
  return s;
}

// Mount flags of `path` that an unprivileged remount must preserve (locked
// flags), plus read-only/nosuid/nodev which we always add.
unsigned long readOnlyFlagsFor(const std::string& path) {
  unsigned long flags = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV;
  struct statvfs sv {};
  if (::statvfs(path.c_str(), &sv) == 0) {
    if (sv.f_flag & ST_NOEXEC) flags |= MS_NOEXEC;
    if (sv.f_flag & ST_NOATIME) flags |= MS_NOATIME;
    if (sv.f_flag & ST_NODIRATIME) flags |= MS_NODIRATIME;
    if (sv.f_flag & ST_RELATIME) flags |= MS_RELATIME;
  }
  return flags;
}

// A read-only bind of host `source` at `path` inside the new root.
void addReadOnlyBind(std::vector<SetupStep>& plan, const std::string& root,
                     const std::string& source, const std::string& path, bool is_dir) {
  const std::string target = root + path;
  if (is_dir) {
    auto mk = step(Kind::kMkdir, "create " + path);
    mk.target = target;
    mk.mode = 0755;
    plan.push_back(std::move(mk));
  } else {
    auto touch = step(Kind::kTouch, "create " + path);
    touch.target = target;
    plan.push_back(std::move(touch));
  }
  auto bind = step(Kind::kBind, "bind " + path);
  bind.source = source;
  bind.target = target;
  plan.push_back(std::move(bind));
  auto ro = step(Kind::kRemountBind, "make " + path + " read-only");
  ro.target = target;
  ro.flags = readOnlyFlagsFor(source);
  plan.push_back(std::move(ro));
}

void addTmpfs(std::vector<SetupStep>& plan, const std::string& root, const std::string& path,
              std::string options, unsigned long flags, mode_t dir_mode) {
  auto mk = step(Kind::kMkdir, "create " + path);
  mk.target = root + path;
  mk.mode = dir_mode;
  plan.push_back(std::move(mk));
  auto fs = step(Kind::kMountTmpfs, "mount tmpfs at " + path);
  fs.target = root + path;
  fs.data = std::move(options);
  fs.flags = flags;
  plan.push_back(std::move(fs));
}

void addMkdir(std::vector<SetupStep>& plan, const std::string& root, const std::string& path,
              mode_t mode) {
  auto mk = step(Kind::kMkdir, "create " + path);
  mk.target = root + path;
  mk.mode = mode;
  plan.push_back(std::move(mk));
}

void addFile(std::vector<SetupStep>& plan, const std::string& root, const std::string& path,
             std::string contents) {
  auto w = step(Kind::kWriteFile, "write " + path);
  w.target = root + path;
  w.data = std::move(contents);
  w.mode = 0644;
  plan.push_back(std::move(w));
}

void addSymlink(std::vector<SetupStep>& plan, const std::string& root, const std::string& path,
                std::string to) {
  auto s = step(Kind::kSymlink, "link " + path);
  s.source = std::move(to);
  s.target = root + path;
  plan.push_back(std::move(s));
}

// The new root: a small tmpfs, with mount events kept from the host.
void addNewRoot(std::vector<SetupStep>& plan, const std::string& root) {
  plan.push_back(step(Kind::kMakeMountsPrivate, "make mounts private"));
  auto fs = step(Kind::kMountTmpfs, "mount the new root");
  fs.target = root;
  fs.data = "size=4m,nr_inodes=4096,mode=0755";
  fs.flags = MS_NOSUID | MS_NODEV;
  plan.push_back(std::move(fs));
}

// One entry of the image (sandbox_image.h), its parents made first (each
// once: `made` holds what exists).
void addImageEntry(std::vector<SetupStep>& plan, const std::string& root, const ImageEntry& e,
                   std::set<std::string>& made) {
  for (std::size_t slash = e.path.find('/', 1); slash != std::string::npos;
       slash = e.path.find('/', slash + 1)) {
    const std::string parent = e.path.substr(0, slash);
    if (made.insert(parent).second) addMkdir(plan, root, parent, 0755);
  }
  made.insert(e.path);
  if (e.kind == ImageEntry::Kind::kSymlink)
    addSymlink(plan, root, e.path, e.source);
  else
    addReadOnlyBind(plan, root, e.source, e.path, e.kind == ImageEntry::Kind::kDirectory);
}

bool underEtc(const ImageEntry& e) {
  return e.path.rfind("/etc/", 0) == 0;
}

// The image: its entries outside /etc.
Result<void> addImage(std::vector<SetupStep>& plan, const std::string& root,
                      const JailPlanInputs& in) {
  if (!in.image) return fail(ErrorCode::kExecutionUnavailable, "the jail plan has no image");
  std::set<std::string> made;
  for (const auto& e : in.image->entries)
    if (!underEtc(e)) addImageEntry(plan, root, e, made);
  return {};
}

// /etc: the generated entries, then the image's own (sandbox_baseline.h);
// the whole root becomes read-only after the pivot.
void addEtc(std::vector<SetupStep>& plan, const std::string& root, const JailPlanInputs& in) {
  addMkdir(plan, root, "/etc", 0755);
  std::set<std::string> made = {"/etc"};
  for (const auto& e : generatedEtcEntries(in.sandbox_uid, in.sandbox_gid)) {
    made.insert(e.path);
    if (e.symlink)
      addSymlink(plan, root, e.path, e.contents);
    else
      addFile(plan, root, e.path, e.contents);
  }
  for (const auto& e : in.image->entries)
    if (underEtc(e) && !made.count(e.path)) addImageEntry(plan, root, e, made);
}

// /dev: a small tmpfs with the harmless character devices bound from the
// host, a private devpts and the usual links.
void addDevices(std::vector<SetupStep>& plan, const std::string& root) {
  addTmpfs(plan, root, "/dev", "size=64k,nr_inodes=64,mode=0755", MS_NOSUID | MS_NOEXEC, 0755);
  // /dev/tty names the opener's controlling terminal (ENXIO without one);
  // the only terminals there are the sandbox's own, from its devpts below.
  for (const char* dev :
       {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"}) {
    auto touch = step(Kind::kTouch, std::string("create ") + dev);
    touch.target = root + dev;
    plan.push_back(std::move(touch));
    auto bind = step(Kind::kBind, std::string("bind ") + dev);
    bind.source = dev;
    bind.target = root + dev;
    plan.push_back(std::move(bind));
  }
  // Pseudo-terminals: a private devpts instance (sandbox_baseline.h
  // kDevptsOptions; gid 5 is mapped in the user namespace) and /dev/ptmx
  // pointing at its multiplexer.
  addMkdir(plan, root, "/dev/pts", 0755);
  auto pts = step(Kind::kMountDevpts, "mount a private devpts at /dev/pts");
  pts.target = root + "/dev/pts";
  pts.data = kDevptsOptions;
  pts.flags = MS_NOSUID | MS_NOEXEC;
  plan.push_back(std::move(pts));
  for (auto [name, to] : {std::pair{"/dev/fd", "/proc/self/fd"},
                          {"/dev/stdin", "/proc/self/fd/0"},
                          {"/dev/stdout", "/proc/self/fd/1"},
                          {"/dev/stderr", "/proc/self/fd/2"},
                          {"/dev/ptmx", "pts/ptmx"}})
    addSymlink(plan, root, name, to);
}

// /dev/shm, /tmp and /workspace: tmpfs capped like the workspace. /dev/shm
// and /tmp count against the memory cgroup (tmpfs pages are charged to the
// writer).
void addScratchSpace(std::vector<SetupStep>& plan, const std::string& root,
                     const JailPlanInputs& in) {
  const auto& lim = in.limits;
  const std::string uid = std::to_string(in.sandbox_uid);
  const std::string gid = std::to_string(in.sandbox_gid);
  const std::string shm_opts =
      "size=" + std::to_string(std::min<std::int64_t>(lim.memory_bytes, lim.workspace_bytes)) +
      ",nr_inodes=" + std::to_string(lim.inodes_max) + ",mode=1777";
  addTmpfs(plan, root, "/dev/shm", shm_opts, MS_NOSUID | MS_NODEV | MS_NOEXEC, 01777);
  const std::string tmp_opts = "size=" + std::to_string(lim.workspace_bytes) +
                               ",nr_inodes=" + std::to_string(lim.inodes_max) + ",mode=1777";
  addTmpfs(plan, root, "/tmp", tmp_opts, MS_NOSUID | MS_NODEV, 01777);
  const std::string ws_opts = "size=" + std::to_string(lim.workspace_bytes) +
                              ",nr_inodes=" + std::to_string(lim.inodes_max) +
                              ",mode=0755,uid=" + uid + ",gid=" + gid;
  addTmpfs(plan, root, "/workspace", ws_opts, MS_NOSUID | MS_NODEV, 0755);
}

// Code mode: the capability directory, read-only (connect() to a socket on
// a read-only mount works; nothing there can be replaced). Exec is allowed
// where the host allows it: the `cap` client is a script there.
void addCapabilityDirectory(std::vector<SetupStep>& plan, const std::string& root,
                            const std::string& capability_dir) {
  if (capability_dir.empty()) return;
  addMkdir(plan, root, "/run", 0755);
  addMkdir(plan, root, "/run/airlock", 0755);
  auto bind = step(Kind::kBind, "bind the capability directory at /run/airlock");
  bind.source = capability_dir;
  bind.target = root + "/run/airlock";
  plan.push_back(std::move(bind));
  auto ro = step(Kind::kRemountBind, "make /run/airlock read-only");
  ro.target = root + "/run/airlock";
  ro.flags = readOnlyFlagsFor(capability_dir);
  plan.push_back(std::move(ro));
}

// /proc of the sandbox's own pid namespace; kernel knobs read-only.
void addProc(std::vector<SetupStep>& plan, const std::string& root) {
  addMkdir(plan, root, "/proc", 0555);
  auto p = step(Kind::kMountProc, "mount /proc");
  p.target = root + "/proc";
  plan.push_back(std::move(p));
  for (const char* knob : {"/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus"}) {
    auto bind = step(Kind::kBind, std::string("bind ") + knob + " over itself");
    bind.source = root + knob;
    bind.target = root + knob;
    bind.flags = 1;  // optional: skip when absent
    plan.push_back(std::move(bind));
    auto ro = step(Kind::kRemountBind, std::string("make ") + knob + " read-only");
    ro.target = root + knob;
    ro.flags = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC;
    ro.mode = 1;  // optional
    plan.push_back(std::move(ro));
  }
}

// Into the new root, made read-only; loopback up; the sandbox's hostname.
void addPivotAndFinish(std::vector<SetupStep>& plan, const std::string& root) {
  auto pv = step(Kind::kPivotRoot, "pivot into the new root");
  pv.target = root;
  plan.push_back(std::move(pv));
  auto ro = step(Kind::kRemountBind, "make / read-only");
  ro.target = "/";
  ro.flags = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV;
  plan.push_back(std::move(ro));
  plan.push_back(step(Kind::kLoopbackUp, "bring up loopback"));
  auto h = step(Kind::kSetHostname, "set hostname");
  h.data = "sandbox";
  plan.push_back(std::move(h));
}

}  // namespace

// The jail, in the order init applies it (each step named in jail_plan.h's
// plan, and by a failure).
Result<std::vector<SetupStep>> buildJailPlan(const JailPlanInputs& in) {
  const std::string& root = in.staging_root;
  std::vector<SetupStep> plan;
  addNewRoot(plan, root);
  if (auto r = addImage(plan, root, in); !r) return tl::unexpected(r.error());
  addEtc(plan, root, in);
  addDevices(plan, root);
  addScratchSpace(plan, root, in);
  addCapabilityDirectory(plan, root, in.capability_dir);
  addProc(plan, root);
  addPivotAndFinish(plan, root);
  return plan;
}

int runSetupStep(const SetupStep& s) noexcept {
  auto rc = [](int r) { return r == 0 ? 0 : errno; };
  switch (s.kind) {
    case Kind::kMakeMountsPrivate:
      return rc(::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr));
    case Kind::kMountTmpfs:
      return rc(::mount("tmpfs", s.target.c_str(), "tmpfs", s.flags, s.data.c_str()));
    case Kind::kMkdir:
      if (::mkdir(s.target.c_str(), s.mode) != 0 && errno != EEXIST) return errno;
      return rc(::chmod(s.target.c_str(), s.mode));
    case Kind::kSymlink:
      return rc(::symlink(s.source.c_str(), s.target.c_str()));
    case Kind::kBind: {
      if (::mount(s.source.c_str(), s.target.c_str(), nullptr, MS_BIND | MS_REC, nullptr) == 0)
        return 0;
      if (s.flags == 1 && errno == ENOENT) return 0;  // optional source
      return errno;
    }
    case Kind::kRemountBind: {
      if (::mount(nullptr, s.target.c_str(), nullptr, s.flags, nullptr) == 0) return 0;
      if (s.mode == 1 && (errno == ENOENT || errno == EINVAL)) return 0;  // optional
      return errno;
    }
    case Kind::kMountDevpts:
      return rc(::mount("devpts", s.target.c_str(), "devpts", s.flags, s.data.c_str()));
    case Kind::kMountProc:
      return rc(
          ::mount("proc", s.target.c_str(), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr));
    case Kind::kWriteFile: {
      int fd =
          ::open(s.target.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, s.mode);
      if (fd < 0) return errno;
      if (!sys::writeAll(fd, s.data.data(), s.data.size())) {
        int err = errno;
        ::close(fd);
        return err;
      }
      ::close(fd);
      return 0;
    }
    case Kind::kTouch: {
      int fd = ::open(s.target.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0444);
      if (fd < 0) return errno;
      ::close(fd);
      return 0;
    }
    case Kind::kPivotRoot: {
      if (::chdir(s.target.c_str()) != 0) return errno;
      if (::syscall(SYS_pivot_root, ".", ".") != 0) return errno;
      if (::umount2(".", MNT_DETACH) != 0) return errno;
      return rc(::chdir("/"));
    }
    case Kind::kLoopbackUp: {
      int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      if (fd < 0) return errno;
      struct ifreq ifr {};
      std::memcpy(ifr.ifr_name, "lo", 3);
      int err = 0;
      if (::ioctl(fd, SIOCGIFFLAGS, &ifr) != 0) {
        err = errno;
      } else {
        ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP | IFF_RUNNING);
        if (::ioctl(fd, SIOCSIFFLAGS, &ifr) != 0) err = errno;
      }
      ::close(fd);
      return err;
    }
    case Kind::kSetHostname:
      return rc(::sethostname(s.data.data(), s.data.size()));
  }
  return EINVAL;
}

}  // namespace airlock::linux_jail
