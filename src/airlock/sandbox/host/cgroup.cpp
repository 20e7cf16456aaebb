#include "airlock/sandbox/host/cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <functional>
#include <optional>
#include <sstream>

#include "airlock/sys/io.h"
#include "airlock/sys/mountinfo.h"

namespace airlock::host {
namespace {

// Rounds of read-and-kill in the v1 kill-all before giving up.
constexpr int kKillRounds = 100;

class RealCgroupFs final : public CgroupFs {
 public:
  Result<void> makeDir(const std::string& path) override {
    if (::mkdir(path.c_str(), 0755) == 0 || errno == EEXIST) return {};
    if (errno == ENOENT)
      return fail(ErrorCode::kNotFound, "mkdir cgroup " + path + ": its parent is gone");
    return failErrno(ErrorCode::kExecutionUnavailable, "mkdir cgroup " + path, errno);
  }
  Result<void> removeDir(const std::string& path) override {
    if (::rmdir(path.c_str()) == 0) return {};
    if (errno == ENOENT) return fail(ErrorCode::kNotFound, "cgroup " + path + " is gone");
    return failErrno(ErrorCode::kExecutionUnavailable, "rmdir cgroup " + path, errno);
  }
  Result<void> write(const std::string& path, const std::string& text) override {
    return sys::writeFile(AT_FDCWD, path.c_str(), text);
  }
  Result<std::string> read(const std::string& path) override {
    return sys::readFile(AT_FDCWD, path.c_str());
  }
  bool exists(const std::string& path) override { return ::access(path.c_str(), F_OK) == 0; }
  Result<sys::UniqueFd> open(const std::string& path) override {
    return sys::openAt(AT_FDCWD, path.c_str(), O_RDWR);
  }
  std::vector<std::string> list(const std::string& dir) override {
    std::vector<std::string> out;
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return out;
    while (dirent* e = ::readdir(d)) {
      if (e->d_type == DT_DIR && e->d_name[0] != '.') out.emplace_back(e->d_name);
    }
    ::closedir(d);
    std::sort(out.begin(), out.end());
    return out;
  }
};

// The name of the child that holds the commands (kCommandsApart), and of
// the one that holds init beside it (v2 only: v2 allows no process in a
// cgroup whose children have controllers).
constexpr const char* kCommandsChild = "commands";
constexpr const char* kInitChild = "init";

// Directories below `dir`, deepest first, then `dir`: the order rmdir needs.
void appendRemovalOrder(CgroupFs& fs, const std::string& dir, std::vector<std::string>& out) {
  for (const auto& child : fs.list(dir)) appendRemovalOrder(fs, dir + "/" + child, out);
  out.push_back(dir);
}

Result<void> removeTree(CgroupFs& fs, const std::string& dir) {
  std::vector<std::string> order;
  appendRemovalOrder(fs, dir, order);
  Result<void> first{};
  for (const auto& d : order) {
    auto r = fs.removeDir(d);
    if (!r && r.error().code != ErrorCode::kNotFound && first) first = r;
  }
  return first;
}

std::optional<std::int64_t> parseBytes(const std::string& text) {
  try {
    if (!text.empty()) return std::stoll(text);
  } catch (...) {
  }
  return std::nullopt;
}

// Writes each (file, value); the first failure is returned.
Result<void> writeAll(CgroupFs& fs, const std::vector<std::pair<std::string, std::string>>& w) {
  for (const auto& [file, value] : w)
    if (auto r = fs.write(file, value); !r) return r;
  return {};
}

// The sandboxes' parent below a hierarchy's mount.
std::string parentIn(const std::string& mount) {
  return mount + "/" + kSandboxCgroupParent;
}

// Where sandbox `name` lives under a hierarchy's mount: below the parent,
// or (a sandbox of a release that created them at the top) directly below
// the mount.
std::string locateIn(CgroupFs& fs, const std::string& mount, const std::string& name) {
  std::string below = parentIn(mount) + "/" + name;
  if (fs.exists(below) || !fs.exists(mount + "/" + name)) return below;
  return mount + "/" + name;
}

// The sandboxes' parents of one driver, one per hierarchy. A parent stays
// while the driver or any cgroup it made or attached lives, so a cycle of
// sandboxes does not make and remove it each time (each costs the kernel a
// cgroup per controller); when the last holder goes, each parent is removed
// if it is empty (rmdir refuses one that still holds a sandbox, another
// service's included).
class SandboxParents {
 public:
  SandboxParents(std::shared_ptr<CgroupFs> fs, std::vector<std::string> dirs)
      : fs_(std::move(fs)), dirs_(std::move(dirs)) {}
  SandboxParents(const SandboxParents&) = delete;
  SandboxParents& operator=(const SandboxParents&) = delete;
  ~SandboxParents() {
    for (const auto& dir : dirs_) (void)fs_->removeDir(dir);
  }

 private:
  std::shared_ptr<CgroupFs> fs_;
  std::vector<std::string> dirs_;
};

// Creates `dir` below the parent `parent`, creating the parent first (an
// existing one is kept). Another service may remove the parent between the
// two mkdirs, when its last sandbox and driver are gone (the second then
// fails with NotFound, even should a third have made the parent again
// since): then both are made again.
Result<void> makeBelowParent(CgroupFs& fs, const std::string& parent, const std::string& dir,
                             const std::function<void()>& configure_parent) {
  Result<void> made{};
  for (int attempt = 0; attempt < 8; ++attempt) {
    if (auto r = fs.makeDir(parent); !r) return r;
    configure_parent();
    made = fs.makeDir(dir);
    if (made || made.error().code != ErrorCode::kNotFound) return made;
  }
  return made;
}

// Names starting with `prefix`, below the parent or at the top of any of
// `mounts`, each once.
std::vector<std::string> listUnder(CgroupFs& fs, const std::vector<std::string>& mounts,
                                   const std::string& prefix) {
  std::vector<std::string> out;
  for (const auto& mount : mounts)
    for (const auto& dir : {mount + "/" + kSandboxCgroupParent, mount})
      for (auto& n : fs.list(dir))
        if (n.rfind(prefix, 0) == 0 && std::find(out.begin(), out.end(), n) == out.end())
          out.push_back(n);
  return out;
}

// ---- v2 ---------------------------------------------------------------------

// dir_: the sandbox's directory. Processes live in dir_ (kOneGroup) or in
// dir_/init and dir_/commands (kCommandsApart).
class CgroupV2 final : public Cgroup {
 public:
  CgroupV2(std::shared_ptr<CgroupFs> fs, std::shared_ptr<const SandboxParents> parents,
           std::string dir, MemoryLayout layout)
      : fs_(std::move(fs)), parents_(std::move(parents)), dir_(std::move(dir)), layout_(layout) {}
  Result<void> addProcess(pid_t pid) override {
    return fs_->write(leaf(kInitChild) + "/cgroup.procs", std::to_string(pid));
  }
  Result<void> addCommandProcess(pid_t pid) override {
    return fs_->write(commands() + "/cgroup.procs", std::to_string(pid));
  }
  Result<sys::UniqueFd> openCommandEntry() override {
    return fs_->open(commands() + "/cgroup.procs");
  }
  Result<CgroupCounters> counters() override {
    CgroupCounters c;
    // The commands' memory.events holds the kills under their limit; with
    // the commands apart, the parent's local events add any kill at the
    // sandbox's own ceiling.
    if (auto ev = fs_->read(commands() + "/memory.events"))
      c.oom_kills = parseKeyedCounter(*ev, "oom_kill").value_or(0);
    if (layout_ == MemoryLayout::kCommandsApart)
      if (auto ev = fs_->read(dir_ + "/memory.events.local"))
        c.oom_kills += parseKeyedCounter(*ev, "oom_kill").value_or(0);
    if (auto ev = fs_->read(dir_ + "/pids.events"))
      c.pids_max_events = parseKeyedCounter(*ev, "max").value_or(0);
    c.memory_peak_bytes = readPeak();
    return c;
  }
  int memoryEventFd() noexcept override { return events_.get(); }
  void drainMemoryEvents() noexcept override {
    char buf[4096];
    while (::read(events_.get(), buf, sizeof buf) > 0) {
    }
  }
  void beginExecution() override {
    if (!events_.valid()) {
      // memory.events raises a modify event when oom / oom_kill change.
      sys::UniqueFd fd(::inotify_init1(IN_CLOEXEC | IN_NONBLOCK));
      if (fd.valid() &&
          ::inotify_add_watch(fd.get(), (commands() + "/memory.events").c_str(), IN_MODIFY) >= 0)
        events_ = std::move(fd);
    }
    // memory.peak (5.19+) is the cgroup's lifetime peak; since 6.12 a write
    // resets it for reads through the same fd, which is what we hold.
    if (!peak_fd_.valid()) {
      if (auto fd = fs_->open(commands() + "/memory.peak")) peak_fd_ = std::move(*fd);
    }
    if (peak_fd_.valid()) peak_reset_ = ::pwrite(peak_fd_.get(), "reset\n", 6, 0) == 6;
  }
  Result<void> killAll() override {
    // cgroup.kill covers the whole subtree.
    if (fs_->exists(dir_ + "/cgroup.kill")) return fs_->write(dir_ + "/cgroup.kill", "1");
    std::vector<std::string> dirs;
    appendRemovalOrder(*fs_, dir_, dirs);
    for (const auto& d : dirs) {
      auto procs = fs_->read(d + "/cgroup.procs");
      if (!procs) continue;
      for (pid_t p : parsePids(*procs)) ::kill(p, SIGKILL);
    }
    return {};
  }
  std::string memoryDirectory() const override { return dir_; }
  std::string commandsMemoryDirectory() const override { return commands(); }
  Result<void> remove() override {
    peak_fd_.reset();
    events_.reset();
    return removeTree(*fs_, dir_);
  }

 private:
  std::string leaf(const char* child) const {
    return layout_ == MemoryLayout::kCommandsApart ? dir_ + "/" + child : dir_;
  }
  std::string commands() const { return leaf(kCommandsChild); }

  std::optional<std::int64_t> readPeak() {
    if (peak_fd_.valid() && peak_reset_) {
      char buf[64];
      ssize_t n = ::pread(peak_fd_.get(), buf, sizeof buf - 1, 0);
      return n > 0 ? parseBytes(std::string(buf, static_cast<std::size_t>(n))) : std::nullopt;
    }
    // The lifetime peak: may include earlier commands (kernel < 6.12).
    auto peak = fs_->read(commands() + "/memory.peak");
    return peak ? parseBytes(*peak) : std::nullopt;
  }

  std::shared_ptr<CgroupFs> fs_;
  std::shared_ptr<const SandboxParents> parents_;
  std::string dir_;
  MemoryLayout layout_;
  sys::UniqueFd events_;
  sys::UniqueFd peak_fd_;
  bool peak_reset_ = false;
};

// What create returns once the new group's limits are written: the group,
// or, when a limit could not be written, that error, with the half-made
// group removed.
Result<std::unique_ptr<Cgroup>> keptIfLimited(std::unique_ptr<Cgroup> cg,
                                              const Result<void>& limited) {
  if (!limited) {
    (void)cg->remove();
    return tl::unexpected(limited.error());
  }
  return cg;
}

class DriverV2 final : public CgroupDriver {
 public:
  DriverV2(std::shared_ptr<CgroupFs> fs, std::string root, std::vector<std::string> controllers)
      : fs_(std::move(fs)),
        parents_(std::make_shared<const SandboxParents>(fs_, std::vector{parentIn(root)})),
        root_(std::move(root)),
        controllers_(std::move(controllers)) {}
  std::string version() const override { return "v2"; }
  std::vector<std::string> controllers() const override { return controllers_; }
  Result<std::unique_ptr<Cgroup>> create(const std::string& name, const ResourceLimits& limits,
                                         MemoryLayout layout) override {
    // Delegate the controllers to the parent and to its children
    // (idempotent).
    (void)fs_->write(root_ + "/cgroup.subtree_control", "+memory +pids +cpu");
    const std::string parent = parentIn(root_);
    const std::string dir = parent + "/" + name;
    if (auto r = makeBelowParent(
            *fs_, parent, dir,
            [&] { (void)fs_->write(parent + "/cgroup.subtree_control", "+memory +pids +cpu"); });
        !r)
      return tl::unexpected(r.error());
    auto cg = std::make_unique<CgroupV2>(fs_, parents_, dir, layout);
    return keptIfLimited(std::move(cg), applyLimits(dir, limits, layout));
  }
  std::unique_ptr<Cgroup> attach(const std::string& name) override {
    const std::string dir = locateIn(*fs_, root_, name);
    const bool apart = fs_->exists(dir + "/" + kCommandsChild);
    return std::make_unique<CgroupV2>(
        fs_, parents_, dir, apart ? MemoryLayout::kCommandsApart : MemoryLayout::kOneGroup);
  }
  std::vector<std::string> list(const std::string& prefix) override {
    return listUnder(*fs_, {root_}, prefix);
  }

 private:
  Result<void> applyLimits(const std::string& dir, const ResourceLimits& limits,
                           MemoryLayout layout) {
    const std::int64_t period = 100000;
    const std::int64_t quota = limits.cpu_millicores * period / 1000;
    const bool apart = layout == MemoryLayout::kCommandsApart;
    const std::int64_t ceiling = limits.memory_bytes + (apart ? kSupervisorMemorySlack : 0);
    std::vector<std::pair<std::string, std::string>> writes = {
        {dir + "/memory.max", std::to_string(ceiling)},
        {dir + "/pids.max", std::to_string(limits.pids_max)},
        {dir + "/cpu.max", std::to_string(quota) + " " + std::to_string(period)},
    };
    if (fs_->exists(dir + "/memory.swap.max")) writes.emplace_back(dir + "/memory.swap.max", "0");
    if (auto r = writeAll(*fs_, writes); !r || !apart) return r;
    if (auto r = fs_->write(dir + "/cgroup.subtree_control", "+memory"); !r) return r;
    for (const char* child : {kInitChild, kCommandsChild})
      if (auto r = fs_->makeDir(dir + "/" + child); !r) return r;
    const std::string commands = dir + "/" + kCommandsChild;
    writes = {{commands + "/memory.max", std::to_string(limits.memory_bytes)}};
    if (fs_->exists(commands + "/memory.swap.max"))
      writes.emplace_back(commands + "/memory.swap.max", "0");
    return writeAll(*fs_, writes);
  }

  std::shared_ptr<CgroupFs> fs_;
  std::shared_ptr<const SandboxParents> parents_;
  std::string root_;
  std::vector<std::string> controllers_;
};

// ---- v1 ---------------------------------------------------------------------

// dirs_: controller -> the sandbox's directory in that hierarchy. With the
// commands apart, only the memory hierarchy has the "commands" child.
class CgroupV1 final : public Cgroup {
 public:
  CgroupV1(std::shared_ptr<CgroupFs> fs, std::shared_ptr<const SandboxParents> parents,
           std::map<std::string, std::string> dirs, MemoryLayout layout)
      : fs_(std::move(fs)), parents_(std::move(parents)), dirs_(std::move(dirs)), layout_(layout) {}
  Result<void> addProcess(pid_t pid) override {
    for (const auto& [ctl, dir] : dirs_) {
      if (auto r = fs_->write(dir + "/cgroup.procs", std::to_string(pid)); !r) return r;
    }
    return {};
  }
  Result<void> addCommandProcess(pid_t pid) override {
    for (const auto& [ctl, dir] : dirs_) {
      const std::string target = ctl == "memory" ? commandsMemory() : dir;
      if (auto r = fs_->write(target + "/cgroup.procs", std::to_string(pid)); !r) return r;
    }
    return {};
  }
  // The pids and cpu hierarchies are the same for init and commands, so the
  // memory one is the only move a command makes.
  Result<sys::UniqueFd> openCommandEntry() override {
    return fs_->open(commandsMemory() + "/cgroup.procs");
  }
  Result<CgroupCounters> counters() override {
    CgroupCounters c;
    // v1 counts an OOM kill only in the cgroup whose limit was hit: sum the
    // commands' and, with the commands apart, the sandbox ceiling's.
    std::vector<std::string> oom_dirs = {commandsMemory()};
    if (layout_ == MemoryLayout::kCommandsApart) oom_dirs.push_back(dirs_.at("memory"));
    for (const auto& d : oom_dirs)
      if (auto oc = fs_->read(d + "/memory.oom_control"))
        c.oom_kills += parseKeyedCounter(*oc, "oom_kill").value_or(0);
    if (auto ev = fs_->read(dirs_.at("pids") + "/pids.events"))
      c.pids_max_events = parseKeyedCounter(*ev, "max").value_or(0);
    if (auto peak = fs_->read(commandsMemory() + "/memory.max_usage_in_bytes"))
      c.memory_peak_bytes = parseBytes(*peak);
    return c;
  }
  void beginExecution() override {
    // Writing 0 resets the v1 high-water mark to the current usage.
    (void)fs_->write(commandsMemory() + "/memory.max_usage_in_bytes", "0");
    if (!oom_event_.valid()) registerOomEvent();
  }
  int memoryEventFd() noexcept override { return oom_event_.get(); }
  void drainMemoryEvents() noexcept override {
    std::uint64_t count;
    while (::read(oom_event_.get(), &count, sizeof count) == sizeof count) {
    }
  }
  // v1 has no cgroup.kill: SIGKILL every member, and repeat while members
  // remain, so a process forked between the read and the kill is met by the
  // next round. (A sandbox's processes all live in one pid namespace whose
  // init is a member too: once init dies the kernel kills the rest of the
  // namespace at once, so a round or two suffices.)
  Result<void> killAll() override {
    for (int round = 0; round < kKillRounds; ++round) {
      bool any = false;
      for (const auto& [ctl, top] : dirs_) {
        std::vector<std::string> dirs;
        appendRemovalOrder(*fs_, top, dirs);
        for (const auto& dir : dirs) {
          auto procs = fs_->read(dir + "/cgroup.procs");
          if (!procs) continue;
          for (pid_t p : parsePids(*procs)) {
            any = true;
            ::kill(p, SIGKILL);
          }
        }
      }
      if (!any) return {};
    }
    return {};
  }
  std::string memoryDirectory() const override { return dirs_.at("memory"); }
  std::string commandsMemoryDirectory() const override { return commandsMemory(); }
  Result<void> remove() override {
    oom_event_.reset();
    Result<void> first{};
    for (const auto& [ctl, dir] : dirs_) {
      auto r = removeTree(*fs_, dir);
      if (!r && first) first = r;
    }
    return first;
  }

 private:
  std::string commandsMemory() const {
    const std::string& mem = dirs_.at("memory");
    return layout_ == MemoryLayout::kCommandsApart ? mem + "/" + kCommandsChild : mem;
  }

  // v1 OOM notification: "<eventfd> <fd of memory.oom_control>" written to
  // cgroup.event_control. It fires for an OOM in the commands' cgroup or an
  // ancestor. Best effort: without it the counters are polled.
  void registerOomEvent() {
    const std::string mem = commandsMemory();
    auto control = fs_->open(mem + "/memory.oom_control");
    if (!control) return;
    sys::UniqueFd efd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!efd.valid()) return;
    if (fs_->write(mem + "/cgroup.event_control",
                   std::to_string(efd.get()) + " " + std::to_string(control->get())))
      oom_event_ = std::move(efd);
  }

  std::shared_ptr<CgroupFs> fs_;
  std::shared_ptr<const SandboxParents> parents_;
  std::map<std::string, std::string> dirs_;  // controller -> directory
  MemoryLayout layout_;
  sys::UniqueFd oom_event_;
};

class DriverV1 final : public CgroupDriver {
 public:
  DriverV1(std::shared_ptr<CgroupFs> fs, std::map<std::string, std::string> mounts)
      : fs_(std::move(fs)),
        parents_(std::make_shared<const SandboxParents>(fs_, parentsIn(mounts))),
        mounts_(std::move(mounts)) {}
  std::string version() const override { return "v1"; }
  std::vector<std::string> controllers() const override {
    std::vector<std::string> out;
    for (const auto& [c, m] : mounts_) out.push_back(c);
    return out;
  }
  Result<std::unique_ptr<Cgroup>> create(const std::string& name, const ResourceLimits& limits,
                                         MemoryLayout layout) override {
    std::map<std::string, std::string> dirs;
    for (const auto& [ctl, mount] : mounts_) dirs[ctl] = parentIn(mount) + "/" + name;
    auto cg = std::make_unique<CgroupV1>(fs_, parents_, dirs, layout);
    return keptIfLimited(std::move(cg), applyLimits(dirs, limits, layout));
  }
  std::unique_ptr<Cgroup> attach(const std::string& name) override {
    std::map<std::string, std::string> dirs;
    for (const auto& [ctl, mount] : mounts_) dirs[ctl] = locateIn(*fs_, mount, name);
    const bool apart = fs_->exists(dirs["memory"] + "/" + kCommandsChild);
    return std::make_unique<CgroupV1>(
        fs_, parents_, dirs, apart ? MemoryLayout::kCommandsApart : MemoryLayout::kOneGroup);
  }
  std::vector<std::string> list(const std::string& prefix) override {
    std::vector<std::string> mounts;
    for (const auto& [ctl, mount] : mounts_) mounts.push_back(mount);
    return listUnder(*fs_, mounts, prefix);
  }

 private:
  Result<void> applyLimits(std::map<std::string, std::string>& dirs, const ResourceLimits& limits,
                           MemoryLayout layout) {
    for (const auto& [ctl, dir] : dirs)
      if (auto r = makeBelowParent(*fs_, dir.substr(0, dir.rfind('/')), dir, [] {}); !r) return r;
    const std::string mem = dirs["memory"];
    const bool apart = layout == MemoryLayout::kCommandsApart;
    std::vector<std::pair<std::string, std::string>> writes = {
        {dirs["pids"] + "/pids.max", std::to_string(limits.pids_max)},
        {dirs["cpu"] + "/cpu.cfs_period_us", "100000"},
        {dirs["cpu"] + "/cpu.cfs_quota_us", std::to_string(limits.cpu_millicores * 100)},
    };
    // With swap accounting, memory+swap gets the same limit: no swap at all.
    // memsw may never be below the plain limit, so the plain one goes first.
    auto limitMemory = [&](const std::string& dir, std::int64_t bytes) {
      writes.emplace_back(dir + "/memory.limit_in_bytes", std::to_string(bytes));
      if (fs_->exists(dir + "/memory.memsw.limit_in_bytes"))
        writes.emplace_back(dir + "/memory.memsw.limit_in_bytes", std::to_string(bytes));
      // v1 charges TCP buffers to a cgroup only once its TCP limit is set;
      // without it a sandbox's sockets can hold the host's whole tcp_mem.
      // At the limit, sends wait or fail; they are not an OOM kill.
      if (fs_->exists(dir + "/memory.kmem.tcp.limit_in_bytes"))
        writes.emplace_back(dir + "/memory.kmem.tcp.limit_in_bytes", std::to_string(bytes));
    };
    limitMemory(mem, limits.memory_bytes + (apart ? kSupervisorMemorySlack : 0));
    if (auto r = writeAll(*fs_, writes); !r || !apart) return r;
    const std::string commands = mem + "/" + kCommandsChild;
    if (auto r = fs_->makeDir(commands); !r) return r;
    writes.clear();
    limitMemory(commands, limits.memory_bytes);
    return writeAll(*fs_, writes);
  }

  static std::vector<std::string> parentsIn(const std::map<std::string, std::string>& mounts) {
    std::vector<std::string> out;
    out.reserve(mounts.size());
    for (const auto& [ctl, mount] : mounts) out.push_back(parentIn(mount));
    return out;
  }

  std::shared_ptr<CgroupFs> fs_;
  std::shared_ptr<const SandboxParents> parents_;
  std::map<std::string, std::string> mounts_;
};

std::vector<std::string> splitBy(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

}  // namespace

std::vector<pid_t> parsePids(const std::string& text) {
  std::vector<pid_t> pids;
  std::istringstream in(text);
  long pid;
  while (in >> pid) pids.push_back(static_cast<pid_t>(pid));
  return pids;
}

std::unique_ptr<CgroupFs> makeRealCgroupFs() {
  return std::make_unique<RealCgroupFs>();
}

std::optional<std::int64_t> parseKeyedCounter(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string k;
    long long v;
    if (ls >> k >> v && k == key) return v;
  }
  return std::nullopt;
}

CgroupMounts parseCgroupMounts(const std::string& mountinfo, CgroupFs& fs) {
  CgroupMounts out;
  for (const auto& mount : sys::parseMountinfo(mountinfo)) {
    const std::string& mountpoint = mount.mount_point;
    const std::string& fstype = mount.fstype;
    if (fstype == "cgroup2") {
      auto ctl = fs.read(mountpoint + "/cgroup.controllers");
      if (!ctl) continue;
      std::istringstream cs(*ctl);
      std::vector<std::string> names;
      std::string n;
      while (cs >> n) names.push_back(n);
      if (!out.v2_root || names.size() > out.v2_controllers.size()) {
        out.v2_root = mountpoint;
        out.v2_controllers = names;
      }
    } else if (fstype == "cgroup") {
      for (const auto& opt : splitBy(mount.super_options, ',')) {
        if (opt == "memory" || opt == "pids" || opt == "cpu")
          out.v1_controller_mounts.emplace(opt, mountpoint);
      }
    }
  }
  return out;
}

Result<std::unique_ptr<CgroupDriver>> makeCgroupDriver(const CgroupMounts& mounts,
                                                       std::shared_ptr<CgroupFs> fs) {
  auto has = [](const std::vector<std::string>& v, const char* c) {
    return std::find(v.begin(), v.end(), c) != v.end();
  };
  if (mounts.v2_root && has(mounts.v2_controllers, "memory") &&
      has(mounts.v2_controllers, "pids") && has(mounts.v2_controllers, "cpu")) {
    return std::unique_ptr<CgroupDriver>(
        std::make_unique<DriverV2>(std::move(fs), *mounts.v2_root, mounts.v2_controllers));
  }
  std::string missing;
  for (const char* c : {"memory", "pids", "cpu"})
    if (!mounts.v1_controller_mounts.count(c))
      missing += std::string(missing.empty() ? "" : ", ") + c;
  if (missing.empty())
    return std::unique_ptr<CgroupDriver>(
        std::make_unique<DriverV1>(std::move(fs), mounts.v1_controller_mounts));
  return fail(ErrorCode::kExecutionUnavailable,
              "no usable cgroup hierarchy: cgroup v2 lacks memory/pids/cpu and cgroup v1 lacks " +
                  missing + " (run `airlock doctor`)");
}

CgroupLimits::CgroupLimits(Cgroup& cgroup) : cgroup_(cgroup) {
  cgroup_.beginExecution();
  if (auto c = cgroup_.counters()) before_ = *c;
}

std::optional<KillReason> CgroupLimits::hit() {
  auto now = cgroup_.counters();
  if (!now || !before_) return std::nullopt;
  if (now->oom_kills > before_->oom_kills) return KillReason::kMemory;
  if (now->pids_max_events > before_->pids_max_events) return KillReason::kPids;
  return std::nullopt;
}

std::optional<std::int64_t> CgroupLimits::peakMemoryBytes() {
  auto now = cgroup_.counters();
  return now ? now->memory_peak_bytes : std::nullopt;
}

}  // namespace airlock::host
