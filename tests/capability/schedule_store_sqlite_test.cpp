// The ScheduleStore suite against SQLite (a fresh database file per test),
// plus what only the SQLite backend shows: a newer schedule schema is refused.
#include "airlock/capability/schedule/store_schema.h"
#include "airlock/storage/sqlite.h"
#include "schedule_store_suite.h"
#include "test_tree.h"

namespace airlock::capability::schedule::testing {
namespace {

namespace sql = storage::sqlite;

class SqliteBackend final : public ScheduleStoreBackend {
 public:
  std::string path() const { return dir_.path() + "/metadata.db"; }

  Result<std::shared_ptr<ScheduleStore>> open(const ScheduleStoreOptions& options) override {
    return openSqliteScheduleStore(path(), options);
  }

  Result<int> schemaVersion() override {
    auto db = sql::Database::open(path());
    if (!db) return tl::unexpected(db.error());
    auto stmt = db->prepare("SELECT COALESCE(MAX(version), 0) FROM schedule_migrations");
    if (!stmt) return tl::unexpected(stmt.error());
    if (auto s = stmt->step(); !s) return tl::unexpected(s.error());
    return static_cast<int>(stmt->int64(0));
  }

  // Version 1 exactly as the first release created it: the store's own
  // first migration, recorded in its ledger.
  Result<void> seedVersion1(const ScheduleRecord& r) override {
    auto db = sql::Database::open(path());
    if (!db) return tl::unexpected(db.error());
    auto conn = sql::sqliteConnection(std::move(*db));
    if (auto e =
            storage::migrate(*conn, schema::sqliteLedger(), schema::sqliteMigrations().first(1), 1);
        !e)
      return e;
    auto ins = conn->execute(
        "INSERT INTO schedules VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
        {storage::text(r.creator), storage::text(r.name), storage::text(r.target),
         storage::text(std::string(timingName(r.kind))), storage::text(r.cadence),
         storage::int64(r.offset_minutes), storage::boolean(r.wake), storage::bytes(r.body),
         storage::int64(r.created_at_s), storage::optionalInt64(r.next_fire_s),
         storage::int64(static_cast<std::int64_t>(r.max_fires)), storage::int64(r.expires_at_s),
         storage::int64(static_cast<std::int64_t>(r.fires))});
    if (!ins) return tl::unexpected(ins.error());
    return {};
  }

 private:
  workspace::testing::TempDir dir_;
};

INSTANTIATE_TEST_SUITE_P(Sqlite, ScheduleStoreSuite,
                         ::testing::Values(ScheduleBackendFactory{
                             "Sqlite", [] { return std::make_unique<SqliteBackend>(); }}),
                         [](const auto& info) { return info.param.name; });

TEST(SqliteScheduleStore, ANewerScheduleSchemaIsRefusedByName) {
  SqliteBackend backend;
  ASSERT_TRUE(backend.open({}).has_value());
  {
    auto db = sql::Database::open(backend.path());
    ASSERT_TRUE(db.has_value());
    ASSERT_TRUE(db->exec("INSERT INTO schedule_migrations VALUES (99, 0)").has_value());
  }
  auto store = backend.open({});
  ASSERT_FALSE(store.has_value());
  EXPECT_EQ(store.error().code, ErrorCode::kConfigurationError);
  EXPECT_NE(store.error().message().find("schedule database schema 99"), std::string::npos)
      << store.error().message();
}

TEST(SqliteScheduleStore, AnOutboxOfNoCapacityIsAConfigurationError) {
  SqliteBackend backend;
  auto store = backend.open(ScheduleStoreOptions{0});
  ASSERT_FALSE(store.has_value());
  EXPECT_EQ(store.error().code, ErrorCode::kConfigurationError);
}

}  // namespace
}  // namespace airlock::capability::schedule::testing
