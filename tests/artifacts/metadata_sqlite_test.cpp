// The metadata suite against SQLite (a fresh database file per test), plus
// what only the SQLite adapter has: the file is in WAL mode, a newer schema
// is refused, and SQL text must be a literal.
#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <type_traits>

#include "airlock/artifacts/sqlite_repository.h"
#include "airlock/storage/sql_text.h"
#include "metadata_suite.h"
#include "test_tree.h"

namespace airlock::artifacts::testing {
namespace {

static_assert(!std::is_constructible_v<storage::SqlText, const char*>);
static_assert(!std::is_constructible_v<storage::SqlText, std::string>);

class SqliteBackend final : public RepositoryBackend {
 public:
  std::string path() const { return dir_.path() + "/artifacts.db"; }
  Result<std::unique_ptr<ArtifactRepository>> open() override {
    auto repo = SqliteArtifactRepository::open(path());
    if (!repo) return tl::unexpected(repo.error());
    return std::unique_ptr<ArtifactRepository>(std::move(*repo));
  }
  Result<int> schemaVersion() override {
    auto repo = SqliteArtifactRepository::open(path());
    if (!repo) return tl::unexpected(repo.error());
    return (*repo)->schemaVersion();
  }

 private:
  workspace::testing::TempDir dir_;
};

INSTANTIATE_TEST_SUITE_P(Sqlite, MetadataRepositoryTest,
                         ::testing::Values(BackendFactory{
                             "Sqlite", [] { return std::make_unique<SqliteBackend>(); }}),
                         [](const auto& info) { return info.param.name; });

// Runs one statement through the raw C API (test setup only).
void rawExec(const std::string& path, const char* sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* message = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, &message), SQLITE_OK)
      << (message ? message : "");
  sqlite3_free(message);
  sqlite3_close(db);
}

TEST(SqliteRepository, DatabaseIsInWalModeUnderTheGivenPath) {
  SqliteBackend backend;
  auto repo = backend.open();
  ASSERT_TRUE(repo.has_value()) << repo.error().message();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(backend.path().c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &stmt, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)), "wal");
  sqlite3_finalize(stmt);
  sqlite3_close(db);
}

TEST(SqliteRepository, NewerSchemaIsAConfigurationError) {
  SqliteBackend backend;
  ASSERT_TRUE(backend.open().has_value());
  rawExec(backend.path(), "INSERT INTO schema_migrations VALUES (99, 0)");
  auto repo = backend.open();
  ASSERT_FALSE(repo.has_value());
  EXPECT_EQ(repo.error().code, ErrorCode::kConfigurationError);
}

TEST(SqliteRepository, CorruptRowIsAnErrorNotACrash) {
  SqliteBackend backend;
  auto repo = backend.open();
  ASSERT_TRUE(repo.has_value());
  rawExec(backend.path(),
          "INSERT INTO artifacts VALUES ('01890000-0000-7000-8000-000000000000', 'local', NULL,"
          " 'NOT_AN_ORIGIN', x'', 'text/plain', 1, 'zz', 'INTERNAL_TOOL', 0, NULL)");
  auto found = (*repo)->find(ArtifactId::parse("01890000-0000-7000-8000-000000000000").value());
  ASSERT_FALSE(found.has_value());
  EXPECT_EQ(found.error().code, ErrorCode::kExecutionUnavailable);
  EXPECT_NE(found.error().context.find("corrupt artifact row"), std::string::npos);
}

TEST(SqliteRepository, MissingDirectoryIsUnavailable) {
  auto repo = SqliteArtifactRepository::open("/nonexistent-airlock-dir/artifacts.db");
  ASSERT_FALSE(repo.has_value());
  EXPECT_EQ(repo.error().code, ErrorCode::kExecutionUnavailable);
}

}  // namespace
}  // namespace airlock::artifacts::testing
