// Resource control for one sandbox, behind one interface with a cgroup v1
// and a cgroup v2 implementation chosen by detection at start
// (one implementation per kernel generation). Every mechanism owns its
// sandboxes' cgroups through it.
//
// v2: one directory under the unified hierarchy: memory.max,
//     memory.swap.max=0, pids.max, cpu.max; counters from memory.events,
//     memory.peak, pids.events; teardown with cgroup.kill.
// v1: one directory per controller (memory, pids, cpu):
//     memory.limit_in_bytes (+ memsw when swap accounting exists), pids.max,
//     cpu.cfs_quota_us/cfs_period_us; counters from memory.oom_control
//     (oom_kill), memory.max_usage_in_bytes, pids.events.
// Every sandbox's cgroup sits below one parent, "airlock", at the top of
// each hierarchy (v2: <root>/airlock/<name>; v1: <mount>/airlock/<name> in
// each controller's hierarchy). The parent is created with the first sandbox
// and stays while its driver or any cgroup of that driver lives; then it is
// removed if empty (rmdir refuses it while another service's sandbox is in
// it). It has no limits of its own: it holds all
// sandboxes together at the CPU weight of one ordinary cgroup (v1
// cpu.shares 1024, v2 cpu.weight 100), so however many sandboxes are busy,
// the service's threads outside it keep their share of the machine.
// Sandboxes that an earlier release created at the top of the hierarchy are
// still found by attach() and list().
// All file access goes through CgroupFs, a seam under the OS so the v2 and
// v1 writers and parsers run against a fake filesystem in tests.
//
// Memory layouts (MemoryLayout):
//   kOneGroup       every process of the sandbox under the one memory limit
//                   (gvisor: the sentry is the sandbox's memory).
//   kCommandsApart  the limit sits on a "commands" child that holds the
//                   commands and side processes; the sandbox's own init stays
//                   outside it, under the pids and cpu limits and a memory
//                   ceiling of limit + kSupervisorMemorySlack. A command's OOM
//                   is then resolved among the commands alone and never picks
//                   init, whatever init's inherited RSS (init is a clone of
//                   the service) and whether or not its oom_score_adj could
//                   be lowered (that needs CAP_SYS_RESOURCE).
//     v2: <name>/{init,commands}, "+memory" in <name>/cgroup.subtree_control
//         (no process may sit in <name> itself).
//     v1: memory/<name>/commands; pids and cpu stay one directory each.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "airlock/core/error.h"
#include "airlock/core/types.h"
#include "airlock/sandbox/host/command_supervisor.h"
#include "airlock/sys/unique_fd.h"

namespace airlock::host {

// Files under absolute paths; the real one is the kernel's cgroupfs.
class CgroupFs {
 public:
  virtual ~CgroupFs() = default;
  virtual Result<void> makeDir(const std::string& path) = 0;
  virtual Result<void> removeDir(const std::string& path) = 0;  // NotFound if absent
  virtual Result<void> write(const std::string& path, const std::string& text) = 0;
  virtual Result<std::string> read(const std::string& path) = 0;
  virtual bool exists(const std::string& path) = 0;
  virtual std::vector<std::string> list(const std::string& dir) = 0;  // subdirectory names
  // An fd on a control file, for files whose state is per open file
  // (v2 memory.peak resets per fd). NotFound where unsupported.
  virtual Result<sys::UniqueFd> open(const std::string& path) = 0;
};
std::unique_ptr<CgroupFs> makeRealCgroupFs();

enum class MemoryLayout { kOneGroup, kCommandsApart };

// The directory below each hierarchy's top that holds every sandbox's cgroup.
inline constexpr const char* kSandboxCgroupParent = "airlock";

// Memory the sandbox's init may charge beyond the commands' limit
// (kCommandsApart): its stack, the pages of its receive buffer it copies on
// write, page tables. Bytes.
inline constexpr std::int64_t kSupervisorMemorySlack = 32LL << 20;

struct CgroupCounters {
  std::int64_t oom_kills = 0;        // memory.events / memory.oom_control oom_kill
  std::int64_t pids_max_events = 0;  // pids.events max
  std::optional<std::int64_t> memory_peak_bytes;
};

class Cgroup {
 public:
  virtual ~Cgroup() = default;
  // Adds a process to the sandbox (kCommandsApart: beside the commands, not
  // under their memory limit; this is where init goes).
  virtual Result<void> addProcess(pid_t pid) = 0;
  // Adds a process where commands run, under the memory limit (kOneGroup:
  // the same as addProcess). Side processes go here.
  virtual Result<void> addCommandProcess(pid_t pid) = 0;
  // An fd (O_RDWR, close-on-exec) on the cgroup.procs of the place commands
  // run. Writing "0" through it moves the writer there; the kernel checks
  // permission against the credentials and cgroup namespace of the opener,
  // so a process inside the sandbox can use an fd the service opened. Init's
  // command child writes it before exec. Owned by the caller.
  virtual Result<sys::UniqueFd> openCommandEntry() = 0;
  // oom_kills counts kills anywhere in the sandbox; memory_peak_bytes is the
  // commands' peak (the limit's own counter).
  virtual Result<CgroupCounters> counters() = 0;
  // Starts a new execution's accounting: the memory peak is reset so that
  // nothing carries over from the previous command (red-team case B34).
  virtual void beginExecution() = 0;
  // An fd that becomes readable when the memory controller reports an OOM
  // (v1: an eventfd registered on memory.oom_control through
  // cgroup.event_control; v2: inotify on memory.events), or -1 where not
  // available. Readers drain it and then read counters(); owned by the cgroup.
  virtual int memoryEventFd() noexcept { return -1; }
  // Drains a readable memoryEventFd().
  virtual void drainMemoryEvents() noexcept {}
  // SIGKILL every process in the cgroup (v2 cgroup.kill; v1 per pid).
  virtual Result<void> killAll() = 0;
  // The directory that holds the sandbox's memory limit (v1: in the memory
  // hierarchy; v2: the sandbox's directory). Control files the interface
  // does not cover (v1 memory.oom_control) are written there.
  virtual std::string memoryDirectory() const = 0;
  // The directory of the commands' own memory limit: the "commands" child
  // with kCommandsApart, else memoryDirectory().
  virtual std::string commandsMemoryDirectory() const { return memoryDirectory(); }
  // rmdir of the sandbox's directories, children first (whatever layout an
  // attached cgroup was created with); the cgroup must be empty. The parent
  // stays (see above).
  virtual Result<void> remove() = 0;
};

class CgroupDriver {
 public:
  virtual ~CgroupDriver() = default;
  virtual std::string version() const = 0;  // "v1" or "v2"
  virtual std::vector<std::string> controllers() const = 0;
  // Creates a cgroup named `name` with the limits applied in `layout`.
  // Nothing is left behind on failure.
  virtual Result<std::unique_ptr<Cgroup>> create(const std::string& name,
                                                 const ResourceLimits& limits,
                                                 MemoryLayout layout = MemoryLayout::kOneGroup) = 0;
  // Attaches to an existing cgroup (crash recovery): enough to kill what is
  // in it and remove it, in either layout.
  virtual std::unique_ptr<Cgroup> attach(const std::string& name) = 0;
  // Names of sandbox cgroups that start with prefix (below the parent, or at
  // the top where an earlier release put them).
  virtual std::vector<std::string> list(const std::string& prefix) = 0;
};

struct CgroupMounts {
  std::optional<std::string> v2_root;  // unified mount with controllers
  std::vector<std::string> v2_controllers;
  std::map<std::string, std::string> v1_controller_mounts;  // "memory" -> mount path
};
// The pids of a cgroup.procs (or tasks) file's text, one per line.
std::vector<pid_t> parsePids(const std::string& text);

// Parses /proc/self/mountinfo text and, for v2, the root's cgroup.controllers.
CgroupMounts parseCgroupMounts(const std::string& mountinfo, CgroupFs& fs);

// Chooses v2 when the unified hierarchy has memory, pids and cpu; else v1
// when all three v1 controllers are mounted; else ExecutionUnavailable
// naming what is missing.
Result<std::unique_ptr<CgroupDriver>> makeCgroupDriver(const CgroupMounts& mounts,
                                                       std::shared_ptr<CgroupFs> fs);

// MEMORY and PIDS for one command (host::LimitSource), from the things that
// enforce them: the memory controller's OOM-kill counter and the pids
// controller's refused-fork counter, against their values when the command
// began (construction calls beginExecution, so the memory peak is the
// command's own). The memory event fd wakes the supervisor at an OOM; the
// peak is the result's peak_memory_bytes. The cgroup must outlive it.
class CgroupLimits final : public host::LimitSource {
 public:
  explicit CgroupLimits(Cgroup& cgroup);
  std::optional<KillReason> hit() override;
  int wakeFd() const noexcept override { return cgroup_.memoryEventFd(); }
  void drainWake() noexcept override { cgroup_.drainMemoryEvents(); }
  std::optional<std::int64_t> peakMemoryBytes() override;

 private:
  Cgroup& cgroup_;
  std::optional<CgroupCounters> before_;
};

// Parses "key value" lines (memory.events, pids.events, memory.oom_control).
std::optional<std::int64_t> parseKeyedCounter(const std::string& text, const std::string& key);

}  // namespace airlock::host
