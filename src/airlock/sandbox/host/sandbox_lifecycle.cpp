#include "airlock/sandbox/host/sandbox_lifecycle.h"

#include <type_traits>

namespace airlock::host {

namespace {

template <class... F>
struct Overload : F... {
  using F::operator()...;
};
template <class... F>
Overload(F...) -> Overload<F...>;

const char* eventName(const SandboxLifecycle::Event& event) noexcept {
  static constexpr const char* kNames[] = {"set up", "begin an activity", "end an activity",
                                           "lose",   "destroy",           "finish destroying"};
  return kNames[event.index()];
}

Error diedError(const std::string& why) {
  return Error{ErrorCode::kExecutionUnavailable, 0,
               "the sandbox has died" + (why.empty() ? std::string() : " (" + why + ")") +
                   "; destroy it and provision again"};
}

}  // namespace

const char* lifecycleStateName(const LifecycleState& state) noexcept {
  static constexpr const char* kNames[] = {"provisioning", "ready",      "running",
                                           "lost",         "destroying", "destroyed"};
  return kNames[state.index()];
}

Result<std::uint64_t> SandboxLifecycle::transition(const Event& event) {
  using namespace lifecycle;
  auto illegal = [&]() -> Result<std::uint64_t> {
    return fail(ErrorCode::kExecutionUnavailable, std::string("a sandbox that is ") +
                                                      lifecycleStateName(state_) + " cannot " +
                                                      eventName(event));
  };
  return std::visit(Overload{
                        [&](const SetUp&) -> Result<std::uint64_t> {
                          if (!std::holds_alternative<Provisioning>(state_)) return illegal();
                          state_ = Ready{};
                          return 0;
                        },
                        [&](const Begin& b) { return begin(b); },
                        [&](const End& e) { return end(e.token); },
                        [&](const Lose& l) -> Result<std::uint64_t> {
                          // A second loss keeps the first why (unless it had none);
                          // destroying already ends the sandbox.
                          if (std::holds_alternative<Destroyed>(state_)) return illegal();
                          if (auto* lost = std::get_if<Lost>(&state_)) {
                            if (lost->why.empty()) lost->why = l.why;
                          } else if (!std::holds_alternative<Destroying>(state_)) {
                            state_ = Lost{l.why};
                          }
                          return 0;
                        },
                        [&](const Destroy&) -> Result<std::uint64_t> {
                          if (std::holds_alternative<Destroying>(state_) ||
                              std::holds_alternative<Destroyed>(state_))
                            return illegal();
                          state_ = Destroying{};
                          return 0;
                        },
                        [&](const Finish&) -> Result<std::uint64_t> {
                          if (!std::holds_alternative<Destroying>(state_)) return illegal();
                          state_ = Destroyed{};
                          return 0;
                        },
                    },
                    event);
}

Result<std::uint64_t> SandboxLifecycle::begin(const Begin& b) {
  using namespace lifecycle;
  if (auto usable = checkUsable(); !usable) return tl::unexpected(usable.error());
  Activity activity{b.kind, next_token_++, b.execution_id};
  if (std::holds_alternative<Ready>(state_)) {
    state_ = Running{{activity}};
    return activity.token;
  }
  auto& running = std::get<Running>(state_);
  if (b.kind == Activity::Kind::kCommand)
    for (const auto& a : running.activities)
      if (a.kind == Activity::Kind::kCommand)
        return fail(ErrorCode::kEnvironmentBusy, "another command is running in this environment");
  const std::uint64_t token = activity.token;
  running.activities.insert(std::move(activity));
  return token;
}

Result<std::uint64_t> SandboxLifecycle::end(std::uint64_t token) {
  using namespace lifecycle;
  // Lost, destroying and destroyed keep no activities: what ran ends with
  // the sandbox.
  if (std::holds_alternative<Lost>(state_) || std::holds_alternative<Destroying>(state_) ||
      std::holds_alternative<Destroyed>(state_))
    return 0;
  auto* running = std::get_if<Running>(&state_);
  if (running == nullptr ||
      running->activities.erase(Activity{Activity::Kind::kCommand, token}) == 0)
    return fail(ErrorCode::kExecutionUnavailable, std::string("a sandbox that is ") +
                                                      lifecycleStateName(state_) +
                                                      " has no activity " + std::to_string(token));
  if (running->activities.empty()) state_ = Ready{};
  return 0;
}

bool SandboxLifecycle::usable() const noexcept {
  return std::holds_alternative<lifecycle::Ready>(state_) ||
         std::holds_alternative<lifecycle::Running>(state_);
}

Result<void> SandboxLifecycle::checkUsable() const {
  using namespace lifecycle;
  if (usable()) return {};
  if (const auto* lost = std::get_if<Lost>(&state_)) return tl::unexpected(diedError(lost->why));
  if (std::holds_alternative<Destroying>(state_))
    return fail(ErrorCode::kEnvironmentGone, "the environment is being destroyed");
  if (std::holds_alternative<Destroyed>(state_))
    return fail(ErrorCode::kEnvironmentGone, "the environment was destroyed");
  return fail(ErrorCode::kExecutionUnavailable, "the sandbox is still being provisioned");
}

std::set<Activity> SandboxLifecycle::activities() const {
  if (const auto* running = std::get_if<lifecycle::Running>(&state_)) return running->activities;
  return {};
}

Result<void> SandboxLife::setUp() {
  MutexLock lk(mu_);
  auto r = life_.transition(SandboxLifecycle::SetUp{});
  if (!r) return tl::unexpected(r.error());
  return {};
}

Result<std::uint64_t> SandboxLife::begin(Activity::Kind kind, std::string execution_id) {
  MutexLock lk(mu_);
  return life_.transition(SandboxLifecycle::Begin{kind, std::move(execution_id)});
}

void SandboxLife::end(std::uint64_t token) {
  MutexLock lk(mu_);
  (void)life_.transition(SandboxLifecycle::End{token});  // only ever a token begin gave
}

void SandboxLife::markLost(std::string why) {
  MutexLock lk(mu_);
  (void)life_.transition(SandboxLifecycle::Lose{std::move(why)});  // always legal
}

void SandboxLife::destroying() {
  MutexLock lk(mu_);
  // Refused only when destroy already began: it stays destroying.
  (void)life_.transition(SandboxLifecycle::Destroy{});
}

void SandboxLife::destroyed() {
  MutexLock lk(mu_);
  // Refused only when destroy never began or already finished: then it
  // stays as it was.
  (void)life_.transition(SandboxLifecycle::Finish{});
}

bool SandboxLife::usable() const {
  MutexLock lk(mu_);
  return life_.usable();
}

Result<void> SandboxLife::checkUsable() const {
  MutexLock lk(mu_);
  return life_.checkUsable();
}

LifecycleState SandboxLife::state() const {
  MutexLock lk(mu_);
  return life_.state();
}

void ActivityScope::release() noexcept {
  if (!life_) return;
  std::exchange(life_, nullptr)->end(token_);
}

Result<ActivityScope> beginActivity(const std::shared_ptr<SandboxLife>& life, Activity::Kind kind,
                                    std::string execution_id) {
  auto token = life->begin(kind, std::move(execution_id));
  if (!token) return tl::unexpected(token.error());
  return ActivityScope(life, *token);
}

}  // namespace airlock::host
