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
// What is built: creating, listing and cancelling, durable, and FIRING
// through an outbox. Airlock decides when an occurrence is due; it does not
// deliver it. ScheduleStore::fireDue() moves each due occurrence, in one
// transaction, into a durable outbox (table `schedule_fires`): one Fire per
// occurrence, numbered by a sequence that only grows. The embedding platform
// (which owns the strands a fire wakes or steers) reads the outbox with
// pendingFires() and acknowledges what it has delivered with
// acknowledgeFires(); the service's fire loop calls fireDue() on a tick. Delivery is
// at least once (a reader that dies before acknowledging reads the entry
// again); firing is at most once per occurrence (see fireDue()).
// due()/recordFire() remain for a caller that fires without the outbox.
//
// Occurrences and time: every occurrence is a UTC second; the host's clock is
// passed in as `now_s` (Unix seconds) so that tests and replicas choose it.
// An occurrence missed while the host was down is not replayed: the due
// occurrence fires once, late, and the schedule moves to its first
// occurrence strictly after now (no burst after an outage). expires_at_s
// bounds occurrences, not deliveries: an occurrence at or before it that
// fires late after an outage still fires.
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
  std::int64_t expires_at_s = 0;  // no occurrence after this second
  std::uint64_t fires = 0;
  // "every 3600s", "cron 0 9 * * 1-5 at +02:00", "at 1767225600".
  std::string when() const;
};

// Validates `request` at `now_s` (Unix seconds) against `ceilings` and
// resolves it into the record to store. Errors name the field.
tl::expected<ScheduleRecord, CronError> planSchedule(const ScheduleRequest& request,
                                                     std::string creator, std::int64_t now_s,
                                                     const ScheduleCeilings& ceilings);

// The schedule's first occurrence strictly after `after_s` that is not past
// its expiry (expires_at_s), ignoring max_fires: every = the next point of
// the epoch-aligned grid, cron = the next matching minute at the record's
// offset; at/after have no occurrence after their one instant. nullopt when
// there is none, or the cadence does not parse (a corrupt record).
std::optional<std::int64_t> occurrenceAfter(const ScheduleRecord& record, std::int64_t after_s);

// The fire after one at `fired_at_s` given `fires` fires so far (this one
// included): occurrenceAfter(record, fired_at_s), or nullopt when the record
// is spent (fires >= max_fires, past its expiry, a one-shot).
std::optional<std::int64_t> nextFireAfter(const ScheduleRecord& record, std::int64_t fired_at_s,
                                          std::uint64_t fires);

// What one fire of a live record at host time `now_s` does: it fires the
// occurrence `next_fire_s`, numbers it fires + 1, and moves the record to
// nextFireAfter(record, max(now_s, occurrence), fires + 1). Because the new
// occurrence is strictly after both the old one and now, occurrences of one
// schedule strictly increase, and an outage collapses into this one fire.
// nullopt for a spent record (next_fire_s empty). Both store backends fire
// through this function.
struct FireStep {
  std::int64_t occurrence_s = 0;
  std::uint64_t fire_number = 0;            // 1 for the first fire
  std::optional<std::int64_t> next_fire_s;  // nullopt: spent after this fire
};
std::optional<FireStep> stepFire(const ScheduleRecord& record, std::int64_t now_s);

// One outbox entry: an occurrence Airlock has fired and the embedding
// platform has not yet acknowledged. A copy of what the schedule said when it
// fired, so cancelling the schedule later does not change or remove it.
struct Fire {
  std::int64_t sequence = 0;  // outbox order; only grows, never reused
  std::string creator, name, target;
  bool wake = false;  // the granted wake
  std::string body;
  std::int64_t occurrence_s = 0;  // the UTC second the occurrence fell on (its next_fire_s)
  std::int64_t fired_at_s = 0;    // the host clock (fireDue's now_s) when it was moved here
  std::uint64_t fire_number = 0;  // 1 for the first fire
  bool operator==(const Fire&) const = default;
};

// The outbox holds at most this many unacknowledged fires by default; past
// it fireDue() moves nothing (ScheduleStoreOptions::outbox_capacity).
inline constexpr std::size_t kDefaultOutboxCapacity = 10'000;

struct ScheduleStoreOptions {
  std::size_t outbox_capacity = kDefaultOutboxCapacity;  // at least 1
  // A creator's share of the outbox: while it holds this many of one
  // creator's fires, that creator's schedules stay due (and fire once the
  // platform acknowledges), so one execution cannot fill the outbox for
  // every other. One pass may go past it by the creator's due schedules.
  std::size_t creator_share = kDefaultOutboxCapacity / 10;  // at least 1
};

// The durable store. Thread-safe.
class ScheduleStore {
 public:
  virtual ~ScheduleStore() = default;
  // ExecutionRejected when the creator already has a schedule of this name
  // or has max_live schedules; ExecutionUnavailable on a database failure.
  // Spent schedules past the creator's newest max_live are deleted first
  // (list() shows spent ones, but not without end).
  virtual Result<void> create(const ScheduleRecord& record, std::size_t max_live) = 0;
  // The creator's schedules (spent ones included), by name.
  virtual Result<std::vector<ScheduleRecord>> list(std::string_view creator) = 0;
  // Whether one was removed.
  virtual Result<bool> cancel(std::string_view creator, std::string_view name) = 0;
  // Schedules whose next fire is at or before now_s, earliest first, at most `limit`.
  virtual Result<std::vector<ScheduleRecord>> due(std::int64_t now_s, std::size_t limit) = 0;
  // Counts a fire at fired_at_s and moves next_fire_s on (stepFire). Writes
  // no outbox entry: for a caller that delivers fires itself from due().
  // NotFound when there is no such schedule; ExecutionRejected when it is
  // spent.
  virtual Result<void> recordFire(std::string_view creator, std::string_view name,
                                  std::int64_t fired_at_s) = 0;

  // ---- the firing outbox ----
  //
  // In ONE transaction: for each schedule due at now_s (next_fire_s <=
  // now_s), earliest occurrence first (then creator, name), at most `limit`
  // of them, appends one Fire for its occurrence next_fire_s, counts it and
  // moves the schedule on by stepFire(record, now_s): to its first
  // occurrence strictly after now_s, or to spent. Occurrences missed while
  // the host was down coalesce into this one fire. Returns the fires
  // appended, in sequence order (empty when nothing is due or limit is 0).
  //
  // At most once: (creator, name, occurrence_s) is unique in the outbox and
  // a schedule only moves forward, so a repeated or concurrent call (two
  // service replicas on one database) never fires an occurrence twice. An
  // occurrence already in the outbox under the same creator and name (a
  // schedule cancelled and re-created while the host clock stepped back) is
  // skipped: the schedule moves past it without counting it.
  //
  // Bounded: the outbox holds at most outbox_capacity unacknowledged fires.
  // fireDue appends only up to that; when the outbox is full and something
  // is due, nothing moves (schedules stay due, to fire once room is made)
  // and the answer is ExecutionUnavailable "schedule outbox full ...".
  // ExecutionUnavailable on a database failure (nothing moved).
  virtual Result<std::vector<Fire>> fireDue(std::int64_t now_s, std::size_t limit) = 0;
  // Outbox entries with sequence > after_sequence, oldest first, at most
  // `limit`. Reading does not remove: entries stay until acknowledged.
  virtual Result<std::vector<Fire>> pendingFires(std::int64_t after_sequence,
                                                 std::size_t limit) = 0;
  // Deletes outbox entries with sequence <= through_sequence; how many were
  // deleted. Cancelling a schedule does not delete its entries: a fire that
  // was moved to the outbox stays there until acknowledged.
  virtual Result<std::size_t> acknowledgeFires(std::int64_t through_sequence) = 0;
};

// The schedule schema version this build writes (both backends; the
// ledgers record it). 1: schedules; 2: the outbox schedule_fires.
inline constexpr int kScheduleSchemaVersion = 2;

// SQLite: the tables `schedules` and `schedule_fires` in the metadata
// database file (beside the artifacts tables; own migration ledger
// `schedule_migrations`, so the artifact schema version is untouched). An
// older schedule schema is upgraded at open. Writers take BEGIN IMMEDIATE,
// so several processes on one file serialize.
// Errors: ExecutionUnavailable (open, migrate), ConfigurationError (a
// schedule schema newer than this build).
Result<std::shared_ptr<ScheduleStore>> openSqliteScheduleStore(
    const std::string& path, const ScheduleStoreOptions& options = {});

// PostgreSQL (the scaled deployment): the same two tables and semantics in
// the database `conninfo` names (a libpq connection string or URI; a
// credential, never logged or put in an error), migrated at connect under
// an advisory lock with its own ledger `schedule_migrations`. One connection
// behind a mutex; open one store per thread that must not wait on another.
// fireDue locks the due rows FOR UPDATE SKIP LOCKED inside a transaction
// that also holds an outbox advisory lock, so outbox sequences commit in
// order (a reader's cursor never passes an entry that commits later) and
// two replicas firing at once neither double-fire nor overfill the outbox.
// Errors as for SQLite.
Result<std::shared_ptr<ScheduleStore>> openPostgresScheduleStore(
    const std::string& conninfo, const ScheduleStoreOptions& options = {});

// What schedule.* needs: the store, the ceilings and the clock (Unix
// seconds; injected for tests).
struct ScheduleServices {
  std::shared_ptr<ScheduleStore> store;
  ScheduleCeilings ceilings;
  std::function<std::int64_t()> now_s;  // default (empty): the system clock
};

}  // namespace airlock::capability::schedule
