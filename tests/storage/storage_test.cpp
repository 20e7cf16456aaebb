#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "airlock/storage/connection.h"
#include "airlock/storage/migration.h"
#include "airlock/storage/row.h"
#include "airlock/storage/sql_value.h"
#include "airlock/storage/sqlite.h"

namespace airlock::storage {
namespace {

TEST(SqlValue, FactoriesSayTheKind) {
  EXPECT_EQ(int64(-5).kind, Value::Kind::kInt64);
  EXPECT_EQ(int64(-5).integer, -5);
  EXPECT_EQ(boolean(true).integer, 1);
  EXPECT_EQ(boolean(false).kind, Value::Kind::kBool);
  EXPECT_EQ(text("a").kind, Value::Kind::kText);
  EXPECT_EQ(bytes(std::string("\0b", 2)).bytes, std::string("\0b", 2));
  EXPECT_EQ(optionalInt64(std::nullopt).kind, Value::Kind::kNull);
  EXPECT_EQ(optionalInt64(7).integer, 7);
  EXPECT_EQ(optionalText(std::nullopt).kind, Value::Kind::kNull);
  EXPECT_EQ(optionalText(std::string("x")).bytes, "x");
}

TEST(SqlValue, CountsClampAtTheSignedMaximum) {
  constexpr auto kMax = std::numeric_limits<std::int64_t>::max();
  EXPECT_EQ(clampToInt64(0), 0);
  EXPECT_EQ(clampToInt64(static_cast<std::uint64_t>(kMax)), kMax);
  EXPECT_EQ(clampToInt64(std::numeric_limits<std::uint64_t>::max()), kMax);
}

TEST(Migration, ANewerDatabaseIsRefusedByName) {
  EXPECT_TRUE(checkSchemaVersion("artifact", 0, 1).has_value());
  EXPECT_TRUE(checkSchemaVersion("artifact", 1, 1).has_value());
  auto newer = checkSchemaVersion("schedule", 3, 2);
  ASSERT_FALSE(newer.has_value());
  EXPECT_EQ(newer.error().code, ErrorCode::kConfigurationError);
  EXPECT_EQ(newer.error().context, "schedule database schema 3 is newer than this build's 2");
}

// One table in a database file, each column type bound through Value and
// read back through Row, over the Connection the repositories use.
class SqliteValues : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/airlock-storage-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    dir_ = dir;
    auto db = sqlite::Database::open(dir_ + "/t.db");
    ASSERT_TRUE(db.has_value()) << db.error().message();
    db_ = sqlite::sqliteConnection(std::move(*db));
    ASSERT_TRUE(
        db_->execute("CREATE TABLE t (i INTEGER, b INTEGER, s TEXT, x BLOB, n INTEGER)", {}));
  }
  void TearDown() override {
    db_.reset();
    for (const char* f : {"/t.db", "/t.db-wal", "/t.db-shm"}) (void)::unlink((dir_ + f).c_str());
    (void)::rmdir(dir_.c_str());
  }
  std::string dir_;
  std::unique_ptr<Connection> db_;
};

struct Decoded {
  std::int64_t i = 0;
  bool b = false;
  std::string s, x;
  std::optional<std::int64_t> n;
};

Result<Decoded> decode(const Row& row) {
  ColumnReader c(row, "test");
  Decoded d;
  d.i = c.int64(0, "i");
  d.b = c.boolean(1, "b");
  d.s = c.text(2);
  d.x = c.text(3);
  d.n = c.optionalInt64(4, "n");
  if (auto ok = c.status(); !ok) return tl::unexpected(ok.error());
  return d;
}

TEST_F(SqliteValues, BoundValuesReadBackThroughRow) {
  auto inserted = db_->execute(
      "INSERT INTO t VALUES (?1, ?2, ?3, ?4, ?5)",
      {int64(-42), boolean(true), text("name"), bytes(std::string("\0\xff", 2)), null()});
  ASSERT_TRUE(inserted.has_value()) << inserted.error().message();
  EXPECT_EQ(*inserted, 1);
  auto rows = queryAll(*db_, "SELECT i, b, s, x, n FROM t", {}, 5, "test", &decode);
  ASSERT_TRUE(rows.has_value()) << rows.error().message();
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ(rows->front().i, -42);
  EXPECT_TRUE(rows->front().b);
  EXPECT_EQ(rows->front().s, "name");
  EXPECT_EQ(rows->front().x, std::string("\0\xff", 2));
  EXPECT_FALSE(rows->front().n.has_value());
}

TEST_F(SqliteValues, AColumnOfTheWrongTypeIsACorruptRowNamingIt) {
  // SQLite stores what it is given: text in an INTEGER column is possible
  // in a file written by something else.
  ASSERT_TRUE(db_->execute("INSERT INTO t VALUES (1, 'yes', 's', x'00', 2)", {}));
  auto rows = queryAll(*db_, "SELECT i, b, s, x, n FROM t", {}, 5, "test", &decode);
  ASSERT_FALSE(rows.has_value());
  EXPECT_EQ(rows.error().code, ErrorCode::kExecutionUnavailable);
  EXPECT_EQ(rows.error().context, "corrupt test row: b");
}

TEST_F(SqliteValues, AResultOfAnotherShapeIsRefused) {
  auto rows = queryAll(*db_, "SELECT i, b FROM t", {}, 5, "test", &decode);
  ASSERT_FALSE(rows.has_value());
  EXPECT_EQ(rows.error().context, "corrupt test row: column count");
}

TEST_F(SqliteValues, OneIntegerOrNone) {
  auto none = queryInt(*db_, "SELECT i FROM t", {}, "test", "i");
  ASSERT_TRUE(none.has_value());
  EXPECT_FALSE(none->has_value());
  auto sum = queryInt(*db_, "SELECT COALESCE(SUM(i), 0) FROM t", {}, "test", "sum");
  ASSERT_TRUE(sum.has_value());
  EXPECT_EQ(sum->value_or(-1), 0);
  auto word = queryInt(*db_, "SELECT 'seven'", {}, "test", "word");
  ASSERT_FALSE(word.has_value());
  EXPECT_EQ(word.error().context, "corrupt test row: word");
}

TEST_F(SqliteValues, ARolledBackWriteIsGoneAndADuplicateIsRejected) {
  ASSERT_TRUE(db_->execute("CREATE UNIQUE INDEX t_i ON t (i)", {}));
  {
    Transaction tx(*db_);
    ASSERT_TRUE(tx.begin());
    ASSERT_TRUE(db_->execute("INSERT INTO t (i) VALUES (?1)", {int64(1)}));
  }  // not committed
  auto count = queryInt(*db_, "SELECT COUNT(*) FROM t", {}, "test", "count");
  ASSERT_TRUE(count.has_value());
  EXPECT_EQ(count->value_or(-1), 0);
  ASSERT_TRUE(db_->execute("INSERT INTO t (i) VALUES (?1)", {int64(1)}));
  auto again = db_->execute("INSERT INTO t (i) VALUES (?1)", {int64(1)});
  ASSERT_FALSE(again.has_value());
  EXPECT_EQ(again.error().code, ErrorCode::kExecutionRejected);
}

// The generic runner over a SQLite connection: a two-step schema and its
// ledger, as a repository declares them.
constexpr MigrationLedger kLedger{
    "CREATE TABLE IF NOT EXISTS test_migrations ("
    "  version INTEGER PRIMARY KEY NOT NULL, applied_at_ms INTEGER NOT NULL)",
    {},
    "SELECT COALESCE(MAX(version), 0) FROM test_migrations",
    "INSERT INTO test_migrations (version, applied_at_ms) VALUES (?1, 0)",
    "test"};
constexpr Migration kSteps[] = {{1, "CREATE TABLE one (a INTEGER)"},
                                {2, "CREATE TABLE two (b INTEGER)"}};

TEST_F(SqliteValues, MigrationsApplyInOrderOnceAndANewerLedgerIsRefused) {
  ASSERT_TRUE(migrate(*db_, kLedger, std::span(kSteps).first(1), 1));
  auto version = appliedVersion(*db_, kLedger);
  ASSERT_TRUE(version.has_value()) << version.error().message();
  EXPECT_EQ(*version, 1);
  // The second run applies only step 2 (step 1 again would fail: the
  // table exists).
  auto both = migrate(*db_, kLedger, kSteps, 2);
  ASSERT_TRUE(both.has_value()) << both.error().message();
  EXPECT_EQ(appliedVersion(*db_, kLedger).value_or(-1), 2);
  EXPECT_TRUE(db_->execute("INSERT INTO two (b) VALUES (1)", {}).has_value());
  auto older = migrate(*db_, kLedger, std::span(kSteps).first(1), 1);
  ASSERT_FALSE(older.has_value());
  EXPECT_EQ(older.error().code, ErrorCode::kConfigurationError);
  EXPECT_EQ(older.error().context, "test database schema 2 is newer than this build's 1");
}

TEST_F(SqliteValues, AFailingMigrationStepRecordsNothing) {
  constexpr Migration kBroken[] = {{1, "CREATE TABLE one (a INTEGER)"},
                                   {2, "CREATE TABLE one (a INTEGER)"}};
  auto r = migrate(*db_, kLedger, kBroken, 2);
  ASSERT_FALSE(r.has_value());
  // Step 1 rolled back with step 2: a fixed build starts from nothing.
  EXPECT_TRUE(migrate(*db_, kLedger, std::span(kSteps), 2).has_value());
  EXPECT_EQ(appliedVersion(*db_, kLedger).value_or(-1), 2);
}

}  // namespace
}  // namespace airlock::storage
