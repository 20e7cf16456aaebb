// Durable schedules for code mode (spec 001 "cap/schedule"; docs/capabilities.md
// "schedule.*"): the four timings, their validation against the host's
// ceilings, and the store that keeps them in the metadata database.
//
// Timings (one per schedule):
//   every  a fixed interval in seconds, on a grid aligned to the Unix epoch
//          (every 86400 fires at 00:00 UTC)
//   at     one UTC instant (Unix seconds), in the future and within the
//          expiry ceiling
//   cron   a five-field UTC expression (cron.h), optionally read at a fixed
//          offset [+-]HH:MM (the offset is refused beside any other timing)
//   after  one shot, 1..604800 seconds from now (the host's clock: a program
//          has no clock of its own it can trust)
// Bounds {max_fires, expires_after_s} apply to the recurring timings (every,
// cron) and can only NARROW the ceilings: a bound above its ceiling, or 0, is
// refused; an absent bound is the ceiling (DefaultBounds). Bounds beside
// at/after are refused (they fire once).
//
// Every refusal names its field ("interval_s: 30 is below the minimum 60");
// the capability answers them "invalid_schedule".
//
// What is built: creating, listing and cancelling, durable; due() and
// recordFire() for a firing loop. Airlock itself fires nothing: the
// embedding platform (which owns strands to wake or steer) polls due() and
// records each fire (docs/capabilities.md).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/capability/schedule/cron.h"
#include "airlock/core/error.h"

namespace airlock::capability::schedule {

enum class TimingKind { kEvery, kAt, kCron, kAfter };
std::string_view timingName(TimingKind kind) noexcept;  // "every", "at", "cron", "after"

// The host's ceilings; the same numbers hold for its own configuration.
struct ScheduleCeilings {
  std::uint64_t max_fires = 10'000;
  std::uint64_t expires_after_s = 30ull * 86'400;  // 30 days
  std::uint64_t min_interval_s = 60;               // cron's own granularity
  std::uint64_t max_interval_s = 30ull * 86'400;
  std::uint64_t max_after_s = 604'800;  // spec 001: 1..604800
  std::size_t max_body_bytes = 64 * 1024;
  std::size_t max_per_creator = 64;  // live schedules per execution
};

struct Bounds {
  std::optional<std::uint64_t> max_fires;
  std::optional<std::uint64_t> expires_after_s;
};

struct ScheduleRequest {
  std::string name;  // 1..64 bytes of [A-Za-z0-9._-]
  TimingKind kind = TimingKind::kAfter;
  std::uint64_t interval_s = 0;       // every
  std::int64_t at_unix_s = 0;         // at
  std::string cron;                   // cron
  std::optional<std::string> offset;  // cron only
  std::uint64_t after_s = 0;          // after
  std::optional<Bounds> bounds;       // every, cron only
  bool wake = false;                  // the request; the grant is the record's
  std::string body;                   // delivered when it fires; at most max_body_bytes
};

// One durable schedule.
struct ScheduleRecord {
  std::string creator;  // the execution that created it; list/cancel key
  std::string name;
  std::string target;  // where it fires; the creator itself for now
  TimingKind kind = TimingKind::kAfter;
  // every: the interval in seconds; cron: the canonical expression;
  // at/after: the resolved Unix second.
  std::string cadence;
  int offset_minutes = 0;  // cron only
  bool wake = false;
  std::string body;
  std::int64_t created_at_s = 0;
  std::optional<std::int64_t> next_fire_s;  // nullopt: spent (no further fire)
  std::uint64_t max_fires = 1;
  std::int64_t expires_at_s = 0;  // no fire after this second
  std::uint64_t fires = 0;
  // "every 3600s", "cron 0 9 * * 1-5 at +02:00", "at 1767225600".
  std::string when() const;
};

// Validates `request` at `now_s` (Unix seconds) against `ceilings` and
// resolves it into the record to store. Errors name the field.
tl::expected<ScheduleRecord, CronError> planSchedule(const ScheduleRequest& request,
                                                     std::string creator, std::int64_t now_s,
                                                     const ScheduleCeilings& ceilings);

// The fire after one at `fired_at_s` given `fires` fires so far; nullopt
// when the record is spent (max_fires reached, past its expiry, one-shot).
std::optional<std::int64_t> nextFireAfter(const ScheduleRecord& record, std::int64_t fired_at_s,
                                          std::uint64_t fires);

// The durable store. Thread-safe.
class ScheduleStore {
 public:
  virtual ~ScheduleStore() = default;
  // ExecutionRejected when the creator already has a schedule of this name
  // or has max_live schedules; ExecutionUnavailable on a database failure.
  virtual Result<void> create(const ScheduleRecord& record, std::size_t max_live) = 0;
  // The creator's schedules (spent ones included), by name.
  virtual Result<std::vector<ScheduleRecord>> list(std::string_view creator) = 0;
  // Whether one was removed.
  virtual Result<bool> cancel(std::string_view creator, std::string_view name) = 0;
  // Schedules whose next fire is at or before now_s, earliest first, at most `limit`.
  virtual Result<std::vector<ScheduleRecord>> due(std::int64_t now_s, std::size_t limit) = 0;
  // Counts a fire at fired_at_s and moves next_fire_s on (nextFireAfter).
  // NotFound when there is no such schedule.
  virtual Result<void> recordFire(std::string_view creator, std::string_view name,
                                  std::int64_t fired_at_s) = 0;
};

// SQLite: the table `schedules` in the metadata database file (beside the
// artifacts tables; own migration ledger `schedule_migrations`, so the
// artifact schema version is untouched). PostgreSQL follows later.
// Errors: ExecutionUnavailable (open, migrate), ConfigurationError (a
// schedule schema newer than this build).
Result<std::shared_ptr<ScheduleStore>> openSqliteScheduleStore(const std::string& path);

// What schedule.* needs: the store, the ceilings and the clock (Unix
// seconds; injected for tests).
struct ScheduleServices {
  std::shared_ptr<ScheduleStore> store;
  ScheduleCeilings ceilings;
  std::function<std::int64_t()> now_s;  // default (empty): the system clock
};

}  // namespace airlock::capability::schedule
