#include "airlock/sandbox/oci/gvisor_memory.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
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

SandboxMemory::SandboxMemory(std::string sandbox_dir, std::string application_dir,
                             std::int64_t memory_bytes)
    : memory_bytes_(memory_bytes), headroom_(std::min(kOomKillHeadroom, memory_bytes / 4)) {
  sandbox_.dir = std::move(sandbox_dir);
  application_.dir = std::move(application_dir);
}

SandboxMemory& SandboxMemory::operator=(SandboxMemory&& other) noexcept {
  endCommand();
  other.endCommand();
  sandbox_ = std::move(other.sandbox_);
  application_ = std::move(other.application_);
  memory_bytes_ = other.memory_bytes_;
  headroom_ = other.headroom_;
  application_at_start_ = other.application_at_start_;
  raised_ = other.raised_;
  return *this;
}

std::optional<std::int64_t> SandboxMemory::usage(const Level& level) {
  return readNumber(level.dir + "/memory.usage_in_bytes");
}

bool SandboxMemory::underOom(const Level& level) {
  auto text = sys::readFile(AT_FDCWD, (level.dir + "/memory.oom_control").c_str());
  return text && host::parseKeyedCounter(*text, "under_oom").value_or(0) > 0;
}

// memsw (where swap accounting exists) must stay >= the limit: it is
// written before the limit (raising) and after it (lowering); the write
// that is out of order fails harmlessly.
bool SandboxMemory::writeLimit(const Level& level) noexcept {
  const std::string v = std::to_string(level.limit);
  const std::string memsw = level.dir + "/memory.memsw.limit_in_bytes";
  (void)sys::writeFile(AT_FDCWD, memsw.c_str(), v);
  const bool ok = static_cast<bool>(
      sys::writeFile(AT_FDCWD, (level.dir + "/memory.limit_in_bytes").c_str(), v));
  (void)sys::writeFile(AT_FDCWD, memsw.c_str(), v);
  return ok;
}

bool SandboxMemory::stalled(const Level& level) {
  auto u = usage(level);
  return underOom(level) && u && *u >= level.limit - kForcedChargeMargin;
}

Result<void> SandboxMemory::beginCommand() {
  if (application_.dir.empty()) return {};
  endCommand();
  const bool after_kill = raised_;
  raised_ = false;
  kill_sent_ = false;
  sandbox_steps_ = 0;
  auto held = usage(application_);
  if (!held) return fail(ErrorCode::kExecutionUnavailable, "read the sandbox's memory usage");
  const auto deadline = Clock::now() + kSettleBudget;
  if (application_at_start_ && after_kill) {
    // The memory of the command stopped at its limit, not given back yet:
    // wait for it.
    while (*held > *application_at_start_ + kSettleSlack && Clock::now() < deadline) {
      ::poll(nullptr, 0, 5);
      if (auto h = usage(application_)) held = h;
    }
  }
  const std::optional<std::int64_t> before = application_at_start_;
  const bool settled = !before || !after_kill || *held <= *before + kSettleSlack;
  // The figure the next command's wait compares with: this one's, even
  // unsettled (a sentry that keeps what it grew costs one wait, not one per
  // command).
  application_at_start_ = *held;
  // Unsettled: the base is the earlier figure, so this command's room is
  // memory_bytes less whatever is still held, never more.
  Level application = application_;
  application.base = settled ? *held : *before + kSettleSlack;
  application.limit = application.base + memory_bytes_ - headroom_;
  // The kernel memory of a new stub is charged to the application, and
  // the sentry dies when that charge fails at the limit: a command starts
  // only with kStartRoom free below its limit (half its room under a small
  // limit), waiting (within the same budget) for memory still being given
  // back.
  const std::int64_t start_room = std::min(kStartRoom, (memory_bytes_ - headroom_) / 2);
  while (held && *held + start_room > application.limit && Clock::now() < deadline) {
    ::poll(nullptr, 0, 5);
    held = usage(application_);
  }
  Level sandbox = sandbox_;
  auto total = usage(sandbox_);
  if (total) {
    sandbox.base = *total;
    sandbox.limit = *total + memory_bytes_ + kSentryRoom;
  }
  // The sandbox level is raised first and lowered last, so it never sits
  // below the application's limit.
  const bool sandbox_first = sandbox.limit >= sandbox_.limit;
  const bool written = held && total && *held + start_room <= application.limit &&
                       (!sandbox_first || writeLimit(sandbox)) && writeLimit(application) &&
                       (sandbox_first || writeLimit(sandbox));
  if (!written) {
    raised_ = after_kill;  // the next try waits again, against the same figure
    application_at_start_ = before;
    const std::int64_t still = held ? (before ? *held - *before : *held) : 0;
    return fail(ErrorCode::kExecutionUnavailable,
                "the sandbox has not given back the memory of the command its memory limit "
                "stopped (" +
                    std::to_string(still >> 20) +
                    " MiB still held); try again, or destroy it and provision again");
  }
  application_ = application;
  sandbox_ = sandbox;
  // The sandbox's peak from here (writing 0 resets the v1 high-water mark);
  // the application's is reset by the cgroup's beginExecution.
  (void)sys::writeFile(AT_FDCWD, (sandbox_.dir + "/memory.max_usage_in_bytes").c_str(), "0");
  return {};
}

bool SandboxMemory::underOom() const {
  return !application_.dir.empty() && underOom(application_);
}

void SandboxMemory::raiseSandboxIfStalled() noexcept {
  if (sandbox_steps_ >= kOomKillSteps || !stalled(sandbox_)) return;
  sandbox_.limit += kOomKillHeadroom;
  (void)writeLimit(sandbox_);
  ++sandbox_steps_;
}

void SandboxMemory::raiseForKill() noexcept {
  if (application_.dir.empty() || raised_) return;
  // The sentry's own threads must not stay stalled: a stalled sandbox level
  // gets its room at once; the command's stubs a little (the shim's among
  // them run the kill).
  raiseSandboxIfStalled();
  application_.limit = firstStepLimit();
  (void)writeLimit(application_);
  raised_ = true;
  stop_watch_ = false;
  try {
    watcher_ = std::thread([this] { watch(); });
  } catch (...) {
    // No thread: raise now; the single raise is all the kill gets.
    application_.limit = killRoomLimit();
    (void)writeLimit(application_);
  }
}

void SandboxMemory::watch() noexcept {
  // Until the kill is sent, the room is the first step's: a command that
  // fills it waits there (only its own stubs wait; the sentry and the shim
  // are outside its cgroup), so it cannot race its kill through the rest.
  const auto deadline = Clock::now() + kKillSentBudget;
  while (!kill_sent_.load() && !stop_watch_.load() && Clock::now() < deadline) {
    ::poll(nullptr, 0, 1);
    raiseSandboxIfStalled();
  }
  application_.limit = killRoomLimit();
  (void)writeLimit(application_);
  int steps = 0;
  while (!stop_watch_.load()) {
    ::poll(nullptr, 0, 2);
    raiseSandboxIfStalled();
    if (steps >= kOomKillSteps || !stalled(application_)) continue;
    application_.limit += kOomKillHeadroom;
    (void)writeLimit(application_);
    ++steps;
  }
}

std::int64_t SandboxMemory::firstStepLimit() const {
  return application_.base + memory_bytes_ - headroom_ + headroom_ / 4;
}

std::int64_t SandboxMemory::killRoomLimit() const {
  return application_.base + memory_bytes_ - std::min(kForcedChargeMargin, headroom_ / 2);
}

void SandboxMemory::endCommand() noexcept {
  stop_watch_ = true;
  if (watcher_.joinable()) watcher_.join();
}

std::optional<std::int64_t> SandboxMemory::commandPeak(
    std::optional<std::int64_t> application_peak) const {
  if (application_.dir.empty() || !application_peak) return std::nullopt;
  std::int64_t peak = std::max<std::int64_t>(0, *application_peak - application_.base);
  if (sandbox_steps_ > 0)
    if (auto p = readNumber(sandbox_.dir + "/memory.max_usage_in_bytes"))
      peak = std::max(peak, *p - sandbox_.base);
  return peak;
}

}  // namespace airlock::gvisor
