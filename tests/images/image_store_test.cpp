// The image store (images/image_store.h): imports of an OCI image layout,
// of an archive of one and of a `docker save` archive; digests; references
// resolved once and moved only by a new import or pull; bad inputs refused
// with nothing recorded or left in tmp/; roots unpacked once and shared;
// remove and garbage collection; a pull from a real docker-registry.
#include "airlock/images/image_store.h"

#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "airlock/images/registry_client.h"
#include "http_test_server.h"
#include "oci_layout.h"
#include "registry_server.h"
#include "test_tree.h"

namespace airlock::images {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::BuiltImage;
using testing::OciLayout;
using workspace::testing::TempDir;

const std::string kSkopeo = "/usr/bin/skopeo";

std::string readText(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::size_t entriesIn(const std::string& dir) {
  std::error_code ec;
  std::size_t n = 0;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); ++it) ++n;
  return n;
}

// A tar archive at `path` of every file below `dir` (names relative to it).
void tarDirectory(const std::string& dir, const std::string& path,
                  const std::map<std::string, std::string>& links = {}) {
  archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  ASSERT_EQ(archive_write_open_filename(a, path.c_str()), ARCHIVE_OK);
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    const std::string name = fs::relative(e.path(), dir).string();
    const std::string bytes = readText(e.path().string());
    archive_entry* entry = archive_entry_new();
    archive_entry_set_pathname(entry, name.c_str());
    archive_entry_set_filetype(entry, AE_IFREG);
    archive_entry_set_perm(entry, 0644);
    archive_entry_set_size(entry, static_cast<la_int64_t>(bytes.size()));
    ASSERT_EQ(archive_write_header(a, entry), ARCHIVE_OK);
    ASSERT_EQ(archive_write_data(a, bytes.data(), bytes.size()),
              static_cast<la_ssize_t>(bytes.size()));
    archive_entry_free(entry);
  }
  for (const auto& [name, to] : links) {
    archive_entry* entry = archive_entry_new();
    archive_entry_set_pathname(entry, name.c_str());
    archive_entry_set_filetype(entry, AE_IFLNK);
    archive_entry_set_perm(entry, 0777);
    archive_entry_set_symlink(entry, to.c_str());
    ASSERT_EQ(archive_write_header(a, entry), ARCHIVE_OK);
    archive_entry_free(entry);
  }
  ASSERT_EQ(archive_write_close(a), ARCHIVE_OK);
  archive_write_free(a);
}

class ImageStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = ImageStore::open(tmp_.sub("store"));
    ASSERT_TRUE(store) << store.error().message();
    store_ = std::move(*store);
  }

  // A layout at tmp/<name> holding one amd64 image named `ref`.
  BuiltImage layoutWith(const std::string& name, const std::string& marker,
                        const std::string& ref) {
    OciLayout layout(tmp_.sub(name));
    EXPECT_TRUE(layout.ok());
    BuiltImage img = layout.addImage("amd64", marker);
    layout.writeIndexJson(json::array({img.indexEntry(ref)}));
    return img;
  }

  // Nothing half-written stays: tmp/ is empty.
  void expectNothingInFlight() {
    EXPECT_EQ(entriesIn(store_->directory() + "/tmp"), 0u) << "tmp/ is not empty";
  }

  TempDir tmp_;
  std::unique_ptr<ImageStore> store_;
};

TEST_F(ImageStoreTest, ImportsALayoutByItsManifestDigestWithItsName) {
  const BuiltImage img = layoutWith("layout", "first", "v1");
  auto stored = store_->importPath(tmp_.sub("layout"));
  ASSERT_TRUE(stored) << stored.error().message();
  EXPECT_EQ(stored->digest, img.manifest_digest);
  EXPECT_EQ(stored->config_digest, img.config_digest);
  EXPECT_EQ(stored->layer_digests, img.layer_digests);
  EXPECT_EQ(stored->references, std::vector<std::string>{"v1"});
  EXPECT_EQ(stored->config.env, (std::vector<std::string>{"PATH=/usr/bin:/bin", "GREETING=first"}));
  EXPECT_EQ(store_->find("v1")->digest, img.manifest_digest);
  EXPECT_EQ(store_->find(img.manifest_digest)->digest, img.manifest_digest);
  EXPECT_FALSE(store_->find("v2"));
  EXPECT_EQ(store_->find("v2").error().code, ErrorCode::kNotFound);
  ASSERT_EQ(store_->list().size(), 1u);

  auto root = store_->use(img.manifest_digest);
  ASSERT_TRUE(root) << root.error().message();
  EXPECT_EQ(readText(root->root_dir + "/etc/marker"), "first\n");
  EXPECT_EQ(readText(root->root_dir + "/srv/data.txt"), std::string(3000, 'd') + "amd64");
  EXPECT_EQ(root->env, stored->config.env);
  expectNothingInFlight();
}

// The root is unpacked once: a second use finds the same directory, with
// nothing unpacked again.
TEST_F(ImageStoreTest, TheSecondUseOfAnImageUnpacksNothing) {
  const BuiltImage img = layoutWith("layout", "once", "v1");
  ASSERT_TRUE(store_->importPath(tmp_.sub("layout")));
  auto first = store_->use(img.manifest_digest);
  ASSERT_TRUE(first);
  struct stat before {
  }, after{};
  ASSERT_EQ(::stat((first->root_dir + "/etc/marker").c_str(), &before), 0);
  auto second = store_->use(img.manifest_digest);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->root_dir, first->root_dir);
  ASSERT_EQ(::stat((second->root_dir + "/etc/marker").c_str(), &after), 0);
  EXPECT_EQ(before.st_ino, after.st_ino);
  EXPECT_EQ(before.st_ctim.tv_nsec, after.st_ctim.tv_nsec);
  EXPECT_EQ(entriesIn(store_->directory() + "/roots"), 2u) << "one root and its lock file";
}

TEST_F(ImageStoreTest, AnArchiveOfALayoutImportsAsTheSameImage) {
  const BuiltImage img = layoutWith("layout", "archived", "v1");
  tarDirectory(tmp_.sub("layout"), tmp_.sub("image.tar"));
  auto stored = store_->importPath(tmp_.sub("image.tar"));
  ASSERT_TRUE(stored) << stored.error().message();
  EXPECT_EQ(stored->digest, img.manifest_digest);
  EXPECT_EQ(stored->references, std::vector<std::string>{"v1"});
  EXPECT_EQ(readText(store_->use(img.manifest_digest)->root_dir + "/etc/marker"), "archived\n");
  expectNothingInFlight();
}

// docker save: manifest.json, the config and the layer tars under their own
// names (a repeated layer as a link to the first); the store writes the
// image's OCI manifest itself.
TEST_F(ImageStoreTest, ADockerSaveArchiveImportsWithItsRepoTags) {
  const std::string dir = tmp_.sub("saved");
  fs::create_directories(dir + "/aaa");
  const std::string layer = testing::tarOf({{"opt/hello.txt", "from docker save\n"}});
  std::ofstream(dir + "/aaa/layer.tar") << layer;
  const json config = {{"architecture", "amd64"},
                       {"os", "linux"},
                       {"config", {{"Env", {"PATH=/opt:/usr/bin"}}}},
                       {"rootfs", {{"type", "layers"}, {"diff_ids", json::array()}}}};
  std::ofstream(dir + "/cfg.json") << config.dump();
  const json manifest = json::array({{{"Config", "cfg.json"},
                                      {"RepoTags", {"team/hello:1"}},
                                      {"Layers", {"aaa/layer.tar", "bbb/layer.tar"}}}});
  std::ofstream(dir + "/manifest.json") << manifest.dump();
  tarDirectory(dir, tmp_.sub("saved.tar"), {{"bbb/layer.tar", "../aaa/layer.tar"}});

  auto stored = store_->importPath(tmp_.sub("saved.tar"));
  ASSERT_TRUE(stored) << stored.error().message();
  EXPECT_EQ(stored->references, std::vector<std::string>{"team/hello:1"});
  ASSERT_EQ(stored->layer_digests.size(), 2u);
  EXPECT_EQ(stored->layer_digests[0], testing::sha256Digest(layer));
  EXPECT_EQ(stored->layer_digests[1], stored->layer_digests[0]);
  EXPECT_EQ(stored->config.env, std::vector<std::string>{"PATH=/opt:/usr/bin"});
  // The digest is that of the manifest the store wrote, which it keeps.
  const std::string written =
      readText(store_->directory() + "/blobs/sha256/" + stored->digest.substr(7));
  EXPECT_EQ(testing::sha256Digest(written), stored->digest);
  EXPECT_EQ(readText(store_->use(stored->digest)->root_dir + "/opt/hello.txt"),
            "from docker save\n");
  expectNothingInFlight();
}

TEST_F(ImageStoreTest, ABlobWhoseBytesLieAboutTheirDigestIsRefusedAndNothingIsRecorded) {
  const BuiltImage img = layoutWith("layout", "lying", "v1");
  std::ofstream(tmp_.sub("layout/blobs/sha256/" + img.layer_digests[1].substr(7)))
      << "not the layer";
  auto stored = store_->importPath(tmp_.sub("layout"));
  ASSERT_FALSE(stored);
  EXPECT_EQ(stored.error().code, ErrorCode::kExecutionRejected);
  EXPECT_NE(stored.error().context.find(img.layer_digests[1]), std::string::npos)
      << stored.error().context;
  EXPECT_TRUE(store_->list().empty());
  EXPECT_EQ(entriesIn(store_->directory() + "/blobs/sha256"), 0u)
      << "the blobs the refused import had copied in are gone again";
  expectNothingInFlight();
}

TEST_F(ImageStoreTest, ALayerThatClimbsOutIsRefusedNamingTheEntryAndLeavesNoRoot) {
  OciLayout layout(tmp_.sub("layout"));
  const BuiltImage img = layout.addImageOf(
      "amd64", {{{"ok.txt", "fine"}}, {{"../../escaped.txt", "out"}}}, {"PATH=/usr/bin"});
  layout.writeIndexJson(json::array({img.indexEntry("bad")}));
  auto stored = store_->importPath(tmp_.sub("layout"));
  ASSERT_FALSE(stored);
  EXPECT_EQ(stored.error().code, ErrorCode::kExecutionRejected);
  EXPECT_NE(stored.error().context.find("escaped.txt"), std::string::npos)
      << stored.error().context;
  EXPECT_NE(stored.error().context.find("layer 2"), std::string::npos) << stored.error().context;
  EXPECT_TRUE(store_->list().empty());
  EXPECT_FALSE(fs::exists(store_->directory() + "/roots/" + img.manifest_digest.substr(7)));
  EXPECT_EQ(entriesIn(store_->directory() + "/roots"), 0u) << "no root, no lock file";
  EXPECT_EQ(entriesIn(store_->directory() + "/blobs/sha256"), 0u);
  EXPECT_FALSE(fs::exists(tmp_.sub("escaped.txt")));
  EXPECT_FALSE(fs::exists(store_->directory() + "/escaped.txt"));
  expectNothingInFlight();
}

// An image may not name itself by another image's digest: neither a bare
// digest nor a name@digest of another digest is recorded, and a digest
// finds only its own image.
TEST_F(ImageStoreTest, ADigestNamesOnlyItsOwnImage) {
  const BuiltImage trusted = layoutWith("trusted", "trusted", "v1");
  ASSERT_TRUE(store_->importPath(tmp_.sub("trusted")));
  const BuiltImage bare = layoutWith("bare", "hostile-bare", trusted.manifest_digest);
  auto a = store_->importPath(tmp_.sub("bare"));
  ASSERT_TRUE(a) << a.error().message();
  EXPECT_TRUE(a->references.empty());
  const BuiltImage at = layoutWith("at", "hostile-at", "r.io/x@" + trusted.manifest_digest);
  auto b = store_->importPath(tmp_.sub("at"));
  ASSERT_TRUE(b) << b.error().message();
  EXPECT_TRUE(b->references.empty());
  EXPECT_EQ(store_->find(trusted.manifest_digest)->digest, trusted.manifest_digest);
  // One that names its own digest is kept.
  const BuiltImage own = layoutWith("own", "own", "");
  OciLayout relabel(tmp_.sub("own"));
  relabel.writeIndexJson(json::array({own.indexEntry("r.io/own@" + own.manifest_digest)}));
  auto c = store_->importPath(tmp_.sub("own"));
  ASSERT_TRUE(c) << c.error().message();
  EXPECT_EQ(c->references, std::vector<std::string>{"r.io/own@" + own.manifest_digest});
}

// A refused image records nothing and takes no reference from the image
// that had it.
TEST_F(ImageStoreTest, ARefusedImportMovesNoReference) {
  const BuiltImage good = layoutWith("good", "good", "team/app:1");
  ASSERT_TRUE(store_->importPath(tmp_.sub("good")));
  OciLayout bad(tmp_.sub("bad"));
  const BuiltImage img =
      bad.addImageOf("amd64", {{{"../../escaped.txt", "out"}}}, {"PATH=/usr/bin"});
  bad.writeIndexJson(json::array({img.indexEntry("team/app:1")}));
  ASSERT_FALSE(store_->importPath(tmp_.sub("bad")));
  auto found = store_->find("team/app:1");
  ASSERT_TRUE(found) << found.error().message();
  EXPECT_EQ(found->digest, good.manifest_digest);
  EXPECT_EQ(store_->list().size(), 1u);
}

// A FIFO where a document, a blob or the archive should be is refused at
// once instead of waiting for a writer.
TEST_F(ImageStoreTest, AFifoIsRefusedWithoutWaiting) {
  const BuiltImage img = layoutWith("layout", "fifo", "v1");
  const std::string blob = tmp_.sub("layout/blobs/sha256/" + img.layer_digests[0].substr(7));
  ASSERT_EQ(::unlink(blob.c_str()), 0);
  ASSERT_EQ(::mkfifo(blob.c_str(), 0644), 0);
  auto stored = store_->importPath(tmp_.sub("layout"));
  ASSERT_FALSE(stored);
  EXPECT_NE(stored.error().context.find("is not a regular file"), std::string::npos)
      << stored.error().context;
  ASSERT_EQ(::unlink(tmp_.sub("layout/index.json").c_str()), 0);
  ASSERT_EQ(::mkfifo(tmp_.sub("layout/index.json").c_str(), 0644), 0);
  auto index = store_->importPath(tmp_.sub("layout"));
  ASSERT_FALSE(index);
  EXPECT_NE(index.error().context.find("index.json: is not a regular file"), std::string::npos)
      << index.error().context;
  ASSERT_EQ(::mkfifo(tmp_.sub("archive.tar").c_str(), 0644), 0);
  auto archive = store_->importPath(tmp_.sub("archive.tar"));
  ASSERT_FALSE(archive);
  EXPECT_NE(archive.error().context.find("neither a directory nor a regular file"),
            std::string::npos)
      << archive.error().context;
  EXPECT_TRUE(store_->list().empty());
}

// A layout with two images and no platforms (umoci's, with two tags):
// without a name the import lists them; with one it takes that image.
TEST_F(ImageStoreTest, ANamePicksOneOfSeveralImagesOfALayout) {
  OciLayout layout(tmp_.sub("layout"));
  const BuiltImage a = layout.addImage("amd64", "a");
  const BuiltImage b = layout.addImage("amd64", "b");
  json ea = a.indexEntry("t1"), eb = b.indexEntry("t2");
  ea.erase("platform");
  eb.erase("platform");
  layout.writeIndexJson(json::array({ea, eb}));
  auto unnamed = store_->importPath(tmp_.sub("layout"));
  ASSERT_FALSE(unnamed);
  EXPECT_NE(unnamed.error().context.find("pick one by its name with --ref (one of t1, t2)"),
            std::string::npos)
      << unnamed.error().context;
  auto missing = store_->importPath(tmp_.sub("layout"), "t3");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().context.find("has no image named t3 (it has t1, t2)"),
            std::string::npos)
      << missing.error().context;
  auto named = store_->importPath(tmp_.sub("layout"), "t2");
  ASSERT_TRUE(named) << named.error().message();
  EXPECT_EQ(named->digest, b.manifest_digest);
  EXPECT_EQ(named->references, std::vector<std::string>{"t2"});
}

// Two tags of one digest (umoci's layout after a second tag): refused
// without a name, with a message naming --ref; either name imports it.
TEST_F(ImageStoreTest, TwoTagsOfOneDigestAskForRef) {
  OciLayout layout(tmp_.sub("layout"));
  const BuiltImage img = layout.addImage("amd64", "twice");
  json first = img.indexEntry("t1"), second = img.indexEntry("t2");
  first.erase("platform");
  second.erase("platform");
  layout.writeIndexJson(json::array({first, second}));
  auto unnamed = store_->importPath(tmp_.sub("layout"));
  ASSERT_FALSE(unnamed);
  EXPECT_EQ(unnamed.error().code, ErrorCode::kExecutionRejected);
  EXPECT_NE(unnamed.error().context.find("--ref (one of t1, t2)"), std::string::npos)
      << unnamed.error().context;
  auto named = store_->importPath(tmp_.sub("layout"), "t1");
  ASSERT_TRUE(named) << named.error().message();
  EXPECT_EQ(named->digest, img.manifest_digest);
}

// "host" names the host image: an imported image may not take the name.
TEST_F(ImageStoreTest, AnImageNamedHostIsRefused) {
  layoutWith("layout", "host", "host");
  auto stored = store_->importPath(tmp_.sub("layout"));
  ASSERT_FALSE(stored);
  EXPECT_EQ(stored.error().code, ErrorCode::kExecutionRejected);
  EXPECT_NE(stored.error().context.find("is named 'host', the name of the host image"),
            std::string::npos)
      << stored.error().context;
  EXPECT_TRUE(store_->list().empty());
  EXPECT_EQ(entriesIn(store_->directory() + "/blobs/sha256"), 0u);
  // Another name of the same image is fine.
  layoutWith("other", "host", "host-tools");
  EXPECT_TRUE(store_->importPath(tmp_.sub("other")));
}

TEST_F(ImageStoreTest, NotALayoutNorAnArchiveIsNamed) {
  fs::create_directories(tmp_.sub("empty"));
  auto dir = store_->importPath(tmp_.sub("empty"));
  ASSERT_FALSE(dir);
  EXPECT_NE(dir.error().context.find("index.json"), std::string::npos) << dir.error().context;
  std::ofstream(tmp_.sub("junk.tar")) << "this is not a tar archive at all";
  auto junk = store_->importPath(tmp_.sub("junk.tar"));
  ASSERT_FALSE(junk);
  EXPECT_EQ(junk.error().code, ErrorCode::kExecutionRejected);
  auto missing = store_->importPath(tmp_.sub("absent"));
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().context.find("absent"), std::string::npos);
  expectNothingInFlight();
}

// A reference names one digest until an import or pull moves it; the image
// it named before stays, by its digest.
TEST_F(ImageStoreTest, AReferenceMovesOnlyWithANewImport) {
  const BuiltImage a = layoutWith("a", "image-a", "v1");
  const BuiltImage b = layoutWith("b", "image-b", "v1");
  ASSERT_TRUE(store_->importPath(tmp_.sub("a")));
  EXPECT_EQ(store_->find("v1")->digest, a.manifest_digest);
  ASSERT_TRUE(store_->importPath(tmp_.sub("b")));
  EXPECT_EQ(store_->find("v1")->digest, b.manifest_digest);
  auto old = store_->find(a.manifest_digest);
  ASSERT_TRUE(old);
  EXPECT_TRUE(old->references.empty());
  EXPECT_EQ(readText(store_->use(a.manifest_digest)->root_dir + "/etc/marker"), "image-a\n");
}

TEST_F(ImageStoreTest, RemoveForgetsTheImageAndCollectsWhatNothingElseUses) {
  const BuiltImage a = layoutWith("a", "image-a", "a:1");
  const BuiltImage b = layoutWith("b", "image-b", "b:1");
  ASSERT_TRUE(store_->importPath(tmp_.sub("a")));
  ASSERT_TRUE(store_->importPath(tmp_.sub("b")));
  const std::string blobs = store_->directory() + "/blobs/sha256/";
  const std::string roots = store_->directory() + "/roots/";
  auto removed = store_->remove("a:1");
  ASSERT_TRUE(removed) << removed.error().message();
  EXPECT_EQ(removed->digest, a.manifest_digest);
  EXPECT_FALSE(store_->find(a.manifest_digest));
  EXPECT_FALSE(fs::exists(blobs + a.manifest_digest.substr(7)));
  EXPECT_FALSE(fs::exists(blobs + a.layer_digests[0].substr(7)));
  EXPECT_FALSE(fs::exists(roots + a.manifest_digest.substr(7)));
  EXPECT_TRUE(fs::exists(blobs + b.layer_digests[0].substr(7)));
  EXPECT_TRUE(fs::exists(roots + b.manifest_digest.substr(7)));

  // A root in use stays through a collection, and goes at the next one.
  auto held = store_->use(b.manifest_digest);
  ASSERT_TRUE(held);
  ASSERT_TRUE(store_->remove(b.manifest_digest));
  EXPECT_TRUE(fs::exists(held->root_dir + "/etc/marker")) << "a held root was collected";
  held = tl::unexpected(Error{ErrorCode::kNotFound, 0, "released"});
  auto gc = store_->collectGarbage();
  ASSERT_TRUE(gc);
  EXPECT_EQ(gc->roots, 1);
  EXPECT_FALSE(fs::exists(roots + b.manifest_digest.substr(7)));
  EXPECT_EQ(entriesIn(store_->directory() + "/blobs/sha256"), 0u);
  EXPECT_FALSE(store_->remove("b:1"));
}

// A scripted registry on loopback serving `images` by tag (their manifests
// as OCI manifests, their config and layers as blobs); `blob_requests`
// counts the GETs of each blob.
struct ScriptedRegistry {
  std::map<std::string, BuiltImage> images;
  std::map<std::string, int> blob_requests;
  std::mutex mu;
  std::unique_ptr<testing::HttpTestServer> server;

  testing::HttpResponse answer(const testing::HttpRequest& req) {
    const std::string manifests = "/v2/test/img/manifests/", blobs = "/v2/test/img/blobs/";
    for (const auto& [tag, img] : images) {
      if (req.path == manifests + tag || req.path == manifests + img.manifest_digest)
        return {
            200, {{"Content-Type", "application/vnd.oci.image.manifest.v1+json"}}, img.manifest};
      std::vector<std::pair<std::string, std::string>> all{{img.config_digest, img.config}};
      for (std::size_t i = 0; i < img.layers.size(); ++i)
        all.emplace_back(img.layer_digests[i], img.layers[i]);
      for (const auto& [digest, bytes] : all)
        if (req.path == blobs + digest) {
          std::lock_guard<std::mutex> lock(mu);
          ++blob_requests[digest];
          return {200, {{"Content-Type", "application/octet-stream"}}, bytes};
        }
    }
    return {404, {}, ""};
  }
  void start() {
    server = std::make_unique<testing::HttpTestServer>(
        "127.0.0.1", [this](const testing::HttpRequest& req) { return answer(req); });
  }
  ImageReference ref(const std::string& tag) const {
    auto r = parseImageReference(server->authority() + "/test/img:" + tag);
    EXPECT_TRUE(r);
    return r ? *r : ImageReference{};
  }
};

std::set<std::string> namesIn(const std::string& dir) {
  std::set<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) out.insert(e.path().filename().string());
  return out;
}

// A pull that is refused after its blobs were fetched and verified (a layer
// that climbs out of the root; an image for another platform) leaves
// nothing: the store's blobs are those of before, and nothing is recorded.
TEST_F(ImageStoreTest, ARefusedPullLeavesNoBlobBehind) {
  const BuiltImage good = layoutWith("good", "good", "v1");
  ASSERT_TRUE(store_->importPath(tmp_.sub("good")));
  OciLayout layout(tmp_.sub("served"));
  ScriptedRegistry registry;
  registry.images["hostile"] = layout.addImageOf(
      "amd64", {{{"ok.txt", "fine"}}, {{"../../escaped.txt", "out"}}}, {"PATH=/usr/bin"});
  registry.images["arm"] = layout.addImage("arm64", "arm");
  registry.start();
  ASSERT_TRUE(registry.server->ok());
  const std::string blobs = store_->directory() + "/blobs/sha256";
  const std::set<std::string> before = namesIn(blobs);
  ASSERT_FALSE(before.empty());
  RegistryClient client;
  for (const char* tag : {"hostile", "arm"}) {
    auto pulled = store_->pull(registry.ref(tag), client);
    ASSERT_FALSE(pulled) << tag;
    EXPECT_EQ(pulled.error().code, ErrorCode::kExecutionRejected) << pulled.error().message();
    EXPECT_EQ(registry.blob_requests[registry.images[tag].config_digest], 1) << "fetched: " << tag;
    EXPECT_EQ(namesIn(blobs), before) << tag << ": " << pulled.error().message();
    EXPECT_EQ(store_->list().size(), 1u);
    EXPECT_EQ(namesIn(store_->directory() + "/locks").size(), 0u);
    expectNothingInFlight();
  }
  EXPECT_EQ(store_->find("v1")->digest, good.manifest_digest);
}

TEST(ImageStoreOpen, TheDirectoryMustBeAbsolute) {
  auto store = ImageStore::open("relative/store");
  ASSERT_FALSE(store);
  EXPECT_NE(store.error().context.find("relative/store"), std::string::npos);
}

// A pull from a real registry: the digest is the registry's, and a moved
// tag changes nothing until it is pulled again. Two pulls at once share the
// work and agree.
TEST(ImageStorePull, PullsByTheRegistrysDigestAndATagMovesOnlyWithAPull) {
  ASSERT_EQ(::access(kSkopeo.c_str(), X_OK), 0) << kSkopeo << " missing: run scripts/bootstrap";
  testing::RegistryServer registry;
  auto started = registry.start();
  ASSERT_TRUE(started) << started.error().message();
  TempDir tmp;
  auto push = [&](const std::string& layout_dir) {
    auto run = testing::runTool(
        {kSkopeo, "--insecure-policy", "copy", "--quiet", "--dest-tls-verify=false",
         "oci:" + layout_dir, "docker://" + registry.address() + "/team/app:v1"},
        tmp.path());
    ASSERT_EQ(run.exit_code, 0) << run.errors;
  };
  OciLayout one(tmp.sub("one"));
  const BuiltImage first = one.addImage("amd64", "pulled-first");
  one.writeIndexJson(json::array({first.indexEntry()}));
  push(tmp.sub("one"));

  auto store = ImageStore::open(tmp.sub("store"));
  ASSERT_TRUE(store) << store.error().message();
  auto ref = parseImageReference(registry.address() + "/team/app:v1");
  ASSERT_TRUE(ref);
  RegistryClient client;
  Result<StoredImage> a, b;
  std::thread other([&] { b = (*store)->pull(*ref, client); });
  a = (*store)->pull(*ref, client);
  other.join();
  ASSERT_TRUE(a) << a.error().message();
  ASSERT_TRUE(b) << b.error().message();
  EXPECT_EQ(a->digest, first.manifest_digest);
  EXPECT_EQ(b->digest, first.manifest_digest);
  EXPECT_EQ(a->references, std::vector<std::string>{registry.address() + "/team/app:v1"});
  EXPECT_EQ(readText((*store)->use(a->digest)->root_dir + "/etc/marker"), "pulled-first\n");

  // The tag moves in the registry; the store's digest does not until a pull.
  OciLayout two(tmp.sub("two"));
  const BuiltImage second = two.addImage("amd64", "pulled-second");
  two.writeIndexJson(json::array({second.indexEntry()}));
  push(tmp.sub("two"));
  EXPECT_EQ((*store)->find(registry.address() + "/team/app:v1")->digest, first.manifest_digest);
  auto again = (*store)->pull(*ref, client);
  ASSERT_TRUE(again) << again.error().message();
  EXPECT_EQ(again->digest, second.manifest_digest);
  EXPECT_EQ((*store)->find(registry.address() + "/team/app:v1")->digest, second.manifest_digest);
  EXPECT_TRUE((*store)->find(first.manifest_digest)) << "the first image stays, by digest";
  EXPECT_EQ(entriesIn((*store)->directory() + "/tmp"), 0u);
}

}  // namespace
}  // namespace airlock::images
