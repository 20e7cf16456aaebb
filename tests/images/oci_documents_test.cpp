// OCI image documents (images/oci_documents.h) on samples shaped like what
// registries serve (written by hand here: an OCI index with an attestation
// entry as BuildKit pushes them, a Docker manifest list, OCI and Docker
// manifests, a Docker-style config, a signed schema 1 manifest), platform
// selection, and refusal of everything a registry should not have sent.
#include "airlock/images/oci_documents.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace airlock::images {
namespace {

using nlohmann::json;

// A distinct valid digest per seed.
std::string digestOf(int seed) {
  static const char* kHex = "0123456789abcdef";
  std::string hex(64, '0');
  unsigned v = static_cast<unsigned>(seed) * 2654435761u;
  for (int i = 0; i < 64; ++i) {
    hex[i] = kHex[(v >> ((i % 8) * 4)) & 0xf];
    if (i % 8 == 7) v = v * 1103515245u + 12345u;
  }
  return "sha256:" + hex;
}

std::string ociIndex() {
  json j = {
      {"schemaVersion", 2},
      {"mediaType", kOciIndexType},
      {"manifests",
       {
           {{"mediaType", kOciManifestType},
            {"digest", digestOf(1)},
            {"size", 1013},
            {"platform", {{"architecture", "arm64"}, {"os", "linux"}, {"variant", "v8"}}}},
           {{"mediaType", kOciManifestType},
            {"digest", digestOf(2)},
            {"size", 1013},
            {"platform", {{"architecture", "amd64"}, {"os", "linux"}}}},
           {{"mediaType", kOciManifestType},
            {"digest", digestOf(3)},
            {"size", 566},
            {"annotations",
             {{"vnd.docker.reference.digest", digestOf(2)},
              {"vnd.docker.reference.type", "attestation-manifest"}}},
            {"platform", {{"architecture", "unknown"}, {"os", "unknown"}}}},
       }},
      {"annotations", {{"org.opencontainers.image.created", "2026-11-30T00:00:00Z"}}},
  };
  return j.dump(3);
}

std::string dockerManifestList() {
  json j = {
      {"schemaVersion", 2}, {"mediaType", kDockerManifestListType}, {"manifests", json::array()}};
  const std::vector<std::pair<std::string, std::string>> platforms = {
      {"arm", "v5"}, {"arm", "v7"}, {"arm64", "v8"}, {"386", ""}, {"amd64", ""}, {"s390x", ""}};
  int seed = 10;
  for (const auto& [arch, variant] : platforms) {
    json p = {{"architecture", arch}, {"os", "linux"}};
    if (!variant.empty()) p["variant"] = variant;
    j["manifests"].push_back({{"mediaType", kDockerManifestType},
                              {"size", 529},
                              {"digest", digestOf(seed++)},
                              {"platform", p}});
  }
  return j.dump();
}

json ociManifestJson() {
  return {{"schemaVersion", 2},
          {"mediaType", kOciManifestType},
          {"config", {{"mediaType", kOciConfigType}, {"digest", digestOf(20)}, {"size", 1472}}},
          {"layers",
           {{{"mediaType", kOciLayerGzipType}, {"digest", digestOf(21)}, {"size", 29126484}},
            {{"mediaType", kOciLayerZstdType}, {"digest", digestOf(22)}, {"size", 4821}},
            {{"mediaType", kOciLayerTarType}, {"digest", digestOf(23)}, {"size", 0}}}},
          {"annotations", {{"org.opencontainers.image.base.name", "docker.io/library/debian:12"}}}};
}

std::string dockerManifest() {
  json j = {
      {"schemaVersion", 2},
      {"mediaType", kDockerManifestType},
      {"config", {{"mediaType", kDockerConfigType}, {"size", 7023}, {"digest", digestOf(30)}}},
      {"layers",
       {{{"mediaType", kDockerLayerGzipType}, {"size", 32654}, {"digest", digestOf(31)}},
        {{"mediaType", kDockerLayerGzipType}, {"size", 16724}, {"digest", digestOf(32)}}}}};
  return j.dump(3);
}

const char* kSchema1 = R"({
   "schemaVersion": 1,
   "name": "hello-world",
   "tag": "latest",
   "architecture": "amd64",
   "fsLayers": [
      {"blobSum": "sha256:5f70bf18a086007016e948b04aed3b82103a36bea41755b6cddfaf10ace3c6ef"}
   ],
   "history": [{"v1Compatibility": "{\"id\":\"e45a5af57b00\"}"}],
   "signatures": [{"header": {"jwk": {"crv": "P-256", "kty": "EC"}, "alg": "ES256"},
                   "signature": "XREm0L8WNn27Ga_iE_vRnTxVMhhYY0Zst_FfkKopg6gWSoTOZTuW4rK0fg",
                   "protected": "eyJmb3JtYXRMZW5ndGgiOjY2MjgsImZvcm1hdFRhaWwiOiJDbjAiLCJ0aW1lIjoiMjAxNS0wNC0wOFQxODo1Mjo1OVoifQ"}]
})";

const char* kDockerConfig = R"({
  "architecture": "amd64",
  "config": {
    "Hostname": "", "User": "app", "Env": ["PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "EMPTY="],
    "Cmd": ["python3"], "WorkingDir": "/srv", "Labels": null, "OnBuild": null
  },
  "container_config": {"Env": ["IGNORED=1"]},
  "created": "2026-11-30T00:00:00Z",
  "history": [{"created": "2026-11-30T00:00:00Z", "created_by": "/bin/sh -c #(nop) ADD file:x in / "}],
  "os": "linux",
  "rootfs": {"type": "layers", "diff_ids": [
    "sha256:1111111111111111111111111111111111111111111111111111111111111111",
    "sha256:2222222222222222222222222222222222222222222222222222222222222222"]}
})";

bool mentions(const Error& e, const std::string& text) {
  return e.context.find(text) != std::string::npos;
}

// --- classifyDocument ---

TEST(OciDocuments, ClassifyByContentType) {
  auto k = classifyDocument(kOciIndexType, ociIndex());
  ASSERT_TRUE(k) << k.error().context;
  EXPECT_EQ(*k, DocumentKind::kIndex);
  k = classifyDocument(std::string(kDockerManifestType) + "; charset=utf-8", dockerManifest());
  ASSERT_TRUE(k) << k.error().context;
  EXPECT_EQ(*k, DocumentKind::kManifest);
  k = classifyDocument("Application/VND.docker.distribution.manifest.list.v2+JSON",
                       dockerManifestList());
  ASSERT_TRUE(k) << k.error().context;
  EXPECT_EQ(*k, DocumentKind::kIndex);
}

TEST(OciDocuments, ClassifyByTheDocumentsMediaTypeWhenTheHeaderIsGeneric) {
  for (const char* header : {"", "application/json", "text/plain", "application/octet-stream"}) {
    auto k = classifyDocument(header, ociIndex());
    ASSERT_TRUE(k) << header << ": " << k.error().context;
    EXPECT_EQ(*k, DocumentKind::kIndex);
    k = classifyDocument(header, ociManifestJson().dump());
    ASSERT_TRUE(k) << k.error().context;
    EXPECT_EQ(*k, DocumentKind::kManifest);
  }
}

TEST(OciDocuments, ClassifyByShapeWhenNothingNamesTheType) {
  json m = ociManifestJson();
  m.erase("mediaType");
  auto k = classifyDocument("", m.dump());
  ASSERT_TRUE(k) << k.error().context;
  EXPECT_EQ(*k, DocumentKind::kManifest);
  json i = json::parse(ociIndex());
  i.erase("mediaType");
  k = classifyDocument("application/json", i.dump());
  ASSERT_TRUE(k) << k.error().context;
  EXPECT_EQ(*k, DocumentKind::kIndex);
  k = classifyDocument("", R"({"schemaVersion": 2})");
  ASSERT_FALSE(k);
  EXPECT_TRUE(mentions(k.error(), "shaped like neither")) << k.error().context;
}

TEST(OciDocuments, SchemaOneIsRefusedHoweverItIsNamed) {
  for (const char* header :
       {"application/vnd.docker.distribution.manifest.v1+prettyjws",
        "application/vnd.docker.distribution.manifest.v1+json", "", "application/json"}) {
    auto k = classifyDocument(header, kSchema1);
    ASSERT_FALSE(k) << header;
    EXPECT_EQ(k.error().code, ErrorCode::kExecutionRejected);
    EXPECT_TRUE(mentions(k.error(), "Docker schema 1 manifests are not supported"))
        << k.error().context;
  }
  auto m = parseImageManifest(kSchema1);
  ASSERT_FALSE(m);
  EXPECT_TRUE(mentions(m.error(), "schema 1")) << m.error().context;
  auto typed = parseImageManifest(
      R"({"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v1+json"})");
  ASSERT_FALSE(typed);
  EXPECT_TRUE(mentions(typed.error(), "schema 1")) << typed.error().context;
}

TEST(OciDocuments, ClassifyRefusesUnknownTypesAndDisagreement) {
  auto k = classifyDocument("application/vnd.oci.artifact.manifest.v1+json", "{}");
  ASSERT_FALSE(k);
  EXPECT_TRUE(mentions(k.error(), "is not an image index or image manifest type"));
  k = classifyDocument(kOciManifestType, ociIndex());
  ASSERT_FALSE(k);
  EXPECT_TRUE(mentions(k.error(), "disagree")) << k.error().context;
  k = classifyDocument("", R"({"schemaVersion":2,"mediaType":"application/x-evil"})");
  ASSERT_FALSE(k);
  EXPECT_TRUE(mentions(k.error(), "'application/x-evil'")) << k.error().context;
  k = classifyDocument(kOciIndexType, "[]");
  ASSERT_FALSE(k);
  EXPECT_TRUE(mentions(k.error(), "not a JSON object"));
  k = classifyDocument(kOciIndexType, "{");
  ASSERT_FALSE(k);
  EXPECT_TRUE(mentions(k.error(), "not valid JSON"));
}

// One digest, one kind (CVE-2021-41190): the kind is the bytes' own, a
// document that could be either is refused, and a Content-Type that names
// the other kind is a refusal, never a choice.
TEST(OciDocuments, ADocumentWithTheMembersOfBothKindsIsRefusedUnderEveryContentType) {
  json both = ociManifestJson();
  both.erase("mediaType");
  both["manifests"] = json::parse(ociIndex())["manifests"];
  for (const char* header : {"", "application/json", kOciIndexType.data(), kOciManifestType.data(),
                             kDockerManifestListType.data(), kDockerManifestType.data()}) {
    auto k = classifyDocument(header, both.dump());
    ASSERT_FALSE(k) << header;
    EXPECT_EQ(k.error().code, ErrorCode::kExecutionRejected);
    EXPECT_TRUE(mentions(k.error(), "has no mediaType and has both manifests"))
        << k.error().context;
  }
  // Only layers (no config) beside manifests is still both.
  json layers_only = json::parse(ociIndex());
  layers_only.erase("mediaType");
  layers_only["layers"] = json::array();
  EXPECT_FALSE(classifyDocument("", layers_only.dump()));
  // Neither parser takes it, whatever a caller thinks it is.
  auto m = parseImageManifest(both.dump());
  ASSERT_FALSE(m);
  EXPECT_TRUE(mentions(m.error(), "has manifests, which only an image index has"))
      << m.error().context;
  auto i = parseImageIndex(both.dump());
  ASSERT_FALSE(i);
  EXPECT_TRUE(mentions(i.error(), "has config or layers, which only an image manifest has"))
      << i.error().context;
}

TEST(OciDocuments, AMediaTypeItsMembersContradictIsRefused) {
  json manifest = ociManifestJson();
  manifest["manifests"] = json::array();
  auto k = classifyDocument(kOciManifestType, manifest.dump());
  ASSERT_FALSE(k);
  EXPECT_TRUE(mentions(k.error(), "(an image manifest) but has manifests")) << k.error().context;
  EXPECT_FALSE(parseImageManifest(manifest.dump()));
  json index = json::parse(ociIndex());
  index["config"] = ociManifestJson()["config"];
  k = classifyDocument("", index.dump());
  ASSERT_FALSE(k);
  EXPECT_TRUE(mentions(k.error(), "(an image index) but has config or layers"))
      << k.error().context;
  EXPECT_FALSE(parseImageIndex(index.dump()));
}

TEST(OciDocuments, TheContentTypeNeverDecidesTheKind) {
  // An index by its members, served as a manifest: refused, not read as one.
  json index = json::parse(ociIndex());
  index.erase("mediaType");
  auto k = classifyDocument(kOciManifestType, index.dump());
  ASSERT_FALSE(k);
  EXPECT_TRUE(mentions(k.error(), "disagree")) << k.error().context;
  json manifest = ociManifestJson();
  manifest.erase("mediaType");
  k = classifyDocument(kDockerManifestListType, manifest.dump());
  ASSERT_FALSE(k);
  EXPECT_TRUE(mentions(k.error(), "disagree")) << k.error().context;
  // Agreeing or generic: the bytes' kind.
  k = classifyDocument(kOciIndexType, index.dump());
  ASSERT_TRUE(k) << k.error().context;
  EXPECT_EQ(*k, DocumentKind::kIndex);
  k = classifyDocument("text/plain", manifest.dump());
  ASSERT_TRUE(k) << k.error().context;
  EXPECT_EQ(*k, DocumentKind::kManifest);
}

// --- indexes and platforms ---

TEST(OciDocuments, OciIndexParsesWithEveryEntry) {
  auto index = parseImageIndex(ociIndex());
  ASSERT_TRUE(index) << index.error().context;
  ASSERT_EQ(index->manifests.size(), 3u);
  EXPECT_EQ(index->manifests[0].digest, digestOf(1));
  EXPECT_EQ(index->manifests[0].size, 1013);
  ASSERT_TRUE(index->manifests[0].platform);
  EXPECT_EQ(*index->manifests[0].platform, (Platform{"linux", "arm64", "v8"}));
  EXPECT_EQ(index->manifests[2].platform->os, "unknown");
}

TEST(OciDocuments, LinuxAmd64IsSelectedFromAnIndex) {
  auto index = parseImageIndex(ociIndex());
  ASSERT_TRUE(index);
  auto d = selectPlatform(*index);
  ASSERT_TRUE(d) << d.error().context;
  EXPECT_EQ(d->digest, digestOf(2));
  EXPECT_EQ(d->media_type, kOciManifestType);
}

TEST(OciDocuments, LinuxAmd64IsSelectedFromAManifestListOfSix) {
  auto list = parseImageIndex(dockerManifestList());
  ASSERT_TRUE(list) << list.error().context;
  ASSERT_EQ(list->manifests.size(), 6u);
  auto d = selectPlatform(*list);
  ASSERT_TRUE(d) << d.error().context;
  EXPECT_EQ(d->digest, digestOf(14));
  auto arm = selectPlatform(*list, "linux", "arm");
  ASSERT_TRUE(arm);
  EXPECT_EQ(arm->digest, digestOf(10));  // the first variant when none is plain
}

TEST(OciDocuments, APlainEntryWinsOverAVariant) {
  ImageIndex index;
  index.manifests.push_back(
      {std::string(kOciManifestType), digestOf(1), 10, Platform{"linux", "amd64", "v3"}});
  index.manifests.push_back(
      {std::string(kOciManifestType), digestOf(2), 10, Platform{"linux", "amd64", ""}});
  auto d = selectPlatform(index);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->digest, digestOf(2));
}

TEST(OciDocuments, MissingPlatformIsAnErrorListingThePlatformsThereAre) {
  json j = json::parse(dockerManifestList());
  j["manifests"].erase(4);  // linux/amd64
  auto list = parseImageIndex(j.dump());
  ASSERT_TRUE(list);
  auto d = selectPlatform(*list);
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().code, ErrorCode::kExecutionRejected);
  EXPECT_TRUE(mentions(d.error(), "has no linux/amd64 image")) << d.error().context;
  for (const char* p :
       {"linux/arm/v5", "linux/arm/v7", "linux/arm64/v8", "linux/386", "linux/s390x"})
    EXPECT_TRUE(mentions(d.error(), p)) << p << " missing from: " << d.error().context;
}

TEST(OciDocuments, OnlyImageManifestEntriesAreSelected) {
  ImageIndex index;
  // A nested index and an entry of another type, both claiming linux/amd64.
  index.manifests.push_back(
      {std::string(kOciIndexType), digestOf(1), 10, Platform{"linux", "amd64", ""}});
  index.manifests.push_back(
      {"application/vnd.example+json", digestOf(2), 10, Platform{"linux", "amd64", ""}});
  auto d = selectPlatform(index);
  ASSERT_FALSE(d);
  EXPECT_TRUE(mentions(d.error(), std::string(kOciIndexType))) << d.error().context;
  EXPECT_FALSE(selectPlatform(ImageIndex{}));
}

TEST(OciDocuments, AManifestIsNotAnIndexAndAnIndexIsNotAManifest) {
  auto i = parseImageIndex(ociManifestJson().dump());
  ASSERT_FALSE(i);
  EXPECT_TRUE(mentions(i.error(), "is an image manifest")) << i.error().context;
  auto m = parseImageManifest(ociIndex());
  ASSERT_FALSE(m);
  EXPECT_TRUE(mentions(m.error(), "is an image index")) << m.error().context;
}

// --- manifests ---

TEST(OciDocuments, OciManifestParses) {
  auto m = parseImageManifest(ociManifestJson().dump());
  ASSERT_TRUE(m) << m.error().context;
  EXPECT_EQ(m->config.media_type, kOciConfigType);
  EXPECT_EQ(m->config.digest, digestOf(20));
  EXPECT_EQ(m->config.size, 1472);
  ASSERT_EQ(m->layers.size(), 3u);
  EXPECT_EQ(m->layers[0].media_type, kOciLayerGzipType);
  EXPECT_EQ(m->layers[0].size, 29126484);
  EXPECT_EQ(m->layers[1].media_type, kOciLayerZstdType);
  EXPECT_EQ(m->layers[2].size, 0);
  EXPECT_FALSE(m->layers[0].platform);
}

TEST(OciDocuments, DockerSchema2ManifestParses) {
  auto m = parseImageManifest(dockerManifest());
  ASSERT_TRUE(m) << m.error().context;
  EXPECT_EQ(m->config.media_type, kDockerConfigType);
  ASSERT_EQ(m->layers.size(), 2u);
  EXPECT_EQ(m->layers[1].digest, digestOf(32));
  EXPECT_EQ(m->layers[1].media_type, kDockerLayerGzipType);
}

TEST(OciDocuments, ForeignAndNonDistributableLayersAreRefused) {
  for (const char* type : {"application/vnd.docker.image.rootfs.foreign.diff.tar.gzip",
                           "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
                           "application/vnd.oci.image.layer.nondistributable.v1.tar"}) {
    json j = ociManifestJson();
    j["layers"][1]["mediaType"] = type;
    j["layers"][1]["urls"] = {"https://mcr.microsoft.com/v2/windows/blobs/x"};
    auto m = parseImageManifest(j.dump());
    ASSERT_FALSE(m) << type;
    EXPECT_TRUE(mentions(m.error(), "layers[1] is a foreign (non-distributable) layer"))
        << m.error().context;
  }
}

TEST(OciDocuments, OtherLayerAndConfigTypesAreRefused) {
  json j = ociManifestJson();
  j["layers"][0]["mediaType"] = "application/vnd.cncf.helm.chart.content.v1.tar+gzip";
  auto m = parseImageManifest(j.dump());
  ASSERT_FALSE(m);
  EXPECT_TRUE(mentions(m.error(), "not a container image layer")) << m.error().context;
  j = ociManifestJson();
  j["config"]["mediaType"] = "application/vnd.cncf.helm.config.v1+json";
  m = parseImageManifest(j.dump());
  ASSERT_FALSE(m);
  EXPECT_TRUE(mentions(m.error(), "not an image config")) << m.error().context;
  j = ociManifestJson();
  j["config"]["size"] = 5 * 1024 * 1024;
  m = parseImageManifest(j.dump());
  ASSERT_FALSE(m);
  EXPECT_TRUE(mentions(m.error(), "config is 5242880 bytes")) << m.error().context;
}

struct Mutation {
  const char* what;
  json value;  // null: remove the member
  const char* problem;
};

TEST(OciDocuments, BadDigestsAndSizesAreRefused) {
  const std::string upper = "sha256:" + std::string(64, 'A');
  const std::vector<Mutation> digest_cases = {
      {"digest", upper, "is not sha256: and 64 lowercase hex digits"},
      {"digest", "sha512:" + std::string(128, 'a'), "is not sha256"},
      {"digest", "sha256:abc", "is not sha256"},
      {"digest", std::string(64, 'a'), "is not sha256"},
      {"digest", "sha256:" + std::string(64, 'a') + "\n", "is not sha256"},
      {"digest", 7, "is not a string"},
      {"digest", nullptr, "digest is missing"},
      {"size", -1, "size is negative"},
      {"size", 1.5, "must be a whole number"},
      {"size", "12", "must be a whole number"},
      {"size", 9223372036854775808.0, "is out of range"},
      {"size", nullptr, "size is missing"},
      {"mediaType", nullptr, "mediaType is missing"},
  };
  for (const auto& c : digest_cases) {
    for (const char* where : {"config", "layer", "index"}) {
      std::string text;
      if (std::string(where) == "index") {
        json j = json::parse(ociIndex());
        if (c.value.is_null()) {
          j["manifests"][1].erase(c.what);
        } else {
          j["manifests"][1][c.what] = c.value;
        }
        text = j.dump();
        auto r = parseImageIndex(text);
        ASSERT_FALSE(r) << where << " " << c.what << "=" << c.value.dump();
        EXPECT_EQ(r.error().code, ErrorCode::kExecutionRejected);
        EXPECT_TRUE(mentions(r.error(), "manifests[1]")) << r.error().context;
        EXPECT_TRUE(mentions(r.error(), c.problem)) << r.error().context;
        continue;
      }
      json j = ociManifestJson();
      json& d = std::string(where) == "config" ? j["config"] : j["layers"][2];
      if (c.value.is_null()) {
        d.erase(c.what);
      } else {
        d[c.what] = c.value;
      }
      auto r = parseImageManifest(j.dump());
      ASSERT_FALSE(r) << where << " " << c.what << "=" << c.value.dump();
      EXPECT_EQ(r.error().code, ErrorCode::kExecutionRejected);
      EXPECT_TRUE(mentions(r.error(), std::string(where) == "config" ? "config." : "layers[2]."))
          << r.error().context;
      EXPECT_TRUE(mentions(r.error(), c.problem)) << r.error().context;
    }
  }
  // 2^63 as an integer literal (beyond int64).
  std::string text = ociManifestJson().dump();
  const std::string from = "\"size\":29126484";
  ASSERT_NE(text.find(from), std::string::npos);
  text.replace(text.find(from), from.size(), "\"size\":9223372036854775808");
  auto r = parseImageManifest(text);
  ASSERT_FALSE(r);
  EXPECT_TRUE(mentions(r.error(), "layers[0].size is out of range")) << r.error().context;
}

TEST(OciDocuments, StructuralProblemsAreRefused) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json"})",
       "config is missing"},
      {R"({"mediaType":"application/vnd.oci.image.manifest.v1+json"})", "schemaVersion is missing"},
      {R"({"schemaVersion":3})", "schemaVersion is 3, not 2"},
      {R"({"schemaVersion":"2"})", "schemaVersion is not an integer"},
      {"[1,2]", "is not a JSON object"},
      {"not json", "is not valid JSON"},
      {R"({"schemaVersion":2,"schemaVersion":2})", "appears twice"},
  };
  for (const auto& [text, problem] : cases) {
    auto r = parseImageManifest(text);
    ASSERT_FALSE(r) << text;
    EXPECT_TRUE(mentions(r.error(), problem)) << text << " -> " << r.error().context;
  }
  json j = ociManifestJson();
  j["layers"] = "none";
  auto r = parseImageManifest(j.dump());
  ASSERT_FALSE(r);
  EXPECT_TRUE(mentions(r.error(), "layers is not an array"));
  j = ociManifestJson();
  j["layers"][0] = 5;
  r = parseImageManifest(j.dump());
  ASSERT_FALSE(r);
  EXPECT_TRUE(mentions(r.error(), "layers[0] is not an object"));
  json i = json::parse(ociIndex());
  i["manifests"][0]["platform"] = {{"os", "linux"}};
  auto ri = parseImageIndex(i.dump());
  ASSERT_FALSE(ri);
  EXPECT_TRUE(mentions(ri.error(), "manifests[0].platform.architecture is missing"));
}

TEST(OciDocuments, ADigestNamedTwiceIsRefused) {
  // Two readers could take either value: refused outright.
  std::string text = ociManifestJson().dump();
  const std::string from = "\"digest\":\"" + digestOf(21) + "\"";
  text.replace(text.find(from), from.size(), from + ",\"digest\":\"" + digestOf(99) + "\"");
  auto r = parseImageManifest(text);
  ASSERT_FALSE(r);
  EXPECT_TRUE(mentions(r.error(), "appears twice")) << r.error().context;
}

TEST(OciDocuments, SizeAndDepthAreCapped) {
  std::string big = ociManifestJson().dump();
  big.insert(big.size() - 1, ",\"pad\":\"" + std::string(kMaxDocumentBytes, 'x') + "\"");
  auto r = parseImageManifest(big);
  ASSERT_FALSE(r);
  EXPECT_TRUE(mentions(r.error(), "more than the limit of 4194304")) << r.error().context;
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  for (auto result : {parseImageIndex(deep).has_value(), parseImageManifest(deep).has_value(),
                      parseImageConfig(deep).has_value(), classifyDocument("", deep).has_value()})
    EXPECT_FALSE(result);
  auto d = parseImageConfig(deep);
  ASSERT_FALSE(d);
  EXPECT_TRUE(mentions(d.error(), "more than 64 deep")) << d.error().context;
  // Brackets inside strings do not count.
  json j = ociManifestJson();
  j["annotations"]["x"] = std::string(1000, '[');
  EXPECT_TRUE(parseImageManifest(j.dump()));
  json many = ociManifestJson();
  for (int i = 0; i < 1100; ++i) many["layers"].push_back(many["layers"][0]);
  r = parseImageManifest(many.dump());
  ASSERT_FALSE(r);
  EXPECT_TRUE(mentions(r.error(), "more than the limit of 1024")) << r.error().context;
}

// --- configs ---

TEST(OciDocuments, DockerStyleConfigParses) {
  auto c = parseImageConfig(kDockerConfig);
  ASSERT_TRUE(c) << c.error().context;
  EXPECT_EQ(c->os, "linux");
  EXPECT_EQ(c->architecture, "amd64");
  EXPECT_EQ(c->user, "app");
  EXPECT_EQ(c->working_dir, "/srv");
  EXPECT_EQ(c->env, (std::vector<std::string>{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8",
                                              "EMPTY="}));
  ASSERT_EQ(c->diff_ids.size(), 2u);
  EXPECT_EQ(c->diff_ids[1], "sha256:" + std::string(64, '2'));
}

TEST(OciDocuments, ConfigNullsAreEmpty) {
  auto c = parseImageConfig(
      R"({"os":"linux","architecture":"arm64","config":{"Env":null,"User":null},"rootfs":null})");
  ASSERT_TRUE(c) << c.error().context;
  EXPECT_TRUE(c->env.empty());
  EXPECT_TRUE(c->user.empty());
  EXPECT_TRUE(c->diff_ids.empty());
  c = parseImageConfig(R"({"os":"linux","architecture":"amd64"})");
  ASSERT_TRUE(c);
}

// A name the config's Env gives twice: the last value wins.
TEST(OciDocuments, ARepeatedEnvNameKeepsItsLastValue) {
  auto c = parseImageConfig(
      R"({"os":"linux","architecture":"amd64","config":{"Env":["A=1","PATH=/bin","A=3","B=","B=x=y"]}})");
  ASSERT_TRUE(c) << c.error().context;
  EXPECT_EQ(c->env, (std::vector<std::string>{"PATH=/bin", "A=3", "B=x=y"}));
}

TEST(OciDocuments, BadConfigsAreRefused) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"architecture":"amd64"})", "os is missing"},
      {R"({"os":"linux"})", "architecture is missing"},
      {R"({"os":"linux","architecture":"amd64","config":{"Env":["NOEQUALS"]}})",
       "config.Env[0] 'NOEQUALS' is not NAME=value"},
      {R"({"os":"linux","architecture":"amd64","config":{"Env":["=x"]}})", "is not NAME=value"},
      {R"({"os":"linux","architecture":"amd64","config":{"Env":["A=\u0000"]}})",
       "config.Env[0] contains a NUL byte"},
      {R"({"os":"linux","architecture":"amd64","config":{"Env":[1]}})",
       "config.Env[0] is not a string"},
      {R"({"os":"linux","architecture":"amd64","config":{"User":"r\u0000oot"}})",
       "config.User contains a NUL byte"},
      {R"({"os":"linux","architecture":"amd64","config":{"WorkingDir":7}})",
       "config.WorkingDir is not a string"},
      {R"({"os":"linux","architecture":"amd64","config":[]})", "config is not an object"},
      {R"({"os":"linux","architecture":"amd64","rootfs":{"diff_ids":["sha256:x"]}})",
       "rootfs.diff_ids[0] 'sha256:x' is not sha256"},
      {R"({"os":"linux","architecture":"amd64","config":{"Env":"A=1"}})",
       "config.Env is not an array"},
      {R"({"os":"linux","architecture":"amd64","rootfs":{"diff_ids":{}}})",
       "rootfs.diff_ids is not an array"},
  };
  for (const auto& [text, problem] : cases) {
    auto r = parseImageConfig(text);
    ASSERT_FALSE(r) << text;
    EXPECT_EQ(r.error().code, ErrorCode::kExecutionRejected);
    EXPECT_TRUE(mentions(r.error(), problem)) << text << " -> " << r.error().context;
  }
}

TEST(OciDocuments, AnIndexAndAManifestNameEachOther) {
  auto m = parseImageManifest(
      R"({"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json"})");
  ASSERT_FALSE(m);
  EXPECT_TRUE(mentions(
      m.error(), "is an image index (application/vnd.oci.image.index.v1+json), not a manifest"))
      << m.error().context;
  auto i = parseImageIndex(
      R"({"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json"})");
  ASSERT_FALSE(i);
  EXPECT_TRUE(mentions(
      i.error(), "is an image manifest (application/vnd.oci.image.manifest.v1+json), not an index"))
      << i.error().context;
  auto t = parseImageIndex(R"({"schemaVersion":2,"mediaType":"text/plain"})");
  ASSERT_FALSE(t);
  EXPECT_TRUE(mentions(t.error(), "mediaType 'text/plain' is not an image index type"))
      << t.error().context;
  auto none = parseImageIndex(R"({"schemaVersion":2})");
  ASSERT_FALSE(none);
  EXPECT_TRUE(mentions(none.error(), "manifests is missing")) << none.error().context;
}

TEST(OciDocuments, MediaTypeOfDropsParametersAndCase) {
  EXPECT_EQ(mediaTypeOf(" Application/JSON ; charset=utf-8"), "application/json");
  EXPECT_EQ(mediaTypeOf(""), "");
  EXPECT_EQ(toString(Platform{"linux", "arm", "v7"}), "linux/arm/v7");
}

// --- properties ---

rc::Gen<Descriptor> genLayer() {
  return rc::gen::exec([] {
    Descriptor d;
    d.media_type = *rc::gen::element<std::string>(
        std::string(kOciLayerTarType), std::string(kOciLayerGzipType),
        std::string(kOciLayerZstdType), std::string(kDockerLayerGzipType));
    d.digest = digestOf(*rc::gen::arbitrary<int>());
    d.size = *rc::gen::inRange<std::int64_t>(0, std::numeric_limits<std::int64_t>::max());
    return d;
  });
}

RC_GTEST_PROP(OciDocuments, GeneratedManifestsParseToTheirDescriptors, ()) {
  const auto layers = *rc::gen::resize(20, rc::gen::container<std::vector<Descriptor>>(genLayer()));
  Descriptor config{std::string(kOciConfigType), digestOf(*rc::gen::arbitrary<int>()),
                    *rc::gen::inRange<std::int64_t>(0, kMaxDocumentBytes), std::nullopt};
  json j = {{"schemaVersion", 2},
            {"config",
             {{"mediaType", config.media_type}, {"digest", config.digest}, {"size", config.size}}},
            {"layers", json::array()}};
  if (*rc::gen::arbitrary<bool>()) j["mediaType"] = kOciManifestType;
  for (const auto& l : layers)
    j["layers"].push_back({{"mediaType", l.media_type}, {"digest", l.digest}, {"size", l.size}});
  auto m = parseImageManifest(j.dump());
  RC_ASSERT(m.has_value());
  RC_ASSERT(m->config == config);
  RC_ASSERT(m->layers == layers);
  auto k = classifyDocument("", j.dump());
  RC_ASSERT(k.has_value());
  RC_ASSERT(*k == DocumentKind::kManifest);
}

// Whatever else a manifest holds, adding an index's manifests makes it a
// document no reader takes, under any Content-Type and any mediaType.
RC_GTEST_PROP(OciDocuments, AManifestWithAnIndexsMembersIsNeverAccepted, ()) {
  json j = ociManifestJson();
  const auto media = *rc::gen::element<std::string>(
      "", std::string(kOciManifestType), std::string(kDockerManifestType),
      std::string(kOciIndexType), std::string(kDockerManifestListType));
  if (media.empty())
    j.erase("mediaType");
  else
    j["mediaType"] = media;
  if (*rc::gen::arbitrary<bool>()) j.erase("config");
  if (j.contains("config") && *rc::gen::arbitrary<bool>()) j.erase("layers");
  j["manifests"] =
      *rc::gen::arbitrary<bool>() ? json::parse(ociIndex())["manifests"] : json::array();
  const auto header = *rc::gen::element<std::string>(
      "", "application/json", std::string(kOciManifestType), std::string(kDockerManifestType),
      std::string(kOciIndexType), std::string(kDockerManifestListType));
  RC_ASSERT_FALSE(classifyDocument(header, j.dump()).has_value());
  RC_ASSERT_FALSE(parseImageManifest(j.dump()).has_value());
  RC_ASSERT_FALSE(parseImageIndex(j.dump()).has_value());
}

// The kind a Content-Type lets through is the one the bytes have alone.
RC_GTEST_PROP(OciDocuments, AnAcceptedKindIsTheBytesOwn, ()) {
  json j = *rc::gen::element(json::parse(ociIndex()), json::parse(dockerManifestList()),
                             ociManifestJson(), json::parse(dockerManifest()));
  if (*rc::gen::arbitrary<bool>()) j.erase("mediaType");
  const auto header = *rc::gen::element<std::string>(
      "", "text/plain", std::string(kOciManifestType), std::string(kDockerManifestType),
      std::string(kOciIndexType), std::string(kDockerManifestListType));
  auto own = classifyDocument("", j.dump());
  RC_ASSERT(own.has_value());
  auto k = classifyDocument(header, j.dump());
  if (k) RC_ASSERT(*k == *own);
}

template <class T>
void checkRefusal(const Result<T>& r) {
  if (!r) {
    RC_ASSERT(r.error().code == ErrorCode::kExecutionRejected);
    RC_ASSERT(!r.error().context.empty());
  }
}

RC_GTEST_PROP(OciDocuments, ArbitraryBytesNeverCrashAnyParser, (const std::string& bytes)) {
  checkRefusal(parseImageIndex(bytes));
  checkRefusal(parseImageManifest(bytes));
  checkRefusal(parseImageConfig(bytes));
  checkRefusal(classifyDocument(*rc::gen::arbitrary<std::string>(), bytes));
}

RC_GTEST_PROP(OciDocuments, MutatedSamplesNeverCrashAnyParser, ()) {
  std::string text = *rc::gen::element(ociIndex(), dockerManifestList(), dockerManifest(),
                                       ociManifestJson().dump(), std::string(kDockerConfig));
  const int edits = *rc::gen::inRange(1, 8);
  for (int i = 0; i < edits; ++i) {
    const std::size_t at = *rc::gen::inRange<std::size_t>(0, text.size());
    text[at] = *rc::gen::elementOf(std::string("{}[]\",:0-9aA\x00"));
  }
  checkRefusal(parseImageIndex(text));
  checkRefusal(parseImageManifest(text));
  checkRefusal(parseImageConfig(text));
  checkRefusal(classifyDocument("", text));
}

}  // namespace
}  // namespace airlock::images

namespace airlock::images {
namespace {

// An image layout's index names its image with the ref.name annotation; the
// name is kept, other annotations are not, and a name that is not a short
// string is refused.
TEST(OciDocuments, AnIndexEntryKeepsItsRefNameAnnotationOnly) {
  const std::string digest = "sha256:" + std::string(64, 'e');
  json entry = {
      {"mediaType", kOciManifestType},
      {"digest", digest},
      {"size", 10},
      {"annotations", {{std::string(kRefNameAnnotation), "v1"}, {"org.example.other", "dropped"}}}};
  json index = {{"schemaVersion", 2}, {"mediaType", kOciIndexType}, {"manifests", {entry}}};
  auto parsed = parseImageIndex(index.dump());
  ASSERT_TRUE(parsed) << parsed.error().message();
  ASSERT_EQ(parsed->manifests.size(), 1u);
  EXPECT_EQ(parsed->manifests[0].annotations,
            (std::map<std::string, std::string>{{kRefNameAnnotation, "v1"}}));

  index["manifests"][0]["annotations"][kRefNameAnnotation] = 7;
  EXPECT_FALSE(parseImageIndex(index.dump()));
  index["manifests"][0]["annotations"][kRefNameAnnotation] = std::string(kMaxRefNameBytes + 1, 'x');
  EXPECT_FALSE(parseImageIndex(index.dump()));
  index["manifests"][0]["annotations"] = "not an object";
  EXPECT_FALSE(parseImageIndex(index.dump()));
}

}  // namespace
}  // namespace airlock::images
