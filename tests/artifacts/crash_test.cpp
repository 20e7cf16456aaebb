// Killing the process in the middle of a put (red-team case
// B48: an interrupted write leaves no partial file, or one under a
// temporary name that is cleaned up). A forked child puts a slow stream
// into a store backed by SQLite and is SIGKILLed at a chosen point; the
// parent then looks at the store as a restarted service would.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "airlock/artifacts/filesystem_store.h"
#include "airlock/artifacts/sqlite_repository.h"
#include "airlock/artifacts/storage_key.h"
#include "airlock/sys/io.h"
#include "airlock/sys/sha256.h"
#include "artifact_test_support.h"
#include "test_tree.h"

namespace airlock::artifacts {
namespace {

using namespace testing;  // NOLINT
using workspace::testing::TempDir;

// A pipe pair the child uses to say "I am at the point" and then to wait
// for a go-ahead that, for a kill, never comes.
struct Rendezvous {
  int ready[2] = {-1, -1};
  int go[2] = {-1, -1};
  Rendezvous() {
    EXPECT_EQ(::pipe2(ready, O_CLOEXEC), 0);
    EXPECT_EQ(::pipe2(go, O_CLOEXEC), 0);
  }
  ~Rendezvous() {
    for (int fd : {ready[0], ready[1], go[0], go[1]})
      if (fd >= 0) ::close(fd);
  }
  // Child side.
  void arriveAndWait() const {
    char c = 'r';
    (void)sys::writeAll(ready[1], &c, 1);
    (void)sys::readSome(go[0], &c, 1);  // blocks until the parent writes or dies
  }
  // Parent side.
  bool awaitArrival() const {
    char c = 0;
    return sys::readSome(ready[0], &c, 1) == 1;
  }
  void release() const {
    char c = 'g';
    (void)sys::writeAll(go[1], &c, 1);
  }
};

// Hands out half the bytes, then stops at the rendezvous.
class StallingSource final : public ByteSource {
 public:
  StallingSource(std::string bytes, const Rendezvous& rv) : bytes_(std::move(bytes)), rv_(rv) {}
  Result<std::size_t> read(char* buffer, std::size_t size) override {
    if (offset_ >= bytes_.size() / 2 && !stalled_) {
      stalled_ = true;
      rv_.arriveAndWait();
    }
    const std::size_t n = std::min({size, std::size_t{4096}, bytes_.size() - offset_});
    std::memcpy(buffer, bytes_.data() + offset_, n);
    offset_ += n;
    return n;
  }

 private:
  std::string bytes_;
  const Rendezvous& rv_;
  std::size_t offset_ = 0;
  bool stalled_ = false;
};

// Stops at the rendezvous before the row is inserted (the object is
// already linked at its key).
class StallingInsertRepository final : public ArtifactRepository {
 public:
  StallingInsertRepository(std::unique_ptr<ArtifactRepository> inner, const Rendezvous& rv)
      : inner_(std::move(inner)), rv_(rv) {}
  Result<void> insert(const StoredArtifact& a, std::optional<std::int64_t> cap) override {
    rv_.arriveAndWait();
    return inner_->insert(a, cap);
  }
  Result<StoredArtifact> find(const ArtifactId& id) override { return inner_->find(id); }
  Result<bool> remove(const ArtifactId& id) override { return inner_->remove(id); }
  Result<std::vector<StoredArtifact>> listExpired(Timestamp now, std::size_t limit) override {
    return inner_->listExpired(now, limit);
  }
  Result<std::vector<StoredArtifact>> listForTenant(const TenantId& t, std::size_t limit) override {
    return inner_->listForTenant(t, limit);
  }
  Result<std::int64_t> tenantBytes(const TenantId& t) override { return inner_->tenantBytes(t); }

 private:
  std::unique_ptr<ArtifactRepository> inner_;
  const Rendezvous& rv_;
};

enum class StallAt { kMidStream, kBeforeRow };

class CrashTest : public ::testing::TestWithParam<TempFileMode> {
 protected:
  std::string dbPath() const { return db_dir_.path() + "/artifacts.db"; }

  Result<std::unique_ptr<FilesystemArtifactStore>> openStore(
      std::shared_ptr<ArtifactRepository> repo) {
    FilesystemStoreOptions options;
    options.temp_mode = GetParam();
    return FilesystemArtifactStore::create(
        sys::UniqueFd(::openat(dir_.fd(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)),
        std::move(repo), options);
  }

  // Forks a child that puts `bytes_` and stalls at `where`; returns its pid
  // once it is there. The child exits 0 if its put succeeds after release.
  pid_t startStalledPut(StallAt where) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      auto sqlite = SqliteArtifactRepository::open(dbPath());
      if (!sqlite) ::_exit(3);
      std::shared_ptr<ArtifactRepository> repo(std::move(*sqlite));
      if (where == StallAt::kBeforeRow)
        repo = std::make_shared<StallingInsertRepository>(
            std::unique_ptr<ArtifactRepository>(
                std::move(*SqliteArtifactRepository::open(dbPath()))),
            rv_);
      auto store = openStore(repo);
      if (!store) ::_exit(4);
      std::unique_ptr<ByteSource> source;
      if (where == StallAt::kMidStream)
        source = std::make_unique<StallingSource>(bytes_, rv_);
      else
        source = std::make_unique<StringSource>(bytes_);
      auto ref = (*store)->put(*source, metadataFor(bytes_, tenant()));
      ::_exit(ref ? 0 : 5);
    }
    EXPECT_GT(pid, 0);
    EXPECT_TRUE(rv_.awaitArrival()) << "child never reached the stall point";
    return pid;
  }

  static int waitFor(pid_t pid) {
    int status = 0;
    EXPECT_EQ(::waitpid(pid, &status, 0), pid);
    return status;
  }

  std::map<std::string, std::string> storeFiles() {
    auto tree = treeOf(dir_.fd());
    std::erase_if(tree, [](const auto& kv) { return kv.second == "d"; });
    return tree;
  }
  std::size_t filesUnder(const std::string& prefix) {
    std::size_t n = 0;
    for (const auto& [path, kind] : storeFiles())
      if (path.rfind(prefix, 0) == 0) ++n;
    return n;
  }

  void SetUp() override {
    // Create the schema before any child opens the file.
    ASSERT_TRUE(SqliteArtifactRepository::open(dbPath()).has_value());
  }

  TempDir dir_;
  TempDir db_dir_;
  Rendezvous rv_;
  const std::string bytes_ = randomBytes(1 << 20, 42);
};

TEST_P(CrashTest, KillMidStreamLeavesNoObjectAndRestartCleansTheTempFile) {
  const pid_t child = startStalledPut(StallAt::kMidStream);
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  const int status = waitFor(child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

  // Nothing is visible as an object; an O_TMPFILE write leaves nothing at
  // all, a named one leaves its temporary file.
  EXPECT_EQ(filesUnder("objects/"), 0u);
  EXPECT_EQ(filesUnder("tmp/"), GetParam() == TempFileMode::kNamed ? 1u : 0u);

  // Restart: recovery removes what the dead put left.
  auto repo = SqliteArtifactRepository::open(dbPath());
  ASSERT_TRUE(repo.has_value());
  std::shared_ptr<ArtifactRepository> shared(std::move(*repo));
  auto store = openStore(shared);
  ASSERT_TRUE(store.has_value());
  auto report = (*store)->recover();
  ASSERT_TRUE(report.has_value()) << report.error().message();
  EXPECT_EQ(report->temp_files_removed, GetParam() == TempFileMode::kNamed ? 1 : 0);
  EXPECT_EQ(report->busy_skipped, 0);
  EXPECT_TRUE(storeFiles().empty());
  EXPECT_TRUE(shared->listForTenant(tenant(), 10)->empty());
}

TEST_P(CrashTest, KillBetweenLinkAndRowLeavesAnUnreachableWholeObjectThatRestartRemoves) {
  const pid_t child = startStalledPut(StallAt::kBeforeRow);
  // At this point the object is complete at its key: never a partial one.
  auto files = storeFiles();
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files.begin()->first.rfind("objects/local/", 0), 0u);
  EXPECT_EQ(files.begin()->second, "f:" + sys::sha256Hex(bytes_));
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  waitFor(child);

  auto repo = SqliteArtifactRepository::open(dbPath());
  ASSERT_TRUE(repo.has_value());
  std::shared_ptr<ArtifactRepository> shared(std::move(*repo));
  EXPECT_TRUE(shared->listForTenant(tenant(), 10)->empty());  // no row: unreachable
  auto store = openStore(shared);
  ASSERT_TRUE(store.has_value());
  auto report = (*store)->recover();
  ASSERT_TRUE(report.has_value()) << report.error().message();
  EXPECT_EQ(report->orphan_objects_removed, 1);
  EXPECT_TRUE(storeFiles().empty());
}

// Recovery running while another process's put is in flight leaves that
// put alone, and the put then commits.
TEST_P(CrashTest, RecoveryDuringALivePutSkipsItAndThePutCommits) {
  for (StallAt where : {StallAt::kMidStream, StallAt::kBeforeRow}) {
    const pid_t child = startStalledPut(where);
    auto repo = SqliteArtifactRepository::open(dbPath());
    ASSERT_TRUE(repo.has_value());
    std::shared_ptr<ArtifactRepository> shared(std::move(*repo));
    auto store = openStore(shared);
    ASSERT_TRUE(store.has_value());
    auto report = (*store)->recover();
    ASSERT_TRUE(report.has_value()) << report.error().message();
    EXPECT_EQ(report->temp_files_removed, 0);
    EXPECT_EQ(report->orphan_objects_removed, 0);
    const bool visible = where == StallAt::kBeforeRow || GetParam() == TempFileMode::kNamed;
    EXPECT_EQ(report->busy_skipped, visible ? 1 : 0);

    rv_.release();
    const int status = waitFor(child);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
    auto rows = shared->listForTenant(tenant(), 10);
    ASSERT_TRUE(rows.has_value());
    ASSERT_FALSE(rows->empty());
    auto stream = (*store)->open(refOf(rows->back()));
    ASSERT_TRUE(stream.has_value()) << stream.error().message();
    auto back = readAll(**stream, 2 << 20);
    ASSERT_TRUE(back.has_value());
    EXPECT_TRUE(*back == bytes_);
  }
}

INSTANTIATE_TEST_SUITE_P(TempModes, CrashTest,
                         ::testing::Values(TempFileMode::kAuto, TempFileMode::kNamed),
                         [](const auto& info) {
                           return info.param == TempFileMode::kAuto ? "Auto" : "Named";
                         });

}  // namespace
}  // namespace airlock::artifacts
