// The ScheduleStore suite against a real PostgreSQL 15 server that this
// binary starts (tests/artifacts/postgres_server.h) and stops; a fresh
// database per test. Without the server binaries every test is skipped
// with the reason printed.
#include <unistd.h>

#include "airlock/capability/schedule/store_schema.h"
#include "airlock/storage/postgres.h"
#include "postgres_server.h"
#include "schedule_store_suite.h"

namespace airlock::capability::schedule::testing {
namespace {

namespace pg = storage::postgres;
using artifacts::testing::PostgresServer;

PostgresServer* server = nullptr;
std::string skip_reason;  // binaries absent
std::string start_error;  // anything else: a failure

class PostgresEnvironment final : public ::testing::Environment {
 public:
  void SetUp() override {
    server = new PostgresServer();
    auto started = server->start();
    if (started) return;
    if (started.error().code == ErrorCode::kConfigurationError)
      skip_reason = started.error().message();
    else
      start_error = started.error().message();
  }
  void TearDown() override {
    delete server;
    server = nullptr;
  }
};
[[maybe_unused]] auto* const environment =
    ::testing::AddGlobalTestEnvironment(new PostgresEnvironment);

class PostgresBackend final : public ScheduleStoreBackend {
 public:
  PostgresBackend() {
    static int counter = 0;
    database_ = "schedules_" + std::to_string(::getpid()) + "_" + std::to_string(++counter);
    if (skip_reason.empty() && start_error.empty()) {
      auto created = server->createDatabase(database_);
      if (!created) start_error = created.error().message();
    }
  }
  std::optional<std::string> skipReason() override {
    if (skip_reason.empty()) return std::nullopt;
    return "PostgreSQL is not available: " + skip_reason;
  }
  std::string conninfo() const { return server->conninfo(database_); }

  Result<std::shared_ptr<ScheduleStore>> open(const ScheduleStoreOptions& options) override {
    if (!start_error.empty()) return fail(ErrorCode::kExecutionUnavailable, start_error);
    return openPostgresScheduleStore(conninfo(), options);
  }

  Result<int> schemaVersion() override {
    auto conn = pg::connect(conninfo());
    if (!conn) return tl::unexpected(conn.error());
    auto r = pg::run(conn->get(),
                     "SELECT COALESCE(MAX(version), 0)::bigint FROM schedule_migrations", {});
    if (!r) return tl::unexpected(r.error());
    auto v = pg::int8Field(r->get(), 0, 0);
    if (!v) return fail(ErrorCode::kExecutionUnavailable, "bad version");
    return static_cast<int>(*v);
  }

  // Version 1 exactly as the first PostgreSQL schedule schema: the store's
  // own first migration, recorded in its ledger.
  Result<void> seedVersion1(const ScheduleRecord& r) override {
    if (!start_error.empty()) return fail(ErrorCode::kExecutionUnavailable, start_error);
    auto conn = pg::connect(conninfo());
    if (!conn) return tl::unexpected(conn.error());
    auto db = pg::postgresConnection(std::move(*conn));
    if (auto e = storage::migrate(*db, schema::postgresLedger(),
                                  schema::postgresMigrations().first(1), 1);
        !e)
      return e;
    auto ins = db->execute(
        "INSERT INTO schedules VALUES ($1::text, $2::text, $3::text, $4::text,"
        " $5::text, $6::bigint, $7::boolean, $8::bytea, $9::bigint, $10::bigint,"
        " $11::bigint, $12::bigint, $13::bigint)",
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
  std::string database_;
};

INSTANTIATE_TEST_SUITE_P(Postgres, ScheduleStoreSuite,
                         ::testing::Values(ScheduleBackendFactory{
                             "Postgres", [] { return std::make_unique<PostgresBackend>(); }}),
                         [](const auto& info) { return info.param.name; });

TEST(PostgresScheduleStore, ANewerScheduleSchemaIsRefusedByName) {
  PostgresBackend backend;
  if (auto reason = backend.skipReason()) GTEST_SKIP() << *reason;
  ASSERT_TRUE(backend.open({}).has_value());
  {
    auto conn = pg::connect(backend.conninfo());
    ASSERT_TRUE(conn.has_value());
    ASSERT_TRUE(pg::exec(conn->get(), "INSERT INTO schedule_migrations VALUES (99, 0)"));
  }
  auto store = backend.open({});
  ASSERT_FALSE(store.has_value());
  EXPECT_EQ(store.error().code, ErrorCode::kConfigurationError);
  EXPECT_NE(store.error().message().find("schedule database schema 99"), std::string::npos)
      << store.error().message();
}

TEST(PostgresScheduleStore, ItsLedgerIsItsOwnBesideTheArtifactSchema) {
  PostgresBackend backend;
  if (auto reason = backend.skipReason()) GTEST_SKIP() << *reason;
  ASSERT_TRUE(backend.open({}).has_value());
  auto conn = pg::connect(backend.conninfo());
  ASSERT_TRUE(conn.has_value());
  auto r = pg::run(conn->get(), "SELECT to_regclass('schema_migrations') IS NULL", {});
  ASSERT_TRUE(r.has_value()) << r.error().message();
  EXPECT_EQ(pg::boolField(r->get(), 0, 0), true) << "the artifact ledger is untouched";
}

TEST(PostgresScheduleStore, UnreachableServerIsUnavailableWithoutTheConnectionString) {
  auto store = openPostgresScheduleStore(
      "host=/nonexistent-airlock-socket-dir port=5432 user=u password=s3cr3t-value dbname=x");
  ASSERT_FALSE(store.has_value());
  EXPECT_EQ(store.error().code, ErrorCode::kExecutionUnavailable);
  EXPECT_EQ(store.error().message().find("s3cr3t-value"), std::string::npos);
}

}  // namespace
}  // namespace airlock::capability::schedule::testing
