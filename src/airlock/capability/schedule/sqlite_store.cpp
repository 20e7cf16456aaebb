// ScheduleStore on SQLite (schedule.h openSqliteScheduleStore).
#include <array>
#include <limits>

#include "airlock/artifacts/sqlite.h"
#include "airlock/capability/schedule/schedule.h"
#include "airlock/capability/schedule/store_rows.h"
#include "airlock/capability/schedule/store_schema.h"

namespace airlock::capability::schedule {
namespace {

namespace sql = artifacts::sqlite;

using sql::Migration;
using sql::Transaction;

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

constexpr sql::MigrationTable kMigrationTable{
    "CREATE TABLE IF NOT EXISTS schedule_migrations ("
    "  version INTEGER PRIMARY KEY NOT NULL,"
    "  applied_at_ms INTEGER NOT NULL)",
    "SELECT COALESCE(MAX(version), 0) FROM schedule_migrations",
    "INSERT INTO schedule_migrations (version, applied_at_ms)"
    " VALUES (?1, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER))",
    "schedule"};

// Columns in the order of store_rows.h.
Result<ScheduleRecord> scheduleFrom(const sql::Statement& s) {
  rows::ScheduleRow row;
  row.creator = s.text(0);
  row.name = s.text(1);
  row.target = s.text(2);
  row.kind = s.text(3);
  row.cadence = s.text(4);
  row.offset_minutes = s.int64(5);
  row.wake = s.int64(6) != 0;
  row.body = s.text(7);
  row.created_at_s = s.int64(8);
  if (!s.isNull(9)) row.next_fire_s = s.int64(9);
  row.max_fires = s.int64(10);
  row.expires_at_s = s.int64(11);
  row.fires = s.int64(12);
  return rows::decode(std::move(row));
}

Result<Fire> fireFrom(const sql::Statement& s) {
  rows::FireRow row;
  row.sequence = s.int64(0);
  row.creator = s.text(1);
  row.name = s.text(2);
  row.target = s.text(3);
  row.wake = s.int64(4) != 0;
  row.body = s.text(5);
  row.occurrence_s = s.int64(6);
  row.fired_at_s = s.int64(7);
  row.fire_number = s.int64(8);
  return rows::decode(std::move(row));
}

template <class T>
Result<std::vector<T>> collect(sql::Statement& stmt, Result<T> (*from)(const sql::Statement&)) {
  std::vector<T> out;
  for (;;) {
    auto step = stmt.step();
    if (!step) return tl::unexpected(step.error());
    if (*step == sql::Step::kDone) return out;
    auto row = from(stmt);
    if (!row) return tl::unexpected(row.error());
    out.push_back(std::move(*row));
  }
}

Result<void> run(sql::Statement& stmt) {
  if (auto s = stmt.step(); !s) return tl::unexpected(s.error());
  return {};
}

// fireDue's steps on one connection inside its BEGIN IMMEDIATE.
class SqliteFiring final : public rows::FiringTransaction {
 public:
  explicit SqliteFiring(sql::Database& db) : db_(db) {}

  Result<std::size_t> pendingCount() override {
    auto stmt = db_.prepare("SELECT COUNT(*) FROM schedule_fires");
    if (!stmt) return tl::unexpected(stmt.error());
    if (auto s = stmt->step(); !s) return tl::unexpected(s.error());
    return static_cast<std::size_t>(stmt->int64(0));
  }

  Result<std::vector<ScheduleRecord>> lockDue(std::int64_t now_s, std::size_t limit,
                                              std::size_t creator_share) override {
    // BEGIN IMMEDIATE already excludes every other writer of the file.
    auto stmt = db_.prepare(
        "SELECT creator, name, target, kind, cadence, offset_minutes, wake, body, created_at_s,"
        " next_fire_s, max_fires, expires_at_s, fires FROM schedules"
        " WHERE next_fire_s IS NOT NULL AND next_fire_s <= ?1"
        " AND creator NOT IN (SELECT creator FROM schedule_fires GROUP BY creator HAVING COUNT(*) "
        ">= ?3)"
        " ORDER BY next_fire_s, creator, name LIMIT ?2");
    if (!stmt) return tl::unexpected(stmt.error());
    stmt->bind(1, now_s).bind(2, rows::toInt64(limit)).bind(3, rows::toInt64(creator_share));
    return collect(*stmt, &scheduleFrom);
  }

  Result<std::optional<std::int64_t>> append(const Fire& fire) override {
    const rows::FireRow row = rows::encode(fire);
    auto stmt = db_.prepare(
        "INSERT INTO schedule_fires (creator, name, target, wake, body, occurrence_s, fired_at_s,"
        " fire_number) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"
        " ON CONFLICT (creator, name, occurrence_s) DO NOTHING RETURNING sequence");
    if (!stmt) return tl::unexpected(stmt.error());
    stmt->bind(1, std::string_view(row.creator))
        .bind(2, std::string_view(row.name))
        .bind(3, std::string_view(row.target))
        .bind(4, std::int64_t{row.wake ? 1 : 0})
        .bindBlob(5, row.body)
        .bind(6, row.occurrence_s)
        .bind(7, row.fired_at_s)
        .bind(8, row.fire_number);
    auto step = stmt->step();
    if (!step) return tl::unexpected(step.error());
    if (*step == sql::Step::kDone) return std::optional<std::int64_t>{};
    const std::int64_t sequence = stmt->int64(0);
    if (auto done = stmt->step(); !done) return tl::unexpected(done.error());
    return std::optional<std::int64_t>{sequence};
  }

  Result<void> advance(const ScheduleRecord& r, std::uint64_t fires,
                       std::optional<std::int64_t> next_fire_s) override {
    auto upd = db_.prepare(
        "UPDATE schedules SET fires = ?3, next_fire_s = ?4 WHERE creator = ?1 AND name = ?2");
    if (!upd) return tl::unexpected(upd.error());
    upd->bind(1, std::string_view(r.creator))
        .bind(2, std::string_view(r.name))
        .bind(3, rows::toInt64(fires))
        .bind(4, next_fire_s);
    return run(*upd);
  }

 private:
  sql::Database& db_;
};

class SqliteScheduleStore final : public ScheduleStore {
 public:
  SqliteScheduleStore(sql::Database db, ScheduleStoreOptions options)
      : options_(options), db_(std::move(db)) {}

  Result<void> create(const ScheduleRecord& r, std::size_t max_live) override {
    const rows::ScheduleRow row = rows::encode(r);
    std::lock_guard lk(mu_);
    Transaction tx(db_);
    if (auto b = tx.beginImmediate(); !b) return b;
    // Spent schedules are kept for list() only up to the creator's newest
    // max_live, so creating and spending one-shots cannot grow the table.
    auto prune = db_.prepare(
        "DELETE FROM schedules WHERE creator = ?1 AND next_fire_s IS NULL AND name NOT IN"
        " (SELECT name FROM schedules WHERE creator = ?1 AND next_fire_s IS NULL"
        "  ORDER BY created_at_s DESC, name DESC LIMIT ?2)");
    if (!prune) return tl::unexpected(prune.error());
    prune->bind(1, std::string_view(row.creator)).bind(2, rows::toInt64(max_live));
    if (auto s = prune->step(); !s) return tl::unexpected(s.error());
    auto count = db_.prepare(
        "SELECT COUNT(*) FROM schedules WHERE creator = ?1 AND next_fire_s IS NOT NULL");
    if (!count) return tl::unexpected(count.error());
    count->bind(1, std::string_view(row.creator));
    if (auto s = count->step(); !s) return tl::unexpected(s.error());
    if (static_cast<std::uint64_t>(count->int64(0)) >= max_live) return rows::tooManyLive(max_live);
    auto ins = db_.prepare(
        "INSERT INTO schedules (creator, name, target, kind, cadence, offset_minutes, wake, body,"
        " created_at_s, next_fire_s, max_fires, expires_at_s, fires)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)");
    if (!ins) return tl::unexpected(ins.error());
    ins->bind(1, std::string_view(row.creator))
        .bind(2, std::string_view(row.name))
        .bind(3, std::string_view(row.target))
        .bind(4, std::string_view(row.kind))
        .bind(5, std::string_view(row.cadence))
        .bind(6, row.offset_minutes)
        .bind(7, std::int64_t{row.wake ? 1 : 0})
        .bindBlob(8, row.body)
        .bind(9, row.created_at_s)
        .bind(10, row.next_fire_s)
        .bind(11, row.max_fires)
        .bind(12, row.expires_at_s)
        .bind(13, row.fires);
    if (auto s = ins->step(); !s) {
      if (s.error().code == ErrorCode::kExecutionRejected) return rows::duplicateName(r.name);
      return tl::unexpected(s.error());
    }
    return tx.commit();
  }

  Result<std::vector<ScheduleRecord>> list(std::string_view creator) override {
    std::lock_guard lk(mu_);
    auto stmt = db_.prepare(
        "SELECT creator, name, target, kind, cadence, offset_minutes, wake, body, created_at_s,"
        " next_fire_s, max_fires, expires_at_s, fires FROM schedules WHERE creator = ?1"
        " ORDER BY name");
    if (!stmt) return tl::unexpected(stmt.error());
    stmt->bind(1, creator);
    return collect(*stmt, &scheduleFrom);
  }

  Result<bool> cancel(std::string_view creator, std::string_view name) override {
    std::lock_guard lk(mu_);
    auto stmt = db_.prepare("DELETE FROM schedules WHERE creator = ?1 AND name = ?2");
    if (!stmt) return tl::unexpected(stmt.error());
    stmt->bind(1, creator).bind(2, name);
    if (auto r = run(*stmt); !r) return tl::unexpected(r.error());
    return db_.changes() > 0;
  }

  Result<std::vector<ScheduleRecord>> due(std::int64_t now_s, std::size_t limit) override {
    std::lock_guard lk(mu_);
    return SqliteFiring(db_).lockDue(now_s, limit, std::numeric_limits<std::size_t>::max());
  }

  Result<void> recordFire(std::string_view creator, std::string_view name,
                          std::int64_t fired_at_s) override {
    std::lock_guard lk(mu_);
    Transaction tx(db_);
    if (auto b = tx.beginImmediate(); !b) return b;
    auto sel = db_.prepare(
        "SELECT creator, name, target, kind, cadence, offset_minutes, wake, body, created_at_s,"
        " next_fire_s, max_fires, expires_at_s, fires FROM schedules"
        " WHERE creator = ?1 AND name = ?2");
    if (!sel) return tl::unexpected(sel.error());
    sel->bind(1, creator).bind(2, name);
    auto found = collect(*sel, &scheduleFrom);
    if (!found) return tl::unexpected(found.error());
    if (found->empty()) return rows::noSuchSchedule(name);
    auto step = stepFire(found->front(), fired_at_s);
    if (!step) return rows::spentSchedule(name);
    if (auto r = SqliteFiring(db_).advance(found->front(), step->fire_number, step->next_fire_s);
        !r)
      return r;
    return tx.commit();
  }

  Result<std::vector<Fire>> fireDue(std::int64_t now_s, std::size_t limit) override {
    std::lock_guard lk(mu_);
    Transaction tx(db_);
    if (auto b = tx.beginImmediate(); !b) return tl::unexpected(b.error());
    SqliteFiring firing(db_);
    auto fires = rows::fireDueIn(firing, now_s, limit, options_);
    if (!fires) return fires;
    if (auto c = tx.commit(); !c) return tl::unexpected(c.error());
    return fires;
  }

  Result<std::vector<Fire>> pendingFires(std::int64_t after_sequence, std::size_t limit) override {
    std::lock_guard lk(mu_);
    auto stmt = db_.prepare(
        "SELECT sequence, creator, name, target, wake, body, occurrence_s, fired_at_s, fire_number"
        " FROM schedule_fires WHERE sequence > ?1 ORDER BY sequence LIMIT ?2");
    if (!stmt) return tl::unexpected(stmt.error());
    stmt->bind(1, after_sequence).bind(2, rows::toInt64(limit));
    return collect(*stmt, &fireFrom);
  }

  Result<std::size_t> acknowledgeFires(std::int64_t through_sequence) override {
    std::lock_guard lk(mu_);
    auto stmt = db_.prepare("DELETE FROM schedule_fires WHERE sequence <= ?1");
    if (!stmt) return tl::unexpected(stmt.error());
    stmt->bind(1, through_sequence);
    if (auto r = run(*stmt); !r) return tl::unexpected(r.error());
    return static_cast<std::size_t>(db_.changes());
  }

 private:
  const ScheduleStoreOptions options_;
  std::mutex mu_;
  sql::Database db_;
};

}  // namespace

std::span<const sql::Migration> schema::sqliteMigrations() {
  return kMigrations;
}
const sql::MigrationTable& schema::sqliteMigrationTable() {
  return kMigrationTable;
}

Result<std::shared_ptr<ScheduleStore>> openSqliteScheduleStore(
    const std::string& path, const ScheduleStoreOptions& options) {
  if (options.outbox_capacity == 0 || options.creator_share == 0)
    return fail(ErrorCode::kConfigurationError,
                "schedule outbox capacity and creator share must be at least 1");
  auto db = sql::Database::open(path);
  if (!db) return tl::unexpected(db.error());
  if (auto r = sql::migrate(*db, kMigrationTable, kMigrations, kScheduleSchemaVersion); !r)
    return tl::unexpected(r.error());
  return std::shared_ptr<ScheduleStore>(
      std::make_shared<SqliteScheduleStore>(std::move(*db), options));
}

}  // namespace airlock::capability::schedule
