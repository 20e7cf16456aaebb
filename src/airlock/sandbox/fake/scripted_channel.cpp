#include "airlock/sandbox/fake/scripted_channel.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>

#include <algorithm>
#include <cerrno>

#include "airlock/sys/io.h"

namespace airlock::fake {
namespace {

using host::ChannelEvent;

Result<sys::UniqueFd> makeEventFd() {
  sys::UniqueFd fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!fd.valid()) return failErrno(ErrorCode::kExecutionUnavailable, "eventfd", errno);
  return fd;
}

void drainEventFd(int fd) noexcept {
  std::uint64_t n = 0;
  (void)sys::readSome(fd, &n, sizeof n);
}

void signalEventFd(int fd) noexcept {
  const std::uint64_t one = 1;
  (void)sys::writeAll(fd, &one, sizeof one);
}

// Bytes written into a pipe and not yet read by the other end.
int unread(int fd) noexcept {
  int n = 0;
  return ::ioctl(fd, FIONREAD, &n) == 0 ? n : 0;
}

}  // namespace

std::optional<KillReason> ScriptedChannel::DiskLimit::hit() {
  if (full_) return KillReason::kDisk;
  return std::nullopt;
}

void ScriptedChannel::DiskLimit::drainWake() noexcept {
  drainEventFd(wake_.get());
}

void ScriptedChannel::DiskLimit::fill() noexcept {
  full_ = true;
  signalEventFd(wake_.get());
}

Result<std::unique_ptr<ScriptedChannel>> ScriptedChannel::create(ScriptedRun run,
                                                                 ScriptedWorkspace& workspace) {
  auto event = makeEventFd();
  if (!event) return tl::unexpected(event.error());
  auto disk_wake = makeEventFd();
  if (!disk_wake) return tl::unexpected(disk_wake.error());
  return std::unique_ptr<ScriptedChannel>(
      new ScriptedChannel(std::move(run), workspace, std::move(*event), std::move(*disk_wake)));
}

ScriptedChannel::ScriptedChannel(ScriptedRun run, ScriptedWorkspace& workspace, sys::UniqueFd event,
                                 sys::UniqueFd disk_wake)
    : run_(std::move(run)),
      workspace_(workspace),
      event_(std::move(event)),
      disk_(std::move(disk_wake)),
      now_(std::chrono::steady_clock::now()) {}

Result<void> ScriptedChannel::start(host::SandboxPipeEnds ends) {
  ++calls_.starts;
  ends_ = std::move(ends);
  // The process's ends never block the supervising thread that plays it.
  for (const auto& fd : {&ends_.stdin_read, &ends_.stdout_write, &ends_.stderr_write})
    if (fd->valid()) (void)::fcntl(fd->get(), F_SETFL, O_NONBLOCK);
  step_ = Step::kExec;
  rearm();
  return {};
}

bool ScriptedChannel::readEvents(std::vector<ChannelEvent>& events) {
  step();
  events.insert(events.end(), pending_.begin(), pending_.end());
  pending_.clear();
  rearm();
  return true;
}

void ScriptedChannel::noteKill(KillReason why) noexcept {
  calls_.kills.push_back(why);
}

bool ScriptedChannel::stop() {
  ++calls_.stops;
  if (step_ == Step::kBackground) {
    endProcess();  // the background process is killed; the main one's exit stands
    pending_.push_back({ChannelEvent::Kind::kAllGone, exit_status_, std::nullopt});
  } else if (step_ != Step::kExited && step_ != Step::kGone) {
    endProcess();
    pending_.push_back({ChannelEvent::Kind::kAllGone, SIGKILL, std::nullopt});
  }
  step_ = Step::kGone;
  rearm();
  return true;
}

void ScriptedChannel::abandon() noexcept {
  ++calls_.abandons;
  endProcess();
  step_ = Step::kGone;
}

int ScriptedChannel::poll(pollfd* fds, std::size_t count, TimePoint wake) {
  const int ready = sys::pollSome(fds, count, 0);
  if (ready != 0) return ready;
  if (step_ == Step::kBackground) {
    now_ = std::max(now_, wake);  // simulated: the background process runs on
    return 0;
  }
  if (step_ == Step::kSleeping) {
    // Simulated: the sleep passes, up to the supervisor's next wake-up.
    now_ = std::max(now_, std::min(wake, sleep_until_));
    rearm();
    return 0;
  }
  // Waiting for the world (a cancel, a destroy, the service stopping): in
  // real time, which simulated time follows.
  const auto real_start = std::chrono::steady_clock::now();
  const auto wait_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(wake - now_).count() + 1;
  const int got =
      sys::pollSome(fds, count, static_cast<int>(std::clamp<long long>(wait_ms, 0, 60000)));
  now_ += std::chrono::steady_clock::now() - real_start;
  return got;
}

bool ScriptedChannel::busy() const noexcept {
  switch (step_) {
    case Step::kExec:
    case Step::kReadStdin:
    case Step::kWriteStdout:
    case Step::kWriteStderr:
    case Step::kEffects:
      return true;
    case Step::kSleeping:
      return now_ >= sleep_until_;
    default:
      return false;
  }
}

void ScriptedChannel::rearm() noexcept {
  const bool want = busy() || !pending_.empty();
  if (want == armed_) return;
  if (want) {
    signalEventFd(event_.get());
  } else {
    drainEventFd(event_.get());
  }
  armed_ = want;
}

void ScriptedChannel::step() {
  switch (step_) {
    case Step::kExec:
      step_ = run_.behaviour.echo_stdin_to_stdout ? Step::kReadStdin : Step::kWriteStdout;
      if (step_ == Step::kWriteStdout) stdout_ = run_.behaviour.stdout_data;
      return;
    case Step::kReadStdin:
      if (!readStdin()) return;
      stdout_ += run_.behaviour.stdout_data;
      step_ = Step::kWriteStdout;
      return;
    case Step::kWriteStdout:
      if (!writeOut(ends_.stdout_write.get(), stdout_, &written_)) return;
      written_ = 0;
      step_ = Step::kWriteStderr;
      return;
    case Step::kWriteStderr:
      if (!writeOut(ends_.stderr_write.get(), run_.behaviour.stderr_data, &written_)) return;
      step_ = Step::kEffects;
      return;
    case Step::kEffects:
      applyEffects();
      return;
    case Step::kSleeping:
      if (now_ >= sleep_until_) exitWith(run_.behaviour.exit_code);
      return;
    default:
      return;
  }
}

bool ScriptedChannel::readStdin() {
  if (!ends_.stdin_read.valid()) return true;  // no stdin_data: empty
  char buf[65536];
  for (;;) {
    const ssize_t got = sys::readSome(ends_.stdin_read.get(), buf, sizeof buf);
    if (got > 0) {
      stdout_.append(buf, static_cast<std::size_t>(got));
      continue;
    }
    if (got < 0 && errno == EAGAIN) return false;  // the feeder has more to give
    ends_.stdin_read.reset();
    return true;
  }
}

bool ScriptedChannel::writeOut(int fd, const std::string& data, std::size_t* offset) {
  if (*offset < data.size()) {
    const ssize_t put = sys::writeSome(fd, data.data() + *offset, data.size() - *offset);
    if (put > 0) *offset += static_cast<std::size_t>(put);
    if (put < 0 && errno != EAGAIN) *offset = data.size();  // the reader is gone
    return false;  // the next call sees whether it was read
  }
  return unread(fd) == 0;
}

void ScriptedChannel::applyEffects() {
  for (const auto& [path, bytes] : run_.writes) {
    auto put = workspace_.put(path, bytes);
    if (!put) {
      failure_ = put.error();
      exitWith(1);
      return;
    }
    if (!*put) {
      disk_.fill();  // as a full tmpfs: the write fails and the process waits to be killed
      step_ = Step::kUntilStopped;
      return;
    }
  }
  for (const auto& path : run_.deletes) workspace_.remove(path);
  if (run_.behaviour.runs_until_cancelled) {
    step_ = Step::kUntilStopped;
    return;
  }
  sleep_until_ = now_ + run_.behaviour.runs_for;
  step_ = Step::kSleeping;
}

void ScriptedChannel::exitWith(int code) {
  const int status = (code & 0xff) << 8;  // exited with `code`, as wait(2) reports it
  pending_.push_back({ChannelEvent::Kind::kMainExited, status, std::nullopt});
  const ScriptedBehaviour& b = run_.behaviour;
  if (b.background_holds_stdout || b.background_holds_stderr) {
    // The main process's ends close; the background process keeps its own.
    ends_.stdin_read.reset();
    if (!b.background_holds_stdout) ends_.stdout_write.reset();
    if (!b.background_holds_stderr) ends_.stderr_write.reset();
    exit_status_ = status;
    step_ = Step::kBackground;
    return;
  }
  endProcess();
  pending_.push_back({ChannelEvent::Kind::kAllGone, status, std::nullopt});
  step_ = Step::kExited;
}

void ScriptedChannel::endProcess() noexcept {
  ends_ = {};
}

}  // namespace airlock::fake
