// schedule.* (src/airlock/capability/schedule; docs/capabilities.md
// "schedule.*"): the cron parser (examples and rapidcheck properties: it
// parses untrusted strings), validation that names the field, bounds that
// only narrow, the SQLite store (durable across a reopen), and the
// capability over it with an injected clock.
#include "airlock/capability/schedule/schedule.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <limits>
#include <set>

#include "airlock/capability/broker/capabilities.h"
#include "airlock/capability/schedule/cron.h"

namespace airlock::capability::schedule {
namespace {

using wire::Refusal;
using wire::Value;

constexpr std::int64_t k2026 = 1'767'225'600;  // 2026-01-01T00:00:00Z, a Thursday

std::string errField(std::string_view text) {
  auto e = CronExpression::parse(text);
  return e ? std::string("<parsed>") : e.error().field;
}

TEST(Cron, StandardFormsParse) {
  for (const char* ok : {"* * * * *", "0 9 * * 1-5", "*/15 0-6/2 1,15 * *", "0 0 1 1 0",
                         "59 23 31 12 7", "  5\t4 * * *  ", "0-59/7 * * * *"})
    EXPECT_TRUE(CronExpression::parse(ok)) << ok;
  EXPECT_EQ(CronExpression::parse("  5\t4 * * *  ")->canonical(), "5 4 * * *");
}

TEST(Cron, RefusalsNameTheField) {
  EXPECT_EQ(errField("60 * * * *"), "minute");
  EXPECT_EQ(errField("* 24 * * *"), "hour");
  EXPECT_EQ(errField("* * 0 * *"), "day_of_month");
  EXPECT_EQ(errField("* * 32 * *"), "day_of_month");
  EXPECT_EQ(errField("* * * 13 *"), "month");
  EXPECT_EQ(errField("* * * JAN *"), "month");
  EXPECT_EQ(errField("* * * * MON"), "day_of_week");
  EXPECT_EQ(errField("* * * * 8"), "day_of_week");
  EXPECT_EQ(errField("* * L * *"), "day_of_month");
  EXPECT_EQ(errField("* * 15W * *"), "day_of_month");
  EXPECT_EQ(errField("* * ? * *"), "day_of_month");
  EXPECT_EQ(errField("* * * * 5#3"), "day_of_week");
  EXPECT_EQ(errField("5-1 * * * *"), "minute");
  EXPECT_EQ(errField("*/0 * * * *"), "minute");
  EXPECT_EQ(errField("5/10 * * * *"), "minute");
  EXPECT_EQ(errField("1,,2 * * * *"), "minute");
  EXPECT_EQ(errField("0 * * * * *"), "expression") << "no seconds field";
  EXPECT_EQ(errField("@daily"), "expression");
  EXPECT_EQ(errField("* * * *"), "expression");
  EXPECT_EQ(errField(std::string(300, '*')), "expression");
}

TEST(Cron, NextFireExamples) {
  auto weekdays = CronExpression::parse("0 9 * * 1-5");
  ASSERT_TRUE(weekdays);
  EXPECT_EQ(weekdays->nextAfter(k2026, 0), k2026 + 9 * 3600);  // Thu 09:00
  EXPECT_EQ(weekdays->nextAfter(k2026 + 9 * 3600, 0),
            k2026 + 86400 + 9 * 3600);  // strictly after: Fri
  EXPECT_EQ(weekdays->nextAfter(k2026 + 86400 + 9 * 3600, 0), k2026 + 4 * 86400 + 9 * 3600);  // Mon
  // 09:00 at +02:00 is 07:00 UTC.
  EXPECT_EQ(weekdays->nextAfter(k2026, 120), k2026 + 7 * 3600);
  // Both day fields restricted: ORed (the 15th, or any Monday).
  auto either = CronExpression::parse("0 0 15 * 1");
  ASSERT_TRUE(either);
  EXPECT_EQ(either->nextAfter(k2026, 0), k2026 + 4 * 86400);  // Mon Jan 5
  // One restricted: ANDed with "*".
  auto fifteenth = CronExpression::parse("0 0 15 * *");
  EXPECT_EQ(fifteenth->nextAfter(k2026, 0), k2026 + 14 * 86400);
  auto leap = CronExpression::parse("0 0 29 2 *");
  EXPECT_EQ(leap->nextAfter(k2026, 0), 1835395200);  // 2028-02-29
  EXPECT_FALSE(CronExpression::parse("0 0 31 2 *")->nextAfter(k2026, 0)) << "never fires";
}

TEST(Cron, OffsetsAreFixedAndBounded) {
  EXPECT_EQ(parseUtcOffset("+02:00").value_or(0), 120);
  EXPECT_EQ(parseUtcOffset("-05:30").value_or(0), -330);
  EXPECT_EQ(parseUtcOffset("+14:00").value_or(0), 840);
  for (const char* bad :
       {"+14:01", "-15:00", "02:00", "+2:00", "+02:60", "Europe/Paris", "UTC", "+02:00 "}) {
    auto o = parseUtcOffset(bad);
    ASSERT_FALSE(o) << bad;
    EXPECT_EQ(o.error().field, "offset");
  }
  EXPECT_EQ(formatUtcOffset(-330), "-05:30");
}

// ---- properties ----

rc::Gen<std::string> genItem(int lo, int hi) {
  return rc::gen::oneOf(
      rc::gen::just(std::string("*")),
      rc::gen::map(rc::gen::inRange(lo, hi + 1), [](int v) { return std::to_string(v); }),
      rc::gen::map(rc::gen::inRange(1, hi - lo + 2),
                   [](int s) { return "*/" + std::to_string(s); }),
      rc::gen::mapcat(rc::gen::inRange(lo, hi + 1), [hi](int a) {
        return rc::gen::map(rc::gen::inRange(a, hi + 1),
                            [a](int b) { return std::to_string(a) + "-" + std::to_string(b); });
      }));
}
rc::Gen<std::string> genField(int lo, int hi) {
  return rc::gen::map(
      rc::gen::nonEmpty(rc::gen::container<std::vector<std::string>>(genItem(lo, hi))),
      [](const std::vector<std::string>& items) {
        std::string out;
        for (std::size_t i = 0; i < items.size() && i < 4; ++i) out += (i ? "," : "") + items[i];
        return out;
      });
}
rc::Gen<std::string> genExpression() {
  return rc::gen::map(rc::gen::tuple(genField(0, 59), genField(0, 23), genField(1, 31),
                                     genField(1, 12), genField(0, 7)),
                      [](const auto& t) {
                        return std::get<0>(t) + " " + std::get<1>(t) + " " + std::get<2>(t) + " " +
                               std::get<3>(t) + " " + std::get<4>(t);
                      });
}

RC_GTEST_PROP(CronProperty, ParsingAnyBytesIsTotalAndRefusalsNameAField,
              (const std::string& text)) {
  auto e = CronExpression::parse(text);
  if (!e) {
    static const std::set<std::string> kFields = {"minute", "hour",        "day_of_month",
                                                  "month",  "day_of_week", "expression"};
    RC_ASSERT(kFields.count(e.error().field) == 1u);
  } else {
    RC_ASSERT(CronExpression::parse(e->canonical()).has_value());
  }
}

RC_GTEST_PROP(CronProperty, ExpressionsOfTheGrammarParse, ()) {
  const auto text = *genExpression();
  auto e = CronExpression::parse(text);
  RC_ASSERT(e.has_value());
  RC_ASSERT(e->canonical() == text);
}

RC_GTEST_PROP(CronProperty, NextFireIsTheFirstMatchingMinuteStrictlyAfter, ()) {
  const auto text = *genExpression();
  const auto t = *rc::gen::inRange<std::int64_t>(0, 4'102'444'800);  // 1970..2100
  const int offset = *rc::gen::inRange(-840, 841);
  auto e = CronExpression::parse(text);
  RC_ASSERT(e.has_value());
  auto next = e->nextAfter(t, offset);
  if (!next) return;  // e.g. Feb 30: checked by example
  RC_ASSERT(*next > t);
  RC_ASSERT(*next % 60 == 0);
  RC_ASSERT(e->matches(*next, offset));
  // No earlier minute matches (checked up to three days back from the fire).
  const std::int64_t first = (t / 60 + 1) * 60;
  for (std::int64_t m = std::max(first, *next - 3 * 86400); m < *next; m += 60)
    RC_ASSERT(!e->matches(m, offset));
}

RC_GTEST_PROP(CronProperty, AnOffsetShiftsTheUtcGrid, ()) {
  const auto text = *genExpression();
  const auto t = *rc::gen::inRange<std::int64_t>(100'000, 4'102'444'800);
  const int offset = *rc::gen::inRange(-840, 841);
  auto e = CronExpression::parse(text);
  RC_ASSERT(e.has_value());
  auto local = e->nextAfter(t, offset);
  auto utc = e->nextAfter(t + offset * 60, 0);
  RC_ASSERT(local.has_value() == utc.has_value());
  if (local) RC_ASSERT(*local == *utc - offset * 60);
}

RC_GTEST_PROP(CronProperty, AnOutOfRangeNumberIsRefusedNamingItsField, ()) {
  static const char* kNames[] = {"minute", "hour", "day_of_month", "month", "day_of_week"};
  static const int kMax[] = {59, 23, 31, 12, 7};
  const int f = *rc::gen::inRange(0, 5);
  const int v = *rc::gen::inRange(kMax[f] + 1, 100);
  std::string fields[5] = {"*", "*", "*", "*", "*"};
  fields[f] = std::to_string(v);
  auto e = CronExpression::parse(fields[0] + " " + fields[1] + " " + fields[2] + " " + fields[3] +
                                 " " + fields[4]);
  RC_ASSERT(!e.has_value());
  RC_ASSERT(e.error().field == std::string(kNames[f]));
}

// ---- planSchedule ----

ScheduleRequest request(TimingKind kind) {
  ScheduleRequest r;
  r.name = "beat";
  r.kind = kind;
  r.interval_s = 3600;
  r.at_unix_s = k2026 + 600;
  r.cron = "0 9 * * *";
  r.after_s = 90;
  return r;
}

std::string planField(const ScheduleRequest& r) {
  auto p = planSchedule(r, "exec", k2026 + 1, ScheduleCeilings{});
  return p ? "<planned>" : p.error().field;
}

TEST(PlanSchedule, EachTimingResolves) {
  ScheduleCeilings c;
  auto every = planSchedule(request(TimingKind::kEvery), "exec", k2026 + 1, c);
  ASSERT_TRUE(every);
  EXPECT_EQ(every->next_fire_s, k2026 + 3600) << "aligned to the epoch";
  EXPECT_EQ(every->max_fires, c.max_fires) << "default bounds are the ceilings";
  auto after = planSchedule(request(TimingKind::kAfter), "exec", k2026, c);
  ASSERT_TRUE(after);
  EXPECT_EQ(after->next_fire_s, k2026 + 90);
  EXPECT_EQ(after->max_fires, 1u);
  auto cron = planSchedule(request(TimingKind::kCron), "exec", k2026, c);
  ASSERT_TRUE(cron);
  EXPECT_EQ(cron->next_fire_s, k2026 + 9 * 3600);
  EXPECT_EQ(cron->when(), "cron 0 9 * * * at +00:00");
  auto at = planSchedule(request(TimingKind::kAt), "exec", k2026, c);
  ASSERT_TRUE(at);
  EXPECT_EQ(at->next_fire_s, k2026 + 600);
}

TEST(PlanSchedule, RefusalsNameTheField) {
  auto r = request(TimingKind::kAfter);
  r.after_s = 0;
  EXPECT_EQ(planField(r), "after_s");
  r.after_s = 604'801;
  EXPECT_EQ(planField(r), "after_s");
  r = request(TimingKind::kEvery);
  r.interval_s = 59;
  EXPECT_EQ(planField(r), "interval_s");
  r = request(TimingKind::kAt);
  r.at_unix_s = k2026;
  EXPECT_EQ(planField(r), "at") << "in the past";
  r = request(TimingKind::kEvery);
  r.offset = "+02:00";
  EXPECT_EQ(planField(r), "offset") << "an offset only beside cron";
  r = request(TimingKind::kCron);
  r.offset = "Europe/Paris";
  EXPECT_EQ(planField(r), "offset");
  r = request(TimingKind::kCron);
  r.cron = "0 0 31 2 *";
  EXPECT_EQ(planField(r), "expression");
  r = request(TimingKind::kCron);
  r.cron = "0 25 * * *";
  EXPECT_EQ(planField(r), "hour");
  r = request(TimingKind::kAfter);
  r.bounds = Bounds{1, std::nullopt};
  EXPECT_EQ(planField(r), "bounds") << "a one-shot takes no bounds";
  r = request(TimingKind::kEvery);
  r.name = "no spaces";
  EXPECT_EQ(planField(r), "name");
}

TEST(PlanSchedule, BoundsCanOnlyNarrow) {
  ScheduleCeilings c;
  auto r = request(TimingKind::kEvery);
  r.bounds = Bounds{c.max_fires + 1, std::nullopt};
  EXPECT_EQ(planField(r), "bounds.max_fires");
  r.bounds = Bounds{std::nullopt, c.expires_after_s + 1};
  EXPECT_EQ(planField(r), "bounds.expires_after_s");
  r.bounds = Bounds{0, std::nullopt};
  EXPECT_EQ(planField(r), "bounds.max_fires");
  r.bounds = Bounds{3, 7200};
  auto p = planSchedule(r, "exec", k2026 + 1, c);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->max_fires, 3u);
  EXPECT_EQ(p->expires_at_s, k2026 + 1 + 7200);
  r.bounds = Bounds{3, 60};
  EXPECT_EQ(planField(r), "interval_s") << "would first fire after it expires";
}

// ---- occurrences (what the stores fire through) ----

TEST(Occurrences, TheNextIsStrictlyAfterAndWithinTheBounds) {
  ScheduleCeilings c;
  auto every = planSchedule(request(TimingKind::kEvery), "exec", k2026 + 1, c);  // 3600 s
  ASSERT_TRUE(every);
  EXPECT_EQ(occurrenceAfter(*every, k2026 + 3600), k2026 + 7200) << "strictly after a grid point";
  EXPECT_EQ(occurrenceAfter(*every, k2026 + 3599), k2026 + 3600);
  ScheduleRecord early = *every;
  early.expires_at_s = 10'000;
  EXPECT_EQ(occurrenceAfter(early, -1), 0) << "the grid holds before the epoch too";
  EXPECT_EQ(occurrenceAfter(early, -3601), -3600);
  EXPECT_EQ(occurrenceAfter(*every, every->expires_at_s), std::nullopt) << "past its expiry";
  EXPECT_EQ(occurrenceAfter(*every, std::numeric_limits<std::int64_t>::max() - 10), std::nullopt)
      << "no overflow at the end of time";
  auto cron = request(TimingKind::kCron);
  cron.offset = "+02:00";
  auto daily = planSchedule(cron, "exec", k2026, c);  // 09:00 at +02:00 = 07:00 UTC
  ASSERT_TRUE(daily);
  EXPECT_EQ(occurrenceAfter(*daily, k2026 + 7 * 3600), k2026 + 86400 + 7 * 3600);
  auto at = planSchedule(request(TimingKind::kAt), "exec", k2026, c);
  ASSERT_TRUE(at);
  EXPECT_EQ(occurrenceAfter(*at, k2026), std::nullopt) << "a one-shot has no second occurrence";
  EXPECT_EQ(nextFireAfter(*every, k2026 + 3600, every->max_fires), std::nullopt)
      << "max_fires reached";
}

TEST(Occurrences, AFireMovesPastBothItsOccurrenceAndNow) {
  auto every = planSchedule(request(TimingKind::kEvery), "exec", k2026 + 1, ScheduleCeilings{});
  ASSERT_TRUE(every);
  auto late = stepFire(*every, k2026 + 5 * 3600 + 1);  // four occurrences missed
  ASSERT_TRUE(late);
  EXPECT_EQ(late->occurrence_s, k2026 + 3600);
  EXPECT_EQ(late->fire_number, 1u);
  EXPECT_EQ(late->next_fire_s, k2026 + 6 * 3600) << "coalesced: resumes after now";
  auto early = stepFire(*every, k2026);  // a clock behind the occurrence
  ASSERT_TRUE(early);
  EXPECT_EQ(early->next_fire_s, k2026 + 7200) << "still strictly after the occurrence";
  ScheduleRecord spent = *every;
  spent.next_fire_s.reset();
  EXPECT_FALSE(stepFire(spent, k2026 + 3600));
}

// ---- the store ----

class ScheduleStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/airlock-schedule-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string db() const { return dir_ + "/metadata.db"; }
  std::string dir_;
};

TEST_F(ScheduleStoreTest, SchedulesSurviveAReopenAndFireUntilSpent) {
  ScheduleCeilings c;
  auto r = request(TimingKind::kEvery);
  r.bounds = Bounds{2, std::nullopt};
  r.body = "tick";
  auto rec = planSchedule(r, "exec-1", k2026 + 1, c);
  ASSERT_TRUE(rec);
  {
    auto store = openSqliteScheduleStore(db());
    ASSERT_TRUE(store) << store.error().message();
    ASSERT_TRUE((*store)->create(*rec, c.max_per_creator));
    auto dup = (*store)->create(*rec, c.max_per_creator);
    ASSERT_FALSE(dup);
    EXPECT_EQ(dup.error().code, ErrorCode::kExecutionRejected);
  }
  auto store = openSqliteScheduleStore(db());
  ASSERT_TRUE(store);
  auto listed = (*store)->list("exec-1");
  ASSERT_TRUE(listed);
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].body, "tick");
  EXPECT_EQ((*listed)[0].next_fire_s, k2026 + 3600);
  EXPECT_TRUE((*store)->list("exec-2")->empty()) << "keyed on the creator";
  EXPECT_TRUE((*store)->due(k2026 + 3599, 10)->empty());
  ASSERT_EQ((*store)->due(k2026 + 3600, 10)->size(), 1u);
  ASSERT_TRUE((*store)->recordFire("exec-1", "beat", k2026 + 3600));
  EXPECT_EQ((*store)->list("exec-1")->at(0).next_fire_s, k2026 + 7200);
  ASSERT_TRUE((*store)->recordFire("exec-1", "beat", k2026 + 7200));
  EXPECT_FALSE((*store)->list("exec-1")->at(0).next_fire_s) << "max_fires 2 reached";
  EXPECT_TRUE((*store)->due(k2026 + 100000, 10)->empty());
  EXPECT_FALSE((*store)->cancel("exec-2", "beat").value_or(true))
      << "another execution cannot cancel it";
  EXPECT_TRUE((*store)->cancel("exec-1", "beat").value_or(false));
  EXPECT_TRUE((*store)->list("exec-1")->empty());
}

TEST_F(ScheduleStoreTest, LiveSchedulesPerExecutionAreCapped) {
  ScheduleCeilings c;
  c.max_per_creator = 2;
  auto store = openSqliteScheduleStore(db());
  ASSERT_TRUE(store);
  for (const char* name : {"a", "b", "c"}) {
    auto r = request(TimingKind::kAfter);
    r.name = name;
    auto rec = planSchedule(r, "exec", k2026, c);
    ASSERT_TRUE(rec);
    auto created = (*store)->create(*rec, c.max_per_creator);
    EXPECT_EQ(created.has_value(), std::string(name) != "c") << name;
  }
}

// ---- the capability ----

TEST_F(ScheduleStoreTest, TheCapabilityCreatesListsAndCancels) {
  auto store = openSqliteScheduleStore(db());
  ASSERT_TRUE(store);
  SandboxServices s;
  s.handle.environment_id = "exec-cap";
  s.schedule.store = *store;
  s.schedule.now_s = [] { return k2026; };
  auto table = makeSandboxCapabilities(s);
  auto cancel = CancelToken::create();
  ASSERT_TRUE(cancel);
  auto call = [&](const char* cap, Value args) {
    const auto* e = table->find(cap);
    EXPECT_NE(e, nullptr) << cap;
    return e->handler(
        CallContext{cap, args, BrokerClock::now() + std::chrono::seconds(5), *cancel});
  };
  auto created = call("schedule.cron",
                      Value::map({{"name", Value::string("standup")},
                                  {"expression", Value::string("0 9 * * 1-5")},
                                  {"offset", Value::string("+02:00")},
                                  {"body", Value::string("stand up")},
                                  {"bounds", Value::map({{"max_fires", Value::integer(10)}})}}));
  ASSERT_TRUE(std::holds_alternative<Value>(created)) << std::get<Refusal>(created).message;
  EXPECT_EQ(std::get<Value>(created).find("next_fire_unix_s")->asUnsigned().value_or(0),
            static_cast<std::uint64_t>(k2026 + 7 * 3600));
  EXPECT_EQ(*std::get<Value>(created).find("when")->asString(), "cron 0 9 * * 1-5 at +02:00");
  auto bad = call("schedule.every",
                  Value::map({{"name", Value::string("x")}, {"interval_s", Value::integer(10)}}));
  ASSERT_TRUE(std::holds_alternative<Refusal>(bad));
  EXPECT_EQ(std::get<Refusal>(bad).code, "invalid_schedule");
  EXPECT_EQ(std::get<Refusal>(bad).message.rfind("interval_s: ", 0), 0u)
      << std::get<Refusal>(bad).message;
  auto wide =
      call("schedule.every",
           Value::map({{"name", Value::string("y")},
                       {"interval_s", Value::integer(3600)},
                       {"bounds", Value::map({{"max_fires", Value::integer(1'000'000)}})}}));
  ASSERT_TRUE(std::holds_alternative<Refusal>(wide));
  EXPECT_EQ(std::get<Refusal>(wide).code, "invalid_schedule");
  EXPECT_EQ(std::get<Refusal>(wide).message.rfind("bounds.max_fires: ", 0), 0u);
  auto offset = call("schedule.after", Value::map({{"name", Value::string("z")},
                                                   {"after_s", Value::integer(5)},
                                                   {"offset", Value::string("+01:00")}}));
  ASSERT_TRUE(std::holds_alternative<Refusal>(offset));
  EXPECT_EQ(std::get<Refusal>(offset).message.rfind("offset: ", 0), 0u);
  auto listed = call("schedule.list", Value::nil());
  ASSERT_TRUE(std::holds_alternative<Value>(listed));
  ASSERT_EQ(std::get<Value>(listed).asArray()->size(), 1u);
  auto gone = call("schedule.cancel", Value::map({{"name", Value::string("standup")}}));
  EXPECT_TRUE(std::holds_alternative<Value>(gone));
  auto again = call("schedule.cancel", Value::map({{"name", Value::string("standup")}}));
  ASSERT_TRUE(std::holds_alternative<Refusal>(again));
  EXPECT_EQ(std::get<Refusal>(again).code, "not_found");
}

TEST(ScheduleCapability, WithoutAStoreItIsRefusedByName) {
  auto table = makeSandboxCapabilities(SandboxServices{});
  const auto* e = table->find("schedule.every");
  ASSERT_NE(e, nullptr) << "routed, not unknown";
  auto cancel = CancelToken::create();
  ASSERT_TRUE(cancel);
  Value args = Value::nil();
  auto a = e->handler(
      CallContext{"schedule.every", args, BrokerClock::now() + std::chrono::seconds(1), *cancel});
  ASSERT_TRUE(std::holds_alternative<Refusal>(a));
  EXPECT_EQ(std::get<Refusal>(a).code, "unavailable");
  EXPECT_NE(std::get<Refusal>(a).message.find("schedule.every"), std::string::npos);
}

}  // namespace
}  // namespace airlock::capability::schedule
