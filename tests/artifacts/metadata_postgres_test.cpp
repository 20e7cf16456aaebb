// The metadata suite against a real PostgreSQL 15 server that this test
// binary starts (postgres_server.h) and stops; a fresh database per test.
#include <gtest/gtest.h>

#include "airlock/artifacts/postgres_repository.h"
#include "metadata_suite.h"
#include "postgres_server.h"

namespace airlock::artifacts::testing {
namespace {

PostgresServer* server = nullptr;
std::string start_error;

class PostgresEnvironment final : public ::testing::Environment {
 public:
  void SetUp() override {
    server = new PostgresServer();
    if (auto started = server->start(); !started) start_error = started.error().message();
  }
  void TearDown() override {
    delete server;
    server = nullptr;
  }
};
[[maybe_unused]] auto* const environment =
    ::testing::AddGlobalTestEnvironment(new PostgresEnvironment);

class PostgresBackend final : public RepositoryBackend {
 public:
  PostgresBackend() {
    static int counter = 0;
    database_ = "suite_" + std::to_string(++counter);
    if (start_error.empty()) {
      auto created = server->createDatabase(database_);
      if (!created) start_error = created.error().message();
    }
  }
  Result<std::unique_ptr<ArtifactRepository>> open() override {
    if (!start_error.empty()) return fail(ErrorCode::kExecutionUnavailable, start_error);
    auto repo = PostgresArtifactRepository::connect(server->conninfo(database_));
    if (!repo) return tl::unexpected(repo.error());
    return std::unique_ptr<ArtifactRepository>(std::move(*repo));
  }
  Result<int> schemaVersion() override {
    auto repo = PostgresArtifactRepository::connect(server->conninfo(database_));
    if (!repo) return tl::unexpected(repo.error());
    return (*repo)->schemaVersion();
  }

 private:
  std::string database_;
};

INSTANTIATE_TEST_SUITE_P(Postgres, MetadataRepositoryTest,
                         ::testing::Values(BackendFactory{
                             "Postgres", [] { return std::make_unique<PostgresBackend>(); }}),
                         [](const auto& info) { return info.param.name; });

TEST(PostgresRepository, UnreachableServerIsUnavailableWithoutTheConnectionString) {
  auto repo = PostgresArtifactRepository::connect(
      "host=/nonexistent-airlock-socket-dir port=5432 user=u password=s3cr3t-value dbname=x");
  ASSERT_FALSE(repo.has_value());
  EXPECT_EQ(repo.error().code, ErrorCode::kExecutionUnavailable);
  EXPECT_EQ(repo.error().message().find("s3cr3t-value"), std::string::npos);
}

}  // namespace
}  // namespace airlock::artifacts::testing
