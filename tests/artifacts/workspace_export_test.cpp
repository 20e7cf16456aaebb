// artifact_export of a workspace path and the ArtifactWriter capability
// (spec 000 "ArtifactWriter", "ArtifactStore"; red-team cases B05, B32).
#include "airlock/artifacts/workspace_export.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <type_traits>

#include "airlock/artifacts/artifact_writer.h"
#include "airlock/artifacts/filesystem_store.h"
#include "airlock/artifacts/memory_repository.h"
#include "airlock/sys/sha256.h"
#include "airlock/workspace/file_export.h"
#include "artifact_test_support.h"
#include "test_tree.h"

namespace airlock::artifacts {
namespace {

using namespace testing;  // NOLINT
using workspace::testing::TempDir;
using workspace::testing::writeFileAt;

// A tool's capability names no tenant, run, size, checksum or key.
static_assert(std::is_same_v<decltype(&ArtifactWriter::create),
                             Result<ArtifactRef> (ArtifactWriter::*)(MeasuredStream, std::string,
                                                                     std::string, TrustLevel)>);

class ExportTest : public ::testing::TestWithParam<workspace::ResolverKind> {
 protected:
  void SetUp() override {
    auto store = FilesystemArtifactStore::create(
        sys::UniqueFd(::openat(store_dir_.fd(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)), repo_);
    ASSERT_TRUE(store.has_value());
    store_ = std::move(*store);
    writer_ = makeArtifactWriter(
        *store_,
        ArtifactWriterScope{tenant("t1"), std::string("run-7"), ArtifactOrigin::kSandboxExport,
                            TrustLevel::kExternalUntrusted},
        {}, [] { return at(1'700'000'000'000); });
  }

  Result<ArtifactRef> exportPath(const std::string& path) {
    auto exported = asWorkspaceExport(
        workspace::openFileExport(ws_.fd(), path, kDefaultMaxArtifactBytes, GetParam()));
    if (!exported) return tl::unexpected(exported.error());
    return writer_->create(std::move(exported->stream), exported->filename,
                           "application/octet-stream", TrustLevel::kExternalUntrusted);
  }

  void expectNothingStored() {
    for (const auto& [path, kind] : treeOf(store_dir_.fd())) EXPECT_EQ(kind, "d") << path;
    EXPECT_TRUE(repo_->listForTenant(tenant("t1"), 10)->empty());
  }

  TempDir ws_;
  TempDir store_dir_;
  std::shared_ptr<MemoryArtifactRepository> repo_ = std::make_shared<MemoryArtifactRepository>();
  std::unique_ptr<FilesystemArtifactStore> store_;
  std::unique_ptr<ArtifactWriter> writer_;
};

TEST_P(ExportTest, FileLargerThanTheBufferRoundTripsWithMetadataFromTheScope) {
  const std::string bytes = randomBytes(5 * kStreamBufferBytes + 123, 11);
  ASSERT_TRUE(workspace::testing::mkdirs(ws_.fd(), "out"));
  ASSERT_TRUE(writeFileAt(ws_.fd(), "out/report.bin", bytes));
  auto ref = exportPath("out/report.bin");
  ASSERT_TRUE(ref.has_value()) << ref.error().message();
  EXPECT_EQ(ref->sha256, sys::sha256Hex(bytes));
  auto stream = store_->open(*ref);
  ASSERT_TRUE(stream.has_value());
  auto back = readAll(**stream, 1 << 30);
  ASSERT_TRUE(back.has_value());
  EXPECT_TRUE(*back == bytes);

  auto row = repo_->find(ref->artifact_id);
  ASSERT_TRUE(row.has_value());
  const ArtifactMetadata& m = row->metadata;
  EXPECT_EQ(m.tenant_id, tenant("t1"));
  EXPECT_EQ(m.run_id, "run-7");
  EXPECT_EQ(m.origin, ArtifactOrigin::kSandboxExport);
  EXPECT_EQ(m.filename, "report.bin");
  EXPECT_EQ(m.trust, TrustLevel::kExternalUntrusted);
  EXPECT_EQ(m.created_at, at(1'700'000'000'000));
  EXPECT_EQ(m.expires_at, at(1'700'000'000'000) + std::chrono::hours(24 * 30));
}

TEST_P(ExportTest, SymlinksAreNeverReadThrough) {
  ASSERT_TRUE(writeFileAt(ws_.fd(), "inside.txt", "inside"));
  ASSERT_TRUE(workspace::testing::symlinkAt(ws_.fd(), "/etc/hostname", "result.json"));
  ASSERT_TRUE(workspace::testing::symlinkAt(ws_.fd(), "inside.txt", "alias.txt"));
  ASSERT_TRUE(workspace::testing::symlinkAt(ws_.fd(), "/proc/self", "out"));
  ASSERT_TRUE(workspace::testing::symlinkAt(ws_.fd(), "loop", "loop"));
  ASSERT_TRUE(workspace::testing::symlinkAt(ws_.fd(), "../../../../etc", "up"));
  for (const char* path : {"result.json", "alias.txt", "out/environ", "loop", "up/passwd"}) {
    auto ref = exportPath(path);
    ASSERT_FALSE(ref.has_value()) << path;
    EXPECT_EQ(ref.error().code, ErrorCode::kWorkspaceEscape)
        << path << ": " << ref.error().message();
  }
  expectNothingStored();
}

TEST_P(ExportTest, DirectoriesFifosAndDevicesAreRefusedWithoutBeingOpened) {
  ASSERT_TRUE(workspace::testing::mkdirs(ws_.fd(), "dir"));
  ASSERT_EQ(::mkfifoat(ws_.fd(), "fifo", 0644), 0);  // opening it for reading would block
  std::vector<std::string> paths = {"dir", "fifo"};
  if (::mknodat(ws_.fd(), "null", S_IFCHR | 0666, makedev(1, 3)) == 0) paths.push_back("null");
  for (const auto& path : paths) {
    auto ref = exportPath(path);
    ASSERT_FALSE(ref.has_value()) << path;
    EXPECT_EQ(ref.error().code, ErrorCode::kToolValidationError) << path;
  }
  expectNothingStored();
}

TEST_P(ExportTest, LexicallyBadPathsAreRefused) {
  for (const char* path : {"../x", "/etc/passwd", "a/../b", ""}) {
    auto ref = exportPath(path);
    ASSERT_FALSE(ref.has_value()) << path;
    EXPECT_TRUE(ref.error().code == ErrorCode::kWorkspaceEscape ||
                ref.error().code == ErrorCode::kToolValidationError)
        << path;
  }
  expectNothingStored();
}

TEST_P(ExportTest, SparseTerabyteIsRefusedBeforeReading) {
  int fd = ::openat(ws_.fd(), "sparse.bin", O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, std::int64_t{1} << 40), 0);
  ::close(fd);
  auto ref = exportPath("sparse.bin");
  ASSERT_FALSE(ref.has_value());
  EXPECT_EQ(ref.error().code, ErrorCode::kExecutionRejected);
  expectNothingStored();
}

TEST_P(ExportTest, FileChangedDuringTheExportStoresNothing) {
  const std::string bytes = randomBytes(3 * kStreamBufferBytes, 12);
  ASSERT_TRUE(writeFileAt(ws_.fd(), "moving.bin", bytes));
  auto exported = asWorkspaceExport(
      workspace::openFileExport(ws_.fd(), "moving.bin", kDefaultMaxArtifactBytes, GetParam()));
  ASSERT_TRUE(exported.has_value());
  // The sandbox rewrites a byte after the execution side hashed the file.
  int fd = ::openat(ws_.fd(), "moving.bin", O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, "X", 1, 100'000), 1);
  ::close(fd);
  auto ref = writer_->create(std::move(exported->stream), exported->filename, "application/x",
                             TrustLevel::kExternalUntrusted);
  ASSERT_FALSE(ref.has_value());
  EXPECT_EQ(ref.error().code, ErrorCode::kArtifactIntegrityError);
  expectNothingStored();
}

TEST_P(ExportTest, ExportWorkspaceFileLabelsTheBytesExternalUntrusted) {
  ASSERT_TRUE(writeFileAt(ws_.fd(), "a.txt", "from the sandbox"));
  auto internal = makeArtifactWriter(
      *store_, ArtifactWriterScope{tenant("t1"), std::nullopt, ArtifactOrigin::kSandboxExport,
                                   TrustLevel::kInternalTool});
  auto ref = exportWorkspaceFile(
      *internal, workspace::openFileExport(ws_.fd(), "a.txt", kDefaultMaxArtifactBytes),
      "text/plain");
  ASSERT_TRUE(ref.has_value()) << ref.error().message();
  EXPECT_EQ(repo_->find(ref->artifact_id)->metadata.trust, TrustLevel::kExternalUntrusted);
}

INSTANTIATE_TEST_SUITE_P(Resolvers, ExportTest,
                         ::testing::Values(workspace::ResolverKind::kOpenat2,
                                           workspace::ResolverKind::kNofollowWalk),
                         [](const auto& info) {
                           return info.param == workspace::ResolverKind::kOpenat2 ? "Openat2"
                                                                                  : "NofollowWalk";
                         });

class WriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = FilesystemArtifactStore::create(
        sys::UniqueFd(::openat(dir_.fd(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)), repo_);
    ASSERT_TRUE(store.has_value());
    store_ = std::move(*store);
  }
  TrustLevel storedTrust(TrustLevel floor, TrustLevel label) {
    auto writer = makeArtifactWriter(
        *store_, ArtifactWriterScope{tenant(), std::nullopt, ArtifactOrigin::kToolOutput, floor});
    auto ref = writer->create(measuredBytes("x"), "x.txt", "text/plain", label);
    EXPECT_TRUE(ref.has_value());
    return repo_->find(ref->artifact_id)->metadata.trust;
  }
  TempDir dir_;
  std::shared_ptr<MemoryArtifactRepository> repo_ = std::make_shared<MemoryArtifactRepository>();
  std::unique_ptr<FilesystemArtifactStore> store_;
};

TEST_F(WriterTest, TrustIsTheLessTrustedOfTheScopeFloorAndTheLabel) {
  using T = TrustLevel;
  EXPECT_EQ(storedTrust(T::kInternalTool, T::kInternalTool), T::kInternalTool);
  EXPECT_EQ(storedTrust(T::kInternalTool, T::kExternalUntrusted), T::kExternalUntrusted);
  EXPECT_EQ(storedTrust(T::kExternalUntrusted, T::kInternalTool), T::kExternalUntrusted);
  EXPECT_EQ(storedTrust(T::kExternalUntrusted, T::kExternalUntrusted), T::kExternalUntrusted);
}

TEST_F(WriterTest, AMisMeasuredStreamIsAnIntegrityError) {
  auto writer = makeArtifactWriter(*store_, ArtifactWriterScope{tenant()});
  MeasuredStream lie = measuredBytes("claimed");
  lie.source = std::make_unique<StringSource>("swapped");
  auto ref = writer->create(std::move(lie), "f", "text/plain", TrustLevel::kInternalTool);
  ASSERT_FALSE(ref.has_value());
  EXPECT_EQ(ref.error().code, ErrorCode::kArtifactIntegrityError);
  EXPECT_TRUE(repo_->listForTenant(tenant(), 10)->empty());
}

TEST_F(WriterTest, UploadsGetTheUnclaimedLifetime) {
  auto writer = makeArtifactWriter(
      *store_, ArtifactWriterScope{tenant(), std::nullopt, ArtifactOrigin::kUpload}, {},
      [] { return at(1000); });
  auto ref = writer->create(measuredBytes("u"), "u", "text/plain", TrustLevel::kExternalUntrusted);
  ASSERT_TRUE(ref.has_value());
  EXPECT_EQ(repo_->find(ref->artifact_id)->metadata.expires_at, at(1000) + std::chrono::hours(24));
}

}  // namespace
}  // namespace airlock::artifacts
