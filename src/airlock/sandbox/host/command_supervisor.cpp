#include "airlock/sandbox/host/command_supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <string>
#include <type_traits>
#include <variant>

#include "airlock/sys/io.h"

namespace airlock::host {
namespace {

using Clock = std::chrono::steady_clock;
using OutputStream = ExecutionEnvironment::OutputStream;
using sys::UniqueFd;

// ---- output: stdout and stderr under one cap --------------------------------

class OutputPump {
 public:
  OutputPump(UniqueFd out, UniqueFd err, std::int64_t cap,
             const ExecutionEnvironment::OutputSink* sink)
      : cap_(cap), sink_(sink != nullptr && *sink ? sink : nullptr) {
    streams_[0].fd = std::move(out);
    streams_[0].which = OutputStream::kStdout;
    streams_[1].fd = std::move(err);
    streams_[1].which = OutputStream::kStderr;
  }
  int fd(int i) const noexcept { return streams_[i].fd.get(); }
  bool open() const noexcept { return streams_[0].fd.valid() || streams_[1].fd.valid(); }
  // The streams not yet at end-of-file, by name ("stdout", "stderr").
  std::vector<std::string> openNames() const {
    std::vector<std::string> names;
    if (streams_[0].fd.valid()) names.emplace_back("stdout");
    if (streams_[1].fd.valid()) names.emplace_back("stderr");
    return names;
  }
  void closeAll() noexcept {
    for (auto& s : streams_) s.fd.reset();
  }
  // One read from stream i (readable or hung up). True when this read
  // crossed the cap: the caller kills with OUTPUT_LIMIT.
  bool read(int i);
  // What is left in both pipes, read without blocking (the sandbox is gone).
  void drain() {
    for (int i = 0; i < 2; ++i)
      for (int guard = 0; streams_[i].fd.valid() && guard < 1024; ++guard) {
        (void)read(i);
        if (last_read_was_empty_) break;
      }
  }
  void moveInto(ExecutionResult& result) {
    result.stdout_data = std::move(streams_[0].data);
    result.stderr_data = std::move(streams_[1].data);
    result.stdout_truncated = streams_[0].truncated;
    result.stderr_truncated = streams_[1].truncated;
  }

 private:
  struct Stream {
    UniqueFd fd;
    std::string data;
    bool truncated = false;
    OutputStream which = OutputStream::kStdout;
  };
  std::array<Stream, 2> streams_;
  std::int64_t cap_;
  bool capped_ = false;  // the cap was crossed: later output is dropped
  bool last_read_was_empty_ = false;
  const ExecutionEnvironment::OutputSink* sink_;
  char buf_[65536];
};

bool OutputPump::read(int i) {
  Stream& s = streams_[i];
  const ssize_t got = sys::readSome(s.fd.get(), buf_, sizeof buf_);
  last_read_was_empty_ = got < 0 && errno == EAGAIN;
  if (last_read_was_empty_) return false;
  if (got <= 0) {
    s.fd.reset();
    return false;
  }
  if (capped_) {
    // Past the cap, until the kill closes the pipes: read and dropped, so
    // this stream (and only a stream that wrote) is truncated.
    s.truncated = true;
    return false;
  }
  const auto used = static_cast<std::int64_t>(streams_[0].data.size() + streams_[1].data.size());
  const std::int64_t room = std::max<std::int64_t>(0, cap_ - used);
  const auto keep = static_cast<std::size_t>(std::min<std::int64_t>(got, room));
  s.data.append(buf_, keep);
  if (sink_ != nullptr && keep > 0) (*sink_)(s.which, std::string_view(buf_, keep));
  if (got <= room) return false;
  // Keep what fits and kill. Each flag means "bytes of this stream were
  // dropped": this stream's are; the other's only if it writes before the
  // kill, so an empty stderr is never reported truncated.
  s.truncated = true;
  capped_ = true;
  return true;
}

// ---- stdin ---------------------------------------------------------------------

class StdinFeeder {
 public:
  StdinFeeder(UniqueFd fd, const std::optional<std::string>& data)
      : fd_(std::move(fd)), data_(data ? &*data : nullptr) {}
  int fd() const noexcept { return fd_.get(); }
  void close() noexcept { fd_.reset(); }
  void onWritable() noexcept {
    if (data_ != nullptr && off_ < data_->size()) {
      const ssize_t w = sys::writeSome(fd_.get(), data_->data() + off_,
                                       std::min<std::size_t>(data_->size() - off_, 65536));
      if (w > 0) {
        off_ += static_cast<std::size_t>(w);
      } else if (w < 0 && errno != EAGAIN) {
        fd_.reset();  // the reader is gone: the rest is dropped
        return;
      }
    }
    if (data_ == nullptr || off_ >= data_->size()) fd_.reset();  // delivered, then closed
  }

 private:
  UniqueFd fd_;
  const std::string* data_;
  std::size_t off_ = 0;
};

// ---- time: the steady clock and poll(2), or the mechanism's clock -----------

class Time {
 public:
  explicit Time(SupervisionClock* clock) : clock_(clock) {}
  Clock::time_point now() const { return clock_ != nullptr ? clock_->now() : Clock::now(); }
  // Waits for `fds` until `wake`; `now` is the time the caller last read.
  int poll(std::vector<pollfd>& fds, Clock::time_point now, Clock::time_point wake) const {
    if (clock_ != nullptr) return clock_->poll(fds.data(), fds.size(), wake);
    const auto wait_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count() + 1;
    return sys::pollSome(fds.data(), fds.size(),
                         static_cast<int>(std::clamp<long long>(wait_ms, 0, 60000)));
  }

 private:
  SupervisionClock* clock_;
};

// ---- lifecycle: one variant of states, one transition function ----------------

struct Running {};   // the main process runs
struct MainExited {  // its output is drained, for at most the output grace
  std::optional<int> status;
  Clock::time_point since;
};
struct Stopping {  // the channel was told to stop; waiting for kAllGone
  std::optional<KillReason> reason;
  std::optional<int> status;
  Clock::time_point since;
};
struct Draining {  // every process is gone; the pipes close
  std::optional<KillReason> reason;
  std::optional<int> status;
  std::optional<std::int64_t> cpu_usec;
  Clock::time_point since;
};
struct Finished {
  std::optional<KillReason> reason;
  std::optional<int> status;
  std::optional<std::int64_t> cpu_usec;
};
struct Lost {  // the channel broke, or did not answer the stop
  std::optional<KillReason> reason;
};
struct Refused {  // the command never started
  int start_errno;
};
using State = std::variant<Running, MainExited, Stopping, Draining, Finished, Lost, Refused>;

struct KillEvent {
  KillReason reason;
};
struct MainExitedEvent {
  std::optional<int> status;
};
struct AllGoneEvent {
  std::optional<int> status;
  std::optional<std::int64_t> cpu_usec;
};
struct StartFailedEvent {
  int start_errno;
};
struct OutputClosedEvent {};
// The main process exited and the output grace ran out with a stream still
// open (a process it left holds it): end the command, reporting the exit.
struct OutputHeldOpenEvent {};
struct TickEvent {
  Clock::time_point now;
};
struct LostEvent {};
using Event = std::variant<KillEvent, MainExitedEvent, AllGoneEvent, StartFailedEvent,
                           OutputClosedEvent, OutputHeldOpenEvent, TickEvent, LostEvent>;

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

class Lifecycle {
 public:
  Lifecycle(CommandChannel& channel, std::chrono::milliseconds kill_grace, Time time)
      : channel_(channel), kill_grace_(kill_grace), time_(time) {}
  void on(const Event& event) { state_ = next(event); }
  const State& state() const noexcept { return state_; }
  bool terminal() const noexcept {
    return std::holds_alternative<Finished>(state_) || std::holds_alternative<Lost>(state_) ||
           std::holds_alternative<Refused>(state_);
  }
  // A kill reason can still be decided: none yet, and not every process gone.
  bool acceptsKill() const noexcept {
    if (auto* s = std::get_if<Stopping>(&state_)) return !s->reason;
    return std::holds_alternative<Running>(state_) || std::holds_alternative<MainExited>(state_);
  }
  bool mainRunning() const noexcept { return std::holds_alternative<Running>(state_); }

 private:
  // Tells the channel to stop (once per command); a failed send is a loss.
  State stopping(std::optional<KillReason> reason, std::optional<int> status) {
    if (!channel_.stop()) return Lost{reason};
    return Stopping{reason, status, time_.now()};
  }
  State next(const Event& event);

  CommandChannel& channel_;
  std::chrono::milliseconds kill_grace_;
  Time time_;
  State state_ = Running{};
};

State Lifecycle::next(const Event& event) {
  return std::visit(
      Overloaded{
          [&](const KillEvent& e) -> State {
            if (!acceptsKill()) return state_;
            channel_.noteKill(e.reason);
            if (auto* s = std::get_if<Stopping>(&state_)) {
              s->reason = e.reason;  // stop already sent at the normal end
              return *s;
            }
            auto* exited = std::get_if<MainExited>(&state_);
            return stopping(e.reason, exited ? exited->status : std::nullopt);
          },
          [&](const MainExitedEvent& e) -> State {
            if (mainRunning()) return MainExited{e.status, time_.now()};
            if (auto* s = std::get_if<Stopping>(&state_); s && !s->status) s->status = e.status;
            return state_;
          },
          [&](const AllGoneEvent& e) -> State {
            std::optional<KillReason> reason;
            std::optional<int> status;
            if (auto* s = std::get_if<Stopping>(&state_)) {
              reason = s->reason;
              status = s->status;
            } else if (mainRunning() || std::holds_alternative<MainExited>(state_)) {
              // Gone before the stop was asked for: the stop is still sent
              // (the channel's protocol has one per command).
              if (auto* m = std::get_if<MainExited>(&state_)) status = m->status;
              if (!channel_.stop()) return Lost{};
            } else {
              return state_;
            }
            // The main process's own exit, when it was seen, is the
            // command's: what the stop killed after it does not change it.
            return Draining{reason, status ? status : e.status, e.cpu_usec, time_.now()};
          },
          [&](const StartFailedEvent& e) -> State { return Refused{e.start_errno}; },
          [&](const OutputClosedEvent&) -> State {
            if (auto* m = std::get_if<MainExited>(&state_))
              return stopping(std::nullopt, m->status);
            if (auto* d = std::get_if<Draining>(&state_))
              return Finished{d->reason, d->status, d->cpu_usec};
            return state_;
          },
          [&](const OutputHeldOpenEvent&) -> State {
            if (auto* m = std::get_if<MainExited>(&state_))
              return stopping(std::nullopt, m->status);
            return state_;
          },
          [&](const TickEvent& e) -> State {
            if (auto* s = std::get_if<Stopping>(&state_); s && e.now >= s->since + kill_grace_) {
              channel_.abandon();  // no answer to the stop: nothing may keep running
              return Lost{s->reason};
            }
            if (auto* d = std::get_if<Draining>(&state_); d && e.now >= d->since + kill_grace_)
              return Finished{d->reason, d->status, d->cpu_usec};  // pipes held open: stop waiting
            return state_;
          },
          [&](const LostEvent&) -> State {
            if (auto* s = std::get_if<Stopping>(&state_)) return Lost{s->reason};
            if (auto* d = std::get_if<Draining>(&state_))
              return Finished{d->reason, d->status, d->cpu_usec};  // nothing is left to answer
            return Lost{};
          },
      },
      event);
}

std::optional<KillReason> limitHit(std::span<LimitSource* const> limits) {
  for (LimitSource* l : limits)
    if (auto hit = l->hit()) return hit;
  return std::nullopt;
}

Result<void> makePipe(UniqueFd& read_end, UniqueFd& write_end) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return failErrno(ErrorCode::kExecutionUnavailable, "pipe", errno);
  read_end.reset(p[0]);
  write_end.reset(p[1]);
  return {};
}

// The descriptors one poll watches, and where each one's result goes.
struct PollSet {
  enum Slot { kChannel, kOut, kErr, kIn, kCancel, kShutdown, kEnd, kWakeBase };
  std::vector<pollfd> fds;
  std::vector<int> slot;  // per fd: a Slot, or kWakeBase + limit index

  void add(int fd, short events, int s) {
    if (fd < 0) return;
    fds.push_back({fd, events, 0});
    slot.push_back(s);
  }
};

// The supervision loop: the command's pipes, its channel, the clock and the
// reasons to end it, until the lifecycle reaches a terminal state.
class Supervision {
 public:
  Supervision(CommandChannel& channel, std::span<LimitSource* const> limits,
              const SupervisionInputs& in, OutputPump& pump, StdinFeeder& feeder)
      : channel_(channel),
        limits_(limits),
        in_(in),
        pump_(pump),
        feeder_(feeder),
        time_(in.clock),
        life_(channel, in.kill_grace, time_) {}

  Result<void> run(Clock::time_point started);
  const Lifecycle& life() const noexcept { return life_; }
  // The streams a process left behind held open past the output grace
  // (the command then ended with its main process's exit); empty otherwise.
  const std::vector<std::string>& heldOpen() const noexcept { return held_open_; }

 private:
  PollSet pollSet() const;
  // Once the main process has exited: ends the command when the output
  // grace has run out (or the timeout came first) with a stream still open.
  void judgeHeldOutput(Clock::time_point now, Clock::time_point deadline);
  void dispatch(const PollSet& set);
  void readChannel();

  CommandChannel& channel_;
  std::span<LimitSource* const> limits_;
  const SupervisionInputs& in_;
  OutputPump& pump_;
  StdinFeeder& feeder_;
  Time time_;
  Lifecycle life_;
  std::vector<ChannelEvent> events_;
  std::vector<std::string> held_open_;
};

PollSet Supervision::pollSet() const {
  PollSet set;
  set.add(channel_.eventFd(), POLLIN, PollSet::kChannel);
  set.add(pump_.fd(0), POLLIN, PollSet::kOut);
  set.add(pump_.fd(1), POLLIN, PollSet::kErr);
  set.add(feeder_.fd(), POLLOUT, PollSet::kIn);
  if (life_.acceptsKill()) {
    if (in_.cancel != nullptr) set.add(in_.cancel->pollFd(), POLLIN, PollSet::kCancel);
    if (in_.cancel_by_id != nullptr) set.add(in_.cancel_by_id->pollFd(), POLLIN, PollSet::kCancel);
    set.add(in_.shutdown_fd, POLLIN, PollSet::kShutdown);
    if (in_.end_request != nullptr) set.add(in_.end_request->pollFd(), POLLIN, PollSet::kEnd);
    for (std::size_t i = 0; i < limits_.size(); ++i)
      set.add(limits_[i]->wakeFd(), POLLIN, PollSet::kWakeBase + static_cast<int>(i));
  }
  return set;
}

void Supervision::dispatch(const PollSet& set) {
  constexpr short kReady = POLLIN | POLLOUT | POLLHUP | POLLERR;
  for (std::size_t k = 0; k < set.fds.size() && !life_.terminal(); ++k) {
    if (!(set.fds[k].revents & kReady)) continue;
    const int slot = set.slot[k];
    switch (slot) {
      case PollSet::kChannel:
        readChannel();
        break;
      case PollSet::kOut:
      case PollSet::kErr:
        if (pump_.read(slot == PollSet::kOut ? 0 : 1))
          life_.on(KillEvent{KillReason::kOutputLimit});
        break;
      case PollSet::kIn:
        feeder_.onWritable();
        break;
      case PollSet::kCancel:
        life_.on(KillEvent{KillReason::kCancelled});
        break;
      case PollSet::kShutdown:
        life_.on(KillEvent{KillReason::kServiceShutdown});
        break;
      case PollSet::kEnd:
        if (auto why = in_.end_request->reason()) life_.on(KillEvent{*why});
        break;
      default: {
        // The enforcer says now (the memory controller's OOM event): ask it
        // rather than wait for the next watch tick.
        LimitSource* l = limits_[static_cast<std::size_t>(slot - PollSet::kWakeBase)];
        l->drainWake();
        if (auto hit = limitHit(limits_)) life_.on(KillEvent{*hit});
      }
    }
  }
}

void Supervision::readChannel() {
  events_.clear();
  const bool alive = channel_.readEvents(events_);
  for (const ChannelEvent& e : events_) {
    switch (e.kind) {
      case ChannelEvent::Kind::kMainExited:
        life_.on(MainExitedEvent{e.wait_status});
        break;
      case ChannelEvent::Kind::kAllGone:
        life_.on(AllGoneEvent{e.wait_status, e.cpu_usec});
        break;
      case ChannelEvent::Kind::kStartFailed:
        life_.on(StartFailedEvent{e.start_errno});
        break;
      case ChannelEvent::Kind::kLimit:
        life_.on(KillEvent{e.limit});
        break;
    }
    if (life_.terminal()) return;
  }
  if (!alive) life_.on(LostEvent{});
}

void Supervision::judgeHeldOutput(Clock::time_point now, Clock::time_point deadline) {
  const auto* exited = std::get_if<MainExited>(&life_.state());
  if (exited == nullptr || !pump_.open()) return;  // a closed pipe is OutputClosedEvent's
  if (now < exited->since + in_.output_grace && now < deadline) return;
  held_open_ = pump_.openNames();
  life_.on(OutputHeldOpenEvent{});
}

Result<void> Supervision::run(Clock::time_point started) {
  const auto timeout_at = started + in_.timeout;
  auto expiry_at = started + in_.until_expiry;
  std::chrono::milliseconds moved_known{0};
  auto next_watch = started + kWatchInterval;
  while (!life_.terminal()) {
    // Time is read before the poll and acted on after it: what the poll
    // found (an answer to the stop, the pipes' end) counts first, so a
    // supervisor starved of CPU past a deadline or the kill grace does not
    // miss what arrived in time.
    const auto now = time_.now();
    // The expiry known at start may have been extended since: asked again
    // only once it is reached, so an unextended one costs nothing.
    if (now >= expiry_at && in_.expiry_moved) {
      const std::chrono::milliseconds moved = in_.expiry_moved();
      if (moved > moved_known) {
        expiry_at += moved - moved_known;
        moved_known = moved;
      }
    }
    const bool expiry_first = expiry_at < timeout_at;
    const auto deadline = std::min(timeout_at, expiry_at);
    if (!life_.mainRunning()) feeder_.close();
    if (!pump_.open()) life_.on(OutputClosedEvent{});
    if (life_.terminal()) break;

    const State& s = life_.state();
    Clock::time_point wake = std::min(deadline, next_watch);
    if (auto* m = std::get_if<MainExited>(&s)) wake = std::min(wake, m->since + in_.output_grace);
    if (auto* st = std::get_if<Stopping>(&s)) wake = st->since + in_.kill_grace;
    if (auto* d = std::get_if<Draining>(&s)) wake = d->since + in_.kill_grace;
    PollSet set = pollSet();
    const int rc = time_.poll(set.fds, now, wake);
    if (rc < 0) {
      const int e = errno;
      channel_.abandon();
      return failErrno(ErrorCode::kExecutionUnavailable, "poll", e);
    }
    if (rc > 0) dispatch(set);
    if (life_.terminal()) break;

    // After the main process's exit the timeout is not a kill: what is left
    // then is only output held open (expiry still ends the sandbox).
    judgeHeldOutput(now, expiry_first ? Clock::time_point::max() : deadline);
    if (life_.acceptsKill() && now >= deadline && (expiry_first || held_open_.empty()))
      life_.on(KillEvent{expiry_first ? KillReason::kExpired : KillReason::kTimeout});
    if (life_.acceptsKill() && now >= next_watch) {
      if (auto hit = limitHit(limits_)) life_.on(KillEvent{*hit});
      next_watch = now + kWatchInterval;
    }
    life_.on(TickEvent{now});
  }
  return {};
}

struct Ending {
  std::optional<KillReason> reason;
  std::optional<int> status;
  std::optional<std::int64_t> cpu_usec;
};

// The kill reason and exit facts a terminal state leaves, or the error the
// command ends with.
Result<Ending> endingOf(const State& state, std::span<LimitSource* const> limits,
                        const SupervisionInputs& in, OutputPump& pump) {
  if (auto* r = std::get_if<Refused>(&state)) {
    if (r->start_errno == EAGAIN)
      return failErrno(ErrorCode::kExecutionUnavailable,
                       "the command could not be started: the sandbox's process limit (pids " +
                           std::to_string(in.pids_max) + ") is reached",
                       r->start_errno);
    return failErrno(ErrorCode::kExecutionUnavailable,
                     "the command could not be started in the sandbox", r->start_errno);
  }
  Ending end;
  if (auto* f = std::get_if<Finished>(&state)) end = Ending{f->reason, f->status, f->cpu_usec};
  if (auto* l = std::get_if<Lost>(&state)) {
    // What the pipes still hold is the command's output up to the loss.
    pump.drain();
    end.reason = l->reason;
    if (!end.reason && in.end_request != nullptr) end.reason = in.end_request->reason();
  }
  if (!end.reason) end.reason = limitHit(limits);
  if (std::holds_alternative<Lost>(state) && !end.reason)
    return fail(ErrorCode::kExecutionUnavailable,
                "the sandbox stopped answering during the command (its init died); destroy it "
                "and provision again");
  pump.closeAll();
  return end;
}

}  // namespace

// ---- EndRequest ----------------------------------------------------------------

EndRequest::EndRequest(UniqueFd fd)
    : fd_(std::move(fd)), reason_(std::make_unique<std::atomic<int>>(-1)) {}

Result<EndRequest> EndRequest::create() {
  const int fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd < 0) return failErrno(ErrorCode::kExecutionUnavailable, "eventfd", errno);
  return EndRequest(UniqueFd(fd));
}

void EndRequest::request(KillReason why) noexcept {
  int none = -1;
  reason_->compare_exchange_strong(none, static_cast<int>(why));
  const std::uint64_t one = 1;
  (void)sys::writeAll(fd_.get(), &one, sizeof one);
}

std::optional<KillReason> EndRequest::reason() const noexcept {
  const int r = reason_->load();
  if (r < 0) return std::nullopt;
  return static_cast<KillReason>(r);
}

KillReason destroyKillReason(bool shutting_down, Timestamp expires_at, Timestamp now) noexcept {
  if (shutting_down) return KillReason::kServiceShutdown;
  return now >= expires_at ? KillReason::kExpired : KillReason::kCancelled;
}

// ---- DISK --------------------------------------------------------------------

bool filesystemFull(int fd) noexcept {
  struct statfs st {};
  if (fd < 0 || ::fstatfs(fd, &st) != 0) return false;
  return st.f_bavail == 0 || (st.f_files > 0 && st.f_ffree == 0);
}

FilesystemFullLimit::FilesystemFullLimit(std::vector<int> directory_fds)
    : fds_(std::move(directory_fds)) {
  for (int fd : fds_) full_at_start_.push_back(filesystemFull(fd));
}

std::optional<KillReason> FilesystemFullLimit::hit() {
  for (std::size_t i = 0; i < fds_.size(); ++i)
    if (!full_at_start_[i] && filesystemFull(fds_[i])) return KillReason::kDisk;
  return std::nullopt;
}

// ---- superviseCommand ------------------------------------------------------------

Result<ExecutionResult> superviseCommand(CommandChannel& channel,
                                         std::span<LimitSource* const> limits,
                                         const SupervisionInputs& in) {
  const ExecutionCommand& command = *in.command;
  UniqueFd out_r, err_r, in_w;
  SandboxPipeEnds ends;
  if (auto r = makePipe(out_r, ends.stdout_write); !r) return tl::unexpected(r.error());
  if (auto r = makePipe(err_r, ends.stderr_write); !r) return tl::unexpected(r.error());
  if (command.stdin_data)
    if (auto r = makePipe(ends.stdin_read, in_w); !r) return tl::unexpected(r.error());
  for (int fd : {out_r.get(), err_r.get(), in_w.get()})
    if (fd >= 0) ::fcntl(fd, F_SETFL, O_NONBLOCK);
  OutputPump pump(std::move(out_r), std::move(err_r), command.maximum_output_bytes, in.sink);
  StdinFeeder feeder(std::move(in_w), command.stdin_data);

  const Time time(in.clock);
  const auto started = time.now();
  if (auto r = channel.start(std::move(ends)); !r) return tl::unexpected(r.error());
  Supervision supervision(channel, limits, in, pump, feeder);
  if (auto r = supervision.run(started); !r) return tl::unexpected(r.error());
  const auto finished = time.now();
  auto end = endingOf(supervision.life().state(), limits, in, pump);
  if (!end) return tl::unexpected(end.error());

  ExecutionResult result;
  if (!end->reason) result.output_held_open = supervision.heldOpen();
  result.duration_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(finished - started).count();
  pump.moveInto(result);
  for (LimitSource* l : limits)
    if (!result.peak_memory_bytes) result.peak_memory_bytes = l->peakMemoryBytes();
  if (end->cpu_usec) result.cpu_time_ms = *end->cpu_usec / 1000;
  if (end->reason) {
    result.killed_by = end->reason;
    result.timed_out = *end->reason == KillReason::kTimeout;
  } else if (end->status && WIFEXITED(*end->status)) {
    result.exit_code = WEXITSTATUS(*end->status);
  } else if (end->status && WIFSIGNALED(*end->status)) {
    result.exit_code = 128 + WTERMSIG(*end->status);  // the shell's convention
  }
  return result;
}

}  // namespace airlock::host
