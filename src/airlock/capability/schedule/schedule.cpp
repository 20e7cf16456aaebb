#include "airlock/capability/schedule/schedule.h"

#include <array>
#include <limits>

#include "airlock/artifacts/sqlite.h"

namespace airlock::capability::schedule {
namespace {

tl::unexpected<CronError> refuse(std::string field, std::string message) {
  return tl::unexpected(CronError{std::move(field), std::move(message)});
}

bool validName(std::string_view n) {
  if (n.empty() || n.size() > 64) return false;
  for (char c : n) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::int64_t clampAdd(std::int64_t a, std::uint64_t b) {
  constexpr auto kMax = std::numeric_limits<std::int64_t>::max();
  return b > static_cast<std::uint64_t>(kMax - a) ? kMax : a + static_cast<std::int64_t>(b);
}

std::optional<TimingKind> kindFromName(std::string_view s) {
  if (s == "every") return TimingKind::kEvery;
  if (s == "at") return TimingKind::kAt;
  if (s == "cron") return TimingKind::kCron;
  if (s == "after") return TimingKind::kAfter;
  return std::nullopt;
}

}  // namespace

std::string_view timingName(TimingKind kind) noexcept {
  switch (kind) {
    case TimingKind::kEvery:
      return "every";
    case TimingKind::kAt:
      return "at";
    case TimingKind::kCron:
      return "cron";
    case TimingKind::kAfter:
      return "after";
  }
  return "after";
}

std::string ScheduleRecord::when() const {
  switch (kind) {
    case TimingKind::kEvery:
      return "every " + cadence + "s";
    case TimingKind::kCron:
      return "cron " + cadence + " at " + formatUtcOffset(offset_minutes);
    case TimingKind::kAt:
    case TimingKind::kAfter:
      return "at " + cadence;
  }
  return cadence;
}

tl::expected<ScheduleRecord, CronError> planSchedule(const ScheduleRequest& req,
                                                     std::string creator, std::int64_t now_s,
                                                     const ScheduleCeilings& c) {
  if (!validName(req.name))
    return refuse("name", "must be 1..64 bytes of letters, digits, '.', '_' or '-'");
  if (req.body.size() > c.max_body_bytes)
    return refuse("body", "is larger than " + std::to_string(c.max_body_bytes) + " bytes");
  if (req.offset && req.kind != TimingKind::kCron)
    return refuse("offset", "is taken only with cron (" + std::string(timingName(req.kind)) +
                                " names no fields to shift)");
  const bool recurring = req.kind == TimingKind::kEvery || req.kind == TimingKind::kCron;
  if (req.bounds && !recurring)
    return refuse("bounds", "apply only to every and cron (" + std::string(timingName(req.kind)) +
                                " fires once)");
  ScheduleRecord r;
  r.creator = std::move(creator);
  r.name = req.name;
  r.target = r.creator;
  r.kind = req.kind;
  r.wake = req.wake;
  r.body = req.body;
  r.created_at_s = now_s;
  if (recurring) {
    r.max_fires = c.max_fires;
    std::uint64_t expires_after = c.expires_after_s;
    if (req.bounds) {
      // Bounds can only narrow.
      if (auto m = req.bounds->max_fires) {
        if (*m == 0) return refuse("bounds.max_fires", "must be at least 1");
        if (*m > c.max_fires)
          return refuse("bounds.max_fires", std::to_string(*m) + " is above the ceiling " +
                                                std::to_string(c.max_fires));
        r.max_fires = *m;
      }
      if (auto e = req.bounds->expires_after_s) {
        if (*e == 0) return refuse("bounds.expires_after_s", "must be at least 1");
        if (*e > c.expires_after_s)
          return refuse("bounds.expires_after_s", std::to_string(*e) + " is above the ceiling " +
                                                      std::to_string(c.expires_after_s));
        expires_after = *e;
      }
    }
    r.expires_at_s = clampAdd(now_s, expires_after);
  }
  switch (req.kind) {
    case TimingKind::kEvery: {
      if (req.interval_s < c.min_interval_s)
        return refuse("interval_s", std::to_string(req.interval_s) + " is below the minimum " +
                                        std::to_string(c.min_interval_s));
      if (req.interval_s > c.max_interval_s)
        return refuse("interval_s", std::to_string(req.interval_s) + " is above the ceiling " +
                                        std::to_string(c.max_interval_s));
      const auto i = static_cast<std::int64_t>(req.interval_s);
      r.cadence = std::to_string(req.interval_s);
      r.next_fire_s = (now_s / i + 1) * i;  // the epoch-aligned grid
      break;
    }
    case TimingKind::kCron: {
      auto e = CronExpression::parse(req.cron);
      if (!e) return tl::unexpected(e.error());
      if (req.offset) {
        auto o = parseUtcOffset(*req.offset);
        if (!o) return tl::unexpected(o.error());
        r.offset_minutes = *o;
      }
      r.cadence = e->canonical();
      r.next_fire_s = e->nextAfter(now_s, r.offset_minutes);
      if (!r.next_fire_s)
        return refuse("expression", "never fires (no day matches " + r.cadence + ")");
      break;
    }
    case TimingKind::kAt: {
      if (req.at_unix_s <= now_s)
        return refuse("at", "is not in the future (now is " + std::to_string(now_s) + ")");
      if (req.at_unix_s > clampAdd(now_s, c.expires_after_s))
        return refuse("at", "is more than " + std::to_string(c.expires_after_s) +
                                " seconds ahead (the ceiling)");
      r.next_fire_s = req.at_unix_s;
      break;
    }
    case TimingKind::kAfter: {
      if (req.after_s < 1 || req.after_s > c.max_after_s)
        return refuse("after_s", std::to_string(req.after_s) + " is outside 1.." +
                                     std::to_string(c.max_after_s));
      r.next_fire_s = now_s + static_cast<std::int64_t>(req.after_s);
      break;
    }
  }
  if (!recurring) {
    r.max_fires = 1;
    r.expires_at_s = *r.next_fire_s;
    r.cadence = std::to_string(*r.next_fire_s);
  } else if (*r.next_fire_s > r.expires_at_s) {
    return refuse(req.kind == TimingKind::kCron ? "expression" : "interval_s",
                  "first fires at " + std::to_string(*r.next_fire_s) +
                      ", after the schedule expires (" + std::to_string(r.expires_at_s) + ")");
  }
  return r;
}

std::optional<std::int64_t> nextFireAfter(const ScheduleRecord& r, std::int64_t fired_at_s,
                                          std::uint64_t fires) {
  if (fires >= r.max_fires) return std::nullopt;
  std::optional<std::int64_t> next;
  switch (r.kind) {
    case TimingKind::kAt:
    case TimingKind::kAfter:
      return std::nullopt;
    case TimingKind::kEvery: {
      std::int64_t i = 0;
      for (char ch : r.cadence) {
        if (ch < '0' || ch > '9' || i > std::numeric_limits<std::int64_t>::max() / 10 - 10)
          return std::nullopt;
        i = i * 10 + (ch - '0');
      }
      if (i <= 0) return std::nullopt;
      next = (fired_at_s / i + 1) * i;
      break;
    }
    case TimingKind::kCron: {
      auto e = CronExpression::parse(r.cadence);
      if (!e) return std::nullopt;
      next = e->nextAfter(fired_at_s, r.offset_minutes);
      break;
    }
  }
  if (!next || *next > r.expires_at_s) return std::nullopt;
  return next;
}

// ---- SQLite -----------------------------------------------------------------

namespace {

using artifacts::SqlText;
namespace sql = artifacts::sqlite;

using sql::Migration;
using sql::Transaction;

// Append only: a released migration is never edited.
constexpr int kScheduleSchemaVersion = 1;
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
}};


constexpr sql::MigrationTable kMigrationTable{
    "CREATE TABLE IF NOT EXISTS schedule_migrations ("
    "  version INTEGER PRIMARY KEY NOT NULL,"
    "  applied_at_ms INTEGER NOT NULL)",
    "SELECT COALESCE(MAX(version), 0) FROM schedule_migrations",
    "INSERT INTO schedule_migrations (version, applied_at_ms)"
    " VALUES (?1, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER))",
    "schedule"};

Result<void> migrate(sql::Database& db) {
  return sql::migrate(db, kMigrationTable, kMigrations, kScheduleSchemaVersion);
}

// Columns in this order in every SELECT below.
ScheduleRecord rowFrom(const sql::Statement& s) {
  ScheduleRecord r;
  r.creator = s.text(0);
  r.name = s.text(1);
  r.target = s.text(2);
  r.kind = kindFromName(s.text(3)).value_or(TimingKind::kAfter);
  r.cadence = s.text(4);
  r.offset_minutes = static_cast<int>(s.int64(5));
  r.wake = s.int64(6) != 0;
  r.body = s.text(7);
  r.created_at_s = s.int64(8);
  if (!s.isNull(9)) r.next_fire_s = s.int64(9);
  r.max_fires = static_cast<std::uint64_t>(s.int64(10));
  r.expires_at_s = s.int64(11);
  r.fires = static_cast<std::uint64_t>(s.int64(12));
  return r;
}

Result<std::vector<ScheduleRecord>> collect(sql::Statement& stmt) {
  std::vector<ScheduleRecord> out;
  for (;;) {
    auto step = stmt.step();
    if (!step) return tl::unexpected(step.error());
    if (*step == sql::Step::kDone) return out;
    out.push_back(rowFrom(stmt));
  }
}

std::int64_t toInt64(std::uint64_t v) {
  return v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())
             ? std::numeric_limits<std::int64_t>::max()
             : static_cast<std::int64_t>(v);
}

class SqliteScheduleStore final : public ScheduleStore {
 public:
  explicit SqliteScheduleStore(sql::Database db) : db_(std::move(db)) {}

  Result<void> create(const ScheduleRecord& r, std::size_t max_live) override {
    std::lock_guard lk(mu_);
    Transaction tx(db_);
    if (auto b = tx.beginImmediate(); !b) return b;
    auto count = db_.prepare(
        "SELECT COUNT(*) FROM schedules WHERE creator = ?1 AND next_fire_s IS NOT NULL");
    if (!count) return tl::unexpected(count.error());
    count->bind(1, std::string_view(r.creator));
    if (auto s = count->step(); !s) return tl::unexpected(s.error());
    if (static_cast<std::uint64_t>(count->int64(0)) >= max_live)
      return fail(ErrorCode::kExecutionRejected, "max_live: this execution already has " +
                                                     std::to_string(max_live) + " live schedules");
    auto ins = db_.prepare(
        "INSERT INTO schedules (creator, name, target, kind, cadence, offset_minutes, wake, body,"
        " created_at_s, next_fire_s, max_fires, expires_at_s, fires)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)");
    if (!ins) return tl::unexpected(ins.error());
    ins->bind(1, std::string_view(r.creator))
        .bind(2, std::string_view(r.name))
        .bind(3, std::string_view(r.target))
        .bind(4, timingName(r.kind))
        .bind(5, std::string_view(r.cadence))
        .bind(6, std::int64_t{r.offset_minutes})
        .bind(7, std::int64_t{r.wake ? 1 : 0})
        .bindBlob(8, r.body)
        .bind(9, r.created_at_s)
        .bind(10, r.next_fire_s)
        .bind(11, toInt64(r.max_fires))
        .bind(12, r.expires_at_s)
        .bind(13, toInt64(r.fires));
    if (auto s = ins->step(); !s) {
      Error e = s.error();
      if (e.code == ErrorCode::kExecutionRejected)
        e.context = "name: a schedule named " + r.name + " exists";
      return tl::unexpected(std::move(e));
    }
    return tx.commit();
  }

  Result<std::vector<ScheduleRecord>> list(std::string_view creator) override {
    std::lock_guard lk(mu_);
    auto stmt = db_.prepare(
        "SELECT creator, name, target, kind, cadence, offset_minutes, wake, body, created_at_s, "
        "next_fire_s,"
        " max_fires, expires_at_s, fires FROM schedules WHERE creator = ?1 ORDER BY name");
    if (!stmt) return tl::unexpected(stmt.error());
    stmt->bind(1, creator);
    return collect(*stmt);
  }

  Result<bool> cancel(std::string_view creator, std::string_view name) override {
    std::lock_guard lk(mu_);
    auto stmt = db_.prepare("DELETE FROM schedules WHERE creator = ?1 AND name = ?2");
    if (!stmt) return tl::unexpected(stmt.error());
    stmt->bind(1, creator).bind(2, name);
    if (auto s = stmt->step(); !s) return tl::unexpected(s.error());
    return db_.changes() > 0;
  }

  Result<std::vector<ScheduleRecord>> due(std::int64_t now_s, std::size_t limit) override {
    std::lock_guard lk(mu_);
    auto stmt = db_.prepare(
        "SELECT creator, name, target, kind, cadence, offset_minutes, wake, body, created_at_s, "
        "next_fire_s,"
        " max_fires, expires_at_s, fires FROM schedules WHERE next_fire_s IS NOT NULL AND "
        "next_fire_s <= ?1"
        " ORDER BY next_fire_s, creator, name LIMIT ?2");
    if (!stmt) return tl::unexpected(stmt.error());
    stmt->bind(1, now_s).bind(2, toInt64(limit));
    return collect(*stmt);
  }

  Result<void> recordFire(std::string_view creator, std::string_view name,
                          std::int64_t fired_at_s) override {
    std::lock_guard lk(mu_);
    Transaction tx(db_);
    if (auto b = tx.beginImmediate(); !b) return b;
    auto sel = db_.prepare(
        "SELECT creator, name, target, kind, cadence, offset_minutes, wake, body, created_at_s, "
        "next_fire_s,"
        " max_fires, expires_at_s, fires FROM schedules WHERE creator = ?1 AND name = ?2");
    if (!sel) return tl::unexpected(sel.error());
    sel->bind(1, creator).bind(2, name);
    auto rows = collect(*sel);
    if (!rows) return tl::unexpected(rows.error());
    if (rows->empty())
      return fail(ErrorCode::kNotFound, "no schedule is named " + std::string(name));
    const ScheduleRecord& r = rows->front();
    const std::uint64_t fires = r.fires + 1;
    auto next = nextFireAfter(r, fired_at_s, fires);
    auto upd = db_.prepare(
        "UPDATE schedules SET fires = ?3, next_fire_s = ?4 WHERE creator = ?1 AND name = ?2");
    if (!upd) return tl::unexpected(upd.error());
    upd->bind(1, creator).bind(2, name).bind(3, toInt64(fires)).bind(4, next);
    if (auto s = upd->step(); !s) return tl::unexpected(s.error());
    return tx.commit();
  }

 private:
  std::mutex mu_;
  sql::Database db_;
};

}  // namespace

Result<std::shared_ptr<ScheduleStore>> openSqliteScheduleStore(const std::string& path) {
  auto db = sql::Database::open(path);
  if (!db) return tl::unexpected(db.error());
  if (auto r = migrate(*db); !r) return tl::unexpected(r.error());
  return std::shared_ptr<ScheduleStore>(std::make_shared<SqliteScheduleStore>(std::move(*db)));
}

}  // namespace airlock::capability::schedule
