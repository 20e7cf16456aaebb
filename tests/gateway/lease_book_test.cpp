// One LeaseBook suite (gateway/leases/lease_book.h), run unchanged against
// the three books: memory, SQLite (a file per test) and PostgreSQL (a real
// server this binary starts, tests/artifacts/postgres_server.h, and a
// database per test). What each test measures:
//   - renew moves forward only and answers the current epoch;
//   - a (tenant, run) is one lease: another tenant's run of the same id is
//     another;
//   - stale names exactly the leases whose run's epoch is newer, in the
//     order asked, across more leases than one database query takes;
//   - a book reopened on a new connection (a gateway restarted) still
//     knows every renewal and answers stale the same;
//   - two connections renewing the same runs at once (two gateways) never
//     move a lease back and end at the largest epoch either renewed.
#include "airlock/gateway/leases/lease_book.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "postgres_server.h"
#include "test_tree.h"

namespace airlock::gateway {
namespace {

using artifacts::testing::PostgresServer;

PostgresServer* server = nullptr;
std::string server_error;

class PostgresEnvironment final : public ::testing::Environment {
 public:
  void SetUp() override {
    server = new PostgresServer();
    if (auto started = server->start(); !started) server_error = started.error().message();
  }
  void TearDown() override {
    delete server;
    server = nullptr;
  }
};
[[maybe_unused]] auto* const environment =
    ::testing::AddGlobalTestEnvironment(new PostgresEnvironment);

// One kind of book. Each test gets a fresh store; open() may be called
// several times in a test, each a new connection to that same store.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual Result<std::shared_ptr<LeaseBook>> open() = 0;
};

// Memory has no connection: the process's one book is the store.
class MemoryBackend final : public Backend {
 public:
  Result<std::shared_ptr<LeaseBook>> open() override { return book_; }

 private:
  std::shared_ptr<LeaseBook> book_ = makeMemoryLeaseBook();
};

class SqliteBackend final : public Backend {
 public:
  Result<std::shared_ptr<LeaseBook>> open() override {
    return openSqliteLeaseBook(dir_.path() + "/metadata.db");
  }

 private:
  workspace::testing::TempDir dir_;
};

class PostgresBackend final : public Backend {
 public:
  PostgresBackend() {
    static int counter = 0;
    database_ = "leases_" + std::to_string(::getpid()) + "_" + std::to_string(++counter);
    if (server_error.empty())
      if (auto created = server->createDatabase(database_); !created)
        server_error = created.error().message();
  }
  Result<std::shared_ptr<LeaseBook>> open() override {
    if (!server_error.empty())
      return fail(ErrorCode::kExecutionUnavailable, "PostgreSQL: " + server_error);
    return openPostgresLeaseBook(server->conninfo(database_));
  }

 private:
  std::string database_;
};

struct BackendFactory {
  std::string name;
  std::function<std::unique_ptr<Backend>()> make;
};

class LeaseBookSuite : public ::testing::TestWithParam<BackendFactory> {
 protected:
  void SetUp() override {
    backend_ = GetParam().make();
    book_ = openBook();
  }
  std::shared_ptr<LeaseBook> openBook() {
    auto book = backend_->open();
    EXPECT_TRUE(book.has_value()) << book.error().message();
    return book ? *book : makeMemoryLeaseBook();
  }
  static LiveLease lease(std::string tenant, std::string run, std::int64_t epoch,
                         std::string environment_id) {
    return LiveLease{std::move(tenant), std::move(run), epoch, std::move(environment_id)};
  }

  std::unique_ptr<Backend> backend_;
  std::shared_ptr<LeaseBook> book_;
};

// Environment ids as a node makes them are opaque to the book: any text.
std::string envId(int n) {
  return "node-a.0190a1b2-c3d4-7e5f-8a9b-" + std::to_string(100000000000 + n);
}

TEST_P(LeaseBookSuite, RenewMovesForwardOnlyAndAnswersTheCurrentEpoch) {
  EXPECT_EQ(book_->current("t1", "r1").value(), std::nullopt);
  EXPECT_EQ(book_->renew("t1", "r1", 3).value(), 3);
  EXPECT_EQ(book_->renew("t1", "r1", 2).value(), 3) << "a lower epoch changes nothing";
  EXPECT_EQ(book_->current("t1", "r1").value(), 3);
  EXPECT_EQ(book_->renew("t1", "r1", 3).value(), 3);
  EXPECT_EQ(book_->renew("t1", "r1", 9).value(), 9);
  EXPECT_EQ(book_->current("t1", "r1").value(), 9);
  constexpr std::int64_t kLargest = std::numeric_limits<std::int64_t>::max();
  EXPECT_EQ(book_->renew("t1", "r1", kLargest).value(), kLargest);
  EXPECT_EQ(book_->renew("t1", "r2", 0).value(), 0);
  EXPECT_EQ(book_->current("t1", "r2").value(), 0);
}

TEST_P(LeaseBookSuite, ARunIsATenantsRunOfThatId) {
  ASSERT_EQ(book_->renew("tenant-a", "run-1", 5).value(), 5);
  EXPECT_EQ(book_->current("tenant-b", "run-1").value(), std::nullopt);
  EXPECT_EQ(book_->renew("tenant-b", "run-1", 1).value(), 1) << "not tenant-a's 5";
  const auto stale = book_->stale(
      {lease("tenant-b", "run-1", 1, envId(1)), lease("tenant-a", "run-1", 1, envId(2))});
  ASSERT_TRUE(stale.has_value()) << stale.error().message();
  EXPECT_EQ(*stale, std::vector<std::string>{envId(2)});
}

TEST_P(LeaseBookSuite, StaleNamesExactlyTheLeasesOfAnOlderEpochInTheOrderAsked) {
  ASSERT_TRUE(book_->renew("t1", "r1", 4));
  ASSERT_TRUE(book_->renew("t1", "r2", 1));
  const std::vector<LiveLease> asked = {
      lease("t1", "r1", 3, envId(1)),  // older: stale
      lease("t1", "r1", 4, envId(2)),  // current
      lease("t1", "r2", 1, envId(3)),  // current
      lease("t1", "r3", 0, envId(4)),  // a run never renewed: not stale
      lease("t1", "r2", 7, envId(5)),  // newer than the book knows: not stale
      lease("t1", "r1", 0, envId(6)),  // older: stale
  };
  const auto stale = book_->stale(asked);
  ASSERT_TRUE(stale.has_value()) << stale.error().message();
  EXPECT_EQ(*stale, (std::vector<std::string>{envId(1), envId(6)}));
  EXPECT_EQ(book_->stale({}).value(), std::vector<std::string>{});
}

TEST_P(LeaseBookSuite, AQuestionOfThousandsOfLeasesIsAnsweredWhole) {
  std::vector<LiveLease> asked;
  std::vector<std::string> expected;
  for (int i = 0; i < 2500; ++i) {
    const std::string run = "run-" + std::to_string(i % 50);
    if (i < 50) {
      ASSERT_TRUE(book_->renew("t1", run, 10));
    }
    const std::int64_t epoch = i % 3 == 0 ? 9 : 10;
    asked.push_back(lease("t1", run, epoch, envId(i)));
    if (epoch == 9) expected.push_back(envId(i));
  }
  const auto stale = book_->stale(asked);
  ASSERT_TRUE(stale.has_value()) << stale.error().message();
  EXPECT_EQ(*stale, expected);
}

TEST_P(LeaseBookSuite, AReopenedBookForgetsNothing) {
  ASSERT_TRUE(book_->renew("t1", "r1", 6));
  ASSERT_TRUE(book_->renew("t2", "r1", 2));
  book_.reset();  // the gateway stops: its connection is closed
  const std::shared_ptr<LeaseBook> reopened = openBook();
  EXPECT_EQ(reopened->current("t1", "r1").value(), 6);
  EXPECT_EQ(reopened->current("t2", "r1").value(), 2);
  const auto stale =
      reopened->stale({lease("t1", "r1", 5, envId(1)), lease("t1", "r1", 6, envId(2)),
                       lease("t2", "r1", 1, envId(3))});
  ASSERT_TRUE(stale.has_value()) << stale.error().message();
  EXPECT_EQ(*stale, (std::vector<std::string>{envId(1), envId(3)}));
  EXPECT_EQ(reopened->renew("t1", "r1", 5).value(), 6) << "still forward only";
}

TEST_P(LeaseBookSuite, TwoConnectionsRenewingAtOnceNeverMoveALeaseBack) {
  constexpr int kRuns = 4;
  constexpr int kEpochs = 150;
  const std::shared_ptr<LeaseBook> other = openBook();
  // Each gateway renews every epoch of every run in its own random order,
  // and checks what it is answered against what it saw before.
  auto gateway = [&](const std::shared_ptr<LeaseBook>& book, unsigned seed, std::string* failure) {
    std::vector<std::pair<int, std::int64_t>> renewals;
    for (int run = 0; run < kRuns; ++run)
      for (std::int64_t epoch = 1; epoch <= kEpochs; ++epoch) renewals.emplace_back(run, epoch);
    std::shuffle(renewals.begin(), renewals.end(), std::mt19937(seed));
    std::map<int, std::int64_t> seen;
    for (const auto& [run, epoch] : renewals) {
      auto current = book->renew("t1", "race-" + std::to_string(run), epoch);
      if (!current) {
        *failure = current.error().message();
        return;
      }
      if (*current < epoch || *current < seen[run]) {
        *failure = "run " + std::to_string(run) + " went back to " + std::to_string(*current) +
                   " after " + std::to_string(std::max(seen[run], epoch));
        return;
      }
      seen[run] = *current;
    }
  };
  std::string failure_a;
  std::string failure_b;
  std::thread a(gateway, book_, 1U, &failure_a);
  std::thread b(gateway, other, 2U, &failure_b);
  a.join();
  b.join();
  EXPECT_EQ(failure_a, "");
  EXPECT_EQ(failure_b, "");
  for (int run = 0; run < kRuns; ++run) {
    EXPECT_EQ(book_->current("t1", "race-" + std::to_string(run)).value(), kEpochs);
    EXPECT_EQ(other->current("t1", "race-" + std::to_string(run)).value(), kEpochs);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Books, LeaseBookSuite,
    ::testing::Values(BackendFactory{"Memory", [] { return std::make_unique<MemoryBackend>(); }},
                      BackendFactory{"Sqlite", [] { return std::make_unique<SqliteBackend>(); }},
                      BackendFactory{"Postgres",
                                     [] { return std::make_unique<PostgresBackend>(); }}),
    [](const auto& info) { return info.param.name; });

TEST(LeaseBook, AnUnreachablePostgresIsUnavailableWithoutTheConnectionString) {
  auto book = openPostgresLeaseBook(
      "host=/nonexistent-airlock-socket-dir port=5432 user=u password=s3cr3t-value dbname=x");
  ASSERT_FALSE(book.has_value());
  EXPECT_EQ(book.error().code, ErrorCode::kExecutionUnavailable);
  EXPECT_EQ(book.error().message().find("s3cr3t-value"), std::string::npos);
}

}  // namespace
}  // namespace airlock::gateway
