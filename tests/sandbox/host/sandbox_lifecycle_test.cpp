// A sandbox's lifecycle: every legal and illegal transition, the errors a
// refused one gets, and a property over random sequences of transitions.
#include "airlock/sandbox/host/sandbox_lifecycle.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace airlock::host {
namespace {

using Kind = Activity::Kind;
using L = SandboxLifecycle;

std::string stateOf(const SandboxLifecycle& life) {
  return lifecycleStateName(life.state());
}

SandboxLifecycle ready() {
  SandboxLifecycle life;
  EXPECT_TRUE(life.transition(L::SetUp{}));
  return life;
}

SandboxLifecycle lost(const std::string& why) {
  SandboxLifecycle life = ready();
  EXPECT_TRUE(life.transition(L::Lose{why}));
  return life;
}

SandboxLifecycle destroying() {
  SandboxLifecycle life = ready();
  EXPECT_TRUE(life.transition(L::Destroy{}));
  return life;
}

SandboxLifecycle destroyed() {
  SandboxLifecycle life = destroying();
  EXPECT_TRUE(life.transition(L::Finish{}));
  return life;
}

TEST(SandboxLifecycle, StartsProvisioningAndSetUpMakesItReady) {
  SandboxLifecycle life;
  EXPECT_EQ(stateOf(life), "provisioning");
  EXPECT_FALSE(life.usable());
  ASSERT_TRUE(life.transition(L::SetUp{}));
  EXPECT_EQ(stateOf(life), "ready");
  EXPECT_TRUE(life.usable());
  EXPECT_TRUE(life.activities().empty());
}

TEST(SandboxLifecycle, NothingBeginsWhileProvisioning) {
  SandboxLifecycle life;
  auto begun = life.transition(L::Begin{Kind::kCommand, ""});
  ASSERT_FALSE(begun);
  EXPECT_EQ(begun.error().code, ErrorCode::kExecutionUnavailable);
  EXPECT_EQ(begun.error().context, "the sandbox is still being provisioned");
  EXPECT_EQ(stateOf(life), "provisioning");
}

TEST(SandboxLifecycle, AProvisionThatFailsIsDestroyedOrLost) {
  SandboxLifecycle failed;
  ASSERT_TRUE(failed.transition(L::Destroy{}));
  EXPECT_EQ(stateOf(failed), "destroying");
  SandboxLifecycle died;
  ASSERT_TRUE(died.transition(L::Lose{"init exited"}));
  EXPECT_EQ(stateOf(died), "lost");
}

TEST(SandboxLifecycle, SetUpIsLegalOnlyOnce) {
  SandboxLifecycle life = ready();
  auto again = life.transition(L::SetUp{});
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().context, "a sandbox that is ready cannot set up");
  EXPECT_EQ(stateOf(life), "ready");
  for (SandboxLifecycle other : {lost(""), destroying(), destroyed()}) {
    const std::string before = stateOf(other);
    EXPECT_FALSE(other.transition(L::SetUp{}));
    EXPECT_EQ(stateOf(other), before);
  }
}

TEST(SandboxLifecycle, ACommandRunsAndItsEndMakesTheSandboxReadyAgain) {
  SandboxLifecycle life = ready();
  auto token = life.transition(L::Begin{Kind::kCommand, "exec-1"});
  ASSERT_TRUE(token) << token.error().message();
  EXPECT_NE(*token, 0u);
  EXPECT_EQ(stateOf(life), "running");
  ASSERT_EQ(life.activities().size(), 1u);
  EXPECT_EQ(life.activities().begin()->execution_id, "exec-1");
  ASSERT_TRUE(life.transition(L::End{*token}));
  EXPECT_EQ(stateOf(life), "ready");
  EXPECT_TRUE(life.activities().empty());
}

TEST(SandboxLifecycle, ASecondCommandIsBusyWithTodaysMessage) {
  SandboxLifecycle life = ready();
  ASSERT_TRUE(life.transition(L::Begin{Kind::kCommand, ""}));
  auto second = life.transition(L::Begin{Kind::kCommand, "exec-2"});
  ASSERT_FALSE(second);
  EXPECT_EQ(second.error().code, ErrorCode::kEnvironmentBusy);
  EXPECT_EQ(second.error().context, "another command is running in this environment");
  EXPECT_EQ(life.activities().size(), 1u);
}

TEST(SandboxLifecycle, SideProcessesRunBesideACommandAndEachOther) {
  SandboxLifecycle life = ready();
  auto side1 = life.transition(L::Begin{Kind::kSide, ""});
  auto command = life.transition(L::Begin{Kind::kCommand, ""});
  auto side2 = life.transition(L::Begin{Kind::kSide, ""});
  ASSERT_TRUE(side1 && command && side2);
  EXPECT_EQ(life.activities().size(), 3u);
  ASSERT_TRUE(life.transition(L::End{*command}));
  ASSERT_TRUE(life.transition(L::End{*side1}));
  EXPECT_EQ(stateOf(life), "running");
  // With the command over, another command may begin beside the side process.
  auto next = life.transition(L::Begin{Kind::kCommand, ""});
  ASSERT_TRUE(next);
  ASSERT_TRUE(life.transition(L::End{*next}));
  ASSERT_TRUE(life.transition(L::End{*side2}));
  EXPECT_EQ(stateOf(life), "ready");
}

TEST(SandboxLifecycle, EndingAnUnknownActivityIsRefused) {
  SandboxLifecycle life = ready();
  auto none = life.transition(L::End{7});
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().context, "a sandbox that is ready has no activity 7");
  auto token = life.transition(L::Begin{Kind::kSide, ""});
  ASSERT_TRUE(token);
  ASSERT_TRUE(life.transition(L::End{*token}));
  EXPECT_FALSE(life.transition(L::End{*token}));  // twice
  SandboxLifecycle provisioning;
  EXPECT_FALSE(provisioning.transition(L::End{1}));
}

TEST(SandboxLifecycle, ALostSandboxRefusesWithItsWhyAndDropsItsActivities) {
  SandboxLifecycle life = ready();
  auto token = life.transition(L::Begin{Kind::kCommand, ""});
  ASSERT_TRUE(token);
  ASSERT_TRUE(life.transition(L::Lose{"its init closed the control socket"}));
  EXPECT_EQ(stateOf(life), "lost");
  EXPECT_TRUE(life.activities().empty());
  EXPECT_FALSE(life.usable());
  for (Kind kind : {Kind::kCommand, Kind::kSide}) {
    auto refused = life.transition(L::Begin{kind, ""});
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, ErrorCode::kExecutionUnavailable);
    EXPECT_EQ(refused.error().context,
              "the sandbox has died (its init closed the control socket); destroy it and "
              "provision again");
  }
  // What ran ends with the sandbox: its end is taken and changes nothing.
  EXPECT_TRUE(life.transition(L::End{*token}));
  EXPECT_EQ(stateOf(life), "lost");
}

TEST(SandboxLifecycle, ALossWithoutWhySaysOnlyThatTheSandboxDied) {
  SandboxLifecycle life = lost("");
  auto refused = life.checkUsable();
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().context, "the sandbox has died; destroy it and provision again");
}

TEST(SandboxLifecycle, ASecondLossKeepsTheFirstWhyUnlessThereWasNone) {
  SandboxLifecycle named = lost("first");
  ASSERT_TRUE(named.transition(L::Lose{"second"}));
  EXPECT_EQ(std::get<lifecycle::Lost>(named.state()).why, "first");
  SandboxLifecycle unnamed = lost("");
  ASSERT_TRUE(unnamed.transition(L::Lose{"at the memory limit"}));
  EXPECT_EQ(std::get<lifecycle::Lost>(unnamed.state()).why, "at the memory limit");
}

TEST(SandboxLifecycle, EveryStateBeforeDestroyMayBeDestroyed) {
  SandboxLifecycle running = ready();
  ASSERT_TRUE(running.transition(L::Begin{Kind::kSide, ""}));
  for (SandboxLifecycle life : {SandboxLifecycle(), ready(), running, lost("x")}) {
    ASSERT_TRUE(life.transition(L::Destroy{}));
    EXPECT_EQ(stateOf(life), "destroying");
    EXPECT_TRUE(life.activities().empty());
  }
  SandboxLifecycle twice = destroying();
  auto again = twice.transition(L::Destroy{});
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().context, "a sandbox that is destroying cannot destroy");
}

TEST(SandboxLifecycle, DestroyingLeadsOnlyToDestroyed) {
  SandboxLifecycle life = destroying();
  auto begun = life.transition(L::Begin{Kind::kCommand, ""});
  ASSERT_FALSE(begun);
  EXPECT_EQ(begun.error().code, ErrorCode::kEnvironmentGone);
  EXPECT_EQ(begun.error().context, "the environment is being destroyed");
  EXPECT_FALSE(life.transition(L::Begin{Kind::kSide, ""}));
  EXPECT_TRUE(life.transition(L::Lose{"killed"}));  // the kill reaching the channel
  EXPECT_TRUE(life.transition(L::End{1}));
  EXPECT_FALSE(life.transition(L::SetUp{}));
  EXPECT_EQ(stateOf(life), "destroying");
  ASSERT_TRUE(life.transition(L::Finish{}));
  EXPECT_EQ(stateOf(life), "destroyed");
}

TEST(SandboxLifecycle, OnlyADestroyingSandboxFinishes) {
  SandboxLifecycle running = ready();
  ASSERT_TRUE(running.transition(L::Begin{Kind::kCommand, ""}));
  for (SandboxLifecycle life : {SandboxLifecycle(), ready(), running, lost("x")}) {
    const std::string before = stateOf(life);
    auto finished = life.transition(L::Finish{});
    ASSERT_FALSE(finished);
    EXPECT_EQ(finished.error().code, ErrorCode::kExecutionUnavailable);
    EXPECT_EQ(finished.error().context,
              "a sandbox that is " + before + " cannot finish destroying");
    EXPECT_EQ(stateOf(life), before);
  }
}

TEST(SandboxLifecycle, DestroyedIsFinal) {
  SandboxLifecycle life = destroyed();
  EXPECT_FALSE(life.usable());
  for (Kind kind : {Kind::kCommand, Kind::kSide}) {
    auto begun = life.transition(L::Begin{kind, ""});
    ASSERT_FALSE(begun);
    EXPECT_EQ(begun.error().code, ErrorCode::kEnvironmentGone);
    EXPECT_EQ(begun.error().context, "the environment was destroyed");
  }
  auto lose = life.transition(L::Lose{"late"});
  ASSERT_FALSE(lose);
  EXPECT_EQ(lose.error().context, "a sandbox that is destroyed cannot lose");
  auto destroy = life.transition(L::Destroy{});
  ASSERT_FALSE(destroy);
  EXPECT_EQ(destroy.error().context, "a sandbox that is destroyed cannot destroy");
  auto finish = life.transition(L::Finish{});
  ASSERT_FALSE(finish);
  EXPECT_EQ(finish.error().context, "a sandbox that is destroyed cannot finish destroying");
  // A side process its caller ends after destroy: taken, nothing changes.
  EXPECT_TRUE(life.transition(L::End{3}));
  EXPECT_EQ(stateOf(life), "destroyed");
}

TEST(SandboxLife, AScopeEndsItsActivityAndMayOutliveItsRecord) {
  auto life = std::make_shared<SandboxLife>();
  ASSERT_TRUE(life->setUp());
  auto command = beginActivity(life, Kind::kCommand, "exec-1");
  ASSERT_TRUE(command) << command.error().message();
  auto busy = beginActivity(life, Kind::kCommand);
  ASSERT_FALSE(busy);
  EXPECT_EQ(busy.error().code, ErrorCode::kEnvironmentBusy);
  auto side = beginActivity(life, Kind::kSide);
  ASSERT_TRUE(side);
  command->release();
  EXPECT_EQ(lifecycleStateName(life->state()), "running");
  ActivityScope moved = std::move(*side);
  life.reset();  // the record is gone; the scope still holds the lifecycle
  moved.release();
  moved.release();  // idempotent
}

TEST(SandboxLife, MarkLostIsTheOneCallAndDestroyingFollows) {
  auto life = std::make_shared<SandboxLife>();
  ASSERT_TRUE(life->setUp());
  EXPECT_TRUE(life->usable());
  life->markLost("its shim closed the stream");
  EXPECT_FALSE(life->usable());
  auto refused = beginActivity(life, Kind::kSide);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().context.find("its shim closed the stream"), std::string::npos);
  life->destroying();
  EXPECT_EQ(lifecycleStateName(life->state()), "destroying");
  life->destroyed();
  EXPECT_EQ(lifecycleStateName(life->state()), "destroyed");
  life->destroyed();  // refused, and it stays destroyed
  EXPECT_EQ(lifecycleStateName(life->state()), "destroyed");
}

TEST(SandboxLifecycle, RandomSequencesKeepTheInvariants) {
  EXPECT_TRUE(rc::check("the lifecycle's invariants hold after any sequence", [] {
    const auto steps = *rc::gen::container<std::vector<int>>(rc::gen::inRange(0, 7));
    const auto picks = *rc::gen::container<std::vector<std::size_t>>(
        steps.size(), rc::gen::inRange<std::size_t>(0, 8));
    SandboxLifecycle life;
    std::vector<std::uint64_t> tokens;
    for (std::size_t i = 0; i < steps.size(); ++i) {
      const LifecycleState before = life.state();
      const bool was_lost = std::holds_alternative<lifecycle::Lost>(before);
      const bool was_destroying = std::holds_alternative<lifecycle::Destroying>(before);
      const bool was_destroyed = std::holds_alternative<lifecycle::Destroyed>(before);
      Result<std::uint64_t> r = 0;
      switch (steps[i]) {
        case 0:
          r = life.transition(L::SetUp{});
          break;
        case 1:
          r = life.transition(L::Begin{Kind::kCommand, ""});
          break;
        case 2:
          r = life.transition(L::Begin{Kind::kSide, ""});
          break;
        case 3:
          r = life.transition(L::End{tokens.empty() ? 99 : tokens[picks[i] % tokens.size()]});
          break;
        case 4:
          r = life.transition(L::Lose{"why"});
          break;
        case 5:
          r = life.transition(L::Destroy{});
          break;
        default:
          r = life.transition(L::Finish{});
          break;
      }
      if (r && (steps[i] == 1 || steps[i] == 2)) tokens.push_back(*r);
      const LifecycleState& after = life.state();
      // Always one of the six (a variant of six alternatives, never empty).
      RC_ASSERT(after.index() < 6u);
      RC_ASSERT(!after.valueless_by_exception());
      // A refused transition leaves the state as it was.
      if (!r) RC_ASSERT(after.index() == before.index());
      // Destroyed is final; destroying leads only to destroyed; lost only
      // to destroying.
      if (was_destroyed) RC_ASSERT(std::holds_alternative<lifecycle::Destroyed>(after));
      if (was_destroying)
        RC_ASSERT(std::holds_alternative<lifecycle::Destroying>(after) ||
                  std::holds_alternative<lifecycle::Destroyed>(after));
      if (was_lost)
        RC_ASSERT(std::holds_alternative<lifecycle::Lost>(after) ||
                  std::holds_alternative<lifecycle::Destroying>(after));
      // Activities only while running, and then at least one, and at most
      // one command.
      const auto activities = life.activities();
      if (!std::holds_alternative<lifecycle::Running>(after))
        RC_ASSERT(activities.empty());
      else
        RC_ASSERT(!activities.empty());
      int commands = 0;
      for (const auto& a : activities) commands += a.kind == Kind::kCommand ? 1 : 0;
      RC_ASSERT(commands <= 1);
      RC_ASSERT(life.usable() == (std::holds_alternative<lifecycle::Ready>(after) ||
                                  std::holds_alternative<lifecycle::Running>(after)));
    }
  }));
}

}  // namespace
}  // namespace airlock::host
