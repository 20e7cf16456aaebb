// ScheduleStore on PostgreSQL (schedule.h openPostgresScheduleStore).
#include <array>

#include "airlock/capability/schedule/schedule.h"
#include "airlock/capability/schedule/sql_store.h"
#include "airlock/capability/schedule/store_schema.h"
#include "airlock/storage/migration.h"
#include "airlock/storage/postgres.h"

namespace airlock::capability::schedule {
namespace {

namespace pg = storage::postgres;

// Append only, like the SQLite list; the two share version numbers. Names
// sort bytewise (COLLATE "C") as they do in SQLite.
constexpr std::array<storage::Migration, kScheduleSchemaVersion> kMigrations{{
    {1,
     "CREATE TABLE schedules ("
     "  creator TEXT COLLATE \"C\" NOT NULL,"
     "  name TEXT COLLATE \"C\" NOT NULL,"
     "  target TEXT NOT NULL,"
     "  kind TEXT NOT NULL CHECK (kind IN ('every', 'at', 'cron', 'after')),"
     "  cadence TEXT NOT NULL,"
     "  offset_minutes BIGINT NOT NULL,"
     "  wake BOOLEAN NOT NULL,"
     "  body BYTEA NOT NULL,"
     "  created_at_s BIGINT NOT NULL,"
     "  next_fire_s BIGINT,"
     "  max_fires BIGINT NOT NULL CHECK (max_fires >= 1),"
     "  expires_at_s BIGINT NOT NULL,"
     "  fires BIGINT NOT NULL DEFAULT 0,"
     "  PRIMARY KEY (creator, name));"
     "CREATE INDEX schedules_due ON schedules (next_fire_s, creator, name)"
     "  WHERE next_fire_s IS NOT NULL;"},
    // The firing outbox. An identity never hands out a value twice, so a
    // sequence is not reused after its entry is acknowledged (deleted).
    {2,
     "CREATE TABLE schedule_fires ("
     "  sequence BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
     "  creator TEXT COLLATE \"C\" NOT NULL,"
     "  name TEXT COLLATE \"C\" NOT NULL,"
     "  target TEXT NOT NULL,"
     "  wake BOOLEAN NOT NULL,"
     "  body BYTEA NOT NULL,"
     "  occurrence_s BIGINT NOT NULL,"
     "  fired_at_s BIGINT NOT NULL,"
     "  fire_number BIGINT NOT NULL CHECK (fire_number >= 1),"
     "  UNIQUE (creator, name, occurrence_s))"},
}};

constexpr storage::MigrationLedger kLedger{
    "CREATE TABLE IF NOT EXISTS schedule_migrations ("
    "  version INTEGER PRIMARY KEY,"
    "  applied_at_ms BIGINT NOT NULL)",
    // "schedule schema migration" (beside the artifact schema's 7046311541)
    "SELECT pg_advisory_xact_lock(7046311542)",
    "SELECT COALESCE(MAX(version), 0)::bigint FROM schedule_migrations",
    "INSERT INTO schedule_migrations (version, applied_at_ms)"
    " VALUES ($1::integer, (extract(epoch FROM clock_timestamp()) * 1000)::bigint)",
    "schedule"};

constexpr ScheduleStatements kStatements{
    // Serializes creates of one creator until commit, so the live count
    // sees every schedule committed before this one (max_live holds).
    "SELECT pg_advisory_xact_lock(hashtextextended($1::text, 7046312))",
    "DELETE FROM schedules WHERE creator = $1::text AND next_fire_s IS NULL AND name NOT IN"
    " (SELECT name FROM schedules WHERE creator = $1::text AND next_fire_s IS NULL"
    "  ORDER BY created_at_s DESC, name DESC LIMIT $2::bigint)",
    "SELECT COUNT(*)::bigint FROM schedules"
    " WHERE creator = $1::text AND next_fire_s IS NOT NULL",
    "INSERT INTO schedules (creator, name, target, kind, cadence, offset_minutes, wake, body,"
    " created_at_s, next_fire_s, max_fires, expires_at_s, fires)"
    " VALUES ($1::text, $2::text, $3::text, $4::text, $5::text, $6::bigint, $7::boolean,"
    "  $8::bytea, $9::bigint, $10::bigint, $11::bigint, $12::bigint, $13::bigint)",
    "SELECT creator, name, target, kind, cadence, offset_minutes, wake, body, created_at_s,"
    " next_fire_s, max_fires, expires_at_s, fires FROM schedules WHERE creator = $1::text"
    " ORDER BY name",
    "DELETE FROM schedules WHERE creator = $1::text AND name = $2::text",
    "SELECT creator, name, target, kind, cadence, offset_minutes, wake, body, created_at_s,"
    " next_fire_s, max_fires, expires_at_s, fires FROM schedules"
    " WHERE next_fire_s IS NOT NULL AND next_fire_s <= $1::bigint"
    " ORDER BY next_fire_s, creator, name LIMIT $2::bigint",
    "SELECT creator, name, target, kind, cadence, offset_minutes, wake, body, created_at_s,"
    " next_fire_s, max_fires, expires_at_s, fires FROM schedules"
    " WHERE creator = $1::text AND name = $2::text FOR UPDATE",
    // Held by every fireDue until it commits: outbox sequences then commit
    // in the order they were drawn, and the outbox count it checks cannot
    // change under it. Another replica waits here, then sees the rows this
    // one moved. The key sits beside the schema ledgers' 7046311541/2.
    "SELECT pg_advisory_xact_lock(7046311543)", "SELECT COUNT(*)::bigint FROM schedule_fires",
    // SKIP LOCKED: a row another transaction holds (a recordFire, a cancel)
    // waits for the next tick rather than stalling this one.
    "SELECT creator, name, target, kind, cadence, offset_minutes, wake, body, created_at_s,"
    " next_fire_s, max_fires, expires_at_s, fires FROM schedules"
    " WHERE next_fire_s IS NOT NULL AND next_fire_s <= $1::bigint"
    " AND creator NOT IN (SELECT f.creator FROM schedule_fires f GROUP BY f.creator"
    "                     HAVING COUNT(*) >= $3::bigint)"
    " ORDER BY next_fire_s, creator, name LIMIT $2::bigint FOR UPDATE SKIP LOCKED",
    "INSERT INTO schedule_fires (creator, name, target, wake, body, occurrence_s,"
    "  fired_at_s, fire_number)"
    " VALUES ($1::text, $2::text, $3::text, $4::boolean, $5::bytea, $6::bigint,"
    "  $7::bigint, $8::bigint)"
    " ON CONFLICT (creator, name, occurrence_s) DO NOTHING RETURNING sequence",
    "UPDATE schedules SET fires = $3::bigint, next_fire_s = $4::bigint"
    " WHERE creator = $1::text AND name = $2::text",
    "SELECT sequence, creator, name, target, wake, body, occurrence_s, fired_at_s, fire_number"
    " FROM schedule_fires WHERE sequence > $1::bigint ORDER BY sequence LIMIT $2::bigint",
    "DELETE FROM schedule_fires WHERE sequence <= $1::bigint"};

}  // namespace

std::span<const storage::Migration> schema::postgresMigrations() {
  return kMigrations;
}
const storage::MigrationLedger& schema::postgresLedger() {
  return kLedger;
}

Result<std::shared_ptr<ScheduleStore>> openPostgresScheduleStore(
    const std::string& conninfo, const ScheduleStoreOptions& options) {
  return openSqlScheduleStore([&] { return pg::connectConnection(conninfo); }, kLedger, kMigrations,
                              kStatements, options);
}

}  // namespace airlock::capability::schedule
