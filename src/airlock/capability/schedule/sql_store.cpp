#include "airlock/capability/schedule/sql_store.h"

#include <mutex>

#include "airlock/capability/schedule/store_rows.h"

namespace airlock::capability::schedule {
namespace {

using rows::clampToInt64;
using storage::int64;
using storage::text;

constexpr int kScheduleColumns = 13;
constexpr int kOutboxColumns = 9;

Result<std::vector<ScheduleRecord>> schedules(storage::Connection& db, storage::SqlText sql,
                                              const std::vector<storage::Value>& values) {
  return storage::queryAll(db, sql, values, kScheduleColumns, "schedule", &rows::readSchedule);
}

// Runs `lock` (a statement returning one row, or none at all when empty).
Result<void> takeLock(storage::Connection& db, storage::SqlText lock,
                      const std::vector<storage::Value>& values) {
  if (lock.empty()) return {};
  return db.query(lock, values, 1, "schedule", [](const storage::Row&) { return Result<void>{}; });
}

// fireDue's steps on the connection inside its transaction.
class SqlFiring final : public rows::FiringTransaction {
 public:
  SqlFiring(storage::Connection& db, const ScheduleStatements& sql) : db_(db), sql_(sql) {}

  Result<std::size_t> pendingCount() override {
    auto n = storage::queryInt(db_, sql_.count_outbox, {}, "schedule", "outbox count");
    if (!n) return tl::unexpected(n.error());
    if (!*n || **n < 0) return storage::corruptRow("schedule", "outbox count");
    return static_cast<std::size_t>(**n);
  }

  Result<std::vector<ScheduleRecord>> lockDue(std::int64_t now_s, std::size_t limit,
                                              std::size_t creator_share) override {
    return schedules(
        db_, sql_.lock_due,
        {int64(now_s), int64(clampToInt64(limit)), int64(clampToInt64(creator_share))});
  }

  Result<std::optional<std::int64_t>> append(const Fire& fire) override {
    return storage::queryInt(db_, sql_.append_fire, rows::values(rows::encode(fire)), "schedule",
                             "sequence");
  }

  Result<void> advance(const ScheduleRecord& record, std::uint64_t fires,
                       std::optional<std::int64_t> next_fire_s) override {
    auto r = db_.execute(sql_.advance,
                         {text(record.creator), text(record.name), int64(clampToInt64(fires)),
                          storage::optionalInt64(next_fire_s)});
    if (!r) return tl::unexpected(r.error());
    return {};
  }

 private:
  storage::Connection& db_;
  const ScheduleStatements& sql_;
};

class SqlScheduleStore final : public ScheduleStore {
 public:
  SqlScheduleStore(std::unique_ptr<storage::Connection> db, const ScheduleStatements& sql,
                   ScheduleStoreOptions options)
      : options_(options), sql_(sql), db_(std::move(db)) {}

  Result<void> create(const ScheduleRecord& record, std::size_t max_live) override {
    std::lock_guard lk(mu_);
    storage::Transaction tx(*db_);
    if (auto r = tx.begin(); !r) return r;
    if (auto r = takeLock(*db_, sql_.lock_creator, {text(record.creator)}); !r) return r;
    // Spent schedules are kept for list() only up to the creator's newest
    // max_live, so creating and spending one-shots cannot grow the table.
    if (auto r =
            db_->execute(sql_.prune_spent, {text(record.creator), int64(clampToInt64(max_live))});
        !r)
      return tl::unexpected(r.error());
    auto live =
        storage::queryInt(*db_, sql_.count_live, {text(record.creator)}, "schedule", "live count");
    if (!live) return tl::unexpected(live.error());
    if (!*live) return storage::corruptRow("schedule", "live count");
    if (static_cast<std::uint64_t>(**live) >= max_live) return rows::tooManyLive(max_live);
    if (auto r = db_->execute(sql_.insert, rows::values(rows::encode(record))); !r) {
      if (r.error().code == ErrorCode::kExecutionRejected) return rows::duplicateName(record.name);
      return tl::unexpected(r.error());
    }
    return tx.commit();
  }

  Result<std::vector<ScheduleRecord>> list(std::string_view creator) override {
    std::lock_guard lk(mu_);
    return schedules(*db_, sql_.list, {text(std::string(creator))});
  }

  Result<bool> cancel(std::string_view creator, std::string_view name) override {
    std::lock_guard lk(mu_);
    auto r = db_->execute(sql_.cancel, {text(std::string(creator)), text(std::string(name))});
    if (!r) return tl::unexpected(r.error());
    return *r > 0;
  }

  Result<std::vector<ScheduleRecord>> due(std::int64_t now_s, std::size_t limit) override {
    std::lock_guard lk(mu_);
    return schedules(*db_, sql_.due, {int64(now_s), int64(clampToInt64(limit))});
  }

  Result<void> recordFire(std::string_view creator, std::string_view name,
                          std::int64_t fired_at_s) override {
    std::lock_guard lk(mu_);
    storage::Transaction tx(*db_);
    if (auto r = tx.begin(); !r) return r;
    auto found = schedules(*db_, sql_.select_for_fire,
                           {text(std::string(creator)), text(std::string(name))});
    if (!found) return tl::unexpected(found.error());
    if (found->empty()) return rows::noSuchSchedule(name);
    auto step = stepFire(found->front(), fired_at_s);
    if (!step) return rows::spentSchedule(name);
    if (auto r =
            SqlFiring(*db_, sql_).advance(found->front(), step->fire_number, step->next_fire_s);
        !r)
      return r;
    return tx.commit();
  }

  Result<std::vector<Fire>> fireDue(std::int64_t now_s, std::size_t limit) override {
    std::lock_guard lk(mu_);
    storage::Transaction tx(*db_);
    if (auto r = tx.begin(); !r) return tl::unexpected(r.error());
    if (auto r = takeLock(*db_, sql_.lock_outbox, {}); !r) return tl::unexpected(r.error());
    SqlFiring firing(*db_, sql_);
    auto fires = rows::fireDueIn(firing, now_s, limit, options_);
    if (!fires) return fires;
    if (auto r = tx.commit(); !r) return tl::unexpected(r.error());
    return fires;
  }

  Result<std::vector<Fire>> pendingFires(std::int64_t after_sequence, std::size_t limit) override {
    std::lock_guard lk(mu_);
    return storage::queryAll(*db_, sql_.pending,
                             {int64(after_sequence), int64(clampToInt64(limit))}, kOutboxColumns,
                             "schedule", &rows::readFire);
  }

  Result<std::size_t> acknowledgeFires(std::int64_t through_sequence) override {
    std::lock_guard lk(mu_);
    auto r = db_->execute(sql_.acknowledge, {int64(through_sequence)});
    if (!r) return tl::unexpected(r.error());
    return static_cast<std::size_t>(*r);
  }

 private:
  const ScheduleStoreOptions options_;
  const ScheduleStatements& sql_;
  std::mutex mu_;
  std::unique_ptr<storage::Connection> db_;
};

}  // namespace

Result<std::shared_ptr<ScheduleStore>> openSqlScheduleStore(
    const std::function<Result<std::unique_ptr<storage::Connection>>()>& open,
    const storage::MigrationLedger& ledger, std::span<const storage::Migration> migrations,
    const ScheduleStatements& sql, const ScheduleStoreOptions& options) {
  if (options.outbox_capacity == 0 || options.creator_share == 0)
    return fail(ErrorCode::kConfigurationError,
                "schedule outbox capacity and creator share must be at least 1");
  auto db = storage::migrated(open(), ledger, migrations, kScheduleSchemaVersion);
  if (!db) return tl::unexpected(db.error());
  return std::make_shared<SqlScheduleStore>(std::move(*db), sql, options);
}

}  // namespace airlock::capability::schedule
