// The memory limit of one gVisor sandbox on cgroup v1, command by command
// (gvisor_environment.h, "MEMORY"; spec 000, resource limits).
//
// The host cgroup holds the sentry, the gofer and runsc as well as the
// command's memory (gVisor's memory file), and the pages of the workspace and
// /tmp tmpfs mounts that the gofer wrote. So the limit is set at each
// command's start to what the sandbox holds then (its base) plus
// memory_bytes minus kOomKillHeadroom: the command stalls there (the adapter
// sets oom_kill_disable, so the kernel never kills the sentry), the adapter
// reports MEMORY, tells the shim to kill the command, and raises the limit
// by kOomKillHeadroom so that the sentry can run the kill. The raise comes in
// two steps: a quarter of the headroom at once (the sentry's own threads,
// the shim's among them, must not stay stalled: a sentry stalled too long
// dies), the rest when the shim reports that it has sent the SIGKILL, or
// at once should the command stall the sandbox again before that
// (kKilling; at most kKillSentBudget later). The command then meets its
// kill soon after it resumes, instead of racing the kill through the whole
// room (at a 75 MiB limit on 2 cores: before, about 1 kill in 100 landed
// only after the command had passed the limit; after, none in 200 on a
// quiet machine and 4 in 320 with a second such run beside it). The command may still use some of
// that room before the kill lands (the sentry, not the host, kills it); the room is the headroom
// less 1 MiB, so the command's memory stays under memory_bytes, however many kills came before.
// Should the command fill even that room and stall the sandbox again before the kill lands, a
// watcher (a thread from raiseForKill until endCommand) raises the limit by another
// kOomKillHeadroom, up to kOomKillSteps times: the command's peak then passes memory_bytes (the
// result's peak says by how much) rather than the sandbox being lost.
//
// The sentry gives a dead command's memory back asynchronously, and a kill
// under a stalled limit is slow to be given back (measured here: up to a few
// hundred milliseconds). A base taken before that would hand the rest to the
// next command, so after a MEMORY kill beginCommand first waits (at most
// kSettleBudget) until the sandbox's own memory (usage minus the tmpfs
// files) is back within kSettleSlack of what it was at the killed command's
// start. If it is not, the base stays at that earlier figure: the command
// gets less room, never more, and a sandbox still holding so much that the
// command would start with less than kStartRoom free below its limit
// refuses the command (ExecutionUnavailable naming why; the sandbox stays
// usable, and the next try waits again). After a command that
// ended by itself the base is what the sandbox holds at the start.
//
// Borrowed fds; no thread-safety (the adapter runs one command at a time).
// With an empty memory directory (no v1 memory controller) every call is a
// no-op and the cgroup's fixed limit applies.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "airlock/core/error.h"

namespace airlock::gvisor {

// The sandbox's own memory may grow this much between commands (the
// sentry's heap, caches) without being taken for memory not yet given back.
inline constexpr std::int64_t kSettleSlack = 4ll << 20;
// What must be free below a command's limit when it starts: the sentry's
// own host allocations for the start (a ptrace stub per address space)
// fail at the limit, and the sentry dies of that failure. Under a small
// limit, half the command's room.
inline constexpr std::int64_t kStartRoom = 8ll << 20;
// How long beginCommand waits for memory to be given back.
inline constexpr std::chrono::milliseconds kSettleBudget{5000};
// Further raises while a MEMORY kill is pending (see above).
inline constexpr int kOomKillSteps = 4;
// How long the raise for a MEMORY kill waits for the shim to report the
// kill sent (should the sentry itself need memory to run the shim, the
// raise comes after this anyway).
inline constexpr std::chrono::milliseconds kKillSentBudget{25};

class SandboxMemory {
 public:
  SandboxMemory() = default;
  ~SandboxMemory() { endCommand(); }
  SandboxMemory(const SandboxMemory&) = delete;
  SandboxMemory& operator=(SandboxMemory&& other) noexcept;
  // memory_dir: the sandbox's v1 memory cgroup directory, or empty.
  // tmpfs_fds: the workspace and /tmp mounts (fstatfs), borrowed.
  SandboxMemory(std::string memory_dir, std::int64_t memory_bytes, std::vector<int> tmpfs_fds);

  // Sets the command's limit (see above). ExecutionUnavailable when the
  // sandbox still holds more than a command's room or the limit cannot be
  // written.
  Result<void> beginCommand();
  // The cgroup is stalled at the command's limit (under_oom).
  bool underOom() const;
  // Room for the sentry to run the MEMORY kill: a quarter of the headroom
  // at once; then the limit becomes base + memory_bytes less a margin of
  // 1 MiB for the kernel's forced charges, once killSent() is called or
  // kKillSentBudget has passed. Idempotent
  // until the next beginCommand. Starts the watcher, which raises.
  void raiseForKill() noexcept;
  // The shim has sent the command its SIGKILL (any thread).
  void killSent() noexcept { kill_sent_ = true; }
  // The command is over: stops the watcher.
  void endCommand() noexcept;
  // The command's own peak: the cgroup's peak since beginCommand minus the
  // base; nullopt without a v1 memory directory or a peak.
  std::optional<std::int64_t> commandPeak(std::optional<std::int64_t> cgroup_peak) const;

  // Usage minus the tmpfs files: the sandbox's own memory.
  std::optional<std::int64_t> ownMemory() const;

 private:
  std::optional<std::int64_t> usage() const;
  std::int64_t tmpfsBytes() const;
  bool writeLimit(std::int64_t bytes) noexcept;
  void watch() noexcept;
  // The limit at a MEMORY stall's first step (a quarter of the headroom
  // given back), and once the kill is sent (memory_bytes less the forced
  // charge margin), both above the base.
  std::int64_t firstStepLimit() const;
  std::int64_t killRoomLimit() const;
  // Stalled at `limit`: under the OOM with usage at it.
  bool stalledAt(std::int64_t limit) const;

  std::string dir_;
  std::int64_t memory_bytes_ = 0;
  std::vector<int> tmpfs_fds_;
  std::optional<std::int64_t> own_at_start_;  // at the last settled start
  std::int64_t base_ = 0;
  std::int64_t headroom_ = 0;
  bool raised_ = false;
  std::thread watcher_;
  std::atomic<bool> stop_watch_{false};
  std::atomic<bool> kill_sent_{false};
};

}  // namespace airlock::gvisor
