// The registry client (images/registry_client.h), against
//   * a real registry: Debian's docker-registry on a loopback port
//     (registry_server.h), with images the test builds as OCI layouts
//     (oci_layout.h) and pushes with skopeo, compared with what the
//     registry and skopeo report;
//   * scripted loopback HTTP servers (http_test_server.h) for what a real
//     registry does not do on request: Bearer token authentication, a
//     redirect to a blob store on another host, wrong digests and sizes.
// Every address is a 127.0.0.0/8 literal: nothing is resolved.
#include "airlock/images/registry_client.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "airlock/images/oci_documents.h"
#include "airlock/sys/io.h"
#include "airlock/sys/unique_fd.h"
#include "http_test_server.h"
#include "oci_layout.h"
#include "registry_server.h"
#include "test_tree.h"

namespace airlock::images {
namespace {

using nlohmann::json;
using testing::BuiltImage;
using testing::HttpRequest;
using testing::HttpResponse;
using testing::HttpTestServer;
using testing::OciLayout;
using testing::RegistryServer;
using testing::runTool;
using testing::sha256Digest;
using workspace::testing::TempDir;

const std::string kSkopeo = "/usr/bin/skopeo";

sys::UniqueFd memFile() {
  return sys::UniqueFd(::memfd_create("blob", MFD_CLOEXEC));
}

std::string contents(int fd) {
  std::string out;
  char buf[65536];
  off_t off = 0;
  ssize_t n = 0;
  while ((n = sys::preadSome(fd, buf, sizeof buf, off)) > 0) {
    out.append(buf, static_cast<std::size_t>(n));
    off += n;
  }
  return out;
}

ImageReference refOf(const std::string& text) {
  auto r = parseImageReference(text);
  EXPECT_TRUE(r) << text << ": " << (r ? "" : r.error().context);
  return r ? *r : ImageReference{};
}

bool mentions(const Error& e, const std::string& text) {
  return e.context.find(text) != std::string::npos;
}

// --- the real registry ---

class RealRegistry : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new RegistryServer;
    auto r = server_->start();
    if (!r) start_error_ = r.error().message();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(start_error_.empty()) << start_error_;
    ASSERT_EQ(::access(kSkopeo.c_str(), X_OK), 0) << kSkopeo << " missing: run scripts/bootstrap";
  }

  std::string address() const { return server_->address(); }

  // skopeo copy from the layout to docker://<registry>/<dest>.
  void push(const std::string& source, const std::string& dest,
            const std::vector<std::string>& flags) {
    std::vector<std::string> argv = {kSkopeo, "--insecure-policy", "copy", "--quiet",
                                     "--dest-tls-verify=false"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.push_back(source);
    argv.push_back("docker://" + address() + "/" + dest);
    auto run = runTool(argv, tmp_.path());
    ASSERT_EQ(run.exit_code, 0) << "skopeo copy: " << run.output << run.errors;
  }

  // The "Digest" skopeo inspect reports for docker://<registry>/<ref>.
  std::string inspectDigest(const std::string& ref) {
    auto run = runTool({kSkopeo, "--insecure-policy", "inspect", "--tls-verify=false",
                        "docker://" + address() + "/" + ref},
                       tmp_.path());
    EXPECT_EQ(run.exit_code, 0) << run.errors;
    const json j = json::parse(run.output, nullptr, false);
    if (!j.is_object() || !j.contains("Digest") || !j["Digest"].is_string()) {
      ADD_FAILURE() << "skopeo inspect printed no Digest: " << run.output;
      return "";
    }
    return j["Digest"].get<std::string>();
  }

  // Fetches every layer and the config of `manifest` and checks them against
  // what the layout holds.
  void fetchAndCheckBlobs(RegistryClient& client, const ImageReference& ref,
                          const std::string& manifest_bytes, const BuiltImage& img,
                          bool same_bytes) {
    auto m = parseImageManifest(manifest_bytes);
    ASSERT_TRUE(m) << m.error().context;
    ASSERT_EQ(m->layers.size(), img.layers.size());
    for (std::size_t i = 0; i < m->layers.size(); ++i) {
      sys::UniqueFd fd = memFile();
      ASSERT_TRUE(fd.valid());
      auto r = client.fetchBlob(ref, m->layers[i].digest, m->layers[i].size, fd.get());
      ASSERT_TRUE(r) << r.error().message();
      const std::string got = contents(fd.get());
      EXPECT_EQ(static_cast<std::int64_t>(got.size()), m->layers[i].size);
      EXPECT_EQ(sha256Digest(got), m->layers[i].digest);
      if (same_bytes) {
        EXPECT_EQ(got, img.layers[i]);
      }
    }
    sys::UniqueFd fd = memFile();
    auto r = client.fetchBlob(ref, m->config.digest, m->config.size, fd.get());
    ASSERT_TRUE(r) << r.error().message();
    auto config = parseImageConfig(contents(fd.get()));
    ASSERT_TRUE(config) << config.error().context;
    EXPECT_EQ(config->architecture, img.architecture);
    EXPECT_EQ(config->os, "linux");
    EXPECT_EQ(config->user, "1000:1000");
    EXPECT_EQ(config->working_dir, "/srv");
    ASSERT_EQ(config->env.size(), 2u);
    EXPECT_EQ(config->env[0], "PATH=/usr/bin:/bin");
    EXPECT_EQ(config->diff_ids, img.diff_ids);
  }

  static RegistryServer* server_;
  static std::string start_error_;
  TempDir tmp_;
};

RegistryServer* RealRegistry::server_ = nullptr;
std::string RealRegistry::start_error_;

TEST_F(RealRegistry, ResolveGetsTheDigestTheRegistryReportsAndEveryBlobVerifies) {
  OciLayout layout(tmp_.sub("layout"));
  const BuiltImage img = layout.addImage("amd64", "hello v1");
  layout.writeIndexJson(json::array({img.indexEntry("v1")}));
  ASSERT_TRUE(layout.ok());
  ASSERT_NO_FATAL_FAILURE(
      push("oci:" + layout.dir() + ":v1", "test/img:v1", {"--preserve-digests"}));
  const std::string reported = inspectDigest("test/img:v1");

  std::vector<std::pair<std::int64_t, std::int64_t>> progress;
  RegistryClientOptions options;
  options.progress = [&progress](std::int64_t done, std::int64_t total) {
    progress.emplace_back(done, total);
  };
  RegistryClient client(options);
  const ImageReference ref = refOf(address() + "/test/img:v1");
  auto m = client.resolve(ref);
  ASSERT_TRUE(m) << m.error().message();
  EXPECT_EQ(m->digest, reported);
  EXPECT_EQ(m->digest, img.manifest_digest);
  EXPECT_EQ(m->bytes, img.manifest);
  EXPECT_EQ(m->media_type, kOciManifestType);
  ASSERT_NO_FATAL_FAILURE(fetchAndCheckBlobs(client, ref, m->bytes, img, true));
  ASSERT_FALSE(progress.empty());
  // The last report of the last blob (the config) is complete.
  EXPECT_EQ(progress.back().first, progress.back().second);
  EXPECT_EQ(progress.back().second, static_cast<std::int64_t>(img.config.size()));

  // By digest: the same manifest, verified against the digest asked for.
  auto by_digest = client.resolve(refOf(address() + "/test/img@" + reported));
  ASSERT_TRUE(by_digest) << by_digest.error().message();
  EXPECT_EQ(by_digest->bytes, img.manifest);
}

TEST_F(RealRegistry, ADockerSchema2ImageResolvesAndItsLayersVerify) {
  OciLayout layout(tmp_.sub("layout"));
  const BuiltImage img = layout.addImage("amd64", "docker format");
  layout.writeIndexJson(json::array({img.indexEntry("v1")}));
  ASSERT_TRUE(layout.ok());
  // skopeo rewrites the manifest and config as Docker schema 2.
  ASSERT_NO_FATAL_FAILURE(
      push("oci:" + layout.dir() + ":v1", "test/docker:v1", {"--format", "v2s2"}));
  const std::string reported = inspectDigest("test/docker:v1");
  RegistryClient client;
  const ImageReference ref = refOf(address() + "/test/docker:v1");
  auto m = client.resolve(ref);
  ASSERT_TRUE(m) << m.error().message();
  EXPECT_EQ(m->digest, reported);
  EXPECT_EQ(m->media_type, kDockerManifestType);
  auto parsed = parseImageManifest(m->bytes);
  ASSERT_TRUE(parsed) << parsed.error().context;
  EXPECT_EQ(parsed->config.media_type, kDockerConfigType);
  ASSERT_FALSE(parsed->layers.empty());
  EXPECT_EQ(parsed->layers[0].media_type, kDockerLayerGzipType);
  ASSERT_NO_FATAL_FAILURE(fetchAndCheckBlobs(client, ref, m->bytes, img, true));
}

TEST_F(RealRegistry, AWrongDigestOrSizeIsRefused) {
  OciLayout layout(tmp_.sub("layout"));
  const BuiltImage img = layout.addImage("amd64", "sizes");
  layout.writeIndexJson(json::array({img.indexEntry("v1")}));
  ASSERT_TRUE(layout.ok());
  ASSERT_NO_FATAL_FAILURE(
      push("oci:" + layout.dir() + ":v1", "test/img:v1", {"--preserve-digests"}));
  RegistryClient client;
  const ImageReference ref = refOf(address() + "/test/img:v1");
  const std::string& layer = img.layer_digests[0];
  const auto size = static_cast<std::int64_t>(img.layers[0].size());

  // A digest the registry does not have.
  const std::string absent = sha256Digest("no such blob");
  sys::UniqueFd fd = memFile();
  auto r = client.fetchBlob(ref, absent, size, fd.get());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kExecutionRejected);
  EXPECT_EQ(r.error().context,
            "registry " + address() + ": repository test/img has no blob " + absent + " (404)");

  // The right digest with a smaller size: the transfer stops, nothing past
  // the expected size is written.
  fd = memFile();
  r = client.fetchBlob(ref, layer, size - 10, fd.get());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kExecutionRejected);
  EXPECT_TRUE(
      mentions(r.error(), "sent more than the " + std::to_string(size - 10) + " bytes expected"))
      << r.error().context;
  EXPECT_LE(contents(fd.get()).size(), static_cast<std::size_t>(size - 10));

  // A larger size: the whole blob is short of it.
  fd = memFile();
  r = client.fetchBlob(ref, layer, size + 1, fd.get());
  ASSERT_FALSE(r);
  EXPECT_TRUE(mentions(r.error(), "sent " + std::to_string(size) + " bytes, " +
                                      std::to_string(size + 1) + " expected"))
      << r.error().context;

  // A manifest by a digest the registry does not have.
  auto m = client.fetchManifest(ref, absent);
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().code, ErrorCode::kExecutionRejected);
  EXPECT_TRUE(mentions(m.error(), "has no manifest " + absent + " (404)")) << m.error().context;

  // Not a digest at all.
  r = client.fetchBlob(ref, "sha256:ABC", 1, fd.get());
  ASSERT_FALSE(r);
  EXPECT_TRUE(mentions(r.error(), "is not sha256: and 64 lowercase hex digits"));
}

TEST_F(RealRegistry, AMissingTagIsAClear404) {
  OciLayout layout(tmp_.sub("layout"));
  const BuiltImage img = layout.addImage("amd64", "tags");
  layout.writeIndexJson(json::array({img.indexEntry("v1")}));
  ASSERT_TRUE(layout.ok());
  ASSERT_NO_FATAL_FAILURE(
      push("oci:" + layout.dir() + ":v1", "team/py:3.12", {"--preserve-digests"}));
  RegistryClient client;
  auto m = client.resolve(refOf(address() + "/team/py:3.13"));
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().code, ErrorCode::kExecutionRejected);
  EXPECT_EQ(m.error().context,
            "registry " + address() + ": repository team/py has no tag 3.13 (404)");
  auto repo = client.resolve(refOf(address() + "/team/nothing:3.12"));
  ASSERT_FALSE(repo);
  EXPECT_EQ(repo.error().code, ErrorCode::kExecutionRejected);
  EXPECT_TRUE(mentions(repo.error(), "team/nothing")) << repo.error().context;
  EXPECT_TRUE(mentions(repo.error(), "(404)")) << repo.error().context;
  EXPECT_TRUE(client.resolve(refOf(address() + "/team/py:3.12")));
}

TEST_F(RealRegistry, AMultiArchIndexResolvesToLinuxAmd64) {
  OciLayout layout(tmp_.sub("layout"));
  const BuiltImage arm = layout.addImage("arm64", "multi arm64");
  const BuiltImage amd = layout.addImage("amd64", "multi amd64");
  const BuiltImage s390 = layout.addImage("s390x", "multi s390x");
  const auto [index_bytes, index_digest] =
      layout.addIndex(json::array({arm.indexEntry(), amd.indexEntry(), s390.indexEntry()}));
  json top = {{"mediaType", kOciIndexType},
              {"digest", index_digest},
              {"size", index_bytes.size()},
              {"annotations", {{"org.opencontainers.image.ref.name", "multi"}}}};
  layout.writeIndexJson(json::array({top}));
  ASSERT_TRUE(layout.ok());
  ASSERT_NO_FATAL_FAILURE(
      push("oci:" + layout.dir() + ":multi", "test/multi:v1", {"--all", "--preserve-digests"}));

  RegistryClient client;
  const ImageReference ref = refOf(address() + "/test/multi:v1");
  auto top_fetched = client.fetchManifest(ref, "v1");
  ASSERT_TRUE(top_fetched) << top_fetched.error().message();
  EXPECT_EQ(top_fetched->digest, index_digest);
  EXPECT_EQ(top_fetched->media_type, kOciIndexType);

  auto m = client.resolve(ref);
  ASSERT_TRUE(m) << m.error().message();
  EXPECT_EQ(m->digest, amd.manifest_digest);
  EXPECT_NE(m->digest, arm.manifest_digest);
  EXPECT_EQ(m->bytes, amd.manifest);
  ASSERT_NO_FATAL_FAILURE(fetchAndCheckBlobs(client, ref, m->bytes, amd, true));
}

TEST_F(RealRegistry, AnIndexWithoutLinuxAmd64ListsWhatItHas) {
  OciLayout layout(tmp_.sub("layout"));
  const BuiltImage arm = layout.addImage("arm64", "no amd64 arm64");
  const BuiltImage s390 = layout.addImage("s390x", "no amd64 s390x");
  const auto [index_bytes, index_digest] =
      layout.addIndex(json::array({arm.indexEntry(), s390.indexEntry()}));
  json top = {{"mediaType", kOciIndexType},
              {"digest", index_digest},
              {"size", index_bytes.size()},
              {"annotations", {{"org.opencontainers.image.ref.name", "multi"}}}};
  layout.writeIndexJson(json::array({top}));
  ASSERT_TRUE(layout.ok());
  ASSERT_NO_FATAL_FAILURE(
      push("oci:" + layout.dir() + ":multi", "test/noamd:v1", {"--all", "--preserve-digests"}));
  RegistryClient client;
  auto m = client.resolve(refOf(address() + "/test/noamd:v1"));
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().code, ErrorCode::kExecutionRejected);
  EXPECT_TRUE(mentions(m.error(), "has no linux/amd64 image")) << m.error().context;
  EXPECT_TRUE(mentions(m.error(), "linux/arm64/v8")) << m.error().context;
  EXPECT_TRUE(mentions(m.error(), "linux/s390x")) << m.error().context;
}

// --- scripted servers ---

// A manifest whose bytes and digest the scripted registry serves.
struct Served {
  std::string manifest;
  std::string digest;
  std::string blob = "blob bytes for the scripted registry";
  std::string blob_digest = sha256Digest("blob bytes for the scripted registry");
};

Served servedManifest() {
  Served s;
  json m = {{"schemaVersion", 2},
            {"mediaType", kOciManifestType},
            {"config", {{"mediaType", kOciConfigType}, {"digest", s.blob_digest}, {"size", 36}}},
            {"layers", json::array()}};
  s.manifest = m.dump();
  s.digest = sha256Digest(s.manifest);
  return s;
}

HttpResponse manifestResponse(const Served& s) {
  return {200,
          {{"Content-Type", std::string(kOciManifestType)}, {"Docker-Content-Digest", s.digest}},
          s.manifest};
}

TEST(RegistryClientScripted, BearerTokenIsFetchedUsedAndNotSentToARedirectedBlobStore) {
  const Served s = servedManifest();
  // The blob store, on another loopback address (another host).
  HttpTestServer store("127.0.0.2", [&s](const HttpRequest& req) -> HttpResponse {
    if (req.path == "/store/blob") return {200, {}, s.blob};
    return {404, {}, ""};
  });
  ASSERT_TRUE(store.ok());
  std::string realm;
  HttpTestServer registry("127.0.0.1", [&](const HttpRequest& req) -> HttpResponse {
    if (req.path == "/token") {
      if (req.query != "service=fake-registry&scope=repository%3Atest%2Fimg%3Apull")
        return {400, {}, "bad query"};
      return {200,
              {{"Content-Type", "application/json"}},
              R"({"token":"good-token","expires_in":300})"};
    }
    if (req.header("authorization") != "Bearer good-token")
      return {401,
              {{"WWW-Authenticate", "Bearer realm=\"" + realm +
                                        "\",service=\"fake-registry\",scope=\"repository:test/"
                                        "img:pull\""}},
              R"({"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]})"};
    if (req.path == "/v2/test/img/manifests/v1") return manifestResponse(s);
    if (req.path == "/v2/test/img/blobs/" + s.blob_digest)
      return {307, {{"Location", store.origin() + "/store/blob?X-Signature=secret"}}, ""};
    return {404, {}, ""};
  });
  ASSERT_TRUE(registry.ok());
  realm = registry.origin() + "/token";

  RegistryClient client;
  const ImageReference ref = refOf(registry.authority() + "/test/img:v1");
  auto m = client.resolve(ref);
  ASSERT_TRUE(m) << m.error().message();
  EXPECT_EQ(m->digest, s.digest);

  sys::UniqueFd fd = memFile();
  auto b = client.fetchBlob(ref, s.blob_digest, static_cast<std::int64_t>(s.blob.size()), fd.get());
  ASSERT_TRUE(b) << b.error().message();
  EXPECT_EQ(contents(fd.get()), s.blob);

  const auto seen = registry.requests();
  ASSERT_EQ(seen.size(), 4u);  // manifest (401), token, manifest, blob (token cached)
  EXPECT_EQ(seen[0].path, "/v2/test/img/manifests/v1");
  EXPECT_FALSE(seen[0].hasHeader("authorization"));
  EXPECT_NE(seen[0].header("accept").find(std::string(kOciIndexType)), std::string::npos);
  EXPECT_NE(seen[0].header("accept").find(std::string(kDockerManifestType)), std::string::npos);
  EXPECT_EQ(seen[1].path, "/token");
  EXPECT_FALSE(seen[1].hasHeader("authorization"));
  EXPECT_EQ(seen[2].header("authorization"), "Bearer good-token");
  EXPECT_EQ(seen[3].path, "/v2/test/img/blobs/" + s.blob_digest);
  EXPECT_EQ(seen[3].header("authorization"), "Bearer good-token");
  const auto at_store = store.requests();
  ASSERT_EQ(at_store.size(), 1u);
  EXPECT_EQ(at_store[0].query, "X-Signature=secret");
  EXPECT_FALSE(at_store[0].hasHeader("authorization"));
}

TEST(RegistryClientScripted, ARefusedTokenAndBasicAuthAreClearErrors) {
  std::string realm;
  HttpTestServer registry("127.0.0.1", [&](const HttpRequest& req) -> HttpResponse {
    if (req.path == "/token") return {401, {}, "no"};
    if (req.path.find("/v2/basic/") == 0)
      return {401, {{"WWW-Authenticate", "Basic realm=\"Registry Realm\""}}, ""};
    if (req.path.find("/v2/badtoken/") == 0)
      return {401, {{"WWW-Authenticate", "Bearer realm=\"" + realm + "-json\""}}, ""};
    if (req.path == "/token-json") return {200, {}, R"({"token":"bad\r\nX-Injected: 1"})"};
    return {401, {{"WWW-Authenticate", "Bearer realm=\"" + realm + "\",service=\"s\""}}, ""};
  });
  ASSERT_TRUE(registry.ok());
  realm = registry.origin() + "/token";
  RegistryClient client;
  auto m = client.fetchManifest(refOf(registry.authority() + "/test/img:v1"), "v1");
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().code, ErrorCode::kExecutionRejected);
  EXPECT_TRUE(mentions(m.error(), "refused a token for 'repository:test/img:pull' (401)"))
      << m.error().context;
  m = client.fetchManifest(refOf(registry.authority() + "/basic/img:v1"), "v1");
  ASSERT_FALSE(m);
  EXPECT_TRUE(mentions(m.error(), "needs basic credentials")) << m.error().context;
  m = client.fetchManifest(refOf(registry.authority() + "/badtoken/img:v1"), "v1");
  ASSERT_FALSE(m);
  EXPECT_TRUE(mentions(m.error(), "without a usable token")) << m.error().context;
}

TEST(RegistryClientScripted, ATokenThatIsStillRefusedIsAccessDenied) {
  std::string realm;
  HttpTestServer registry("127.0.0.1", [&](const HttpRequest& req) -> HttpResponse {
    if (req.path == "/token") return {200, {}, R"({"access_token":"t"})"};
    return {401,
            {{"WWW-Authenticate", "Bearer realm=\"" + realm + "\""}},
            R"({"errors":[{"code":"DENIED"}]})"};
  });
  ASSERT_TRUE(registry.ok());
  realm = registry.origin() + "/token";
  RegistryClient client;
  auto m = client.fetchManifest(refOf(registry.authority() + "/test/img:v1"), "v1");
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().code, ErrorCode::kExecutionRejected);
  EXPECT_TRUE(
      mentions(m.error(), "access to tag v1 of repository test/img was denied (401 DENIED)"))
      << m.error().context;
  const auto seen = registry.requests();
  ASSERT_EQ(seen.size(), 3u);  // one token, one retry: no loop
  EXPECT_EQ(seen[2].header("authorization"), "Bearer t");
}

TEST(RegistryClientScripted, ManifestDigestsAreVerified) {
  const Served s = servedManifest();
  HttpTestServer registry("127.0.0.1", [&](const HttpRequest& req) -> HttpResponse {
    if (req.path == "/v2/test/img/manifests/lying")
      return {200,
              {{"Content-Type", std::string(kOciManifestType)},
               {"Docker-Content-Digest", sha256Digest("other")}},
              s.manifest};
    // Whatever digest is asked for, the same bytes.
    if (req.path.find("/v2/test/img/manifests/") == 0)
      return {200, {{"Content-Type", std::string(kOciManifestType)}}, s.manifest};
    return {404, {}, ""};
  });
  ASSERT_TRUE(registry.ok());
  RegistryClient client;
  const ImageReference ref = refOf(registry.authority() + "/test/img:v1");
  auto m = client.fetchManifest(ref, "lying");
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().code, ErrorCode::kExecutionRejected);
  EXPECT_TRUE(mentions(m.error(), "Docker-Content-Digest says")) << m.error().context;
  const std::string other = sha256Digest("other");
  m = client.fetchManifest(ref, other);
  ASSERT_FALSE(m);
  EXPECT_TRUE(mentions(m.error(), "hash to " + s.digest + ", not the digest asked for"))
      << m.error().context;
  m = client.fetchManifest(ref, s.digest);
  ASSERT_TRUE(m) << m.error().message();
  m = client.fetchManifest(ref, "v1");  // no header: accepted, digest computed
  ASSERT_TRUE(m) << m.error().message();
  EXPECT_EQ(m->digest, s.digest);
  m = client.fetchManifest(ref, "bad tag");
  ASSERT_FALSE(m);
  EXPECT_TRUE(mentions(m.error(), "is neither a tag nor a sha256 digest"));
}

TEST(RegistryClientScripted, AnIndexEntryMustMatchTheManifestItNames) {
  const Served s = servedManifest();
  // An inner index posing as the linux/amd64 manifest.
  const std::string inner =
      json({{"schemaVersion", 2}, {"mediaType", kOciIndexType}, {"manifests", json::array()}})
          .dump();
  const auto indexOf = [](const std::string& digest, std::size_t size) {
    return json({{"schemaVersion", 2},
                 {"mediaType", kOciIndexType},
                 {"manifests",
                  {{{"mediaType", kOciManifestType},
                    {"digest", digest},
                    {"size", size},
                    {"platform", {{"os", "linux"}, {"architecture", "amd64"}}}}}}})
        .dump();
  };
  const std::string wrong_size = indexOf(s.digest, s.manifest.size() + 1);
  const std::string nested = indexOf(sha256Digest(inner), inner.size());
  HttpTestServer registry("127.0.0.1", [&](const HttpRequest& req) -> HttpResponse {
    const std::string index_type(kOciIndexType);
    if (req.path == "/v2/test/img/manifests/wrongsize")
      return {200, {{"Content-Type", index_type}}, wrong_size};
    if (req.path == "/v2/test/img/manifests/nested")
      return {200, {{"Content-Type", index_type}}, nested};
    if (req.path == "/v2/test/img/manifests/" + s.digest) return manifestResponse(s);
    if (req.path == "/v2/test/img/manifests/" + sha256Digest(inner))
      return {200, {{"Content-Type", index_type}}, inner};
    return {404, {}, ""};
  });
  ASSERT_TRUE(registry.ok());
  RegistryClient client;
  auto m = client.resolve(refOf(registry.authority() + "/test/img:wrongsize"));
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().code, ErrorCode::kExecutionRejected);
  EXPECT_TRUE(mentions(m.error(), "bytes, the index says " + std::to_string(s.manifest.size() + 1)))
      << m.error().context;
  m = client.resolve(refOf(registry.authority() + "/test/img:nested"));
  ASSERT_FALSE(m);
  EXPECT_TRUE(mentions(m.error(), "is an index inside an index")) << m.error().context;
}

// One document, two images (CVE-2021-41190): a document without mediaType
// that holds both an image manifest's config and layers and an index's
// manifests (whose linux/amd64 entry is another, valid manifest). Read by
// the Content-Type it would be image X under one and image Y under the
// other; it is refused under both, by tag and by digest, and no blob is
// asked for.
TEST(RegistryClientScripted, ADocumentThatReadsAsBothKindsIsRefusedWhateverTheContentType) {
  const Served other = servedManifest();
  json both = json::parse(other.manifest);
  both.erase("mediaType");
  both["layers"] =
      json::array({{{"mediaType", kOciLayerGzipType}, {"digest", sha256Digest("x")}, {"size", 1}}});
  both["manifests"] = json::array({{{"mediaType", kOciManifestType},
                                    {"digest", other.digest},
                                    {"size", other.manifest.size()},
                                    {"platform", {{"os", "linux"}, {"architecture", "amd64"}}}}});
  const std::string ambiguous = both.dump();
  const std::string digest = sha256Digest(ambiguous);
  std::string content_type;  // what the registry says the document is
  HttpTestServer registry("127.0.0.1", [&](const HttpRequest& req) -> HttpResponse {
    if (req.path == "/v2/test/img/manifests/v1" || req.path == "/v2/test/img/manifests/" + digest)
      return {200, {{"Content-Type", content_type}, {"Docker-Content-Digest", digest}}, ambiguous};
    if (req.path == "/v2/test/img/manifests/" + other.digest) return manifestResponse(other);
    return {404, {}, ""};
  });
  ASSERT_TRUE(registry.ok());
  RegistryClient client;
  for (const std::string_view type : {kOciManifestType, kOciIndexType, kDockerManifestType,
                                      kDockerManifestListType, std::string_view()}) {
    content_type = type;
    for (const std::string& name : {std::string("/test/img:v1"), "/test/img@" + digest}) {
      auto m = client.resolve(refOf(registry.authority() + name));
      ASSERT_FALSE(m) << "Content-Type '" << type << "', " << name << " resolved to " << m->digest;
      EXPECT_EQ(m.error().code, ErrorCode::kExecutionRejected);
      EXPECT_TRUE(mentions(m.error(), "has no mediaType and has both manifests"))
          << m.error().context;
      EXPECT_TRUE(mentions(m.error(), "CVE-2021-41190")) << m.error().context;
    }
  }
  for (const auto& req : registry.requests())
    EXPECT_EQ(req.path.find("/v2/test/img/manifests/"), 0u) << "fetched " << req.path;
  for (const auto& req : registry.requests())
    EXPECT_NE(req.path, "/v2/test/img/manifests/" + other.digest) << "followed the index entry";
}

TEST(RegistryClientScripted, BodiesOverTheirCapsAndShortOrWrongBlobsAreRefused) {
  const std::string blob(1000, 'b');
  HttpTestServer registry("127.0.0.1", [&](const HttpRequest& req) -> HttpResponse {
    if (req.path == "/v2/test/img/manifests/huge")
      return {200,
              {{"Content-Type", std::string(kOciManifestType)}},
              std::string(kMaxDocumentBytes + 1, ' ')};
    if (req.path.find("/v2/test/img/blobs/") == 0) {
      if (req.path.find(sha256Digest("cut")) != std::string::npos)
        return {200, {}, blob.substr(0, 100), 1000};  // announces 1000, sends 100
      if (req.path.find(sha256Digest("wrong")) != std::string::npos) return {200, {}, blob};
      return {200, {}, blob};
    }
    return {500, {}, ""};
  });
  ASSERT_TRUE(registry.ok());
  RegistryClient client;
  const ImageReference ref = refOf(registry.authority() + "/test/img:v1");
  auto m = client.fetchManifest(ref, "huge");
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().code, ErrorCode::kExecutionRejected);
  EXPECT_TRUE(mentions(m.error(), "is larger than 4194304 bytes")) << m.error().context;

  // Right size, wrong bytes.
  sys::UniqueFd fd = memFile();
  auto b = client.fetchBlob(ref, sha256Digest("wrong"), 1000, fd.get());
  ASSERT_FALSE(b);
  EXPECT_EQ(b.error().code, ErrorCode::kExecutionRejected);
  EXPECT_TRUE(mentions(b.error(), "digest mismatch: the bytes sent hash to " + sha256Digest(blob)))
      << b.error().context;
  // The right bytes go through.
  fd = memFile();
  b = client.fetchBlob(ref, sha256Digest(blob), 1000, fd.get());
  ASSERT_TRUE(b) << b.error().message();
  // More than expected: stopped, at most expected_size written.
  fd = memFile();
  b = client.fetchBlob(ref, sha256Digest(blob), 999, fd.get());
  ASSERT_FALSE(b);
  EXPECT_TRUE(mentions(b.error(), "more than the 999 bytes expected")) << b.error().context;
  EXPECT_LE(contents(fd.get()).size(), 999u);
  // A transfer cut short is a transport failure (retriable).
  fd = memFile();
  b = client.fetchBlob(ref, sha256Digest("cut"), 1000, fd.get());
  ASSERT_FALSE(b);
  EXPECT_EQ(b.error().code, ErrorCode::kExecutionUnavailable) << b.error().context;
  // A 500 is retriable too.
  m = client.fetchManifest(ref, "v1");
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().code, ErrorCode::kExecutionUnavailable);
  EXPECT_TRUE(mentions(m.error(), "is unavailable for now (500)")) << m.error().context;
}

TEST(RegistryClientScripted, RedirectsToPlainHttpElsewhereAreRefusedBeforeConnecting) {
  const Served s = servedManifest();
  HttpTestServer registry("127.0.0.1", [&](const HttpRequest& req) -> HttpResponse {
    if (req.path == "/v2/test/img/blobs/" + s.blob_digest)
      // Not loopback and not listed: refused without a connection.
      return {302, {{"Location", "http://10.255.255.1/blob"}}, ""};
    if (req.path == "/v2/test/loop/manifests/v1")
      return {301, {{"Location", "/v2/test/loop/manifests/v1"}}, ""};
    return {404, {}, ""};
  });
  ASSERT_TRUE(registry.ok());
  RegistryClient client;
  sys::UniqueFd fd = memFile();
  auto b = client.fetchBlob(refOf(registry.authority() + "/test/img:v1"), s.blob_digest,
                            static_cast<std::int64_t>(s.blob.size()), fd.get());
  ASSERT_FALSE(b);
  EXPECT_EQ(b.error().code, ErrorCode::kExecutionRejected);
  EXPECT_TRUE(mentions(b.error(), "refusing http://10.255.255.1:80")) << b.error().context;
  auto m = client.fetchManifest(refOf(registry.authority() + "/test/loop:v1"), "v1");
  ASSERT_FALSE(m);
  EXPECT_TRUE(mentions(m.error(), "more than 5 redirects")) << m.error().context;
  EXPECT_EQ(registry.requests().size(), 1u + 6u);
}

TEST(RegistryClientScripted, ProxyVariablesAreIgnored) {
  const Served s = servedManifest();
  HttpTestServer trap("127.0.0.3", [](const HttpRequest&) -> HttpResponse {
    return {502, {}, "proxy"};
  });
  HttpTestServer registry("127.0.0.1", [&](const HttpRequest&) { return manifestResponse(s); });
  ASSERT_TRUE(trap.ok() && registry.ok());
  const std::string proxy = trap.origin();
  const char* names[] = {"http_proxy",  "HTTP_PROXY", "https_proxy",
                         "HTTPS_PROXY", "all_proxy",  "ALL_PROXY"};
  for (const char* n : names) ::setenv(n, proxy.c_str(), 1);
  ::unsetenv("no_proxy");
  ::unsetenv("NO_PROXY");
  RegistryClient client;
  auto m = client.fetchManifest(refOf(registry.authority() + "/test/img:v1"), "v1");
  for (const char* n : names) ::unsetenv(n);
  ASSERT_TRUE(m) << m.error().message();
  EXPECT_TRUE(trap.requests().empty());
  EXPECT_EQ(registry.requests().size(), 1u);
}

TEST(RegistryClientScripted, ConnectionRefusedIsUnavailableAndNamesTheRegistry) {
  std::uint16_t port = 0;
  {
    HttpTestServer gone("127.0.0.1", [](const HttpRequest&) { return HttpResponse{}; });
    ASSERT_TRUE(gone.ok());
    port = gone.port();
  }
  RegistryClientOptions options;
  options.timeout = std::chrono::seconds(10);
  RegistryClient client(options);
  const std::string reg = "127.0.0.1:" + std::to_string(port);
  auto m = client.fetchManifest(refOf(reg + "/test/img:v1"), "v1");
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().code, ErrorCode::kExecutionUnavailable);
  EXPECT_EQ(m.error().context.rfind("registry " + reg + ": ", 0), 0u) << m.error().context;
}

TEST(RegistryClient, PlainHttpIsForLoopbackAndListedRegistriesOnly) {
  EXPECT_TRUE(isPlainHttpRegistry("127.0.0.1:5000", {}));
  EXPECT_TRUE(isPlainHttpRegistry("127.9.8.7", {}));
  EXPECT_TRUE(isPlainHttpRegistry("localhost:5000", {}));
  EXPECT_TRUE(isPlainHttpRegistry("[::1]:5000", {}));
  EXPECT_FALSE(isPlainHttpRegistry("128.0.0.1:5000", {}));
  EXPECT_FALSE(isPlainHttpRegistry("127.0.0.1.example.com", {}));
  EXPECT_FALSE(isPlainHttpRegistry("[::2]:5000", {}));
  EXPECT_FALSE(isPlainHttpRegistry("registry-1.docker.io", {}));
  EXPECT_TRUE(isPlainHttpRegistry("Registry.Local:5000", {"registry.local:5000"}));
  EXPECT_FALSE(isPlainHttpRegistry("registry.local:5001", {"registry.local:5000"}));
}

TEST(RegistryClient, AHandBuiltReferenceIsCheckedBeforeItReachesAUrl) {
  RegistryClient client;
  ImageReference bad{"127.0.0.1:1", "../../etc?x=", "v1", ""};
  auto m = client.fetchManifest(bad, "v1");
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().code, ErrorCode::kExecutionRejected);
  EXPECT_TRUE(mentions(m.error(), "is not a valid registry and repository name"));
  sys::UniqueFd fd = memFile();
  auto b = client.fetchBlob(ImageReference{"127.0.0.1:1/x", "a", "v1", ""}, sha256Digest("x"), 1,
                            fd.get());
  ASSERT_FALSE(b);
  EXPECT_TRUE(mentions(b.error(), "is not a valid registry and repository name"));
}

}  // namespace
}  // namespace airlock::images
