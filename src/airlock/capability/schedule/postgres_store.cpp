// ScheduleStore on PostgreSQL (schedule.h openPostgresScheduleStore).
#include <array>
#include <mutex>

#include "airlock/artifacts/postgres.h"
#include "airlock/capability/schedule/schedule.h"
#include "airlock/capability/schedule/store_rows.h"
#include "airlock/capability/schedule/store_schema.h"

namespace airlock::capability::schedule {
namespace {

namespace pg = artifacts::postgres;

// Append only, like the SQLite list; the two share version numbers. Names
// sort bytewise (COLLATE "C") as they do in SQLite.
constexpr std::array<pg::Migration, kScheduleSchemaVersion> kMigrations{{
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

constexpr pg::MigrationLedger kLedger{
    "CREATE TABLE IF NOT EXISTS schedule_migrations ("
    "  version INTEGER PRIMARY KEY,"
    "  applied_at_ms BIGINT NOT NULL)",
    "SELECT COALESCE(MAX(version), 0)::bigint FROM schedule_migrations",
    "INSERT INTO schedule_migrations (version, applied_at_ms)"
    " VALUES ($1::integer, (extract(epoch FROM clock_timestamp()) * 1000)::bigint)",
    7046311542,  // "schedule schema migration" (beside the artifact schema's 7046311541)
    "schedule"};

// Held by every fireDue until it commits: outbox sequences then commit in
// the order they were drawn, and the outbox count it checks cannot change
// under it. Another replica waits here, then sees the rows this one moved.
constexpr std::int64_t kOutboxLockKey = 7046311543;

tl::unexpected<Error> corrupt(const char* what) {
  return fail(ErrorCode::kExecutionUnavailable, std::string("corrupt schedule row: ") + what);
}

// Columns in the order of store_rows.h.
Result<std::vector<ScheduleRecord>> schedulesFrom(const PGresult* r) {
  if (pg::columnCount(r) != 13) return corrupt("column count");
  std::vector<ScheduleRecord> out;
  for (int i = 0; i < pg::rowCount(r); ++i) {
    rows::ScheduleRow row;
    row.creator = pg::field(r, i, 0);
    row.name = pg::field(r, i, 1);
    row.target = pg::field(r, i, 2);
    row.kind = pg::field(r, i, 3);
    row.cadence = pg::field(r, i, 4);
    auto offset = pg::int8Field(r, i, 5);
    auto wake = pg::boolField(r, i, 6);
    row.body = pg::field(r, i, 7);
    auto created = pg::int8Field(r, i, 8);
    if (!pg::isNull(r, i, 9)) {
      row.next_fire_s = pg::int8Field(r, i, 9);
      if (!row.next_fire_s) return corrupt("next_fire_s");
    }
    auto max_fires = pg::int8Field(r, i, 10);
    auto expires = pg::int8Field(r, i, 11);
    auto fires = pg::int8Field(r, i, 12);
    if (!offset || !wake || !created || !max_fires || !expires || !fires)
      return corrupt("integer column");
    row.offset_minutes = *offset;
    row.wake = *wake;
    row.created_at_s = *created;
    row.max_fires = *max_fires;
    row.expires_at_s = *expires;
    row.fires = *fires;
    auto record = rows::decode(std::move(row));
    if (!record) return tl::unexpected(record.error());
    out.push_back(std::move(*record));
  }
  return out;
}

Result<std::vector<Fire>> firesFrom(const PGresult* r) {
  if (pg::columnCount(r) != 9) return corrupt("outbox column count");
  std::vector<Fire> out;
  for (int i = 0; i < pg::rowCount(r); ++i) {
    rows::FireRow row;
    auto sequence = pg::int8Field(r, i, 0);
    row.creator = pg::field(r, i, 1);
    row.name = pg::field(r, i, 2);
    row.target = pg::field(r, i, 3);
    auto wake = pg::boolField(r, i, 4);
    row.body = pg::field(r, i, 5);
    auto occurrence = pg::int8Field(r, i, 6);
    auto fired_at = pg::int8Field(r, i, 7);
    auto number = pg::int8Field(r, i, 8);
    if (!sequence || !wake || !occurrence || !fired_at || !number)
      return corrupt("outbox integer column");
    row.sequence = *sequence;
    row.wake = *wake;
    row.occurrence_s = *occurrence;
    row.fired_at_s = *fired_at;
    row.fire_number = *number;
    auto fire = rows::decode(std::move(row));
    if (!fire) return tl::unexpected(fire.error());
    out.push_back(std::move(*fire));
  }
  return out;
}

// fireDue's steps on one connection inside its transaction.
class PostgresFiring final : public rows::FiringTransaction {
 public:
  explicit PostgresFiring(PGconn* conn) : conn_(conn) {}

  Result<std::size_t> pendingCount() override {
    auto r = pg::run(conn_, "SELECT COUNT(*)::bigint FROM schedule_fires", {});
    if (!r) return tl::unexpected(r.error());
    auto n = pg::rowCount(r->get()) == 1 ? pg::int8Field(r->get(), 0, 0) : std::nullopt;
    if (!n || *n < 0) return corrupt("outbox count");
    return static_cast<std::size_t>(*n);
  }

  Result<std::vector<ScheduleRecord>> lockDue(std::int64_t now_s, std::size_t limit,
                                              std::size_t creator_share) override {
    // SKIP LOCKED: a row another transaction holds (a recordFire, a cancel)
    // waits for the next tick rather than stalling this one.
    auto r = pg::run(
        conn_,
        "SELECT creator, name, target, kind, cadence, offset_minutes, wake, body, created_at_s,"
        " next_fire_s, max_fires, expires_at_s, fires FROM schedules"
        " WHERE next_fire_s IS NOT NULL AND next_fire_s <= $1::bigint"
        " AND creator NOT IN (SELECT f.creator FROM schedule_fires f GROUP BY f.creator"
        "                     HAVING COUNT(*) >= $3::bigint)"
        " ORDER BY next_fire_s, creator, name LIMIT $2::bigint FOR UPDATE SKIP LOCKED",
        {pg::int64(now_s), pg::int64(rows::toInt64(limit)),
         pg::int64(rows::toInt64(creator_share))});
    if (!r) return tl::unexpected(r.error());
    return schedulesFrom(r->get());
  }

  Result<std::optional<std::int64_t>> append(const Fire& fire) override {
    rows::FireRow row = rows::encode(fire);
    auto r = pg::run(
        conn_,
        "INSERT INTO schedule_fires (creator, name, target, wake, body, occurrence_s,"
        "  fired_at_s, fire_number)"
        " VALUES ($1::text, $2::text, $3::text, $4::boolean, $5::bytea, $6::bigint,"
        "  $7::bigint, $8::bigint)"
        " ON CONFLICT (creator, name, occurrence_s) DO NOTHING RETURNING sequence",
        {pg::text(std::move(row.creator)), pg::text(std::move(row.name)),
         pg::text(std::move(row.target)), pg::boolean(row.wake), pg::bytes(std::move(row.body)),
         pg::int64(row.occurrence_s), pg::int64(row.fired_at_s), pg::int64(row.fire_number)});
    if (!r) return tl::unexpected(r.error());
    if (pg::rowCount(r->get()) == 0) return std::optional<std::int64_t>{};
    auto sequence = pg::int8Field(r->get(), 0, 0);
    if (!sequence) return corrupt("sequence");
    return std::optional<std::int64_t>{*sequence};
  }

  Result<void> advance(const ScheduleRecord& record, std::uint64_t fires,
                       std::optional<std::int64_t> next_fire_s) override {
    auto r = pg::run(conn_,
                     "UPDATE schedules SET fires = $3::bigint, next_fire_s = $4::bigint"
                     " WHERE creator = $1::text AND name = $2::text",
                     {pg::text(record.creator), pg::text(record.name),
                      pg::int64(rows::toInt64(fires)), pg::optionalInt64(next_fire_s)});
    if (!r) return tl::unexpected(r.error());
    return {};
  }

 private:
  PGconn* conn_;
};

class PostgresScheduleStore final : public ScheduleStore {
 public:
  PostgresScheduleStore(pg::PgConn conn, ScheduleStoreOptions options)
      : options_(options), conn_(std::move(conn)) {}

  Result<void> create(const ScheduleRecord& record, std::size_t max_live) override {
    rows::ScheduleRow row = rows::encode(record);
    std::lock_guard lk(mu_);
    PGconn* c = conn_.get();
    if (!pg::ensureConnected(c)) return pg::pgError(c, nullptr, "connect");
    pg::Transaction tx(c);
    if (auto r = tx.begin(); !r) return r;
    // Serializes creates of one creator until commit, so the count below
    // sees every schedule committed before this one (max_live holds).
    if (auto r = pg::run(c, "SELECT pg_advisory_xact_lock(hashtextextended($1::text, 7046312))",
                         {pg::text(row.creator)});
        !r)
      return tl::unexpected(r.error());
    // Spent schedules are kept for list() only up to the creator's newest
    // max_live, so creating and spending one-shots cannot grow the table.
    if (auto r = pg::run(
            c,
            "DELETE FROM schedules WHERE creator = $1::text AND next_fire_s IS NULL AND name NOT IN"
            " (SELECT name FROM schedules WHERE creator = $1::text AND next_fire_s IS NULL"
            "  ORDER BY created_at_s DESC, name DESC LIMIT $2::bigint)",
            {pg::text(row.creator), pg::int64(rows::toInt64(max_live))});
        !r)
      return tl::unexpected(r.error());
    auto count = pg::run(c,
                         "SELECT COUNT(*)::bigint FROM schedules"
                         " WHERE creator = $1::text AND next_fire_s IS NOT NULL",
                         {pg::text(row.creator)});
    if (!count) return tl::unexpected(count.error());
    auto live = pg::rowCount(count->get()) == 1 ? pg::int8Field(count->get(), 0, 0) : std::nullopt;
    if (!live) return corrupt("live count");
    if (static_cast<std::uint64_t>(*live) >= max_live) return rows::tooManyLive(max_live);
    auto ins = pg::run(
        c,
        "INSERT INTO schedules (creator, name, target, kind, cadence, offset_minutes, wake, body,"
        " created_at_s, next_fire_s, max_fires, expires_at_s, fires)"
        " VALUES ($1::text, $2::text, $3::text, $4::text, $5::text, $6::bigint, $7::boolean,"
        "  $8::bytea, $9::bigint, $10::bigint, $11::bigint, $12::bigint, $13::bigint)",
        {pg::text(row.creator), pg::text(row.name), pg::text(row.target), pg::text(row.kind),
         pg::text(row.cadence), pg::int64(row.offset_minutes), pg::boolean(row.wake),
         pg::bytes(std::move(row.body)), pg::int64(row.created_at_s),
         pg::optionalInt64(row.next_fire_s), pg::int64(row.max_fires), pg::int64(row.expires_at_s),
         pg::int64(row.fires)});
    if (!ins) {
      if (ins.error().code == ErrorCode::kExecutionRejected)
        return rows::duplicateName(record.name);
      return tl::unexpected(ins.error());
    }
    return tx.commit();
  }

  Result<std::vector<ScheduleRecord>> list(std::string_view creator) override {
    std::lock_guard lk(mu_);
    PGconn* c = conn_.get();
    if (!pg::ensureConnected(c)) return pg::pgError(c, nullptr, "connect");
    auto r = pg::run(
        c,
        "SELECT creator, name, target, kind, cadence, offset_minutes, wake, body, created_at_s,"
        " next_fire_s, max_fires, expires_at_s, fires FROM schedules WHERE creator = $1::text"
        " ORDER BY name",
        {pg::text(std::string(creator))});
    if (!r) return tl::unexpected(r.error());
    return schedulesFrom(r->get());
  }

  Result<bool> cancel(std::string_view creator, std::string_view name) override {
    std::lock_guard lk(mu_);
    PGconn* c = conn_.get();
    if (!pg::ensureConnected(c)) return pg::pgError(c, nullptr, "connect");
    auto r = pg::run(c, "DELETE FROM schedules WHERE creator = $1::text AND name = $2::text",
                     {pg::text(std::string(creator)), pg::text(std::string(name))});
    if (!r) return tl::unexpected(r.error());
    return pg::affectedRows(r->get()) > 0;
  }

  Result<std::vector<ScheduleRecord>> due(std::int64_t now_s, std::size_t limit) override {
    std::lock_guard lk(mu_);
    PGconn* c = conn_.get();
    if (!pg::ensureConnected(c)) return pg::pgError(c, nullptr, "connect");
    auto r = pg::run(
        c,
        "SELECT creator, name, target, kind, cadence, offset_minutes, wake, body, created_at_s,"
        " next_fire_s, max_fires, expires_at_s, fires FROM schedules"
        " WHERE next_fire_s IS NOT NULL AND next_fire_s <= $1::bigint"
        " ORDER BY next_fire_s, creator, name LIMIT $2::bigint",
        {pg::int64(now_s), pg::int64(rows::toInt64(limit))});
    if (!r) return tl::unexpected(r.error());
    return schedulesFrom(r->get());
  }

  Result<void> recordFire(std::string_view creator, std::string_view name,
                          std::int64_t fired_at_s) override {
    std::lock_guard lk(mu_);
    PGconn* c = conn_.get();
    if (!pg::ensureConnected(c)) return pg::pgError(c, nullptr, "connect");
    pg::Transaction tx(c);
    if (auto r = tx.begin(); !r) return r;
    auto sel = pg::run(
        c,
        "SELECT creator, name, target, kind, cadence, offset_minutes, wake, body, created_at_s,"
        " next_fire_s, max_fires, expires_at_s, fires FROM schedules"
        " WHERE creator = $1::text AND name = $2::text FOR UPDATE",
        {pg::text(std::string(creator)), pg::text(std::string(name))});
    if (!sel) return tl::unexpected(sel.error());
    auto found = schedulesFrom(sel->get());
    if (!found) return tl::unexpected(found.error());
    if (found->empty()) return rows::noSuchSchedule(name);
    auto step = stepFire(found->front(), fired_at_s);
    if (!step) return rows::spentSchedule(name);
    if (auto r = PostgresFiring(c).advance(found->front(), step->fire_number, step->next_fire_s);
        !r)
      return r;
    return tx.commit();
  }

  Result<std::vector<Fire>> fireDue(std::int64_t now_s, std::size_t limit) override {
    std::lock_guard lk(mu_);
    PGconn* c = conn_.get();
    if (!pg::ensureConnected(c)) return pg::pgError(c, nullptr, "connect");
    pg::Transaction tx(c);
    if (auto r = tx.begin(); !r) return tl::unexpected(r.error());
    if (auto r =
            pg::run(c, "SELECT pg_advisory_xact_lock($1::bigint)", {pg::int64(kOutboxLockKey)});
        !r)
      return tl::unexpected(r.error());
    PostgresFiring firing(c);
    auto fires = rows::fireDueIn(firing, now_s, limit, options_);
    if (!fires) return fires;
    if (auto r = tx.commit(); !r) return tl::unexpected(r.error());
    return fires;
  }

  Result<std::vector<Fire>> pendingFires(std::int64_t after_sequence, std::size_t limit) override {
    std::lock_guard lk(mu_);
    PGconn* c = conn_.get();
    if (!pg::ensureConnected(c)) return pg::pgError(c, nullptr, "connect");
    auto r = pg::run(
        c,
        "SELECT sequence, creator, name, target, wake, body, occurrence_s, fired_at_s, fire_number"
        " FROM schedule_fires WHERE sequence > $1::bigint ORDER BY sequence LIMIT $2::bigint",
        {pg::int64(after_sequence), pg::int64(rows::toInt64(limit))});
    if (!r) return tl::unexpected(r.error());
    return firesFrom(r->get());
  }

  Result<std::size_t> acknowledgeFires(std::int64_t through_sequence) override {
    std::lock_guard lk(mu_);
    PGconn* c = conn_.get();
    if (!pg::ensureConnected(c)) return pg::pgError(c, nullptr, "connect");
    auto r = pg::run(c, "DELETE FROM schedule_fires WHERE sequence <= $1::bigint",
                     {pg::int64(through_sequence)});
    if (!r) return tl::unexpected(r.error());
    return static_cast<std::size_t>(pg::affectedRows(r->get()));
  }

 private:
  const ScheduleStoreOptions options_;
  std::mutex mu_;
  pg::PgConn conn_;
};

}  // namespace

std::span<const pg::Migration> schema::postgresMigrations() {
  return kMigrations;
}
const pg::MigrationLedger& schema::postgresLedger() {
  return kLedger;
}

Result<std::shared_ptr<ScheduleStore>> openPostgresScheduleStore(
    const std::string& conninfo, const ScheduleStoreOptions& options) {
  if (options.outbox_capacity == 0 || options.creator_share == 0)
    return fail(ErrorCode::kConfigurationError,
                "schedule outbox capacity and creator share must be at least 1");
  auto conn = pg::connect(conninfo);
  if (!conn) return tl::unexpected(conn.error());
  if (auto r = pg::migrate(conn->get(), kLedger, kMigrations, kScheduleSchemaVersion); !r)
    return tl::unexpected(r.error());
  return std::shared_ptr<ScheduleStore>(
      std::make_shared<PostgresScheduleStore>(std::move(*conn), options));
}

}  // namespace airlock::capability::schedule
