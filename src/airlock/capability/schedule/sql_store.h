// The ScheduleStore (schedule.h) over one storage::Connection: the one
// implementation behind the SQLite and PostgreSQL stores, which differ only
// in how they connect and migrate (sqlite_store.cpp, postgres_store.cpp)
// and in the SQL text of each statement (ScheduleStatements, literals with
// bound values). Internal to airlock_capability_schedule.
//
// Thread-safe: the connection is used behind one mutex. Every write that
// reads before it writes (create's live count, recordFire, fireDue) runs in
// one write transaction, after the backend's lock where it has one.
#pragma once

#include <functional>
#include <memory>
#include <span>

#include "airlock/capability/schedule/schedule.h"
#include "airlock/storage/connection.h"
#include "airlock/storage/migration.h"

namespace airlock::capability::schedule {

// One backend's SQL. "Schedule columns" and "outbox columns" are the SELECT
// lists of store_rows.h, in order; "?n" is the n-th bound value.
struct ScheduleStatements {
  // ?1 creator: held until commit, so create's live count sees every
  // schedule committed before; empty where begin() already excludes every
  // other writer (SQLite's BEGIN IMMEDIATE).
  storage::SqlText lock_creator;
  // ?1 creator, ?2 max_live: deletes the creator's spent schedules beyond
  // its newest max_live.
  storage::SqlText prune_spent;
  storage::SqlText count_live;  // ?1 creator -> one integer
  storage::SqlText insert;      // ?1..?13 the schedule columns
  storage::SqlText list;        // ?1 creator -> schedules by name
  storage::SqlText cancel;      // ?1 creator, ?2 name
  // ?1 now_s, ?2 limit -> due schedules by (next_fire_s, creator, name).
  storage::SqlText due;
  // ?1 creator, ?2 name -> that schedule, locked until commit where the
  // backend locks rows.
  storage::SqlText select_for_fire;
  // Held by fireDue until commit (outbox sequences commit in the order they
  // are drawn); empty where begin() already serializes it.
  storage::SqlText lock_outbox;
  storage::SqlText count_outbox;  // -> one integer
  // ?1 now_s, ?2 limit, ?3 creator_share -> due schedules as `due`, leaving
  // out creators holding creator_share or more fires, locked until commit.
  storage::SqlText lock_due;
  // ?1..?8 the outbox columns after sequence -> the new sequence, or no row
  // when (creator, name, occurrence_s) is already in the outbox.
  storage::SqlText append_fire;
  // ?1 creator, ?2 name, ?3 fires, ?4 next_fire_s (NULL: spent).
  storage::SqlText advance;
  storage::SqlText pending;      // ?1 after sequence, ?2 limit -> fires by sequence
  storage::SqlText acknowledge;  // ?1 through sequence
};

// How each backend opens its store: `options` are checked first
// (ConfigurationError when the outbox capacity or the creator share is 0,
// before anything is opened), then `open` is called and its connection
// migrated with `ledger` and `migrations` to kScheduleSchemaVersion. The
// first error on the way, or the store over that connection running `sql`
// (a static table of the backend's statements).
Result<std::shared_ptr<ScheduleStore>> openSqlScheduleStore(
    const std::function<Result<std::unique_ptr<storage::Connection>>()>& open,
    const storage::MigrationLedger& ledger, std::span<const storage::Migration> migrations,
    const ScheduleStatements& sql, const ScheduleStoreOptions& options);

}  // namespace airlock::capability::schedule
