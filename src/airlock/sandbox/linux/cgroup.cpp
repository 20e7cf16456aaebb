#include "airlock/sandbox/linux/cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <sstream>

#include "airlock/sys/io.h"

namespace airlock::linux_jail {
namespace {

// Rounds of read-and-kill in the v1 kill-all before giving up.
constexpr int kKillRounds = 100;

class RealCgroupFs final : public CgroupFs {
 public:
  Result<void> makeDir(const std::string& path) override {
    if (::mkdir(path.c_str(), 0755) == 0 || errno == EEXIST) return {};
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

std::vector<pid_t> parsePids(const std::string& text) {
  std::vector<pid_t> pids;
  std::istringstream in(text);
  long pid;
  while (in >> pid) pids.push_back(static_cast<pid_t>(pid));
  return pids;
}

// ---- v2 ---------------------------------------------------------------------

class CgroupV2 final : public Cgroup {
 public:
  CgroupV2(std::shared_ptr<CgroupFs> fs, std::string dir)
      : fs_(std::move(fs)), dir_(std::move(dir)) {}
  Result<void> addProcess(pid_t pid) override {
    return fs_->write(dir_ + "/cgroup.procs", std::to_string(pid));
  }
  Result<CgroupCounters> counters() override {
    CgroupCounters c;
    if (auto ev = fs_->read(dir_ + "/memory.events"))
      c.oom_kills = parseKeyedCounter(*ev, "oom_kill").value_or(0);
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
          ::inotify_add_watch(fd.get(), (dir_ + "/memory.events").c_str(), IN_MODIFY) >= 0)
        events_ = std::move(fd);
    }
    // memory.peak (5.19+) is the cgroup's lifetime peak; since 6.12 a write
    // resets it for reads through the same fd, which is what we hold.
    if (!peak_fd_.valid()) {
      if (auto fd = fs_->open(dir_ + "/memory.peak")) peak_fd_ = std::move(*fd);
    }
    if (peak_fd_.valid()) peak_reset_ = ::pwrite(peak_fd_.get(), "reset\n", 6, 0) == 6;
  }
  Result<void> killAll() override {
    if (fs_->exists(dir_ + "/cgroup.kill")) return fs_->write(dir_ + "/cgroup.kill", "1");
    auto procs = fs_->read(dir_ + "/cgroup.procs");
    if (!procs) return tl::unexpected(procs.error());
    for (pid_t p : parsePids(*procs)) ::kill(p, SIGKILL);
    return {};
  }
  Result<void> remove() override {
    peak_fd_.reset();
    return fs_->removeDir(dir_);
  }

 private:
  std::optional<std::int64_t> readPeak() {
    std::string text;
    if (peak_fd_.valid() && peak_reset_) {
      char buf[64];
      ssize_t n = ::pread(peak_fd_.get(), buf, sizeof buf - 1, 0);
      if (n > 0) text.assign(buf, static_cast<std::size_t>(n));
    } else if (auto peak = fs_->read(dir_ + "/memory.peak")) {
      text = *peak;  // lifetime peak: may include earlier commands (kernel < 6.12)
    }
    try {
      if (!text.empty()) return std::stoll(text);
    } catch (...) {
    }
    return std::nullopt;
  }

  std::shared_ptr<CgroupFs> fs_;
  std::string dir_;
  sys::UniqueFd events_;
  sys::UniqueFd peak_fd_;
  bool peak_reset_ = false;
};

class DriverV2 final : public CgroupDriver {
 public:
  DriverV2(std::shared_ptr<CgroupFs> fs, std::string root, std::vector<std::string> controllers)
      : fs_(std::move(fs)), root_(std::move(root)), controllers_(std::move(controllers)) {}
  std::string version() const override { return "v2"; }
  std::vector<std::string> controllers() const override { return controllers_; }
  Result<std::unique_ptr<Cgroup>> create(const std::string& name,
                                         const ResourceLimits& limits) override {
    // Delegate the controllers to children of the parent (idempotent).
    (void)fs_->write(root_ + "/cgroup.subtree_control", "+memory +pids +cpu");
    const std::string dir = root_ + "/" + name;
    if (auto r = fs_->makeDir(dir); !r) return tl::unexpected(r.error());
    auto cg = std::make_unique<CgroupV2>(fs_, dir);
    const std::int64_t period = 100000;
    const std::int64_t quota = limits.cpu_millicores * period / 1000;
    const std::pair<std::string, std::string> writes[] = {
        {"memory.max", std::to_string(limits.memory_bytes)},
        {"memory.swap.max", "0"},
        {"pids.max", std::to_string(limits.pids_max)},
        {"cpu.max", std::to_string(quota) + " " + std::to_string(period)},
    };
    for (const auto& [file, value] : writes) {
      if (file == "memory.swap.max" && !fs_->exists(dir + "/" + file)) continue;
      if (auto r = fs_->write(dir + "/" + file, value); !r) {
        (void)cg->remove();
        return tl::unexpected(r.error());
      }
    }
    return std::unique_ptr<Cgroup>(std::move(cg));
  }
  std::unique_ptr<Cgroup> attach(const std::string& name) override {
    return std::make_unique<CgroupV2>(fs_, root_ + "/" + name);
  }
  std::vector<std::string> list(const std::string& prefix) override {
    std::vector<std::string> out;
    for (auto& n : fs_->list(root_))
      if (n.rfind(prefix, 0) == 0) out.push_back(n);
    return out;
  }

 private:
  std::shared_ptr<CgroupFs> fs_;
  std::string root_;
  std::vector<std::string> controllers_;
};

// ---- v1 ---------------------------------------------------------------------

class CgroupV1 final : public Cgroup {
 public:
  CgroupV1(std::shared_ptr<CgroupFs> fs, std::map<std::string, std::string> dirs)
      : fs_(std::move(fs)), dirs_(std::move(dirs)) {}
  Result<void> addProcess(pid_t pid) override {
    for (const auto& [ctl, dir] : dirs_) {
      if (auto r = fs_->write(dir + "/cgroup.procs", std::to_string(pid)); !r) return r;
    }
    return {};
  }
  Result<CgroupCounters> counters() override {
    CgroupCounters c;
    const std::string& mem = dirs_.at("memory");
    if (auto oc = fs_->read(mem + "/memory.oom_control"))
      c.oom_kills = parseKeyedCounter(*oc, "oom_kill").value_or(0);
    if (auto ev = fs_->read(dirs_.at("pids") + "/pids.events"))
      c.pids_max_events = parseKeyedCounter(*ev, "max").value_or(0);
    if (auto peak = fs_->read(mem + "/memory.max_usage_in_bytes")) {
      try {
        c.memory_peak_bytes = std::stoll(*peak);
      } catch (...) {
      }
    }
    return c;
  }
  void beginExecution() override {
    // Writing 0 resets the v1 high-water mark to the current usage.
    (void)fs_->write(dirs_.at("memory") + "/memory.max_usage_in_bytes", "0");
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
      for (const auto& [ctl, dir] : dirs_) {
        auto procs = fs_->read(dir + "/cgroup.procs");
        if (!procs) continue;
        for (pid_t p : parsePids(*procs)) {
          any = true;
          ::kill(p, SIGKILL);
        }
      }
      if (!any) return {};
    }
    return {};
  }
  Result<void> remove() override {
    Result<void> first{};
    for (const auto& [ctl, dir] : dirs_) {
      auto r = fs_->removeDir(dir);
      if (!r && r.error().code != ErrorCode::kNotFound && first) first = r;
    }
    return first;
  }

 private:
  // v1 OOM notification: "<eventfd> <fd of memory.oom_control>" written to
  // cgroup.event_control. Best effort: without it the counters are polled.
  void registerOomEvent() {
    const std::string& mem = dirs_.at("memory");
    auto control = fs_->open(mem + "/memory.oom_control");
    if (!control) return;
    sys::UniqueFd efd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!efd.valid()) return;
    if (fs_->write(mem + "/cgroup.event_control",
                   std::to_string(efd.get()) + " " + std::to_string(control->get())))
      oom_event_ = std::move(efd);
  }

  std::shared_ptr<CgroupFs> fs_;
  std::map<std::string, std::string> dirs_;  // controller -> directory
  sys::UniqueFd oom_event_;
};

class DriverV1 final : public CgroupDriver {
 public:
  DriverV1(std::shared_ptr<CgroupFs> fs, std::map<std::string, std::string> mounts)
      : fs_(std::move(fs)), mounts_(std::move(mounts)) {}
  std::string version() const override { return "v1"; }
  std::vector<std::string> controllers() const override {
    std::vector<std::string> out;
    for (const auto& [c, m] : mounts_) out.push_back(c);
    return out;
  }
  Result<std::unique_ptr<Cgroup>> create(const std::string& name,
                                         const ResourceLimits& limits) override {
    std::map<std::string, std::string> dirs;
    for (const auto& [ctl, mount] : mounts_) dirs[ctl] = mount + "/" + name;
    auto cg = std::make_unique<CgroupV1>(fs_, dirs);
    for (const auto& [ctl, dir] : dirs) {
      if (auto r = fs_->makeDir(dir); !r) {
        (void)cg->remove();
        return tl::unexpected(r.error());
      }
    }
    const std::string mem = dirs["memory"];
    std::vector<std::pair<std::string, std::string>> writes = {
        {mem + "/memory.limit_in_bytes", std::to_string(limits.memory_bytes)},
        {dirs["pids"] + "/pids.max", std::to_string(limits.pids_max)},
        {dirs["cpu"] + "/cpu.cfs_period_us", "100000"},
        {dirs["cpu"] + "/cpu.cfs_quota_us", std::to_string(limits.cpu_millicores * 100)},
    };
    // With swap accounting, memory+swap gets the same limit: no swap at all.
    if (fs_->exists(mem + "/memory.memsw.limit_in_bytes"))
      writes.emplace_back(mem + "/memory.memsw.limit_in_bytes",
                          std::to_string(limits.memory_bytes));
    for (const auto& [file, value] : writes) {
      if (auto r = fs_->write(file, value); !r) {
        (void)cg->remove();
        return tl::unexpected(r.error());
      }
    }
    return std::unique_ptr<Cgroup>(std::move(cg));
  }
  std::unique_ptr<Cgroup> attach(const std::string& name) override {
    std::map<std::string, std::string> dirs;
    for (const auto& [ctl, mount] : mounts_) dirs[ctl] = mount + "/" + name;
    return std::make_unique<CgroupV1>(fs_, dirs);
  }
  std::vector<std::string> list(const std::string& prefix) override {
    std::vector<std::string> out;
    for (const auto& [ctl, mount] : mounts_)
      for (auto& n : fs_->list(mount))
        if (n.rfind(prefix, 0) == 0 && std::find(out.begin(), out.end(), n) == out.end())
          out.push_back(n);
    return out;
  }

 private:
  std::shared_ptr<CgroupFs> fs_;
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
  std::istringstream in(mountinfo);
  std::string line;
  while (std::getline(in, line)) {
    // "id parent major:minor root mountpoint options... - fstype source superoptions"
    auto dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    auto pre = splitBy(line.substr(0, dash), ' ');
    auto post = splitBy(line.substr(dash + 3), ' ');
    if (pre.size() < 5 || post.size() < 3) continue;
    const std::string& mountpoint = pre[4];
    const std::string& fstype = post[0];
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
      for (const auto& opt : splitBy(post[2], ',')) {
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

}  // namespace airlock::linux_jail
