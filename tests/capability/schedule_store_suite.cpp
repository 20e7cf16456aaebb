// The ScheduleStore contract (spec 001 "cap/schedule"; schedule.h), run
// unchanged against SQLite and a real PostgreSQL server. Times are passed
// in (no wall clock), so every expected occurrence is plain arithmetic on
// k2026.
#include "schedule_store_suite.h"

#include <rapidcheck.h>

#include <algorithm>
#include <barrier>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <vector>

namespace airlock::capability::schedule::testing {

void ScheduleStoreSuite::SetUp() {
  backend_ = GetParam().make();
  ASSERT_NE(backend_, nullptr);
  if (auto reason = backend_->skipReason()) GTEST_SKIP() << *reason;
  auto store = backend_->open({});
  ASSERT_TRUE(store.has_value()) << store.error().message();
  store_ = std::move(*store);
}

namespace {

constexpr std::int64_t k2026 = 1'767'225'600;  // 2026-01-01T00:00:00Z
constexpr std::int64_t kDay = 86'400;
constexpr std::size_t kMaxLive = 64;

ScheduleRequest every(std::string name, std::uint64_t interval_s,
                      std::optional<std::uint64_t> max_fires = std::nullopt,
                      std::optional<std::uint64_t> expires_after_s = std::nullopt) {
  ScheduleRequest r;
  r.name = std::move(name);
  r.kind = TimingKind::kEvery;
  r.interval_s = interval_s;
  if (max_fires || expires_after_s) r.bounds = Bounds{max_fires, expires_after_s};
  return r;
}
ScheduleRequest cron(std::string name, std::string expression, std::optional<std::string> offset) {
  ScheduleRequest r;
  r.name = std::move(name);
  r.kind = TimingKind::kCron;
  r.cron = std::move(expression);
  r.offset = std::move(offset);
  return r;
}
ScheduleRequest at(std::string name, std::int64_t unix_s) {
  ScheduleRequest r;
  r.name = std::move(name);
  r.kind = TimingKind::kAt;
  r.at_unix_s = unix_s;
  return r;
}
ScheduleRequest after(std::string name, std::uint64_t after_s) {
  ScheduleRequest r;
  r.name = std::move(name);
  r.kind = TimingKind::kAfter;
  r.after_s = after_s;
  return r;
}

// A planned record; a refusal here is a bug in the test (thrown, reported).
ScheduleRecord plan(const ScheduleRequest& request, std::string creator, std::int64_t now_s) {
  auto r = planSchedule(request, std::move(creator), now_s, ScheduleCeilings{});
  if (!r) throw std::runtime_error("plan: " + r.error().text());
  return *r;
}

void expectSameRecord(const ScheduleRecord& got, const ScheduleRecord& want) {
  EXPECT_EQ(got.creator, want.creator);
  EXPECT_EQ(got.name, want.name);
  EXPECT_EQ(got.target, want.target);
  EXPECT_EQ(got.kind, want.kind);
  EXPECT_EQ(got.cadence, want.cadence);
  EXPECT_EQ(got.offset_minutes, want.offset_minutes);
  EXPECT_EQ(got.wake, want.wake);
  EXPECT_EQ(got.body, want.body);
  EXPECT_EQ(got.created_at_s, want.created_at_s);
  EXPECT_EQ(got.next_fire_s, want.next_fire_s);
  EXPECT_EQ(got.max_fires, want.max_fires);
  EXPECT_EQ(got.expires_at_s, want.expires_at_s);
  EXPECT_EQ(got.fires, want.fires);
}

std::vector<std::string> namesOf(const std::vector<Fire>& fires) {
  std::vector<std::string> out;
  for (const auto& f : fires) out.push_back(f.name);
  return out;
}

// The one record `creator` has named `name`, or a default one (and a failure).
ScheduleRecord find(ScheduleStore& store, const std::string& creator, const std::string& name) {
  auto listed = store.list(creator);
  EXPECT_TRUE(listed.has_value()) << listed.error().message();
  if (listed)
    for (auto& r : *listed)
      if (r.name == name) return r;
  ADD_FAILURE() << "no schedule " << creator << "/" << name;
  return {};
}

TEST_P(ScheduleStoreSuite, TheDatabaseIsAtThisBuildsSchemaVersion) {
  auto version = backend_->schemaVersion();
  ASSERT_TRUE(version.has_value()) << version.error().message();
  EXPECT_EQ(*version, kScheduleSchemaVersion);
}

TEST_P(ScheduleStoreSuite, CreateListAndCancelAreKeyedOnTheCreator) {
  auto b = plan(every("b-every", 3600), "exec-1", k2026 + 1);
  b.body = std::string("\0\xff raw bytes\n", 13);
  b.wake = true;
  auto a = plan(cron("a-cron", "0 9 * * 1-5", "+02:00"), "exec-1", k2026);
  auto c = plan(after("b-every", 90), "exec-2", k2026);
  for (const auto* r : {&b, &a, &c}) {
    auto created = store_->create(*r, kMaxLive);
    ASSERT_TRUE(created.has_value()) << created.error().message();
  }
  auto listed = store_->list("exec-1");
  ASSERT_TRUE(listed.has_value()) << listed.error().message();
  ASSERT_EQ(listed->size(), 2u);
  expectSameRecord((*listed)[0], a);  // by name
  expectSameRecord((*listed)[1], b);
  ASSERT_EQ(store_->list("exec-2")->size(), 1u);
  expectSameRecord(store_->list("exec-2")->front(), c);
  EXPECT_TRUE(store_->list("exec-3")->empty());

  EXPECT_FALSE(store_->cancel("exec-3", "b-every").value_or(true)) << "not the creator";
  EXPECT_TRUE(store_->cancel("exec-1", "b-every").value_or(false));
  EXPECT_FALSE(store_->cancel("exec-1", "b-every").value_or(true)) << "already gone";
  ASSERT_EQ(store_->list("exec-1")->size(), 1u);
  EXPECT_EQ(store_->list("exec-2")->size(), 1u) << "one creator's cancel leaves another's name";
}

TEST_P(ScheduleStoreSuite, NamesAreUniquePerCreator) {
  auto first = plan(after("beat", 60), "exec-1", k2026);
  ASSERT_TRUE(store_->create(first, kMaxLive).has_value());
  auto dup = store_->create(plan(every("beat", 3600), "exec-1", k2026), kMaxLive);
  ASSERT_FALSE(dup.has_value());
  EXPECT_EQ(dup.error().code, ErrorCode::kExecutionRejected);
  EXPECT_EQ(dup.error().context.rfind("name: ", 0), 0u) << dup.error().context;
  expectSameRecord(find(*store_, "exec-1", "beat"), first);  // the first one is untouched
  EXPECT_TRUE(store_->create(plan(after("beat", 60), "exec-2", k2026), kMaxLive).has_value());
  ASSERT_TRUE(store_->cancel("exec-1", "beat").value_or(false));
  EXPECT_TRUE(store_->create(plan(every("beat", 3600), "exec-1", k2026), kMaxLive).has_value())
      << "a cancelled name is free again";
}

TEST_P(ScheduleStoreSuite, MaxLiveCountsOnlySchedulesThatStillFire) {
  ASSERT_TRUE(store_->create(plan(after("a", 60), "exec", k2026), 2).has_value());
  ASSERT_TRUE(store_->create(plan(after("b", 60), "exec", k2026), 2).has_value());
  auto third = store_->create(plan(after("c", 60), "exec", k2026), 2);
  ASSERT_FALSE(third.has_value());
  EXPECT_EQ(third.error().code, ErrorCode::kExecutionRejected);
  EXPECT_EQ(third.error().context.rfind("max_live: ", 0), 0u) << third.error().context;
  EXPECT_TRUE(store_->create(plan(after("c", 60), "other", k2026), 2).has_value())
      << "the cap is per creator";
  auto fired = store_->fireDue(k2026 + 60, 10);
  ASSERT_TRUE(fired.has_value()) << fired.error().message();
  ASSERT_EQ(fired->size(), 3u);
  EXPECT_FALSE(find(*store_, "exec", "a").next_fire_s) << "spent";
  EXPECT_TRUE(store_->create(plan(after("c", 60), "exec", k2026 + 60), 2).has_value())
      << "spent schedules no longer count";
  EXPECT_EQ(store_->list("exec")->size(), 3u) << "spent schedules are still listed";
}

TEST_P(ScheduleStoreSuite, DueAndRecordFireMoveASchedule) {
  ASSERT_TRUE(store_->create(plan(after("x", 300), "exec-2", k2026), kMaxLive));
  ASSERT_TRUE(store_->create(plan(after("y", 100), "exec-1", k2026), kMaxLive));
  ASSERT_TRUE(store_->create(plan(after("z", 100), "exec-0", k2026), kMaxLive));
  ASSERT_TRUE(store_->create(plan(every("w", 3600), "exec-1", k2026 + 1), kMaxLive));
  EXPECT_TRUE(store_->due(k2026 + 99, 10)->empty());
  auto due = store_->due(k2026 + 300, 10);
  ASSERT_TRUE(due.has_value()) << due.error().message();
  ASSERT_EQ(due->size(), 3u);
  EXPECT_EQ((*due)[0].name, "z") << "earliest first, then by creator";
  EXPECT_EQ((*due)[1].name, "y");
  EXPECT_EQ((*due)[2].name, "x");
  EXPECT_EQ(store_->due(k2026 + 300, 2)->size(), 2u);

  ASSERT_TRUE(store_->recordFire("exec-1", "w", k2026 + 3600 + 5));
  auto w = find(*store_, "exec-1", "w");
  EXPECT_EQ(w.next_fire_s, k2026 + 7200);
  EXPECT_EQ(w.fires, 1u);
  // Recorded before its occurrence: the schedule still moves past it.
  ASSERT_TRUE(store_->recordFire("exec-1", "w", k2026 + 10));
  EXPECT_EQ(find(*store_, "exec-1", "w").next_fire_s, k2026 + 10800);
  EXPECT_EQ(find(*store_, "exec-1", "w").fires, 2u);

  auto missing = store_->recordFire("exec-1", "nope", k2026);
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  ASSERT_TRUE(store_->recordFire("exec-1", "y", k2026 + 100));
  EXPECT_FALSE(find(*store_, "exec-1", "y").next_fire_s);
  auto spent = store_->recordFire("exec-1", "y", k2026 + 200);
  ASSERT_FALSE(spent.has_value());
  EXPECT_EQ(spent.error().code, ErrorCode::kExecutionRejected);
  EXPECT_EQ(find(*store_, "exec-1", "y").fires, 1u);
  EXPECT_TRUE(store_->pendingFires(0, 10)->empty()) << "recordFire writes no outbox entry";
}

TEST_P(ScheduleStoreSuite, FireDueMovesEachDueOccurrenceIntoTheOutboxOnce) {
  auto one = plan(after("one", 100), "exec-a", k2026);
  one.wake = true;
  one.body = "first body";
  ASSERT_TRUE(store_->create(one, kMaxLive));
  ASSERT_TRUE(store_->create(plan(every("two", 60), "exec-b", k2026), kMaxLive));
  ASSERT_TRUE(store_->create(plan(at("three", k2026 + 500), "exec-a", k2026), kMaxLive));

  const std::int64_t now = k2026 + 100;
  auto fires = store_->fireDue(now, 10);
  ASSERT_TRUE(fires.has_value()) << fires.error().message();
  ASSERT_EQ(fires->size(), 2u);
  const Fire& two = (*fires)[0];  // occurrence 60 before 100
  EXPECT_EQ(two.creator, "exec-b");
  EXPECT_EQ(two.name, "two");
  EXPECT_EQ(two.target, "exec-b");
  EXPECT_FALSE(two.wake);
  EXPECT_EQ(two.occurrence_s, k2026 + 60);
  EXPECT_EQ(two.fired_at_s, now);
  EXPECT_EQ(two.fire_number, 1u);
  const Fire& first = (*fires)[1];
  EXPECT_EQ(first.name, "one");
  EXPECT_TRUE(first.wake);
  EXPECT_EQ(first.body, "first body");
  EXPECT_EQ(first.occurrence_s, k2026 + 100);
  EXPECT_EQ(first.fire_number, 1u);
  EXPECT_LT(two.sequence, first.sequence);

  auto again = store_->fireDue(now, 10);
  ASSERT_TRUE(again.has_value()) << again.error().message();
  EXPECT_TRUE(again->empty()) << "a repeated call fires nothing twice";
  auto pending = store_->pendingFires(0, 10);
  ASSERT_TRUE(pending.has_value()) << pending.error().message();
  EXPECT_EQ(*pending, *fires) << "the outbox holds exactly what fireDue returned";

  EXPECT_EQ(find(*store_, "exec-b", "two").next_fire_s, k2026 + 120);
  EXPECT_EQ(find(*store_, "exec-b", "two").fires, 1u);
  EXPECT_FALSE(find(*store_, "exec-a", "one").next_fire_s);
  EXPECT_EQ(find(*store_, "exec-a", "three").next_fire_s, k2026 + 500) << "not yet due";

  auto next = store_->fireDue(k2026 + 130, 10);
  ASSERT_TRUE(next.has_value());
  ASSERT_EQ(next->size(), 1u);
  EXPECT_EQ((*next)[0].occurrence_s, k2026 + 120);
  EXPECT_EQ((*next)[0].fire_number, 2u);
  EXPECT_GT((*next)[0].sequence, first.sequence);
  EXPECT_TRUE(store_->fireDue(k2026 + 10 * kDay, 0)->empty()) << "limit 0 moves nothing";
  EXPECT_EQ(find(*store_, "exec-a", "three").next_fire_s, k2026 + 500);
}

TEST_P(ScheduleStoreSuite, AnOutageCoalescesIntoOneFireAndResumesAfterNow) {
  ASSERT_TRUE(store_->create(plan(every("hourly", 3600), "exec", k2026 + 1), kMaxLive));
  // 09:00 at +02:00 is 07:00 UTC, every day.
  ASSERT_TRUE(store_->create(plan(cron("daily", "0 9 * * *", "+02:00"), "exec", k2026), kMaxLive));
  const std::int64_t day10 = k2026 + 10 * kDay;
  const std::int64_t now = day10 + 5 * 3600 + 17;  // ten days later, 05:00:17 UTC
  auto fires = store_->fireDue(now, 10);
  ASSERT_TRUE(fires.has_value()) << fires.error().message();
  ASSERT_EQ(fires->size(), 2u) << "two hundred missed hours and ten missed days: one fire each";
  EXPECT_EQ((*fires)[0].name, "hourly");
  EXPECT_EQ((*fires)[0].occurrence_s, k2026 + 3600) << "the occurrence that was due";
  EXPECT_EQ((*fires)[1].name, "daily");
  EXPECT_EQ((*fires)[1].occurrence_s, k2026 + 7 * 3600);
  for (const Fire& f : *fires) {
    EXPECT_EQ(f.fired_at_s, now);
    EXPECT_EQ(f.fire_number, 1u);
  }
  EXPECT_EQ(find(*store_, "exec", "hourly").next_fire_s, day10 + 6 * 3600)
      << "the first grid point strictly after now";
  EXPECT_EQ(find(*store_, "exec", "daily").next_fire_s, day10 + 7 * 3600)
      << "today's 07:00 UTC, not a missed one";
  EXPECT_TRUE(store_->fireDue(now, 10)->empty());
  auto resumed = store_->fireDue(day10 + 7 * 3600, 10);
  ASSERT_TRUE(resumed.has_value());
  ASSERT_EQ(resumed->size(), 2u);
  EXPECT_EQ(namesOf(*resumed), (std::vector<std::string>{"hourly", "daily"}));
  EXPECT_EQ((*resumed)[0].occurrence_s, day10 + 6 * 3600);
  EXPECT_EQ((*resumed)[1].occurrence_s, day10 + 7 * 3600);
  EXPECT_EQ((*resumed)[0].fire_number, 2u);
  EXPECT_EQ(find(*store_, "exec", "daily").next_fire_s, day10 + kDay + 7 * 3600);
}

TEST_P(ScheduleStoreSuite, OneShotsMaxFiresAndExpirySpendASchedule) {
  ASSERT_TRUE(store_->create(plan(at("once", k2026 + 700), "exec", k2026), kMaxLive));
  ASSERT_TRUE(store_->create(plan(every("twice", 600, 2), "exec", k2026), kMaxLive));
  ASSERT_TRUE(
      store_->create(plan(every("expiring", 600, std::nullopt, 1800), "exec", k2026), kMaxLive));
  auto names = [&](std::int64_t now) {
    auto f = store_->fireDue(now, 10);
    EXPECT_TRUE(f.has_value()) << f.error().message();
    return f ? namesOf(*f) : std::vector<std::string>{"<error>"};
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(names(k2026 + 600), (V{"expiring", "twice"}));
  EXPECT_EQ(names(k2026 + 1200), (V{"once", "expiring", "twice"})) << "700 before 1200";
  EXPECT_EQ(names(k2026 + 1800), (V{"expiring"})) << "an occurrence at the expiry second fires";
  EXPECT_EQ(names(k2026 + 5000), V{});
  EXPECT_EQ(names(k2026 + 60 * kDay), V{});
  for (auto [name, fires] :
       {std::pair{"once", 1u}, std::pair{"twice", 2u}, std::pair{"expiring", 3u}}) {
    auto r = find(*store_, "exec", name);
    EXPECT_FALSE(r.next_fire_s) << name << " is spent";
    EXPECT_EQ(r.fires, fires) << name;
  }
  // Down past the expiry: the occurrence that fell before it fires once, late.
  const std::int64_t t = k2026 + 100'000;
  ASSERT_TRUE(store_->create(plan(every("late", 600, std::nullopt, 1800), "exec", t), kMaxLive));
  auto late = store_->fireDue(t + 30 * kDay, 10);
  ASSERT_TRUE(late.has_value());
  ASSERT_EQ(late->size(), 1u);
  EXPECT_EQ((*late)[0].occurrence_s, k2026 + 100'200);
  EXPECT_FALSE(find(*store_, "exec", "late").next_fire_s);
}

TEST_P(ScheduleStoreSuite, PendingFiresPagesAndAcknowledgeDeletesThrough) {
  for (int i = 0; i < 5; ++i)
    ASSERT_TRUE(
        store_->create(plan(after("s" + std::to_string(i), 60 + i), "exec", k2026), kMaxLive));
  auto fires = store_->fireDue(k2026 + 100, 10);
  ASSERT_TRUE(fires.has_value()) << fires.error().message();
  ASSERT_EQ(fires->size(), 5u);
  EXPECT_EQ(namesOf(*fires), (std::vector<std::string>{"s0", "s1", "s2", "s3", "s4"}));
  for (std::size_t i = 1; i < fires->size(); ++i)
    EXPECT_LT((*fires)[i - 1].sequence, (*fires)[i].sequence);
  const std::vector<Fire> head(fires->begin(), fires->begin() + 2);
  const std::vector<Fire> tail(fires->begin() + 2, fires->end());
  EXPECT_EQ(*store_->pendingFires(0, 2), head);
  EXPECT_EQ(*store_->pendingFires(head.back().sequence, 10), tail);
  EXPECT_TRUE(store_->pendingFires(tail.back().sequence, 10)->empty());

  EXPECT_EQ(store_->acknowledgeFires(head.back().sequence).value_or(99), 2u);
  EXPECT_EQ(*store_->pendingFires(0, 10), tail);
  EXPECT_EQ(store_->acknowledgeFires(head.back().sequence).value_or(99), 0u);
  EXPECT_EQ(store_->acknowledgeFires(tail.back().sequence).value_or(99), 3u);
  EXPECT_TRUE(store_->pendingFires(0, 10)->empty());

  // An emptied outbox, a new connection: sequences still only grow.
  auto reopened = backend_->open({});
  ASSERT_TRUE(reopened.has_value()) << reopened.error().message();
  ASSERT_TRUE((*reopened)->create(plan(after("s5", 60), "exec", k2026 + 100), kMaxLive));
  auto later = (*reopened)->fireDue(k2026 + 200, 10);
  ASSERT_TRUE(later.has_value()) << later.error().message();
  ASSERT_EQ(later->size(), 1u);
  EXPECT_GT((*later)[0].sequence, tail.back().sequence) << "a sequence is never reused";
  EXPECT_EQ(*store_->pendingFires(0, 10), *later) << "durable and visible to every connection";
  EXPECT_TRUE(store_->fireDue(k2026 + 200, 10)->empty()) << "nor fired again by another";
}

TEST_P(ScheduleStoreSuite, CancellingKeepsFiresAlreadyInTheOutbox) {
  auto r = plan(every("beat", 60), "exec", k2026);
  r.body = "kept";
  ASSERT_TRUE(store_->create(r, kMaxLive));
  auto fires = store_->fireDue(k2026 + 60, 10);
  ASSERT_TRUE(fires.has_value());
  ASSERT_EQ(fires->size(), 1u);
  ASSERT_TRUE(store_->cancel("exec", "beat").value_or(false));
  EXPECT_EQ(*store_->pendingFires(0, 10), *fires);
  EXPECT_EQ(store_->pendingFires(0, 10)->front().body, "kept");
  EXPECT_TRUE(store_->fireDue(k2026 + kDay, 10)->empty()) << "nothing fires after the cancel";
}

TEST_P(ScheduleStoreSuite, AFullOutboxMovesNothingUntilAcknowledged) {
  auto bounded = backend_->open(ScheduleStoreOptions{3});
  ASSERT_TRUE(bounded.has_value()) << bounded.error().message();
  ScheduleStore& store = **bounded;
  for (int i = 0; i < 5; ++i)
    ASSERT_TRUE(
        store.create(plan(after("s" + std::to_string(i), 60 + i), "exec", k2026), kMaxLive));
  const std::int64_t now = k2026 + 100;
  auto first = store.fireDue(now, 10);
  ASSERT_TRUE(first.has_value()) << first.error().message();
  EXPECT_EQ(namesOf(*first), (std::vector<std::string>{"s0", "s1", "s2"})) << "up to the bound";

  auto full = store.fireDue(now, 10);
  ASSERT_FALSE(full.has_value());
  EXPECT_EQ(full.error().code, ErrorCode::kExecutionUnavailable);
  EXPECT_NE(full.error().message().find("outbox full"), std::string::npos)
      << full.error().message();
  auto waiting = store.due(now, 10);
  ASSERT_TRUE(waiting.has_value());
  ASSERT_EQ(waiting->size(), 2u) << "the rest stay due";
  EXPECT_EQ((*waiting)[0].next_fire_s, k2026 + 63);
  EXPECT_EQ((*waiting)[1].next_fire_s, k2026 + 64);
  EXPECT_EQ(store.pendingFires(0, 100)->size(), 3u);

  ASSERT_EQ(store.acknowledgeFires((*first)[0].sequence).value_or(0), 1u);
  auto one = store.fireDue(now, 10);
  ASSERT_TRUE(one.has_value()) << one.error().message();
  EXPECT_EQ(namesOf(*one), std::vector<std::string>{"s3"}) << "one acknowledged, one moved";
  EXPECT_FALSE(store.fireDue(now, 10).has_value());

  ASSERT_EQ(store.acknowledgeFires((*one)[0].sequence).value_or(0), 3u);
  ASSERT_TRUE(store.create(plan(after("s5", 60), "exec", now), kMaxLive));
  ASSERT_TRUE(store.create(plan(after("s6", 61), "exec", now), kMaxLive));
  auto rest = store.fireDue(now + 100, 10);
  ASSERT_TRUE(rest.has_value()) << rest.error().message();
  EXPECT_EQ(namesOf(*rest), (std::vector<std::string>{"s4", "s5", "s6"}));
  auto idle = store.fireDue(now + 100, 10);
  ASSERT_TRUE(idle.has_value()) << "full but nothing due is not an error";
  EXPECT_TRUE(idle->empty());
}

// Creating and spending one-shots in a loop does not grow the table: a
// create keeps only the creator's newest max_live spent schedules.
TEST_P(ScheduleStoreSuite, SpentSchedulesAreKeptOnlyUpToMaxLive) {
  constexpr std::size_t kLive = 3;
  std::int64_t now = k2026;
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(store_->create(plan(after("s" + std::to_string(i), 60), "exec", now), kLive));
    now += 60;
    auto fired = store_->fireDue(now, 10);
    ASSERT_TRUE(fired.has_value()) << fired.error().message();
    ASSERT_EQ(fired->size(), 1u);
  }
  auto listed = store_->list("exec");
  ASSERT_TRUE(listed.has_value());
  std::vector<std::string> names;
  for (const auto& r : *listed) names.push_back(r.name);
  std::sort(names.begin(), names.end());
  // s16..s18 kept at s19's create, then s19 itself spent.
  EXPECT_EQ(names, (std::vector<std::string>{"s16", "s17", "s18", "s19"}));
  EXPECT_EQ(store_->pendingFires(0, 100)->size(), 20u) << "pruning leaves the outbox alone";
}

// One creator's fires cannot fill the outbox for everyone: past its share
// its schedules stay due while another creator's still fire.
TEST_P(ScheduleStoreSuite, ACreatorPastItsShareOfTheOutboxWaits) {
  ScheduleStoreOptions options;
  options.outbox_capacity = 100;
  options.creator_share = 2;
  auto shared = backend_->open(options);
  ASSERT_TRUE(shared.has_value()) << shared.error().message();
  ScheduleStore& store = **shared;
  for (int i = 0; i < 4; ++i)
    ASSERT_TRUE(
        store.create(plan(after("greedy" + std::to_string(i), 60), "greedy", k2026), kMaxLive));
  auto first = store.fireDue(k2026 + 60, 2);
  ASSERT_TRUE(first.has_value()) << first.error().message();
  ASSERT_EQ(first->size(), 2u);
  ASSERT_TRUE(store.create(plan(after("polite", 60), "polite", k2026 + 60), kMaxLive));
  auto second = store.fireDue(k2026 + 200, 10);
  ASSERT_TRUE(second.has_value()) << second.error().message();
  EXPECT_EQ(namesOf(*second), std::vector<std::string>{"polite"}) << "greedy is at its share";
  EXPECT_EQ(store.due(k2026 + 200, 10)->size(), 2u) << "greedy's rest stay due";
  ASSERT_EQ(store.acknowledgeFires((*first)[1].sequence).value_or(0), 2u);
  auto third = store.fireDue(k2026 + 200, 10);
  ASSERT_TRUE(third.has_value()) << third.error().message();
  EXPECT_EQ(namesOf(*third), (std::vector<std::string>{"greedy2", "greedy3"}));
}

TEST_P(ScheduleStoreSuite, TwoConcurrentCallersNeverFireAnOccurrenceTwice) {
  auto second = backend_->open({});
  ASSERT_TRUE(second.has_value()) << second.error().message();
  constexpr int kCreators = 4, kNames = 10, kRounds = 4;
  for (int c = 0; c < kCreators; ++c)
    for (int n = 0; n < kNames; ++n)
      ASSERT_TRUE(store_->create(
          plan(every("n" + std::to_string(n), 60), "c" + std::to_string(c), k2026), kMaxLive));

  std::barrier sync(2);
  std::mutex mu;
  std::vector<Fire> all;
  std::vector<std::string> errors;
  std::size_t largest_batch = 0;
  auto replica = [&](ScheduleStore* store) {
    for (int round = 1; round <= kRounds; ++round) {
      sync.arrive_and_wait();  // both start the round together
      for (;;) {
        auto fires = store->fireDue(k2026 + 60 * round, 7);
        std::lock_guard lk(mu);
        if (!fires) {
          errors.push_back(fires.error().message());
          break;
        }
        if (fires->empty()) break;
        largest_batch = std::max(largest_batch, fires->size());
        all.insert(all.end(), fires->begin(), fires->end());
      }
      sync.arrive_and_wait();  // the round is over for both
    }
  };
  std::thread a(replica, store_.get());
  std::thread b(replica, second->get());
  a.join();
  b.join();
  EXPECT_TRUE(errors.empty()) << errors.front();
  ASSERT_EQ(all.size(), static_cast<std::size_t>(kCreators * kNames * kRounds));

  std::set<std::tuple<std::string, std::string, std::int64_t>> keys;
  std::set<std::int64_t> sequences;
  std::map<std::pair<std::string, std::string>, std::vector<std::uint64_t>> numbers;
  for (const Fire& f : all) {
    EXPECT_TRUE(keys.emplace(f.creator, f.name, f.occurrence_s).second)
        << "fired twice: " << f.creator << "/" << f.name << " at " << f.occurrence_s;
    EXPECT_TRUE(sequences.insert(f.sequence).second);
    EXPECT_EQ(f.occurrence_s, f.fired_at_s) << "each round's time is an occurrence";
    numbers[{f.creator, f.name}].push_back(f.fire_number);
  }
  ASSERT_EQ(numbers.size(), static_cast<std::size_t>(kCreators * kNames));
  for (auto& [key, n] : numbers) {
    std::sort(n.begin(), n.end());
    EXPECT_EQ(n, (std::vector<std::uint64_t>{1, 2, 3, 4})) << key.first << "/" << key.second;
  }
  auto pending = store_->pendingFires(0, 1000);
  ASSERT_TRUE(pending.has_value());
  ASSERT_EQ(pending->size(), all.size());
  for (std::size_t i = 0; i < pending->size(); ++i) {
    if (i > 0) {
      EXPECT_LT((*pending)[i - 1].sequence, (*pending)[i].sequence);
    }
    EXPECT_EQ(sequences.count((*pending)[i].sequence), 1u);
  }
  EXPECT_LE(largest_batch, 7u) << "limit holds";
}

TEST_P(ScheduleStoreSuite, AVersion1DatabaseIsUpgradedInPlace) {
  auto fresh = GetParam().make();
  ASSERT_NE(fresh, nullptr);
  auto old = plan(every("kept", 3600), "exec-old", k2026 + 1);
  old.body = "from version 1";
  auto seeded = fresh->seedVersion1(old);
  ASSERT_TRUE(seeded.has_value()) << seeded.error().message();
  auto store = fresh->open({});
  ASSERT_TRUE(store.has_value()) << store.error().message();
  EXPECT_EQ(fresh->schemaVersion().value_or(0), kScheduleSchemaVersion);
  auto listed = (*store)->list("exec-old");
  ASSERT_TRUE(listed.has_value()) << listed.error().message();
  ASSERT_EQ(listed->size(), 1u);
  expectSameRecord(listed->front(), old);
  auto fires = (*store)->fireDue(k2026 + 3600, 10);
  ASSERT_TRUE(fires.has_value()) << fires.error().message();
  ASSERT_EQ(fires->size(), 1u);
  EXPECT_EQ((*fires)[0].body, "from version 1");
  EXPECT_EQ((*fires)[0].occurrence_s, k2026 + 3600);
}

// For random every-intervals, bounds and clock steps (repeats included, and
// gaps of many intervals), fireDue behaves like this model: a call at `now`
// fires the pending occurrence once if it is due and moves to the first grid
// point strictly after now; max_fires and the expiry spend the schedule.
TEST_P(ScheduleStoreSuite, FireDueMatchesTheModelForRandomClocks) {
  int case_number = 0;
  const bool ok = rc::check("fireDue matches the coalescing model", [&] {
    const auto interval = *rc::gen::inRange<std::int64_t>(60, 7201);
    const auto max_fires = *rc::gen::inRange<std::uint64_t>(1, 25);
    const auto expires_after = *rc::gen::inRange<std::int64_t>(interval, 40 * interval);
    const auto start = k2026 + *rc::gen::inRange<std::int64_t>(0, kDay);
    const auto steps = *rc::gen::container<std::vector<std::int64_t>>(
        rc::gen::oneOf(rc::gen::just<std::int64_t>(0), rc::gen::inRange<std::int64_t>(1, interval),
                       rc::gen::inRange<std::int64_t>(interval, 6 * interval)));
    const std::string creator = "prop-" + std::to_string(++case_number);
    const auto record = plan(every("p", static_cast<std::uint64_t>(interval), max_fires,
                                   static_cast<std::uint64_t>(expires_after)),
                             creator, start);
    RC_ASSERT(store_->create(record, kMaxLive).has_value());

    std::optional<std::int64_t> model_next = record.next_fire_s;
    std::uint64_t model_fires = 0;
    std::vector<Fire> mine;
    std::int64_t now = start;
    for (std::int64_t step : steps) {
      now += step;
      auto fires = store_->fireDue(now, 100);
      RC_ASSERT(fires.has_value());
      std::optional<std::int64_t> expected;
      if (model_next && *model_next <= now) {
        expected = model_next;
        ++model_fires;
        const std::int64_t next = (now / interval + 1) * interval;
        model_next = model_fires >= max_fires || next > record.expires_at_s
                         ? std::nullopt
                         : std::optional<std::int64_t>(next);
      }
      RC_ASSERT(fires->size() == (expected ? 1u : 0u));
      if (expected) {
        const Fire& f = fires->front();
        RC_ASSERT(f.creator == creator);
        RC_ASSERT(f.occurrence_s == *expected);
        RC_ASSERT(f.fired_at_s == now);
        RC_ASSERT(f.fire_number == model_fires);
        mine.push_back(f);
      }
      auto listed = store_->list(creator);
      RC_ASSERT(listed.has_value() && listed->size() == 1u);
      RC_ASSERT(listed->front().next_fire_s == model_next);
      RC_ASSERT(listed->front().fires == model_fires);
      if (model_next) RC_ASSERT(*model_next > now);
    }
    // The invariants the model implies, stated directly.
    RC_ASSERT(mine.size() <= max_fires);
    for (std::size_t i = 0; i < mine.size(); ++i) {
      RC_ASSERT(mine[i].fire_number == i + 1);
      RC_ASSERT(mine[i].occurrence_s % interval == 0);
      RC_ASSERT(mine[i].occurrence_s <= record.expires_at_s);
      if (i > 0) {
        RC_ASSERT(mine[i].occurrence_s > mine[i - 1].occurrence_s);
        RC_ASSERT(mine[i].sequence > mine[i - 1].sequence);
      }
    }
    RC_ASSERT(store_->cancel(creator, "p").value_or(false));
    if (!mine.empty()) RC_ASSERT(store_->acknowledgeFires(mine.back().sequence).has_value());
  });
  EXPECT_TRUE(ok);
}

}  // namespace
}  // namespace airlock::capability::schedule::testing
