// Gate artifact_checksum (spec 000 hard gate "An artifact's bytes are the
// bytes that were exported"). A workspace file larger than the
// streaming buffer, exported and fetched back, is the same byte for byte;
// a digest mismatch injected at the store boundary (the hop between the
// execution side and the store) is ArtifactIntegrityError and stores
// nothing: no object, no row, no temporary file.
//
// The workspace here is a local directory opened by fd, read through the
// same containment (openBeneath) the sandbox mechanisms use; no sandbox is
// started.
#include <fcntl.h>
#include <gtest/gtest.h>

#include "airlock/artifacts/artifact_writer.h"
#include "airlock/artifacts/filesystem_store.h"
#include "airlock/artifacts/sqlite_repository.h"
#include "airlock/artifacts/workspace_export.h"
#include "airlock/sys/sha256.h"
#include "airlock/workspace/file_export.h"
#include "artifact_test_support.h"
#include "test_tree.h"

namespace airlock::artifacts {
namespace {

using testing::at;
using testing::randomBytes;
using testing::tenant;
using testing::treeOf;
using workspace::testing::TempDir;

// The hop: forwards the exported stream, damaging it on the way.
class DamagingHop final : public ByteSource {
 public:
  enum class Damage { kFlipOneByte, kDropTheTail };
  DamagingHop(std::unique_ptr<ByteSource> inner, Damage damage)
      : inner_(std::move(inner)), damage_(damage) {}
  Result<std::size_t> read(char* buffer, std::size_t size) override {
    auto n = inner_->read(buffer, size);
    if (!n || *n == 0) return n;
    const std::int64_t start = passed_;
    passed_ += static_cast<std::int64_t>(*n);
    if (damage_ == Damage::kFlipOneByte && start <= kAt && kAt < passed_)
      buffer[kAt - start] ^= 0x01;
    if (damage_ == Damage::kDropTheTail && passed_ > kAt) return std::size_t{0};
    return n;
  }

 private:
  static constexpr std::int64_t kAt = 3 * kStreamBufferBytes + 7;
  std::unique_ptr<ByteSource> inner_;
  Damage damage_;
  std::int64_t passed_ = 0;
};

class GateArtifactChecksum : public ::testing::TestWithParam<TempFileMode> {
 protected:
  void SetUp() override {
    auto repo = SqliteArtifactRepository::open(db_dir_.path() + "/artifacts.db");
    ASSERT_TRUE(repo.has_value()) << repo.error().message();
    repo_ = std::shared_ptr<ArtifactRepository>(std::move(*repo));
    FilesystemStoreOptions options;
    options.temp_mode = GetParam();
    auto store = FilesystemArtifactStore::create(
        sys::UniqueFd(::openat(store_dir_.fd(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)), repo_,
        options);
    ASSERT_TRUE(store.has_value()) << store.error().message();
    store_ = std::move(*store);
    writer_ = makeArtifactWriter(*store_, ArtifactWriterScope{tenant("gate"), std::string("run"),
                                                              ArtifactOrigin::kSandboxExport});
    ASSERT_TRUE(workspace::testing::writeFileAt(ws_.fd(), "result.bin", bytes_));
  }

  void expectNothingStored() {
    for (const auto& [path, kind] : treeOf(store_dir_.fd()))
      EXPECT_EQ(kind, "d") << "left behind: " << path;  // no object, no temporary file
    auto rows = repo_->listForTenant(tenant("gate"), 10);
    ASSERT_TRUE(rows.has_value());
    EXPECT_TRUE(rows->empty());  // no row
  }

  Result<ArtifactRef> exportThroughHop(DamagingHop::Damage damage) {
    auto exported = asWorkspaceExport(
        workspace::openFileExport(ws_.fd(), "result.bin", kDefaultMaxArtifactBytes));
    if (!exported) return tl::unexpected(exported.error());
    exported->stream.source =
        std::make_unique<DamagingHop>(std::move(exported->stream.source), damage);
    return writer_->create(std::move(exported->stream), exported->filename,
                           "application/octet-stream", TrustLevel::kExternalUntrusted);
  }

  TempDir ws_;
  TempDir store_dir_;
  TempDir db_dir_;
  const std::string bytes_ = randomBytes(64 * kStreamBufferBytes + 1, 2026);
  std::shared_ptr<ArtifactRepository> repo_;
  std::unique_ptr<FilesystemArtifactStore> store_;
  std::unique_ptr<ArtifactWriter> writer_;
};

TEST_P(GateArtifactChecksum, ExportedFileFetchedBackIsTheSameBytes) {
  ASSERT_GT(bytes_.size(), kStreamBufferBytes);
  auto ref = exportWorkspaceFile(
      *writer_, workspace::openFileExport(ws_.fd(), "result.bin", kDefaultMaxArtifactBytes),
      "application/octet-stream");
  ASSERT_TRUE(ref.has_value()) << ref.error().message();
  EXPECT_EQ(ref->sha256, sys::sha256Hex(bytes_));
  EXPECT_EQ(ref->size_bytes, static_cast<std::int64_t>(bytes_.size()));

  auto stream = store_->open(*ref);
  ASSERT_TRUE(stream.has_value()) << stream.error().message();
  auto fetched = readAll(**stream, bytes_.size() + 1);
  ASSERT_TRUE(fetched.has_value()) << fetched.error().message();
  EXPECT_EQ(sys::sha256Hex(*fetched), sys::sha256Hex(bytes_));
  EXPECT_TRUE(*fetched == bytes_);  // byte for byte
}

TEST_P(GateArtifactChecksum, OneFlippedByteAtTheStoreBoundaryStoresNothing) {
  auto ref = exportThroughHop(DamagingHop::Damage::kFlipOneByte);
  ASSERT_FALSE(ref.has_value());
  EXPECT_EQ(ref.error().code, ErrorCode::kArtifactIntegrityError) << ref.error().message();
  expectNothingStored();
}

TEST_P(GateArtifactChecksum, TruncatedTransferStoresNothing) {
  auto ref = exportThroughHop(DamagingHop::Damage::kDropTheTail);
  ASSERT_FALSE(ref.has_value());
  EXPECT_EQ(ref.error().code, ErrorCode::kArtifactIntegrityError) << ref.error().message();
  expectNothingStored();
}

INSTANTIATE_TEST_SUITE_P(TempModes, GateArtifactChecksum,
                         ::testing::Values(TempFileMode::kAuto, TempFileMode::kNamed),
                         [](const auto& info) {
                           return info.param == TempFileMode::kAuto ? "Auto" : "Named";
                         });

}  // namespace
}  // namespace airlock::artifacts
