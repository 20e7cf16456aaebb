// Retention (spec 000 "Retention"): expiry defaults, and the sweeper
// deleting expired objects and rows by expires_at only.
#include "airlock/artifacts/retention.h"

#include <fcntl.h>
#include <gtest/gtest.h>

#include <set>

#include "airlock/artifacts/filesystem_store.h"
#include "airlock/artifacts/sqlite_repository.h"
#include "airlock/artifacts/storage_key.h"
#include "artifact_test_support.h"
#include "test_tree.h"

namespace airlock::artifacts {
namespace {

using namespace testing;  // NOLINT
using workspace::testing::TempDir;

constexpr std::int64_t kT0 = 1'700'000'000'000;

TEST(ExpiresAtFor, DefaultsAreThirtyDaysADayForUnclaimedUploadsAndNeverForKnowledge) {
  const RetentionSettings settings;
  const Timestamp created = at(kT0);
  EXPECT_EQ(settings.retention, std::chrono::hours(720));
  EXPECT_EQ(expiresAtFor(ArtifactOrigin::kSandboxExport, created, settings),
            created + std::chrono::hours(720));
  EXPECT_EQ(expiresAtFor(ArtifactOrigin::kToolOutput, created, settings),
            created + std::chrono::hours(720));
  EXPECT_EQ(expiresAtFor(ArtifactOrigin::kModelOutput, created, settings),
            created + std::chrono::hours(720));
  EXPECT_EQ(expiresAtFor(ArtifactOrigin::kTrajectoryExport, created, settings),
            created + std::chrono::hours(720));
  EXPECT_EQ(expiresAtFor(ArtifactOrigin::kUpload, created, settings),
            created + std::chrono::hours(24));
  EXPECT_EQ(expiresAtFor(ArtifactOrigin::kKnowledgeSource, created, settings), std::nullopt);
  RetentionSettings week;
  week.retention = std::chrono::hours(24 * 7);
  EXPECT_EQ(expiresAtFor(ArtifactOrigin::kSandboxExport, created, week),
            created + std::chrono::hours(168));
}

// A store that fails remove() for one id and forwards the rest.
class FlakyStore final : public ArtifactStore {
 public:
  FlakyStore(ArtifactStore& inner, std::optional<ArtifactId> broken)
      : inner_(inner), broken_(std::move(broken)) {}
  Result<ArtifactRef> put(ByteSource& s, const ArtifactMetadata& m) override {
    return inner_.put(s, m);
  }
  Result<std::unique_ptr<ByteSource>> open(const ArtifactRef& r) override { return inner_.open(r); }
  Result<bool> remove(const ArtifactId& id) override {
    if (broken_ && id == *broken_) return fail(ErrorCode::kExecutionUnavailable, "disk on fire");
    return inner_.remove(id);
  }

 private:
  ArtifactStore& inner_;
  std::optional<ArtifactId> broken_;
};

class SweeperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto repo = SqliteArtifactRepository::open(db_dir_.path() + "/artifacts.db");
    ASSERT_TRUE(repo.has_value()) << repo.error().message();
    repo_ = std::shared_ptr<ArtifactRepository>(std::move(*repo));
    FilesystemStoreOptions options;
    options.clock = [this] { return now_; };
    auto store = FilesystemArtifactStore::create(
        sys::UniqueFd(::openat(dir_.fd(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)), repo_,
        options);
    ASSERT_TRUE(store.has_value()) << store.error().message();
    store_ = std::move(*store);
  }

  // Puts `bytes` created at now_ with the given origin's default expiry.
  ArtifactRef put(const std::string& bytes, ArtifactOrigin origin, const std::string& t = "local") {
    auto metadata = metadataFor(bytes, tenant(t), now_);
    metadata.origin = origin;
    metadata.expires_at = expiresAtFor(origin, now_, settings_);
    StringSource source(bytes);
    auto ref = store_->put(source, metadata);
    EXPECT_TRUE(ref.has_value()) << ref.error().message();
    return *ref;
  }

  std::size_t objectCount() {
    std::size_t n = 0;
    for (const auto& [path, kind] : treeOf(dir_.fd()))
      if (kind != "d") ++n;
    return n;
  }

  TempDir dir_;
  TempDir db_dir_;
  Timestamp now_ = at(kT0);
  RetentionSettings settings_;
  std::shared_ptr<ArtifactRepository> repo_;
  std::unique_ptr<FilesystemArtifactStore> store_;
};

TEST_F(SweeperTest, DeletesExactlyTheExpiredObjectsAndRows) {
  auto upload = put("upload", ArtifactOrigin::kUpload);                 // expires T0+1d
  auto export1 = put("export-one", ArtifactOrigin::kSandboxExport);     // T0+30d
  auto knowledge = put("knowledge", ArtifactOrigin::kKnowledgeSource);  // never
  now_ += std::chrono::hours(24 * 10);
  auto export2 = put("export-two", ArtifactOrigin::kSandboxExport);  // T0+40d
  ASSERT_EQ(objectCount(), 4u);

  RetentionSweeper sweeper(*store_, *repo_, [this] { return now_; });
  // Day 10: only the upload has expired.
  auto report = sweeper.sweepOnce();
  ASSERT_TRUE(report.has_value()) << report.error().message();
  EXPECT_EQ(report->artifacts_deleted, 1);
  EXPECT_EQ(report->bytes_deleted, 6);
  EXPECT_EQ(store_->open(upload).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(objectCount(), 3u);

  // Exactly at T0+30d the first export's expires_at is reached.
  now_ = at(kT0) + std::chrono::hours(24 * 30);
  report = sweeper.sweepOnce();
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->artifacts_deleted, 1);
  EXPECT_EQ(store_->open(export1).error().code, ErrorCode::kNotFound);
  EXPECT_TRUE(store_->open(export2).has_value());

  // Years later only the artifact without expires_at remains.
  now_ = at(kT0) + std::chrono::hours(24 * 3650);
  report = sweeper.sweepOnce();
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->artifacts_deleted, 1);
  EXPECT_EQ(objectCount(), 1u);
  auto stream = store_->open(knowledge);
  ASSERT_TRUE(stream.has_value());
  EXPECT_EQ(*readAll(**stream, 100), "knowledge");
  EXPECT_EQ(repo_->listForTenant(tenant(), 100)->size(), 1u);
}

TEST_F(SweeperTest, SweepsMoreThanOneBatch) {
  for (int i = 0; i < 7; ++i) put("bytes-" + std::to_string(i), ArtifactOrigin::kToolOutput);
  now_ += std::chrono::hours(24 * 31);
  RetentionSweeper sweeper(
      *store_, *repo_, [this] { return now_; }, 2);
  auto report = sweeper.sweepOnce();
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->artifacts_deleted, 7);
  EXPECT_EQ(objectCount(), 0u);
  EXPECT_TRUE(repo_->listForTenant(tenant(), 100)->empty());
}

TEST_F(SweeperTest, AFailedRemovalIsCountedAndDoesNotStopTheRest) {
  auto stuck = put("stuck", ArtifactOrigin::kToolOutput);
  for (int i = 0; i < 4; ++i) put("other-" + std::to_string(i), ArtifactOrigin::kToolOutput);
  now_ += std::chrono::hours(24 * 31);
  FlakyStore flaky(*store_, stuck.artifact_id);
  RetentionSweeper sweeper(
      flaky, *repo_, [this] { return now_; }, 2);
  auto report = sweeper.sweepOnce();
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->artifacts_deleted, 4);
  EXPECT_EQ(report->failures, 1);
  EXPECT_EQ(objectCount(), 1u);
  // The next sweep, with the fault gone, finishes the job.
  RetentionSweeper healthy(*store_, *repo_, [this] { return now_; });
  EXPECT_EQ(healthy.sweepOnce()->artifacts_deleted, 1);
  EXPECT_EQ(objectCount(), 0u);
}

}  // namespace
}  // namespace airlock::artifacts
