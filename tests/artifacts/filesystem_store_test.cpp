// The filesystem ArtifactStore (spec 000 "ArtifactStore";
// red-team case B48): verified streaming put, the size cap mid-stream, nothing
// left behind by any failure, open re-hashing, remove, recovery.
#include "airlock/artifacts/filesystem_store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "airlock/artifacts/memory_repository.h"
#include "airlock/artifacts/storage_key.h"
#include "airlock/sys/sha256.h"
#include "artifact_test_support.h"
#include "test_tree.h"

namespace airlock::artifacts {
namespace {

using namespace testing;  // NOLINT
using workspace::testing::TempDir;

// A repository whose insert fails, to show a failed row commit takes the
// object back out.
class FailingInsertRepository final : public ArtifactRepository {
 public:
  Result<void> insert(const StoredArtifact&, std::optional<std::int64_t>) override {
    return fail(ErrorCode::kExecutionUnavailable, "database is down");
  }
  Result<StoredArtifact> find(const ArtifactId& id) override { return inner.find(id); }
  Result<bool> remove(const ArtifactId& id) override { return inner.remove(id); }
  Result<std::vector<StoredArtifact>> listExpired(Timestamp now, std::size_t limit) override {
    return inner.listExpired(now, limit);
  }
  Result<std::vector<StoredArtifact>> listForTenant(const TenantId& t, std::size_t limit) override {
    return inner.listForTenant(t, limit);
  }
  Result<std::int64_t> tenantBytes(const TenantId& t) override { return inner.tenantBytes(t); }
  MemoryArtifactRepository inner;
};

class FilesystemStoreTest : public ::testing::TestWithParam<TempFileMode> {
 protected:
  std::unique_ptr<FilesystemArtifactStore> makeStore(
      FilesystemStoreOptions options = {},
      std::shared_ptr<ArtifactRepository> repository = nullptr) {
    options.temp_mode = GetParam();
    auto store = FilesystemArtifactStore::create(
        sys::UniqueFd(::openat(dir_.fd(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)),
        repository ? repository : repo_, options);
    EXPECT_TRUE(store.has_value()) << store.error().message();
    return std::move(*store);
  }

  // Everything under the store root except the two fixed directories.
  std::map<std::string, std::string> contents() {
    auto tree = treeOf(dir_.fd());
    tree.erase("tmp");
    tree.erase("objects");
    return tree;
  }
  std::map<std::string, std::string> files() {
    auto tree = contents();
    std::erase_if(tree, [](const auto& kv) { return kv.second == "d"; });
    return tree;
  }

  TempDir dir_;
  std::shared_ptr<MemoryArtifactRepository> repo_ = std::make_shared<MemoryArtifactRepository>();
};

TEST_P(FilesystemStoreTest, PutThenOpenReturnsTheSameBytesAcrossManyBuffers) {
  auto store = makeStore();
  const std::string bytes = randomBytes(3 * kStreamBufferBytes + 17, 1);
  const auto metadata = metadataFor(bytes, tenant());
  CountingSource source(bytes, 5000);
  auto ref = store->put(source, metadata);
  ASSERT_TRUE(ref.has_value()) << ref.error().message();
  EXPECT_EQ(ref->sha256, sys::sha256Hex(bytes));
  EXPECT_EQ(ref->size_bytes, static_cast<std::int64_t>(bytes.size()));
  EXPECT_EQ(ref->media_type, "text/plain");

  auto stream = store->open(*ref);
  ASSERT_TRUE(stream.has_value()) << stream.error().message();
  auto back = readAll(**stream, 1 << 30);
  ASSERT_TRUE(back.has_value()) << back.error().message();
  EXPECT_TRUE(*back == bytes);

  auto row = repo_->find(ref->artifact_id);
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(row->metadata, metadata);
}

TEST_P(FilesystemStoreTest, ObjectLivesAtItsKeyWithMode0600AndNothingElseRemains) {
  auto store = makeStore();
  const std::string bytes = "hello";
  auto ref = store->put(*std::make_unique<StringSource>(bytes), metadataFor(bytes, tenant("t1")));
  ASSERT_TRUE(ref.has_value()) << ref.error().message();
  const auto key = storageKey(tenant("t1"), ref->artifact_id);
  const std::string object = "objects/" + key.str();
  EXPECT_EQ(files(), (std::map<std::string, std::string>{{object, "f:" + sys::sha256Hex(bytes)}}));
  struct stat st {};
  ASSERT_EQ(::fstatat(dir_.fd(), object.c_str(), &st, AT_SYMLINK_NOFOLLOW), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_nlink, 1u);
}

TEST_P(FilesystemStoreTest, EmptyArtifactRoundTrips) {
  auto store = makeStore();
  StringSource source("");
  auto ref = store->put(source, metadataFor("", tenant()));
  ASSERT_TRUE(ref.has_value()) << ref.error().message();
  auto stream = store->open(*ref);
  ASSERT_TRUE(stream.has_value());
  auto back = readAll(**stream, 10);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, "");
}

TEST_P(FilesystemStoreTest, IdsAreUuidV7FromTheClock) {
  FilesystemStoreOptions options;
  options.clock = [] { return at(1'700'000'000'000); };
  auto store = makeStore(options);
  StringSource source("x");
  auto ref = store->put(source, metadataFor("x", tenant()));
  ASSERT_TRUE(ref.has_value());
  const std::string& id = ref->artifact_id.str();
  EXPECT_EQ(id[14], '7');
  // 1700000000000 ms = 0x018bcfe56800
  EXPECT_EQ(id.substr(0, 13), "018bcfe5-6800");
}

TEST_P(FilesystemStoreTest, DigestMismatchIsIntegrityErrorAndStoresNothing) {
  auto store = makeStore();
  const std::string bytes = randomBytes(2 * kStreamBufferBytes + 5, 2);
  auto metadata = metadataFor(bytes, tenant());
  metadata.sha256 = sys::sha256Hex("something else");
  StringSource source(bytes);
  auto ref = store->put(source, metadata);
  ASSERT_FALSE(ref.has_value());
  EXPECT_EQ(ref.error().code, ErrorCode::kArtifactIntegrityError);
  EXPECT_TRUE(contents().empty());
  EXPECT_EQ(*repo_->tenantBytes(tenant()), 0);
  EXPECT_TRUE(repo_->listForTenant(tenant(), 10)->empty());
}

TEST_P(FilesystemStoreTest, ShortStreamIsIntegrityErrorAndStoresNothing) {
  auto store = makeStore();
  const std::string bytes = randomBytes(1000, 3);
  StringSource source(bytes.substr(0, 999));
  auto ref = store->put(source, metadataFor(bytes, tenant()));
  ASSERT_FALSE(ref.has_value());
  EXPECT_EQ(ref.error().code, ErrorCode::kArtifactIntegrityError);
  EXPECT_TRUE(contents().empty());
}

TEST_P(FilesystemStoreTest, LongStreamStopsOneChunkPastTheDeclaredSize) {
  auto store = makeStore();
  const std::string declared = randomBytes(1000, 4);
  CountingSource source(declared + randomBytes(1'000'000, 5), 100);
  auto ref = store->put(source, metadataFor(declared, tenant()));
  ASSERT_FALSE(ref.has_value());
  EXPECT_EQ(ref.error().code, ErrorCode::kArtifactIntegrityError);
  EXPECT_LE(source.handed_out(), 1100u);  // abandoned, not drained
  EXPECT_TRUE(contents().empty());
}

TEST_P(FilesystemStoreTest, DeclaredSizeAboveTheCapIsRefusedBeforeReading) {
  FilesystemStoreOptions options;
  options.max_artifact_bytes = 4096;
  auto store = makeStore(options);
  const std::string bytes = randomBytes(4097, 6);
  CountingSource source(bytes, 1000);
  auto ref = store->put(source, metadataFor(bytes, tenant()));
  ASSERT_FALSE(ref.has_value());
  EXPECT_EQ(ref.error().code, ErrorCode::kExecutionRejected);
  EXPECT_NE(ref.error().context.find("size cap"), std::string::npos);
  EXPECT_EQ(source.reads(), 0);
  EXPECT_TRUE(contents().empty());
}

TEST_P(FilesystemStoreTest, StreamRunningPastTheCapIsAbandonedMidWrite) {
  FilesystemStoreOptions options;
  options.max_artifact_bytes = 4096;
  auto store = makeStore(options);
  const std::string declared = randomBytes(4096, 7);
  CountingSource source(declared + randomBytes(10 * 4096, 8), 512);
  auto ref = store->put(source, metadataFor(declared, tenant()));
  ASSERT_FALSE(ref.has_value());
  EXPECT_EQ(ref.error().code, ErrorCode::kExecutionRejected);
  EXPECT_LE(source.handed_out(), 4096u + 512u);
  EXPECT_TRUE(contents().empty());
}

TEST_P(FilesystemStoreTest, DefaultCapIs512MiB) {
  auto store = makeStore();
  EXPECT_EQ(store->options().max_artifact_bytes, std::int64_t{512} * 1024 * 1024);
  auto metadata = metadataFor("", tenant());
  metadata.size_bytes = std::int64_t{512} * 1024 * 1024 + 1;
  StringSource source("");
  auto ref = store->put(source, metadata);
  ASSERT_FALSE(ref.has_value());
  EXPECT_EQ(ref.error().code, ErrorCode::kExecutionRejected);
}

TEST_P(FilesystemStoreTest, ProducerErrorCancelsThePutAndStoresNothing) {
  auto store = makeStore();
  const std::string bytes = randomBytes(300'000, 9);
  CountingSource source(bytes, 10'000, 150'000);
  auto ref = store->put(source, metadataFor(bytes, tenant()));
  ASSERT_FALSE(ref.has_value());
  EXPECT_EQ(ref.error().context, "producer cancelled");
  EXPECT_TRUE(contents().empty());
}

TEST_P(FilesystemStoreTest, FailedRowInsertTakesTheObjectBackOut) {
  auto failing = std::make_shared<FailingInsertRepository>();
  auto store = makeStore({}, failing);
  StringSource source("bytes");
  auto ref = store->put(source, metadataFor("bytes", tenant()));
  ASSERT_FALSE(ref.has_value());
  EXPECT_EQ(ref.error().context, "database is down");
  EXPECT_TRUE(files().empty());
}

TEST_P(FilesystemStoreTest, InvalidMetadataIsRefusedBeforeReading) {
  auto store = makeStore();
  auto bad_sha = metadataFor("x", tenant());
  bad_sha.sha256 = std::string(64, 'A');
  auto negative = metadataFor("x", tenant());
  negative.size_bytes = -1;
  auto no_media = metadataFor("x", tenant());
  no_media.media_type = "";
  auto nul_name = metadataFor("x", tenant());
  nul_name.filename = std::string("a\0b", 3);
  auto expires_early = metadataFor("x", tenant());
  expires_early.expires_at = expires_early.created_at - std::chrono::milliseconds(1);
  for (const auto& m : {bad_sha, negative, no_media, nul_name, expires_early}) {
    CountingSource source("x", 1);
    auto ref = store->put(source, m);
    ASSERT_FALSE(ref.has_value());
    EXPECT_EQ(ref.error().code, ErrorCode::kToolValidationError);
    EXPECT_EQ(source.reads(), 0);
  }
  EXPECT_TRUE(contents().empty());
}

TEST_P(FilesystemStoreTest, TenantByteCapRefusesThePutThatWouldCrossIt) {
  FilesystemStoreOptions options;
  options.tenant_byte_cap = 10;
  auto store = makeStore(options);
  StringSource a("123456");
  ASSERT_TRUE(store->put(a, metadataFor("123456", tenant("a"))).has_value());
  StringSource b("12345");
  auto over = store->put(b, metadataFor("12345", tenant("a")));
  ASSERT_FALSE(over.has_value());
  EXPECT_EQ(over.error().code, ErrorCode::kExecutionRejected);
  StringSource c("1234");
  EXPECT_TRUE(store->put(c, metadataFor("1234", tenant("a"))).has_value());  // exactly 10
  StringSource d("12345");
  EXPECT_TRUE(store->put(d, metadataFor("12345", tenant("b"))).has_value());  // another tenant
  EXPECT_EQ(*repo_->tenantBytes(tenant("a")), 10);
  EXPECT_EQ(files().size(), 3u);
}

TEST_P(FilesystemStoreTest, OpenRefusesUnknownAndForgedRefs) {
  auto store = makeStore();
  StringSource source("abc");
  auto ref = store->put(source, metadataFor("abc", tenant()));
  ASSERT_TRUE(ref.has_value());
  auto unknown = *ref;
  unknown.artifact_id = ArtifactId::generate(at(1));
  EXPECT_EQ(store->open(unknown).error().code, ErrorCode::kNotFound);
  auto wrong_sha = *ref;
  wrong_sha.sha256 = sys::sha256Hex("abd");
  EXPECT_EQ(store->open(wrong_sha).error().code, ErrorCode::kNotFound);
  auto wrong_size = *ref;
  wrong_size.size_bytes = 4;
  EXPECT_EQ(store->open(wrong_size).error().code, ErrorCode::kNotFound);
}

TEST_P(FilesystemStoreTest, CorruptionAtRestFailsTheReadAtTheEnd) {
  auto store = makeStore();
  const std::string bytes = randomBytes(100'000, 10);
  StringSource source(bytes);
  auto ref = store->put(source, metadataFor(bytes, tenant()));
  ASSERT_TRUE(ref.has_value());
  const std::string object = "objects/" + storageKey(tenant(), ref->artifact_id).str();
  int fd = ::openat(dir_.fd(), object.c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, "!", 1, 50'000), 1);
  ::close(fd);
  auto stream = store->open(*ref);
  ASSERT_TRUE(stream.has_value());
  auto back = readAll(**stream, 1 << 20);
  ASSERT_FALSE(back.has_value());
  EXPECT_EQ(back.error().code, ErrorCode::kArtifactIntegrityError);
}

TEST_P(FilesystemStoreTest, RemoveDeletesRowAndObject) {
  auto store = makeStore();
  StringSource source("abc");
  auto ref = store->put(source, metadataFor("abc", tenant()));
  ASSERT_TRUE(ref.has_value());
  auto removed = store->remove(ref->artifact_id);
  ASSERT_TRUE(removed.has_value());
  EXPECT_TRUE(*removed);
  EXPECT_TRUE(files().empty());
  EXPECT_EQ(repo_->find(ref->artifact_id).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(store->open(*ref).error().code, ErrorCode::kNotFound);
  EXPECT_FALSE(*store->remove(ref->artifact_id));
}

TEST_P(FilesystemStoreTest, RecoverRemovesUnlockedTempFilesAndOrphansOnly) {
  auto store = makeStore();
  // A committed artifact stays.
  StringSource source("keep");
  auto kept = store->put(source, metadataFor("keep", tenant()));
  ASSERT_TRUE(kept.has_value());
  // A stale temporary file nobody holds, and one a live put holds.
  ASSERT_TRUE(workspace::testing::writeFileAt(dir_.fd(), "tmp/stale.part", "partial"));
  ASSERT_TRUE(workspace::testing::writeFileAt(dir_.fd(), "tmp/busy.part", "partial"));
  sys::UniqueFd busy(::openat(dir_.fd(), "tmp/busy.part", O_RDONLY | O_CLOEXEC));
  ASSERT_EQ(::flock(busy.get(), LOCK_EX), 0);
  // An object with no row (a crash between link and insert).
  const auto orphan_id = ArtifactId::generate(at(2));
  const auto key = storageKey(tenant(), orphan_id);
  ASSERT_TRUE(workspace::testing::mkdirs(dir_.fd(), "objects/" + key.tenant + "/" + key.shard));
  ASSERT_TRUE(workspace::testing::writeFileAt(dir_.fd(), "objects/" + key.str(), "orphan"));

  auto report = store->recover();
  ASSERT_TRUE(report.has_value()) << report.error().message();
  EXPECT_EQ(report->temp_files_removed, 1);
  EXPECT_EQ(report->orphan_objects_removed, 1);
  EXPECT_EQ(report->busy_skipped, 1);
  auto left = files();
  EXPECT_EQ(left.count("tmp/busy.part"), 1u);
  EXPECT_EQ(left.count("tmp/stale.part"), 0u);
  EXPECT_EQ(left.count("objects/" + key.str()), 0u);
  EXPECT_EQ(left.count("objects/" + storageKey(tenant(), kept->artifact_id).str()), 1u);
  auto stream = store->open(*kept);
  ASSERT_TRUE(stream.has_value());
  EXPECT_EQ(*readAll(**stream, 100), "keep");
}

TEST_P(FilesystemStoreTest, CreateRefusesNonPositiveCaps) {
  FilesystemStoreOptions options;
  options.max_artifact_bytes = 0;
  auto store = FilesystemArtifactStore::create(
      sys::UniqueFd(::openat(dir_.fd(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)), repo_, options);
  ASSERT_FALSE(store.has_value());
  EXPECT_EQ(store.error().code, ErrorCode::kConfigurationError);
}

INSTANTIATE_TEST_SUITE_P(TempModes, FilesystemStoreTest,
                         ::testing::Values(TempFileMode::kAuto, TempFileMode::kNamed),
                         [](const auto& info) {
                           return info.param == TempFileMode::kAuto ? "Auto" : "Named";
                         });

}  // namespace
}  // namespace airlock::artifacts
