// The metadata repository contract (spec 000 "Artifacts": ArtifactMetadata
// in a real database; "Retention": deletion by expires_at). Runs unchanged
// against SQLite and a real PostgreSQL server.
#include "metadata_suite.h"

#include <atomic>
#include <thread>
#include <vector>

#include "airlock/artifacts/sqlite_repository.h"  // kArtifactSchemaVersion
#include "airlock/sys/sha256.h"
#include "artifact_test_support.h"

namespace airlock::artifacts::testing {

void MetadataRepositoryTest::SetUp() {
  backend_ = GetParam().make();
  ASSERT_NE(backend_, nullptr);
  auto repo = backend_->open();
  ASSERT_TRUE(repo.has_value()) << repo.error().message();
  repo_ = std::move(*repo);
}

namespace {

// A row with every field set from `n` so rows differ in each column.
StoredArtifact rowFor(int n, const TenantId& tenant_id, std::optional<std::int64_t> expires_ms,
                      std::int64_t size = 10) {
  const auto created = at(1'700'000'000'000 + n);
  ArtifactMetadata m{tenant_id,
                     "run-" + std::to_string(n),
                     ArtifactOrigin::kSandboxExport,
                     "file-" + std::to_string(n) + ".txt",
                     "text/plain",
                     size,
                     sys::sha256Hex(std::to_string(n)),
                     TrustLevel::kExternalUntrusted,
                     created,
                     std::nullopt};
  if (expires_ms) m.expires_at = at(*expires_ms);
  return StoredArtifact{ArtifactId::generate(created), std::move(m)};
}

std::vector<std::string> idsOf(const std::vector<StoredArtifact>& rows) {
  std::vector<std::string> out;
  for (const auto& r : rows) out.push_back(r.artifact_id.str());
  return out;
}

TEST_P(MetadataRepositoryTest, InsertThenFindReturnsEveryFieldExactly) {
  std::vector<StoredArtifact> rows;
  const ArtifactOrigin origins[] = {
      ArtifactOrigin::kSandboxExport,    ArtifactOrigin::kToolOutput,
      ArtifactOrigin::kModelOutput,      ArtifactOrigin::kUpload,
      ArtifactOrigin::kTrajectoryExport, ArtifactOrigin::kKnowledgeSource};
  for (int i = 0; i < 6; ++i) {
    auto row = rowFor(i, tenant("t1"), 1'800'000'000'000 + i);
    row.metadata.origin = origins[i];
    row.metadata.trust = i % 2 ? TrustLevel::kInternalTool : TrustLevel::kExternalUntrusted;
    rows.push_back(row);
  }
  // Filenames are raw bytes: not UTF-8, a traversal, empty; no run; no expiry.
  rows[0].metadata.filename = std::string("caf\xe9 \xff\xfe.txt");
  rows[1].metadata.filename = "../../etc/passwd";
  rows[2].metadata.filename = "";
  rows[3].metadata.run_id = std::nullopt;
  rows[5].metadata.expires_at = std::nullopt;
  // Sizes past 31 and 32 bits (red-team case B48), and a media type with parameters.
  rows[4].metadata.size_bytes = (std::int64_t{4} << 30) + 1;
  rows[4].metadata.media_type = "text/plain; charset=utf-8";
  for (const auto& row : rows) {
    auto inserted = repo_->insert(row, std::nullopt);
    ASSERT_TRUE(inserted.has_value()) << inserted.error().message();
  }
  for (const auto& row : rows) {
    auto found = repo_->find(row.artifact_id);
    ASSERT_TRUE(found.has_value()) << found.error().message();
    EXPECT_EQ(*found, row);
  }
}

TEST_P(MetadataRepositoryTest, FindOfAnUnknownIdIsNotFound) {
  auto found = repo_->find(ArtifactId::generate(at(5)));
  ASSERT_FALSE(found.has_value());
  EXPECT_EQ(found.error().code, ErrorCode::kNotFound);
}

TEST_P(MetadataRepositoryTest, DuplicateIdIsRejectedAndTheFirstRowKept) {
  auto first = rowFor(1, tenant(), std::nullopt);
  ASSERT_TRUE(repo_->insert(first, std::nullopt).has_value());
  auto second = rowFor(2, tenant(), std::nullopt);
  second.artifact_id = first.artifact_id;
  auto again = repo_->insert(second, std::nullopt);
  ASSERT_FALSE(again.has_value());
  EXPECT_EQ(again.error().code, ErrorCode::kExecutionRejected);
  EXPECT_EQ(*repo_->find(first.artifact_id), first);
}

TEST_P(MetadataRepositoryTest, RemoveSaysWhetherARowWasDeleted) {
  auto row = rowFor(1, tenant(), std::nullopt);
  ASSERT_TRUE(repo_->insert(row, std::nullopt).has_value());
  auto removed = repo_->remove(row.artifact_id);
  ASSERT_TRUE(removed.has_value()) << removed.error().message();
  EXPECT_TRUE(*removed);
  EXPECT_EQ(repo_->find(row.artifact_id).error().code, ErrorCode::kNotFound);
  EXPECT_FALSE(*repo_->remove(row.artifact_id));
}

TEST_P(MetadataRepositoryTest, ListExpiredSelectsByExpiresAtOnlyInExpiryOrder) {
  const std::int64_t now = 1'800'000'000'000;
  auto late = rowFor(1, tenant("a"), now - 10);
  auto early = rowFor(2, tenant("b"), now - 1000);
  auto boundary = rowFor(3, tenant("a"), now);
  auto future = rowFor(4, tenant("a"), now + 1);
  auto forever = rowFor(5, tenant("a"), std::nullopt);
  for (const auto& r : {late, early, boundary, future, forever})
    ASSERT_TRUE(repo_->insert(r, std::nullopt).has_value());
  auto expired = repo_->listExpired(at(now), 100);
  ASSERT_TRUE(expired.has_value()) << expired.error().message();
  EXPECT_EQ(idsOf(*expired),
            (std::vector<std::string>{early.artifact_id.str(), late.artifact_id.str(),
                                      boundary.artifact_id.str()}));
  auto limited = repo_->listExpired(at(now), 2);
  ASSERT_TRUE(limited.has_value());
  EXPECT_EQ(idsOf(*limited),
            (std::vector<std::string>{early.artifact_id.str(), late.artifact_id.str()}));
  EXPECT_TRUE(repo_->listExpired(at(now - 2000), 100)->empty());
}

TEST_P(MetadataRepositoryTest, ListForTenantIsInIdOrderAndOnlyThatTenant) {
  std::vector<StoredArtifact> mine;
  for (int i = 0; i < 5; ++i) {
    mine.push_back(rowFor(i, tenant("mine"), std::nullopt));
    ASSERT_TRUE(repo_->insert(rowFor(100 + i, tenant("other"), std::nullopt), std::nullopt));
  }
  for (int i = 4; i >= 0; --i) ASSERT_TRUE(repo_->insert(mine[i], std::nullopt).has_value());
  auto listed = repo_->listForTenant(tenant("mine"), 100);
  ASSERT_TRUE(listed.has_value()) << listed.error().message();
  EXPECT_EQ(*listed, mine);  // generated ids are time-ordered
  auto limited = repo_->listForTenant(tenant("mine"), 2);
  ASSERT_TRUE(limited.has_value());
  EXPECT_EQ(limited->size(), 2u);
  EXPECT_TRUE(repo_->listForTenant(tenant("nobody"), 10)->empty());
}

// A run's rows, newest first (created_at, then id), only the tenant's: the
// same run id under another tenant is another run.
TEST_P(MetadataRepositoryTest, ListForRunIsNewestFirstAndOnlyThatTenantsRun) {
  std::vector<StoredArtifact> run;  // oldest first
  for (int i = 0; i < 4; ++i) {
    StoredArtifact row = rowFor(i, tenant("mine"), std::nullopt);
    row.metadata.run_id = "run-x";
    run.push_back(row);
  }
  // Two made in one millisecond: the larger id is listed first.
  StoredArtifact twin = rowFor(3, tenant("mine"), std::nullopt);
  twin.metadata.run_id = "run-x";
  run.push_back(twin);
  StoredArtifact foreign = rowFor(9, tenant("other"), std::nullopt);
  foreign.metadata.run_id = "run-x";
  StoredArtifact elsewhere = rowFor(8, tenant("mine"), std::nullopt);  // run-8
  for (const auto& row : {run[2], foreign, run[0], run[4], elsewhere, run[3], run[1]})
    ASSERT_TRUE(repo_->insert(row, std::nullopt).has_value());
  std::vector<StoredArtifact> newest = {run[4], run[3]};
  if (run[4].artifact_id < run[3].artifact_id) std::swap(newest[0], newest[1]);
  newest.push_back(run[2]);
  newest.push_back(run[1]);
  newest.push_back(run[0]);

  auto listed = repo_->listForRun(tenant("mine"), "run-x", 100);
  ASSERT_TRUE(listed.has_value()) << listed.error().message();
  EXPECT_EQ(idsOf(*listed), idsOf(newest));
  EXPECT_EQ(*listed, newest) << "every field comes back";
  auto limited = repo_->listForRun(tenant("mine"), "run-x", 2);
  ASSERT_TRUE(limited.has_value());
  EXPECT_EQ(idsOf(*limited), idsOf({newest[0], newest[1]}));
  auto theirs = repo_->listForRun(tenant("other"), "run-x", 100);
  ASSERT_TRUE(theirs.has_value());
  EXPECT_EQ(idsOf(*theirs), idsOf({foreign}));
  EXPECT_TRUE(repo_->listForRun(tenant("nobody"), "run-x", 10)->empty());
  EXPECT_TRUE(repo_->listForRun(tenant("mine"), "run-y", 10)->empty());
}

TEST_P(MetadataRepositoryTest, TenantBytesSumsThatTenantsRows) {
  EXPECT_EQ(*repo_->tenantBytes(tenant("a")), 0);
  ASSERT_TRUE(repo_->insert(rowFor(1, tenant("a"), std::nullopt, std::int64_t{3} << 32), {}));
  ASSERT_TRUE(repo_->insert(rowFor(2, tenant("a"), std::nullopt, 7), {}));
  ASSERT_TRUE(repo_->insert(rowFor(3, tenant("b"), std::nullopt, 100), {}));
  EXPECT_EQ(*repo_->tenantBytes(tenant("a")), (std::int64_t{3} << 32) + 7);
  EXPECT_EQ(*repo_->tenantBytes(tenant("b")), 100);
}

TEST_P(MetadataRepositoryTest, TenantCapIsCheckedWithTheInsert) {
  ASSERT_TRUE(repo_->insert(rowFor(1, tenant("a"), std::nullopt, 60), 100).has_value());
  auto over = repo_->insert(rowFor(2, tenant("a"), std::nullopt, 41), 100);
  ASSERT_FALSE(over.has_value());
  EXPECT_EQ(over.error().code, ErrorCode::kExecutionRejected);
  EXPECT_TRUE(repo_->insert(rowFor(3, tenant("a"), std::nullopt, 40), 100).has_value());
  EXPECT_TRUE(repo_->insert(rowFor(4, tenant("b"), std::nullopt, 100), 100).has_value());
  EXPECT_TRUE(repo_->insert(rowFor(5, tenant("a"), std::nullopt, 5), std::nullopt).has_value());
  EXPECT_EQ(*repo_->tenantBytes(tenant("a")), 105);
  EXPECT_EQ(repo_->listForTenant(tenant("a"), 10)->size(), 3u);
}

// Two connections inserting for one tenant at once: the cap holds exactly.
TEST_P(MetadataRepositoryTest, ConcurrentInsertsCannotBothPassTheCap) {
  constexpr int kCap = 30;
  constexpr int kPerThread = 25;
  auto second = backend_->open();
  ASSERT_TRUE(second.has_value()) << second.error().message();
  std::atomic<int> accepted{0};
  std::atomic<int> other_errors{0};
  auto worker = [&](ArtifactRepository* repo, int base) {
    for (int i = 0; i < kPerThread; ++i) {
      auto r = repo->insert(rowFor(base + i, tenant("race"), std::nullopt, 1), kCap);
      if (r) {
        ++accepted;
      } else if (r.error().code != ErrorCode::kExecutionRejected) {
        ++other_errors;
      }
    }
  };
  std::thread a(worker, repo_.get(), 0);
  std::thread b(worker, second->get(), 1000);
  a.join();
  b.join();
  EXPECT_EQ(other_errors.load(), 0);
  EXPECT_EQ(accepted.load(), kCap);
  EXPECT_EQ(*repo_->tenantBytes(tenant("race")), kCap);
}

TEST_P(MetadataRepositoryTest, RowsSurviveReconnectAndMigrationRunsOnce) {
  auto row = rowFor(1, tenant(), 1'900'000'000'000);
  ASSERT_TRUE(repo_->insert(row, std::nullopt).has_value());
  repo_.reset();
  auto again = backend_->open();
  ASSERT_TRUE(again.has_value()) << again.error().message();
  EXPECT_EQ(*(*again)->find(row.artifact_id), row);
  auto version = backend_->schemaVersion();
  ASSERT_TRUE(version.has_value()) << version.error().message();
  EXPECT_EQ(*version, kArtifactSchemaVersion);
}

// --- notes (spec 001, "Durable code-mode notes") ---------------------------

RunNote noteFor(std::string key, std::string value_json,
                std::int64_t expires_ms = 1'900'000'000'000) {
  return RunNote{std::move(key), std::move(value_json), "env-1", at(1'700'000'000'123),
                 at(expires_ms)};
}

std::vector<std::string> keysOf(const std::vector<RunNote>& notes) {
  std::vector<std::string> out;
  for (const auto& n : notes) out.push_back(n.key);
  return out;
}

TEST_P(MetadataRepositoryTest, ANoteIsPutReplacedAndFoundByTenantRunAndKey) {
  const RunNote first = noteFor("plan", R"({"step": 1})");
  ASSERT_TRUE(repo_->putNote("t1", "r1", first).has_value());
  auto found = repo_->findNote("t1", "r1", "plan");
  ASSERT_TRUE(found.has_value()) << found.error().message();
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ(**found, first);

  RunNote second = noteFor("plan", R"([1, 2.5, "x", null, true])");
  second.written_by = "env-2";
  second.updated_at = at(1'700'000'000'999);
  ASSERT_TRUE(repo_->putNote("t1", "r1", second).has_value());
  EXPECT_EQ(repo_->findNote("t1", "r1", "plan")->value(), second) << "a put replaces the note";

  EXPECT_FALSE(repo_->findNote("t2", "r1", "plan")->has_value()) << "another tenant's run";
  EXPECT_FALSE(repo_->findNote("t1", "r2", "plan")->has_value()) << "another run";
  EXPECT_FALSE(repo_->findNote("t1", "r1", "Plan")->has_value());
  ASSERT_TRUE(repo_->putNote("t1", "r1", noteFor("other", "0")).has_value());
  ASSERT_TRUE(repo_->putNote("t1", "r2", noteFor("plan", "0")).has_value());
  EXPECT_EQ(repo_->countNotes("t1", "r1").value_or(-1), 2);
  EXPECT_EQ(repo_->countNotes("t2", "r1").value_or(-1), 0);
}

TEST_P(MetadataRepositoryTest, NotesAreListedByPrefixInBytewiseKeyOrder) {
  for (const char* key : {"b", "a/2", "a/10", "a", "ab", "\xc3\xa9t\xc3\xa9", "B"})
    ASSERT_TRUE(repo_->putNote("t1", "r1", noteFor(key, "1")).has_value());
  ASSERT_TRUE(repo_->putNote("t1", "r2", noteFor("a/3", "1")).has_value());
  ASSERT_TRUE(repo_->putNote("t2", "r1", noteFor("a/4", "1")).has_value());
  auto all = repo_->listNotes("t1", "r1", "", 100);
  ASSERT_TRUE(all.has_value()) << all.error().message();
  EXPECT_EQ(keysOf(*all),
            (std::vector<std::string>{"B", "a", "a/10", "a/2", "ab", "b", "\xc3\xa9t\xc3\xa9"}));
  EXPECT_EQ(keysOf(*repo_->listNotes("t1", "r1", "a/", 100)),
            (std::vector<std::string>{"a/10", "a/2"}));
  EXPECT_EQ(keysOf(*repo_->listNotes("t1", "r1", "a", 2)), (std::vector<std::string>{"a", "a/10"}));
  EXPECT_EQ(keysOf(*repo_->listNotes("t1", "r1", "\xc3\xa9", 100)),
            (std::vector<std::string>{"\xc3\xa9t\xc3\xa9"}));
  EXPECT_TRUE(repo_->listNotes("t1", "r1", "z", 100)->empty());
  EXPECT_TRUE(repo_->listNotes("t1", "r1", "a%", 100)->empty()) << "no pattern characters";
}

TEST_P(MetadataRepositoryTest, ExpiredNotesAreRemovedAndTheRestSurviveReconnect) {
  ASSERT_TRUE(repo_->putNote("t1", "r1", noteFor("old", "1", 1'800'000'000'000)).has_value());
  ASSERT_TRUE(repo_->putNote("t1", "r1", noteFor("new", "2", 1'900'000'000'000)).has_value());
  auto removed = repo_->removeExpiredNotes(at(1'800'000'000'000));
  ASSERT_TRUE(removed.has_value()) << removed.error().message();
  EXPECT_EQ(*removed, 1);
  repo_.reset();
  auto again = backend_->open();
  ASSERT_TRUE(again.has_value()) << again.error().message();
  EXPECT_FALSE((*again)->findNote("t1", "r1", "old")->has_value());
  EXPECT_EQ((*again)->findNote("t1", "r1", "new")->value().value_json, "2");
}

}  // namespace
}  // namespace airlock::artifacts::testing
