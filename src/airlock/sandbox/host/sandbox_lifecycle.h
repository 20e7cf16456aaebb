// A sandbox's life as one state, changed only through one transition
// function, for every mechanism under the host layer (spec 000, "The three
// methods and what may fail": one command at a time, a sandbox whose init
// died, destroy).
//
// The states:
//   provisioning  provision is making it; no port method reaches it yet;
//   ready         live, nothing running;
//   running       live, running a set of activities: at most one command
//                 (execute), by execution id or anonymous, and any number
//                 of side processes beside it (code mode);
//   lost          its channel to the sandbox is gone (init or shim died, a
//                 send was refused): every later command and side process
//                 is refused, naming `why` when the mechanism knew it;
//   destroying    destroy (or a failed provision) has begun to tear it down;
//   destroyed     destroy (or the failed provision) has returned: it is out
//                 of the registry and nothing of it runs (a mechanism may
//                 still free its resources on a worker of its own).
// The legal transitions (any other is refused with an error value and
// leaves the state as it was):
//   provisioning -> ready (setUp finished), lost, destroying;
//   ready        -> running (an activity begins), lost, destroying;
//   running      -> running (another activity begins; one ends and others
//                   remain), ready (the last activity ends), lost,
//                   destroying;
//   lost         -> lost (a second loss: the first why stays, unless it
//                   was "" and this one names one; an activity ends),
//                   destroying;
//   destroying   -> destroying (a loss or an activity's end, as the kill
//                   reaches what ran), destroyed (teardown finished);
//   destroyed    -> destroyed (an activity's end: a side process its
//                   caller destroys after the sandbox).
// Lost and destroying lead only to destroying and destroyed; destroyed is
// final. The activity set is empty outside running.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <variant>

#include "airlock/core/error.h"
#include "airlock/core/thread_annotations.h"

namespace airlock::host {

// One thing a sandbox runs. Ordered by token, which is unique per
// sandbox (SandboxLifecycle hands them out).
struct Activity {
  enum class Kind : std::uint8_t {
    kCommand,  // an execute: at most one at a time
    kSide,     // a side process (code mode), beside a command or not
  };
  Kind kind = Kind::kCommand;
  std::uint64_t token = 0;
  std::string execution_id;  // a command's, when it has one; "" otherwise
  bool operator<(const Activity& other) const noexcept { return token < other.token; }
};

namespace lifecycle {
struct Provisioning {};
struct Ready {};
struct Running {
  std::set<Activity> activities;  // never empty
};
struct Lost {
  std::string why;  // "" when the mechanism did not know
};
struct Destroying {};
struct Destroyed {};
}  // namespace lifecycle

using LifecycleState = std::variant<lifecycle::Provisioning, lifecycle::Ready, lifecycle::Running,
                                    lifecycle::Lost, lifecycle::Destroying, lifecycle::Destroyed>;

// "provisioning", "ready", "running", "lost", "destroying", "destroyed".
const char* lifecycleStateName(const LifecycleState& state) noexcept;

// The state machine itself. Not thread-safe (SandboxLife guards one).
class SandboxLifecycle {
 public:
  // What a transition is asked for.
  struct SetUp {};  // provisioning -> ready
  struct Begin {
    Activity::Kind kind;
    std::string execution_id;
  };
  struct End {
    std::uint64_t token;
  };
  struct Lose {
    std::string why;
  };
  struct Destroy {};  // -> destroying
  struct Finish {};   // destroying -> destroyed
  using Event = std::variant<SetUp, Begin, End, Lose, Destroy, Finish>;

  const LifecycleState& state() const noexcept { return state_; }

  // The one transition function (the table above). For Begin, the new
  // activity's token; 0 for the others. Errors: EnvironmentBusy ("another
  // command is running in this environment") for a second command;
  // ExecutionUnavailable "the sandbox has died (<why>); destroy it and
  // provision again" for a Begin on a lost sandbox; EnvironmentGone for a
  // Begin on one being destroyed or destroyed; ExecutionUnavailable "a
  // sandbox that is <state> cannot <event>" for any other illegal
  // transition.
  Result<std::uint64_t> transition(const Event& event);

  // Whether commands and side processes may begin: ready or running.
  bool usable() const noexcept;
  // usable(), or the error a Begin gets (above).
  Result<void> checkUsable() const;
  // The running activities (empty outside running).
  std::set<Activity> activities() const;

 private:
  Result<std::uint64_t> begin(const Begin& begin);
  Result<std::uint64_t> end(std::uint64_t token);

  LifecycleState state_ = lifecycle::Provisioning{};
  std::uint64_t next_token_ = 1;
};

// A sandbox record's lifecycle (SandboxRecord::life): a SandboxLifecycle
// under its own mutex, since the calls that change it (admission, a
// command's channel, side-process starts and their ends, destroy) run on
// any thread, and a side process may end after its adapter is gone. Every
// change is one SandboxLifecycle::transition under that mutex.
class SandboxLife {
 public:
  Result<void> setUp() EXCLUDES(mu_);
  Result<std::uint64_t> begin(Activity::Kind kind, std::string execution_id = {}) EXCLUDES(mu_);
  void end(std::uint64_t token) EXCLUDES(mu_);
  // The mechanism's one call to report that the sandbox is unusable (its
  // channel is gone); `why` ("" for unknown) is named by the next refusal.
  void markLost(std::string why) EXCLUDES(mu_);
  void destroying() EXCLUDES(mu_);
  // Teardown is over (destroying -> destroyed).
  void destroyed() EXCLUDES(mu_);

  bool usable() const EXCLUDES(mu_);
  Result<void> checkUsable() const EXCLUDES(mu_);
  LifecycleState state() const EXCLUDES(mu_);

 private:
  mutable Mutex mu_;
  SandboxLifecycle life_ GUARDED_BY(mu_);
};

// One activity of a sandbox, from begin to destruction (end). Shares
// ownership of the lifecycle, so it may outlive the record and the adapter.
// Movable.
class ActivityScope {
 public:
  ActivityScope() = default;
  ActivityScope(std::shared_ptr<SandboxLife> life, std::uint64_t token)
      : life_(std::move(life)), token_(token) {}
  ActivityScope(ActivityScope&& other) noexcept = default;
  ActivityScope& operator=(ActivityScope&& other) noexcept {
    if (this != &other) {
      release();
      life_ = std::move(other.life_);
      token_ = other.token_;
    }
    return *this;
  }
  ActivityScope(const ActivityScope&) = delete;
  ActivityScope& operator=(const ActivityScope&) = delete;
  ~ActivityScope() { release(); }

  // Ends the activity now (idempotent).
  void release() noexcept;

 private:
  std::shared_ptr<SandboxLife> life_;
  std::uint64_t token_ = 0;
};

// Begins an activity of `life` and holds it: SandboxLife::begin's errors.
Result<ActivityScope> beginActivity(const std::shared_ptr<SandboxLife>& life, Activity::Kind kind,
                                    std::string execution_id = {});

}  // namespace airlock::host
