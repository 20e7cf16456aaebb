#include "oci_layout.h"

#include <archive.h>
#include <archive_entry.h>

#include <filesystem>
#include <fstream>

#include "airlock/images/oci_documents.h"
#include "test_tree.h"

namespace airlock::images::testing {
namespace {

bool writeWhole(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(out);
}

// Writes one archive (format and filter already set on `a`) to memory.
std::string writeToMemory(archive* a,
                          const std::vector<std::pair<std::string, std::string>>& files) {
  std::vector<char> buf(8 * 1024 * 1024);
  std::size_t used = 0;
  std::string out;
  if (archive_write_open_memory(a, buf.data(), buf.size(), &used) == ARCHIVE_OK) {
    bool good = true;
    for (const auto& [name, bytes] : files) {
      archive_entry* e = archive_entry_new();
      archive_entry_set_pathname(e, name.c_str());
      archive_entry_set_filetype(e, AE_IFREG);
      archive_entry_set_perm(e, 0644);
      archive_entry_set_size(e, static_cast<la_int64_t>(bytes.size()));
      archive_entry_set_mtime(e, 0, 0);
      good = good && archive_write_header(a, e) == ARCHIVE_OK &&
             archive_write_data(a, bytes.data(), bytes.size()) ==
                 static_cast<la_ssize_t>(bytes.size());
      archive_entry_free(e);
    }
    if (archive_write_close(a) == ARCHIVE_OK && good) out.assign(buf.data(), used);
  }
  archive_write_free(a);
  return out;
}

}  // namespace

std::string sha256Digest(const std::string& bytes) {
  return "sha256:" + workspace::testing::sha256Hex(bytes);
}

std::string tarOf(const std::vector<std::pair<std::string, std::string>>& files) {
  archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  return writeToMemory(a, files);
}

std::string gzipOf(const std::string& bytes) {
  archive* a = archive_write_new();
  archive_write_set_format_raw(a);
  archive_write_add_filter_gzip(a);
  archive_write_set_bytes_per_block(a, 0);  // no padding after the stream
  return writeToMemory(a, {{"data", bytes}});
}

nlohmann::json BuiltImage::indexEntry(const std::string& ref_name) const {
  nlohmann::json e = {{"mediaType", kOciManifestType},
                      {"digest", manifest_digest},
                      {"size", manifest.size()},
                      {"platform", {{"os", "linux"}, {"architecture", architecture}}}};
  if (architecture == "arm64") e["platform"]["variant"] = "v8";
  if (!ref_name.empty()) e["annotations"] = {{"org.opencontainers.image.ref.name", ref_name}};
  return e;
}

OciLayout::OciLayout(std::string dir) : dir_(std::move(dir)) {
  std::error_code ec;
  std::filesystem::create_directories(dir_ + "/blobs/sha256", ec);
  ok_ = !ec && writeWhole(dir_ + "/oci-layout", R"({"imageLayoutVersion":"1.0.0"})");
}

std::string OciLayout::addBlob(const std::string& bytes) {
  const std::string digest = sha256Digest(bytes);
  ok_ = writeWhole(dir_ + "/blobs/sha256/" + digest.substr(7), bytes) && ok_;
  return digest;
}

BuiltImage OciLayout::addImage(const std::string& architecture, const std::string& marker) {
  return addImageOf(
      architecture,
      {
          {{"etc/marker", marker + "\n"}, {"bin/tool", "#!/bin/sh\necho " + architecture + "\n"}},
          {{"srv/data.txt", std::string(3000, 'd') + architecture}},
      },
      {"PATH=/usr/bin:/bin", "GREETING=" + marker});
}

BuiltImage OciLayout::addImageOf(
    const std::string& architecture,
    const std::vector<std::vector<std::pair<std::string, std::string>>>& layer_files,
    const std::vector<std::string>& env) {
  BuiltImage img;
  img.architecture = architecture;
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& files : layer_files) {
    const std::string tar = tarOf(files);
    const std::string gz = gzipOf(tar);
    if (tar.empty() || gz.empty()) ok_ = false;
    img.diff_ids.push_back(sha256Digest(tar));
    img.layers.push_back(gz);
    img.layer_digests.push_back(addBlob(gz));
    layers.push_back({{"mediaType", kOciLayerGzipType},
                      {"digest", img.layer_digests.back()},
                      {"size", gz.size()}});
  }
  nlohmann::json config = {
      {"architecture", architecture},
      {"os", "linux"},
      {"config", {{"Env", env}, {"User", "1000:1000"}, {"WorkingDir", "/srv"}}},
      {"rootfs", {{"type", "layers"}, {"diff_ids", img.diff_ids}}},
  };
  img.config = config.dump();
  img.config_digest = addBlob(img.config);
  nlohmann::json manifest = {
      {"schemaVersion", 2},
      {"mediaType", kOciManifestType},
      {"config",
       {{"mediaType", kOciConfigType}, {"digest", img.config_digest}, {"size", img.config.size()}}},
      {"layers", layers},
  };
  img.manifest = manifest.dump();
  img.manifest_digest = addBlob(img.manifest);
  return img;
}

std::pair<std::string, std::string> OciLayout::addIndex(const nlohmann::json& entries) {
  const nlohmann::json index = {
      {"schemaVersion", 2}, {"mediaType", kOciIndexType}, {"manifests", entries}};
  std::string bytes = index.dump();
  std::string digest = addBlob(bytes);
  return {bytes, digest};
}

void OciLayout::writeIndexJson(const nlohmann::json& entries) {
  const nlohmann::json index = {
      {"schemaVersion", 2}, {"mediaType", kOciIndexType}, {"manifests", entries}};
  ok_ = writeWhole(dir_ + "/index.json", index.dump()) && ok_;
}

}  // namespace airlock::images::testing
