// The memory limit of one gVisor sandbox on cgroup v1, command by command
// (gvisor_environment.h, "MEMORY"; spec 000, resource limits).
//
// Two memory cgroups, one inside the other (the v1 driver's kCommandsApart
// layout):
//   the application's ("commands" child): the ptrace stub processes, in
//     which the command's code runs. A page the command touches first is
//     charged there (the host faults gVisor's memory file into the stub's
//     address space), and so is the kernel memory of a new stub (the first
//     stub forks every later one). gvisor_environment moves the stubs there
//     (adoptApplication); nothing else lives there.
//   the sandbox's (the parent): the sentry, the gofer and runsc besides,
//     and the pages the sentry fills itself (file contents it reads in, the
//     tmpfs files the gofer writes, /dev/shm written through write(2)).
// Both wait at their limit instead of killing (oom_kill_disable).
//
// At each command's start the application's limit becomes what it holds
// then (its base) plus memory_bytes minus kOomKillHeadroom, and the
// sandbox's limit becomes what the sandbox holds plus memory_bytes plus
// kSentryRoom: the command stalls its own stubs at its limit while the
// sentry keeps room for its own threads, page tables and new stubs. (When
// both sat in one cgroup, the sentry stalled with the command and now and
// then died of it: a thread it could not create, a signal in its runtime.)
// The sandbox's limit is the backstop for what the sentry fills for the
// command.
//
// At a stall (either level: v1 marks a cgroup under_oom when it or an
// ancestor is at its limit) the adapter reports MEMORY, tells the shim to
// kill the command, and raiseForKill opens room for the kill: the stub
// must finish the page fault it waits in before the sentry can stop it.
// For the application, a quarter of the headroom at once, the rest when
// the shim reports that it has sent the SIGKILL (kKilling), or
// kKillSentBudget later at the latest: a command that fills the first step
// before that waits there, so it meets its kill soon after it resumes
// instead of racing the kill through the whole room (two 75 MiB kill loops
// side by side on 2 cores: 1 kill in 640 passed memory_bytes; 10 when a
// second stall opened the rest at once). The room is the headroom less
// 1 MiB, so the command's memory stays under memory_bytes however many
// kills came before. A stalled sandbox level gets kOomKillHeadroom at once.
// Should a level stall again before the kill lands, a watcher (a thread
// from raiseForKill until endCommand) raises it by another
// kOomKillHeadroom, up to kOomKillSteps times: the command's peak then
// passes memory_bytes (the result's peak says by how much) rather than the
// sandbox being lost.
//
// The sentry gives a dead command's memory back asynchronously (measured
// here: up to a few hundred milliseconds after a kill under a stalled
// limit). A base taken before that would hand the rest to the next
// command, so after a MEMORY kill beginCommand first waits (at most
// kSettleBudget) until the application holds no more than kSettleSlack
// above what it held at the killed command's start. If it does, the base
// stays at that earlier figure: the command gets less room, never more; and
// when the command would start with less than kStartRoom free below its
// limit, the command is refused (ExecutionUnavailable naming why; the
// sandbox stays usable, and the next try waits again).
//
// peak_memory_bytes is the application's peak above its base; when the
// sandbox level stalled, the sandbox's own growth above its base if that
// is more.
//
// Borrowed paths; no thread-safety (the adapter runs one command at a
// time). With empty directories (no v1 memory controller) every call is a
// no-op and the cgroup's fixed limit applies.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>

#include "airlock/core/error.h"

namespace airlock::gvisor {

// The application's memory may grow this much between commands (a stub's
// page tables, a stub kept for reuse) without being taken for memory not
// yet given back.
inline constexpr std::int64_t kSettleSlack = 4ll << 20;
// What must be free below the application's limit when a command starts:
// the kernel memory of a new stub (its stack, its page tables) is charged
// there, and the sentry dies when forking one fails. Under a small limit,
// half the command's room.
inline constexpr std::int64_t kStartRoom = 8ll << 20;
// The sandbox level's limit, above what it holds at a command's start and
// memory_bytes: the sentry's own growth during a command (the file
// contents it reads in for the command; measured here: 11 MiB for a first
// python3 start).
inline constexpr std::int64_t kSentryRoom = 16ll << 20;
// How long beginCommand waits for memory to be given back.
inline constexpr std::chrono::milliseconds kSettleBudget{5000};
// Further raises while a MEMORY kill is pending (see above).
inline constexpr int kOomKillSteps = 4;
// How long the raise for a MEMORY kill waits for the shim to report the
// kill sent (a command with threads that still need new stub threads must
// not wait at its limit long: a failed stub thread panics the sentry).
inline constexpr std::chrono::milliseconds kKillSentBudget{25};

class SandboxMemory {
 public:
  SandboxMemory() = default;
  ~SandboxMemory() { endCommand(); }
  SandboxMemory(const SandboxMemory&) = delete;
  SandboxMemory& operator=(SandboxMemory&& other) noexcept;
  // sandbox_dir: the sandbox's v1 memory cgroup directory, or empty;
  // application_dir: its child that holds the stubs.
  SandboxMemory(std::string sandbox_dir, std::string application_dir, std::int64_t memory_bytes);

  // Sets the command's limits (see above). ExecutionUnavailable when the
  // application still holds more than a command's room or a limit cannot
  // be written.
  Result<void> beginCommand();
  // The command is stalled at a limit (the application's under_oom, which
  // the sandbox level's stall sets too).
  bool underOom() const;
  // Room for the sentry to run the MEMORY kill (see above). Idempotent
  // until the next beginCommand. Starts the watcher, which raises.
  void raiseForKill() noexcept;
  // raiseForKill has run for this command (a MEMORY kill is under way).
  bool killPending() const noexcept { return raised_; }
  // The shim has sent the command its SIGKILL (any thread).
  void killSent() noexcept { kill_sent_ = true; }
  // The command is over: stops the watcher.
  void endCommand() noexcept;
  // The command's own peak (see above), from the application's peak since
  // beginCommand (the cgroup's commands peak); nullopt without a v1 memory
  // directory or a peak.
  std::optional<std::int64_t> commandPeak(std::optional<std::int64_t> application_peak) const;

 private:
  // One of the two cgroups: its directory, what it held at the command's
  // start, and its limit now.
  struct Level {
    std::string dir;
    std::int64_t base = 0;
    std::int64_t limit = 0;
  };
  static std::optional<std::int64_t> usage(const Level& level);
  static bool underOom(const Level& level);
  static bool writeLimit(const Level& level) noexcept;
  // Stalled at its limit: under the OOM with usage at it (not the waiters
  // of an earlier, lower limit still leaving: under_oom lags a raise).
  static bool stalled(const Level& level);
  void watch() noexcept;
  // The application's limit at a MEMORY stall's first step (a quarter of
  // the headroom given back), and once the kill is sent (memory_bytes less
  // the forced charge margin), both above its base.
  std::int64_t firstStepLimit() const;
  std::int64_t killRoomLimit() const;
  // Raises a stalled sandbox level by kOomKillHeadroom (watcher or
  // raiseForKill), at most kOomKillSteps times a command.
  void raiseSandboxIfStalled() noexcept;

  Level sandbox_;
  Level application_;
  std::int64_t memory_bytes_ = 0;
  std::int64_t headroom_ = 0;
  std::optional<std::int64_t> application_at_start_;  // at the last start
  bool raised_ = false;
  std::atomic<int> sandbox_steps_{0};  // raises of the sandbox level
  std::thread watcher_;
  std::atomic<bool> stop_watch_{false};
  std::atomic<bool> kill_sent_{false};
};

}  // namespace airlock::gvisor
