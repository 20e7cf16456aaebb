// The command supervisor with a scripted channel: how it judges the kill
// grace when the supervising thread itself was late, and the deadlines on
// a clock the mechanism supplies.
#include "airlock/sandbox/host/command_supervisor.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "airlock/port/cancel_token.h"
#include "airlock/sys/unique_fd.h"

namespace airlock::host {
namespace {

using namespace std::chrono_literals;

// A channel whose command has started and runs until stop(); stop() makes
// the "process" write its last bytes to stdout and close its pipes. The
// answer to the stop (every process gone) is given by the test, through
// answer(). Counts abandon().
class ScriptedChannel final : public CommandChannel {
 public:
  ScriptedChannel() : event_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}
  Result<void> start(SandboxPipeEnds ends) override {
    ends_ = std::move(ends);
    return {};
  }
  int eventFd() const noexcept override { return event_.get(); }
  bool readEvents(std::vector<ChannelEvent>& events) override {
    std::uint64_t n = 0;
    if (::read(event_.get(), &n, sizeof n) != sizeof n) return true;
    for (auto& e : pending_) events.push_back(e);
    pending_.clear();
    return true;
  }
  bool stop() override {
    ++stops;
    if (answer_stop) answer();
    const std::string_view tail = "last words\n";
    EXPECT_EQ(::write(ends_.stdout_write.get(), tail.data(), tail.size()),
              static_cast<ssize_t>(tail.size()));
    ends_ = {};
    return true;
  }
  void abandon() noexcept override { ++abandons; }
  bool lost() const noexcept override { return false; }

  // Every process is gone: the answer is there to read from now on.
  void answer() { say({ChannelEvent::Kind::kAllGone, 9, 4000}); }
  // The main process exited with `code`; what it started runs on.
  void mainExited(int code) { say({ChannelEvent::Kind::kMainExited, code << 8}); }

  int stops = 0;
  int abandons = 0;
  bool answer_stop = false;  // stop() gives the answer itself

 private:
  void say(ChannelEvent event) {
    pending_.push_back(event);
    const std::uint64_t one = 1;
    EXPECT_EQ(::write(event_.get(), &one, sizeof one), static_cast<ssize_t>(sizeof one));
  }

  sys::UniqueFd event_;
  SandboxPipeEnds ends_;
  std::vector<ChannelEvent> pending_;
};

// The channel answers the stop in time, but the supervising thread is held
// up (here by its output sink; on a loaded machine by the scheduler) until
// the grace has long passed. The answer was there before the grace ran out:
// the supervisor reads it, reports the command's end with its CPU, and does
// not abandon the sandbox. (The sink's busy wait stands for the thread not
// being scheduled; nothing waits on it for synchronization.)
TEST(CommandSupervisor, AnAnswerThatCameInTimeCountsWhenTheSupervisorIsLate) {
  ScriptedChannel channel;
  auto cancel = CancelToken::create();
  ASSERT_TRUE(cancel) << cancel.error().message();
  cancel->cancel();  // the command is cancelled at once: the stop follows
  ExecutionCommand command;
  command.argv = {"x"};
  command.maximum_output_bytes = 1 << 20;
  constexpr auto kGrace = 500ms;
  ExecutionEnvironment::OutputSink sink = [&](ExecutionEnvironment::OutputStream,
                                              std::string_view) {
    channel.answer();
    const auto until = std::chrono::steady_clock::now() + 3 * kGrace;
    while (std::chrono::steady_clock::now() < until) {
    }
  };
  SupervisionInputs in;
  in.command = &command;
  in.timeout = 60s;
  in.until_expiry = 60s;
  in.cancel = &*cancel;
  in.sink = &sink;
  in.kill_grace = kGrace;
  auto r = superviseCommand(channel, {}, in);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(channel.stops, 1);
  EXPECT_EQ(channel.abandons, 0) << "an answer that came in time was taken for none";
  EXPECT_EQ(r->killed_by, KillReason::kCancelled);
  EXPECT_EQ(r->stdout_data, "last words\n");
  EXPECT_EQ(r->cpu_time_ms, 4) << "the answer's CPU figure is reported";
}

// No answer at all: after the grace the sandbox is abandoned, and the
// command still reports why it ended and what it wrote.
TEST(CommandSupervisor, NoAnswerWithinTheGraceAbandonsTheSandbox) {
  ScriptedChannel channel;
  auto cancel = CancelToken::create();
  ASSERT_TRUE(cancel) << cancel.error().message();
  cancel->cancel();
  ExecutionCommand command;
  command.argv = {"x"};
  command.maximum_output_bytes = 1 << 20;
  SupervisionInputs in;
  in.command = &command;
  in.timeout = 60s;
  in.until_expiry = 60s;
  in.cancel = &*cancel;
  in.kill_grace = 50ms;
  auto r = superviseCommand(channel, {}, in);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(channel.abandons, 1);
  EXPECT_EQ(r->killed_by, KillReason::kCancelled);
  EXPECT_EQ(r->stdout_data, "last words\n");
  EXPECT_FALSE(r->cpu_time_ms);
}

// Simulated time: when nothing is ready, time jumps to the supervisor's
// next wake-up instead of passing.
class SimulatedClock final : public SupervisionClock {
 public:
  TimePoint now() override { return now_; }
  int poll(pollfd* fds, std::size_t count, TimePoint wake) override {
    const int ready = ::poll(fds, count, 0);
    if (ready == 0) now_ = std::max(now_, wake);
    return ready;
  }

 private:
  TimePoint now_ = std::chrono::steady_clock::now();
};

// A supplied clock is the one every deadline is judged on: a command that
// never exits is killed at its timeout, or at its expiry when that comes
// first, in that clock's time, and duration_ms is that time too.
TEST(CommandSupervisor, ASuppliedClockTellsTheTimeoutAndTheExpiry) {
  ExecutionCommand command;
  command.argv = {"x"};
  command.maximum_output_bytes = 1 << 20;
  const auto called = std::chrono::steady_clock::now();
  for (const auto& [timeout, expiry, why] :
       {std::tuple{60s, 3600s, KillReason::kTimeout}, std::tuple{60s, 30s, KillReason::kExpired}}) {
    ScriptedChannel channel;
    channel.answer_stop = true;
    SimulatedClock clock;
    SupervisionInputs in;
    in.command = &command;
    in.timeout = timeout;
    in.until_expiry = expiry;
    in.clock = &clock;
    auto r = superviseCommand(channel, {}, in);
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->killed_by, why);
    EXPECT_EQ(r->timed_out, why == KillReason::kTimeout);
    EXPECT_EQ(r->duration_ms, std::chrono::milliseconds(std::min(timeout, expiry)).count());
    EXPECT_EQ(channel.stops, 1);
    EXPECT_EQ(channel.abandons, 0);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - called, 10s) << "simulated minutes took real time";
}

// The main process exits 0 while what it left behind holds both pipes
// open: the command ends once the output grace has passed (or its timeout,
// when that comes first), with the main process's exit code, no kill
// reason and both streams named; the rest is stopped once, never
// abandoned.
TEST(CommandSupervisor, OutputHeldOpenAfterTheMainExitEndsWithItsExitCode) {
  ExecutionCommand command;
  command.argv = {"x"};
  command.maximum_output_bytes = 1 << 20;
  for (const auto& [timeout, ends_at] : {std::pair{60s, 2s}, std::pair{1s, 1s}}) {
    ScriptedChannel channel;
    channel.answer_stop = true;
    channel.mainExited(0);
    SimulatedClock clock;
    SupervisionInputs in;
    in.command = &command;
    in.timeout = timeout;
    in.until_expiry = 3600s;
    in.output_grace = 2s;
    in.clock = &clock;
    auto r = superviseCommand(channel, {}, in);
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->killed_by, std::nullopt);
    EXPECT_FALSE(r->timed_out);
    EXPECT_EQ(r->exit_code, 0);
    EXPECT_EQ(r->output_held_open, (std::vector<std::string>{"stdout", "stderr"}));
    EXPECT_EQ(r->stdout_data, "last words\n") << "output up to the kill is kept";
    EXPECT_EQ(r->duration_ms, std::chrono::milliseconds(ends_at).count());
    EXPECT_EQ(channel.stops, 1);
    EXPECT_EQ(channel.abandons, 0);
  }
}

// A kill decided during the output grace is the command's end as before:
// its reason, no exit code, and nothing named as held open.
TEST(CommandSupervisor, AKillDuringTheOutputGraceIsReportedAsTheKill) {
  ExecutionCommand command;
  command.argv = {"x"};
  command.maximum_output_bytes = 1 << 20;
  ScriptedChannel channel;
  channel.answer_stop = true;
  channel.mainExited(0);
  auto cancel = CancelToken::create();
  ASSERT_TRUE(cancel) << cancel.error().message();
  cancel->cancel();
  SupervisionInputs in;
  in.command = &command;
  in.timeout = 60s;
  in.until_expiry = 3600s;
  in.cancel = &*cancel;
  auto r = superviseCommand(channel, {}, in);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->killed_by, KillReason::kCancelled);
  EXPECT_EQ(r->exit_code, std::nullopt);
  EXPECT_TRUE(r->output_held_open.empty());
}

}  // namespace
}  // namespace airlock::host
