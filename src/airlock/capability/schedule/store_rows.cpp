#include "airlock/capability/schedule/store_rows.h"

#include <algorithm>

namespace airlock::capability::schedule::rows {
namespace {

std::optional<TimingKind> kindFromName(std::string_view s) {
  for (TimingKind k : {TimingKind::kEvery, TimingKind::kAt, TimingKind::kCron, TimingKind::kAfter})
    if (timingName(k) == s) return k;
  return std::nullopt;
}

tl::unexpected<Error> corrupt(const char* column) {
  return storage::corruptRow("schedule", column);
}

}  // namespace

ScheduleRow encode(const ScheduleRecord& r) {
  ScheduleRow row;
  row.creator = r.creator;
  row.name = r.name;
  row.target = r.target;
  row.kind = std::string(timingName(r.kind));
  row.cadence = r.cadence;
  row.offset_minutes = r.offset_minutes;
  row.wake = r.wake;
  row.body = r.body;
  row.created_at_s = r.created_at_s;
  row.next_fire_s = r.next_fire_s;
  row.max_fires = clampToInt64(r.max_fires);
  row.expires_at_s = r.expires_at_s;
  row.fires = clampToInt64(r.fires);
  return row;
}

Result<ScheduleRecord> decode(ScheduleRow row) {
  ScheduleRecord r;
  auto kind = kindFromName(row.kind);
  if (!kind) return corrupt("kind");
  if (row.offset_minutes < -14 * 60 || row.offset_minutes > 14 * 60)
    return corrupt("offset_minutes");
  if (row.max_fires < 1) return corrupt("max_fires");
  if (row.fires < 0) return corrupt("fires");
  r.creator = std::move(row.creator);
  r.name = std::move(row.name);
  r.target = std::move(row.target);
  r.kind = *kind;
  r.cadence = std::move(row.cadence);
  r.offset_minutes = static_cast<int>(row.offset_minutes);
  r.wake = row.wake;
  r.body = std::move(row.body);
  r.created_at_s = row.created_at_s;
  r.next_fire_s = row.next_fire_s;
  r.max_fires = static_cast<std::uint64_t>(row.max_fires);
  r.expires_at_s = row.expires_at_s;
  r.fires = static_cast<std::uint64_t>(row.fires);
  return r;
}

FireRow encode(const Fire& f) {
  return FireRow{f.sequence,     f.creator,    f.name,
                 f.target,       f.wake,       f.body,
                 f.occurrence_s, f.fired_at_s, clampToInt64(f.fire_number)};
}

Result<Fire> decode(FireRow row) {
  if (row.fire_number < 1) return corrupt("fire_number");
  Fire f;
  f.sequence = row.sequence;
  f.creator = std::move(row.creator);
  f.name = std::move(row.name);
  f.target = std::move(row.target);
  f.wake = row.wake;
  f.body = std::move(row.body);
  f.occurrence_s = row.occurrence_s;
  f.fired_at_s = row.fired_at_s;
  f.fire_number = static_cast<std::uint64_t>(row.fire_number);
  return f;
}

std::vector<storage::Value> values(ScheduleRow row) {
  return {storage::text(std::move(row.creator)),
          storage::text(std::move(row.name)),
          storage::text(std::move(row.target)),
          storage::text(std::move(row.kind)),
          storage::text(std::move(row.cadence)),
          storage::int64(row.offset_minutes),
          storage::boolean(row.wake),
          storage::bytes(std::move(row.body)),
          storage::int64(row.created_at_s),
          storage::optionalInt64(row.next_fire_s),
          storage::int64(row.max_fires),
          storage::int64(row.expires_at_s),
          storage::int64(row.fires)};
}

std::vector<storage::Value> values(FireRow row) {
  return {storage::text(std::move(row.creator)), storage::text(std::move(row.name)),
          storage::text(std::move(row.target)),  storage::boolean(row.wake),
          storage::bytes(std::move(row.body)),   storage::int64(row.occurrence_s),
          storage::int64(row.fired_at_s),        storage::int64(row.fire_number)};
}

Result<ScheduleRecord> readSchedule(const storage::Row& r) {
  storage::ColumnReader c(r, "schedule");
  ScheduleRow row;
  row.creator = c.text(0);
  row.name = c.text(1);
  row.target = c.text(2);
  row.kind = c.text(3);
  row.cadence = c.text(4);
  row.offset_minutes = c.int64(5, "offset_minutes");
  row.wake = c.boolean(6, "wake");
  row.body = c.text(7);
  row.created_at_s = c.int64(8, "created_at_s");
  row.next_fire_s = c.optionalInt64(9, "next_fire_s");
  row.max_fires = c.int64(10, "max_fires");
  row.expires_at_s = c.int64(11, "expires_at_s");
  row.fires = c.int64(12, "fires");
  if (auto ok = c.status(); !ok) return tl::unexpected(ok.error());
  return decode(std::move(row));
}

Result<Fire> readFire(const storage::Row& r) {
  storage::ColumnReader c(r, "schedule");
  FireRow row;
  row.sequence = c.int64(0, "sequence");
  row.creator = c.text(1);
  row.name = c.text(2);
  row.target = c.text(3);
  row.wake = c.boolean(4, "wake");
  row.body = c.text(5);
  row.occurrence_s = c.int64(6, "occurrence_s");
  row.fired_at_s = c.int64(7, "fired_at_s");
  row.fire_number = c.int64(8, "fire_number");
  if (auto ok = c.status(); !ok) return tl::unexpected(ok.error());
  return decode(std::move(row));
}

tl::unexpected<Error> duplicateName(std::string_view name) {
  return fail(ErrorCode::kExecutionRejected,
              "name: a schedule named " + std::string(name) + " exists");
}

tl::unexpected<Error> tooManyLive(std::size_t max_live) {
  return fail(ErrorCode::kExecutionRejected, "max_live: this execution already has " +
                                                 std::to_string(max_live) + " live schedules");
}

tl::unexpected<Error> noSuchSchedule(std::string_view name) {
  return fail(ErrorCode::kNotFound, "no schedule is named " + std::string(name));
}

tl::unexpected<Error> spentSchedule(std::string_view name) {
  return fail(ErrorCode::kExecutionRejected,
              "schedule " + std::string(name) + " is spent (it fires no more)");
}

tl::unexpected<Error> outboxFull(std::size_t capacity) {
  return fail(ErrorCode::kExecutionUnavailable,
              "schedule outbox full: " + std::to_string(capacity) +
                  " fires are unacknowledged; due schedules wait until some are acknowledged");
}

Result<std::vector<Fire>> fireDueIn(FiringTransaction& tx, std::int64_t now_s, std::size_t limit,
                                    const ScheduleStoreOptions& options) {
  const std::size_t outbox_capacity = options.outbox_capacity;
  std::vector<Fire> out;
  if (limit == 0) return out;
  auto pending = tx.pendingCount();
  if (!pending) return tl::unexpected(pending.error());
  const std::size_t room = *pending >= outbox_capacity ? 0 : outbox_capacity - *pending;
  if (room == 0) {
    // Full: an error only when something is actually waiting.
    auto waiting = tx.lockDue(now_s, 1, options.creator_share);
    if (!waiting) return tl::unexpected(waiting.error());
    if (waiting->empty()) return out;
    return outboxFull(outbox_capacity);
  }
  auto due = tx.lockDue(now_s, std::min(limit, room), options.creator_share);
  if (!due) return tl::unexpected(due.error());
  for (const ScheduleRecord& record : *due) {
    auto step = stepFire(record, now_s);
    if (!step) continue;  // spent: lockDue never returns one
    Fire fire;
    fire.creator = record.creator;
    fire.name = record.name;
    fire.target = record.target;
    fire.wake = record.wake;
    fire.body = record.body;
    fire.occurrence_s = step->occurrence_s;
    fire.fired_at_s = now_s;
    fire.fire_number = step->fire_number;
    auto sequence = tx.append(fire);
    if (!sequence) return tl::unexpected(sequence.error());
    if (!*sequence) {
      // Already in the outbox under this key: move past it, uncounted.
      const auto next = nextFireAfter(record, std::max(now_s, step->occurrence_s), record.fires);
      if (auto r = tx.advance(record, record.fires, next); !r) return tl::unexpected(r.error());
      continue;
    }
    if (auto r = tx.advance(record, step->fire_number, step->next_fire_s); !r)
      return tl::unexpected(r.error());
    fire.sequence = **sequence;
    out.push_back(std::move(fire));
  }
  return out;
}

}  // namespace airlock::capability::schedule::rows
