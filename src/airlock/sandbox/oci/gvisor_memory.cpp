#include "airlock/sandbox/oci/gvisor_memory.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "airlock/sandbox/host/cgroup.h"
#include "airlock/sandbox/oci/gvisor_environment.h"
#include "airlock/sys/io.h"

namespace airlock::gvisor {
namespace {

using Clock = std::chrono::steady_clock;

// The kernel lets a process being killed charge a little past the limit (a
// page, measured here); the raised limit stays this far below base +
// memory_bytes so that the command's peak does not pass memory_bytes.
constexpr std::int64_t kForcedChargeMargin = 1ll << 20;

std::optional<std::int64_t> readNumber(const std::string& path) {
  auto text = sys::readFile(AT_FDCWD, path.c_str(), 64);
  if (!text) return std::nullopt;
  try {
    return std::stoll(*text);
  } catch (...) {
    return std::nullopt;
  }
}

}  // namespace

SandboxMemory::SandboxMemory(std::string memory_dir, std::int64_t memory_bytes,
                             std::vector<int> tmpfs_fds)
    : dir_(std::move(memory_dir)),
      memory_bytes_(memory_bytes),
      tmpfs_fds_(std::move(tmpfs_fds)),
      headroom_(std::min(kOomKillHeadroom, memory_bytes / 4)) {}

SandboxMemory& SandboxMemory::operator=(SandboxMemory&& other) noexcept {
  endCommand();
  other.endCommand();
  dir_ = std::move(other.dir_);

  memory_bytes_ = other.memory_bytes_;
  tmpfs_fds_ = std::move(other.tmpfs_fds_);
  own_at_start_ = other.own_at_start_;
  base_ = other.base_;
  headroom_ = other.headroom_;
  raised_ = other.raised_;
  return *this;
}

std::optional<std::int64_t> SandboxMemory::usage() const {
  return readNumber(dir_ + "/memory.usage_in_bytes");
}

std::int64_t SandboxMemory::tmpfsBytes() const {
  std::int64_t total = 0;
  for (int fd : tmpfs_fds_) {
    struct statfs st {};
    if (::fstatfs(fd, &st) == 0)
      total += static_cast<std::int64_t>(st.f_blocks - st.f_bfree) *
               static_cast<std::int64_t>(st.f_bsize);
  }
  return total;
}

std::optional<std::int64_t> SandboxMemory::ownMemory() const {
  if (dir_.empty()) return std::nullopt;
  auto u = usage();
  if (!u) return std::nullopt;
  return *u - tmpfsBytes();
}

// memsw (where swap accounting exists) must stay >= the limit: it is
// written before the limit (raising) and after it (lowering); the write
// that is out of order fails harmlessly.
bool SandboxMemory::writeLimit(std::int64_t bytes) noexcept {
  const std::string v = std::to_string(bytes);
  const std::string memsw = dir_ + "/memory.memsw.limit_in_bytes";
  (void)sys::writeFile(AT_FDCWD, memsw.c_str(), v);
  const bool ok =
      static_cast<bool>(sys::writeFile(AT_FDCWD, (dir_ + "/memory.limit_in_bytes").c_str(), v));
  (void)sys::writeFile(AT_FDCWD, memsw.c_str(), v);
  return ok;
}

Result<void> SandboxMemory::beginCommand() {
  if (dir_.empty()) return {};
  endCommand();
  const bool after_kill = raised_;
  raised_ = false;
  kill_sent_ = false;
  auto own = ownMemory();
  if (!own) return fail(ErrorCode::kExecutionUnavailable, "read the sandbox's memory usage");
  const auto deadline = Clock::now() + kSettleBudget;
  if (own_at_start_ && after_kill) {
    // The memory of the command stopped at its limit, not given back yet:
    // wait for it.
    while (*own > *own_at_start_ + kSettleSlack && Clock::now() < deadline) {
      ::poll(nullptr, 0, 5);
      if (auto o = ownMemory()) own = o;
    }
  }
  const std::optional<std::int64_t> before = own_at_start_;
  const bool settled = !before || !after_kill || *own <= *before + kSettleSlack;
  // The figure the next command's wait compares with: this one's, even
  // unsettled (a sentry that keeps what it grew costs one wait, not one per
  // command).
  own_at_start_ = *own;
  // Unsettled: the base is the earlier figure, so this command's room is
  // memory_bytes less whatever is still held, never more.
  base_ = (settled ? *own : *before + kSettleSlack) + tmpfsBytes();
  const std::int64_t limit = base_ + memory_bytes_ - headroom_;
  // The sentry's host-side allocations to start a command (a ptrace stub
  // process for each new address space: its kernel stack, its page tables)
  // fail with ENOMEM at the limit instead of stalling there, and the sentry
  // panics on that failure ("error initializing first thread"): a command
  // starts only with kStartRoom free below its limit (half its room under
  // a small limit), waiting (within the same budget) for memory still being
  // given back.
  const std::int64_t start_room = std::min(kStartRoom, (memory_bytes_ - headroom_) / 2);
  auto now = usage();
  while (now && *now + start_room > limit && Clock::now() < deadline) {
    ::poll(nullptr, 0, 5);
    now = usage();
  }
  if (!now || *now + start_room > limit || !writeLimit(limit)) {
    raised_ = after_kill;  // the next try waits again, against the same figure
    own_at_start_ = before;
    const std::int64_t held = before ? *own - *before : *own;
    return fail(ErrorCode::kExecutionUnavailable,
                "the sandbox has not given back the memory of the command its memory limit "
                "stopped (" +
                    std::to_string(held >> 20) +
                    " MiB still held); try again, or destroy it and provision again");
  }
  return {};
}

bool SandboxMemory::underOom() const {
  if (dir_.empty()) return false;
  auto text = sys::readFile(AT_FDCWD, (dir_ + "/memory.oom_control").c_str());
  return text && host::parseKeyedCounter(*text, "under_oom").value_or(0) > 0;
}

void SandboxMemory::raiseForKill() noexcept {
  if (dir_.empty() || raised_) return;
  // A little room at once: the sentry's own threads (the shim's among them)
  // must not stay stalled while the kill is sent.
  (void)writeLimit(firstStepLimit());
  raised_ = true;
  stop_watch_ = false;
  try {
    watcher_ = std::thread([this] { watch(); });
  } catch (...) {
    // No thread: raise now; the single raise is all the kill gets.
    (void)writeLimit(killRoomLimit());
  }
}

void SandboxMemory::watch() noexcept {
  // Until the kill is sent, the room is the first step's; stalled there
  // again, the sandbox gets the rest at once (a sentry left stalled dies).
  const auto deadline = std::chrono::steady_clock::now() + kKillSentBudget;
  while (!kill_sent_.load() && !stop_watch_.load() && std::chrono::steady_clock::now() < deadline) {
    ::poll(nullptr, 0, 1);
    if (stalledAt(firstStepLimit())) break;
  }
  std::int64_t limit = killRoomLimit();
  (void)writeLimit(limit);
  int steps = 0;
  while (!stop_watch_.load() && steps < kOomKillSteps) {
    ::poll(nullptr, 0, 2);
    if (!stalledAt(limit)) continue;
    limit += kOomKillHeadroom;
    (void)writeLimit(limit);
    ++steps;
  }
}

std::int64_t SandboxMemory::firstStepLimit() const {
  return base_ + memory_bytes_ - headroom_ + headroom_ / 4;
}

std::int64_t SandboxMemory::killRoomLimit() const {
  return base_ + memory_bytes_ - std::min(kForcedChargeMargin, headroom_ / 2);
}

bool SandboxMemory::stalledAt(std::int64_t limit) const {
  // Under the OOM and at this limit (not the waiters of an earlier, lower
  // one still leaving: under_oom lags a raise).
  auto u = usage();
  return underOom() && u && *u >= limit - kForcedChargeMargin;
}

void SandboxMemory::endCommand() noexcept {
  stop_watch_ = true;
  if (watcher_.joinable()) watcher_.join();
}

std::optional<std::int64_t> SandboxMemory::commandPeak(
    std::optional<std::int64_t> cgroup_peak) const {
  if (dir_.empty() || !cgroup_peak) return std::nullopt;
  return std::max<std::int64_t>(0, *cgroup_peak - base_);
}

}  // namespace airlock::gvisor
