// Gate artifact_key_opaque (spec 000, "The storage key is derived, never
// composed"; hard gate "The storage key is derived from platform values
// only"). A structural test: the property is about the key function's
// inputs, so it is asserted on the function's type and on the store's
// source, and then shown on disk for hostile filenames.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <type_traits>

#include "airlock/artifacts/filesystem_store.h"
#include "airlock/artifacts/memory_repository.h"
#include "airlock/artifacts/storage_key.h"
#include "airlock/sys/sha256.h"
#include "artifact_test_support.h"
#include "test_tree.h"

namespace airlock::artifacts {
namespace {

using testing::metadataFor;
using testing::tenant;
using testing::treeOf;
using workspace::testing::TempDir;

// Exactly (tenant_id, artifact_id): taking the address of an overload set
// would not compile, so this also shows there is one storageKey.
static_assert(
    std::is_same_v<decltype(&storageKey), StorageKey (*)(const TenantId&, const ArtifactId&)>);
// Neither input can be made from an arbitrary string without its parser.
static_assert(!std::is_constructible_v<TenantId, std::string>);
static_assert(!std::is_constructible_v<ArtifactId, std::string>);
static_assert(!std::is_convertible_v<std::string, TenantId>);
static_assert(!std::is_convertible_v<std::string, ArtifactId>);

// A source file's code with its comments removed (prose may name fields).
std::string sourceOf(const std::string& relative) {
  std::ifstream in(std::string(AIRLOCK_SOURCE_DIR) + "/" + relative);
  std::stringstream text;
  text << in.rdbuf();
  std::string code = std::regex_replace(text.str(), std::regex(R"(/\*[\s\S]*?\*/)"), "");
  return std::regex_replace(code, std::regex(R"(//[^\n]*)"), "");
}

// The modules that name objects on disk never mention a caller-supplied
// metadata field, so no such value can reach a path they build.
TEST(GateArtifactKeyOpaque, StoreModulesNeverTouchCallerSuppliedFields) {
  for (const char* file :
       {"src/airlock/artifacts/storage_key.h", "src/airlock/artifacts/storage_key.cpp",
        "src/airlock/artifacts/filesystem_store.cpp"}) {
    const std::string text = sourceOf(file);
    ASSERT_FALSE(text.empty()) << file;
    for (const char* field : {"filename", "media_type", "run_id", "origin", "trust"}) {
      EXPECT_FALSE(std::regex_search(text, std::regex(std::string("\\b") + field + "\\b")))
          << file << " mentions " << field;
    }
  }
}

// Every object name the filesystem store opens or creates comes from a
// StorageKey part (or is one of its fixed directories / its temp name).
TEST(GateArtifactKeyOpaque, StoreBuildsNamesOnlyFromTheKey) {
  const std::string text = sourceOf("src/airlock/artifacts/filesystem_store.cpp");
  ASSERT_FALSE(text.empty());
  const std::regex key_call(R"(\bstorageKey\(([^)]*)\))");
  int calls = 0;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), key_call);
       it != std::sregex_iterator(); ++it) {
    ++calls;
    const std::string args = (*it)[1];
    EXPECT_TRUE(std::regex_search(
        args, std::regex(R"(^\s*[\w.>-]*tenant_id\s*,\s*[\w.>-]*(id|artifact_id)\s*$)")))
        << "storageKey called with: " << args;
  }
  EXPECT_GE(calls, 3);  // put, open, remove
}

class KeyOpaqueOnDisk : public ::testing::Test {
 protected:
  void SetUp() override {
    // The store lives at <tmp>/a/b/store; every level around it holds an
    // etc/passwd canary a traversal could reach.
    ASSERT_TRUE(workspace::testing::mkdirs(outer_.fd(), "a/b/store"));
    for (const char* dir : {"", "a/", "a/b/", "a/b/store/"}) {
      ASSERT_TRUE(workspace::testing::mkdirs(outer_.fd(), std::string(dir) + "etc"));
      ASSERT_TRUE(
          workspace::testing::writeFileAt(outer_.fd(), std::string(dir) + "etc/passwd", "canary"));
    }
    auto store = FilesystemArtifactStore::create(
        sys::UniqueFd(::openat(outer_.fd(), "a/b/store", O_RDONLY | O_DIRECTORY | O_CLOEXEC)),
        repo_);
    ASSERT_TRUE(store.has_value()) << store.error().message();
    store_ = std::move(*store);
    ASSERT_EQ(::stat("/etc/passwd", &passwd_before_), 0);
  }

  TempDir outer_;
  std::shared_ptr<MemoryArtifactRepository> repo_ = std::make_shared<MemoryArtifactRepository>();
  std::unique_ptr<FilesystemArtifactStore> store_;
  struct stat passwd_before_ {};
};

TEST_F(KeyOpaqueOnDisk, TraversalFilenameIsMetadataAndChangesNothingElse) {
  const auto before = treeOf(outer_.fd());
  const std::string bytes = "root::0:0::/:/bin/sh\n";
  auto metadata = metadataFor(bytes, tenant("t1"));
  metadata.filename = "../../etc/passwd";
  metadata.media_type = "../../etc/shadow";
  StringSource source(bytes);
  auto ref = store_->put(source, metadata);
  ASSERT_TRUE(ref.has_value()) << ref.error().message();

  // The only additions are the key's directories and the object at the key.
  const auto key = storageKey(tenant("t1"), ref->artifact_id);
  auto expected = before;
  expected["a/b/store/objects/t1"] = "d";
  expected["a/b/store/objects/t1/" + key.shard] = "d";
  expected["a/b/store/objects/" + key.str()] = "f:" + sys::sha256Hex(bytes);
  EXPECT_EQ(treeOf(outer_.fd()), expected);

  // The filename is kept verbatim as metadata.
  auto row = repo_->find(ref->artifact_id);
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(row->metadata.filename, "../../etc/passwd");
  EXPECT_EQ(row->metadata.media_type, "../../etc/shadow");

  struct stat after {};
  ASSERT_EQ(::stat("/etc/passwd", &after), 0);
  EXPECT_EQ(after.st_ino, passwd_before_.st_ino);
  EXPECT_EQ(after.st_size, passwd_before_.st_size);
  EXPECT_EQ(after.st_mtim.tv_sec, passwd_before_.st_mtim.tv_sec);
  EXPECT_EQ(after.st_mtim.tv_nsec, passwd_before_.st_mtim.tv_nsec);
}

// Whatever a producer names the file, the object lands at the key and
// nowhere else.
RC_GTEST_FIXTURE_PROP(KeyOpaqueOnDisk, AnyFilenameLandsOnlyAtTheKey, ()) {
  static const std::vector<std::string> kHostile = {
      "../../etc/passwd",    "/etc/passwd", "..",    ".",        "",
      "a/../../b",           "objects/x",   "tmp/y", "\xff\xfe", "/proc/self/root/etc/passwd",
      std::string(4096, '/')};
  const auto filename = *rc::gen::oneOf(rc::gen::elementOf(kHostile),
                                        rc::gen::container<std::string>(rc::gen::nonZero<char>()));
  RC_PRE(filename.size() <= kMaxFilenameBytes);
  const auto before = treeOf(outer_.fd());
  const std::string bytes = "x";
  auto metadata = metadataFor(bytes, tenant("t2"));
  metadata.filename = filename;
  StringSource source(bytes);
  auto ref = store_->put(source, metadata);
  RC_ASSERT(ref.has_value());
  const auto key = storageKey(tenant("t2"), ref->artifact_id);
  // rapidcheck sets the fixture up afresh for every case.
  auto expected = before;
  expected["a/b/store/objects/t2"] = "d";
  expected["a/b/store/objects/t2/" + key.shard] = "d";
  expected["a/b/store/objects/" + key.str()] = "f:" + sys::sha256Hex(bytes);
  RC_ASSERT(treeOf(outer_.fd()) == expected);
  RC_ASSERT(repo_->find(ref->artifact_id)->metadata.filename == filename);
}

}  // namespace
}  // namespace airlock::artifacts
