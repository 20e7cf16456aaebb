// ScheduleStore on SQLite (schedule.h openSqliteScheduleStore).
#include <array>

#include "airlock/capability/schedule/schedule.h"
#include "airlock/capability/schedule/sql_store.h"
#include "airlock/capability/schedule/store_schema.h"
#include "airlock/storage/migration.h"
#include "airlock/storage/sqlite.h"

namespace airlock::capability::schedule {
namespace {

namespace sql = storage::sqlite;

using storage::Migration;

// Append only: a released migration is never edited. The version numbers
// are shared with the PostgreSQL list (postgres_store.cpp).
constexpr std::array<Migration, kScheduleSchemaVersion> kMigrations{{
    {1,
     "CREATE TABLE schedules ("
     "  creator TEXT NOT NULL,"
     "  name TEXT NOT NULL,"
     "  target TEXT NOT NULL,"
     "  kind TEXT NOT NULL CHECK (kind IN ('every', 'at', 'cron', 'after')),"
     "  cadence TEXT NOT NULL,"
     "  offset_minutes INTEGER NOT NULL,"
     "  wake INTEGER NOT NULL,"
     "  body BLOB NOT NULL,"
     "  created_at_s INTEGER NOT NULL,"
     "  next_fire_s INTEGER,"
     "  max_fires INTEGER NOT NULL CHECK (max_fires >= 1),"
     "  expires_at_s INTEGER NOT NULL,"
     "  fires INTEGER NOT NULL DEFAULT 0,"
     "  PRIMARY KEY (creator, name)"
     ") WITHOUT ROWID;"
     "CREATE INDEX schedules_due ON schedules (next_fire_s) WHERE next_fire_s IS NOT NULL;"},
    // The firing outbox. AUTOINCREMENT: a sequence is never reused after
    // its entry is acknowledged (deleted), so a reader's cursor stays valid.
    {2,
     "CREATE TABLE schedule_fires ("
     "  sequence INTEGER PRIMARY KEY AUTOINCREMENT,"
     "  creator TEXT NOT NULL,"
     "  name TEXT NOT NULL,"
     "  target TEXT NOT NULL,"
     "  wake INTEGER NOT NULL,"
     "  body BLOB NOT NULL,"
     "  occurrence_s INTEGER NOT NULL,"
     "  fired_at_s INTEGER NOT NULL,"
     "  fire_number INTEGER NOT NULL CHECK (fire_number >= 1),"
     "  UNIQUE (creator, name, occurrence_s))"},
}};

constexpr storage::MigrationLedger kLedger{
    "CREATE TABLE IF NOT EXISTS schedule_migrations ("
    "  version INTEGER PRIMARY KEY NOT NULL,"
    "  applied_at_ms INTEGER NOT NULL)",
    {},  // BEGIN IMMEDIATE holds the file's write lock
    "SELECT COALESCE(MAX(version), 0) FROM schedule_migrations",
    "INSERT INTO schedule_migrations (version, applied_at_ms)"
    " VALUES (?1, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER))",
    "schedule"};

// BEGIN IMMEDIATE excludes every other writer of the file, so no statement
// here needs a lock of its own.
constexpr ScheduleStatements kStatements{
    {},
    "DELETE FROM schedules WHERE creator = ?1 AND next_fire_s IS NULL AND name NOT IN"
    " (SELECT name FROM schedules WHERE creator = ?1 AND next_fire_s IS NULL"
    "  ORDER BY created_at_s DESC, name DESC LIMIT ?2)",
    "SELECT COUNT(*) FROM schedules WHERE creator = ?1 AND next_fire_s IS NOT NULL",
    "INSERT INTO schedules (creator, name, target, kind, cadence, offset_minutes, wake, body,"
    " created_at_s, next_fire_s, max_fires, expires_at_s, fires)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
    "SELECT creator, name, target, kind, cadence, offset_minutes, wake, body, created_at_s,"
    " next_fire_s, max_fires, expires_at_s, fires FROM schedules WHERE creator = ?1"
    " ORDER BY name",
    "DELETE FROM schedules WHERE creator = ?1 AND name = ?2",
    "SELECT creator, name, target, kind, cadence, offset_minutes, wake, body, created_at_s,"
    " next_fire_s, max_fires, expires_at_s, fires FROM schedules"
    " WHERE next_fire_s IS NOT NULL AND next_fire_s <= ?1"
    " ORDER BY next_fire_s, creator, name LIMIT ?2",
    "SELECT creator, name, target, kind, cadence, offset_minutes, wake, body, created_at_s,"
    " next_fire_s, max_fires, expires_at_s, fires FROM schedules"
    " WHERE creator = ?1 AND name = ?2",
    {},
    "SELECT COUNT(*) FROM schedule_fires",
    "SELECT creator, name, target, kind, cadence, offset_minutes, wake, body, created_at_s,"
    " next_fire_s, max_fires, expires_at_s, fires FROM schedules"
    " WHERE next_fire_s IS NOT NULL AND next_fire_s <= ?1"
    " AND creator NOT IN (SELECT creator FROM schedule_fires GROUP BY creator"
    "                     HAVING COUNT(*) >= ?3)"
    " ORDER BY next_fire_s, creator, name LIMIT ?2",
    "INSERT INTO schedule_fires (creator, name, target, wake, body, occurrence_s, fired_at_s,"
    " fire_number) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"
    " ON CONFLICT (creator, name, occurrence_s) DO NOTHING RETURNING sequence",
    "UPDATE schedules SET fires = ?3, next_fire_s = ?4 WHERE creator = ?1 AND name = ?2",
    "SELECT sequence, creator, name, target, wake, body, occurrence_s, fired_at_s, fire_number"
    " FROM schedule_fires WHERE sequence > ?1 ORDER BY sequence LIMIT ?2",
    "DELETE FROM schedule_fires WHERE sequence <= ?1"};

}  // namespace

std::span<const storage::Migration> schema::sqliteMigrations() {
  return kMigrations;
}
const storage::MigrationLedger& schema::sqliteLedger() {
  return kLedger;
}

Result<std::shared_ptr<ScheduleStore>> openSqliteScheduleStore(
    const std::string& path, const ScheduleStoreOptions& options) {
  return openSqlScheduleStore([&] { return sql::openConnection(path); }, kLedger, kMigrations,
                              kStatements, options);
}

}  // namespace airlock::capability::schedule
