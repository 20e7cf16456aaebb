// What the SQLite and PostgreSQL ScheduleStores share (schedule.h): the one
// mapping between a ScheduleRecord/Fire and a database row, the wording of
// the store's refusals, and the firing algorithm itself (fireDueIn), which
// each backend runs inside its own transaction through FiringTransaction.
// Internal to airlock_capability_schedule.
//
// Schedule columns, in this order in every SELECT of a schedule:
//   creator, name, target, kind, cadence, offset_minutes, wake, body,
//   created_at_s, next_fire_s, max_fires, expires_at_s, fires
// Outbox columns, in this order in every SELECT of a fire:
//   sequence, creator, name, target, wake, body, occurrence_s, fired_at_s,
//   fire_number
// A row is decoded as untrusted data: a field that does not parse is an
// ExecutionUnavailable "corrupt schedule row: <column>", never an exception.
// Both backends read rows (storage::Row) and bind values (storage::Value)
// through the functions here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/capability/schedule/schedule.h"
#include "airlock/storage/row.h"
#include "airlock/storage/sql_value.h"

namespace airlock::capability::schedule::rows {

struct ScheduleRow {
  std::string creator, name, target;
  std::string kind;  // timingName()
  std::string cadence;
  std::int64_t offset_minutes = 0;
  bool wake = false;
  std::string body;  // bytes
  std::int64_t created_at_s = 0;
  std::optional<std::int64_t> next_fire_s;
  std::int64_t max_fires = 1;
  std::int64_t expires_at_s = 0;
  std::int64_t fires = 0;
};

struct FireRow {
  std::int64_t sequence = 0;
  std::string creator, name, target;
  bool wake = false;
  std::string body;
  std::int64_t occurrence_s = 0;
  std::int64_t fired_at_s = 0;
  std::int64_t fire_number = 0;
};

// Unsigned counts are stored as BIGINT, clamped at INT64_MAX.
using storage::clampToInt64;

ScheduleRow encode(const ScheduleRecord& record);
Result<ScheduleRecord> decode(ScheduleRow row);
FireRow encode(const Fire& fire);
Result<Fire> decode(FireRow row);

// The 13 schedule columns in the order above, for parameters 1 to 13.
std::vector<storage::Value> values(ScheduleRow row);
// The outbox columns after sequence (8), for parameters 1 to 8.
std::vector<storage::Value> values(FireRow row);
// A result row whose SELECT list is the 13 schedule columns in order.
Result<ScheduleRecord> readSchedule(const storage::Row& row);
// A result row whose SELECT list is the 9 outbox columns in order.
Result<Fire> readFire(const storage::Row& row);

// The refusals both backends give, in the words schedule.* passes on.
tl::unexpected<Error> duplicateName(std::string_view name);   // ExecutionRejected
tl::unexpected<Error> tooManyLive(std::size_t max_live);      // ExecutionRejected
tl::unexpected<Error> noSuchSchedule(std::string_view name);  // NotFound
tl::unexpected<Error> spentSchedule(std::string_view name);   // ExecutionRejected
tl::unexpected<Error> outboxFull(std::size_t capacity);       // ExecutionUnavailable

// The steps of fireDue, each run inside a transaction the backend has
// opened and will commit once fireDueIn succeeds (or roll back).
class FiringTransaction {
 public:
  virtual ~FiringTransaction() = default;
  // How many fires the outbox holds.
  virtual Result<std::size_t> pendingCount() = 0;
  // Schedules with next_fire_s <= now_s, ordered by (next_fire_s, creator,
  // name), at most `limit`, locked against concurrent firing until commit;
  // a creator with creator_share or more fires in the outbox is left out.
  virtual Result<std::vector<ScheduleRecord>> lockDue(std::int64_t now_s, std::size_t limit,
                                                      std::size_t creator_share) = 0;
  // Appends `fire` (its sequence ignored); the new sequence, or nullopt when
  // (creator, name, occurrence_s) is already in the outbox.
  virtual Result<std::optional<std::int64_t>> append(const Fire& fire) = 0;
  // Sets the schedule's fire count and next occurrence.
  virtual Result<void> advance(const ScheduleRecord& record, std::uint64_t fires,
                               std::optional<std::int64_t> next_fire_s) = 0;
};

// fireDue (schedule.h) over `tx`: the outbox bound, the ordering, stepFire
// for each due schedule, and skipping an occurrence whose key is taken.
Result<std::vector<Fire>> fireDueIn(FiringTransaction& tx, std::int64_t now_s, std::size_t limit,
                                    const ScheduleStoreOptions& options);

}  // namespace airlock::capability::schedule::rows
