#include "airlock/core/timeout_rule.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <string>

namespace airlock {
namespace {

using std::chrono::seconds;

TimeoutInputs base() {
  TimeoutInputs in{};
  in.service_hard_cap = seconds{1800};
  in.spec_wall_clock = seconds{300};
  in.remaining_run_budget = std::nullopt;
  in.command_timeout = std::nullopt;
  in.tool_declared_timeout = seconds{300};
  in.minimum_floor = seconds{5};
  return in;
}

TEST(EffectiveTimeout, HardCapAppliesWhenNothingElseIsSupplied) {
  TimeoutInputs in = base();
  in.service_hard_cap = seconds{60};
  EXPECT_EQ(effectiveTimeout(in).value(), seconds{60});
}

TEST(EffectiveTimeout, SpecWallClockBoundsWhenItIsTheSmallest) {
  EXPECT_EQ(effectiveTimeout(base()).value(), seconds{300});
}

TEST(EffectiveTimeout, RemainingBudgetBoundsWhenItIsTheSmallest) {
  TimeoutInputs in = base();
  in.remaining_run_budget = seconds{42};
  EXPECT_EQ(effectiveTimeout(in).value(), seconds{42});
}

TEST(EffectiveTimeout, ACommandAskingForMoreThanTheDeclaredTimeoutGetsTheDeclaredTimeout) {
  TimeoutInputs in = base();
  in.spec_wall_clock = seconds{1800};
  in.command_timeout = seconds{3600};
  EXPECT_EQ(effectiveTimeout(in).value(), seconds{300});
}

TEST(EffectiveTimeout, ACommandCanLowerTheTimeout) {
  TimeoutInputs in = base();
  in.command_timeout = seconds{5};
  in.remaining_run_budget = seconds{100};
  EXPECT_EQ(effectiveTimeout(in).value(), seconds{5});
}

TEST(EffectiveTimeout, ACommandCannotRaiseItAboveTheOtherBounds) {
  TimeoutInputs in = base();
  in.spec_wall_clock = seconds{30};
  in.command_timeout = seconds{200};
  EXPECT_EQ(effectiveTimeout(in).value(), seconds{30});
}

TEST(EffectiveTimeout, BudgetExactlyAtTheFloorIsAccepted) {
  TimeoutInputs in = base();
  in.remaining_run_budget = seconds{5};
  EXPECT_EQ(effectiveTimeout(in).value(), seconds{5});
}

TEST(EffectiveTimeout, BudgetUnderTheFloorIsRejectedNamingBothNumbers) {
  TimeoutInputs in = base();
  in.remaining_run_budget = seconds{4};
  const auto r = effectiveTimeout(in);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kExecutionRejected);
  EXPECT_NE(r.error().context.find("4 s"), std::string::npos) << r.error().context;
  EXPECT_NE(r.error().context.find("5 s"), std::string::npos) << r.error().context;
}

TEST(EffectiveTimeout, ANonPositiveBudgetIsRejectedEvenWithAZeroFloor) {
  TimeoutInputs in = base();
  in.minimum_floor = seconds{0};
  in.remaining_run_budget = seconds{0};
  EXPECT_EQ(effectiveTimeout(in).error().code, ErrorCode::kExecutionRejected);
}

TEST(EffectiveTimeout, NonPositiveCommandTimeoutIsAToolValidationError) {
  for (const auto bad : {seconds{0}, seconds{-1}}) {
    TimeoutInputs in = base();
    in.command_timeout = bad;
    const auto r = effectiveTimeout(in);
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().code, ErrorCode::kToolValidationError);
    EXPECT_NE(r.error().context.find("timeout_seconds"), std::string::npos);
  }
}

TEST(EffectiveTimeout, BrokenOperatorSettingsAreConfigurationErrors) {
  TimeoutInputs in = base();
  in.service_hard_cap = seconds{0};
  EXPECT_EQ(effectiveTimeout(in).error().code, ErrorCode::kConfigurationError);
  in = base();
  in.tool_declared_timeout = seconds{-5};
  EXPECT_EQ(effectiveTimeout(in).error().code, ErrorCode::kConfigurationError);
}

TEST(EffectiveTimeout, NonPositiveSpecWallClockIsRejected) {
  TimeoutInputs in = base();
  in.spec_wall_clock = seconds{0};
  EXPECT_EQ(effectiveTimeout(in).error().code, ErrorCode::kExecutionRejected);
}

TEST(EffectiveTimeout, IsTheMinimumAndNeverExceedsAnySuppliedBound) {
  EXPECT_TRUE(rc::check("effective == min of the supplied bounds", [] {
    TimeoutInputs in{};
    in.service_hard_cap = seconds{*rc::gen::inRange<long>(1, 100000)};
    in.spec_wall_clock = seconds{*rc::gen::inRange<long>(1, 100000)};
    in.tool_declared_timeout = seconds{*rc::gen::inRange<long>(1, 100000)};
    in.minimum_floor = seconds{*rc::gen::inRange<long>(0, 10)};
    if (*rc::gen::arbitrary<bool>()) {
      in.remaining_run_budget = seconds{*rc::gen::inRange<long>(10, 100000)};
    }
    if (*rc::gen::arbitrary<bool>())
      in.command_timeout = seconds{*rc::gen::inRange<long>(1, 100000)};
    const auto r = effectiveTimeout(in);
    RC_ASSERT(r.has_value());
    seconds expected = std::min(in.service_hard_cap, in.spec_wall_clock);
    if (in.remaining_run_budget) expected = std::min(expected, *in.remaining_run_budget);
    if (in.command_timeout) {
      RC_ASSERT(*r <= *in.command_timeout);
      RC_ASSERT(*r <= in.tool_declared_timeout);
      expected = std::min({expected, *in.command_timeout, in.tool_declared_timeout});
    }
    RC_ASSERT(*r == expected);
    RC_ASSERT(*r > seconds{0});
    RC_ASSERT(*r <= in.service_hard_cap);
  }));
}

}  // namespace
}  // namespace airlock
