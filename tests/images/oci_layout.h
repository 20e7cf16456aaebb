// Builds OCI image layouts (OCI image spec, "Image Layout Specification":
// oci-layout, index.json, blobs/sha256/<hex>) for the registry client tests
// to push with skopeo: small images whose every byte the test knows, with
// gzip layers (so a push needs no recompression and keeps every digest).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace airlock::images::testing {

// An uncompressed tar (pax) of regular files, mode 0644, mtime 0.
std::string tarOf(const std::vector<std::pair<std::string, std::string>>& files);
// The bytes as one gzip stream.
std::string gzipOf(const std::string& bytes);

struct BuiltImage {
  std::string manifest, manifest_digest;
  std::string config, config_digest;
  std::vector<std::string> layers, layer_digests;  // gzip bytes
  std::vector<std::string> diff_ids;               // sha256 of each uncompressed tar
  std::string architecture;
  // An index entry for this manifest, with its platform.
  nlohmann::json indexEntry(const std::string& ref_name = "") const;
};

class OciLayout {
 public:
  // Creates dir (and dir/blobs/sha256) and writes oci-layout.
  explicit OciLayout(std::string dir);
  const std::string& dir() const { return dir_; }
  bool ok() const { return ok_; }

  // Writes a blob; returns its digest.
  std::string addBlob(const std::string& bytes);
  // A linux image for `architecture` with two gzip layers (a file naming
  // `marker`, then a second small file), Env, User and WorkingDir set.
  BuiltImage addImage(const std::string& architecture, const std::string& marker);
  // A linux image of gzip layers holding these files (tarOf), in order, with
  // this Env and the same User and WorkingDir.
  BuiltImage addImageOf(
      const std::string& architecture,
      const std::vector<std::vector<std::pair<std::string, std::string>>>& layer_files,
      const std::vector<std::string>& env);
  // An image index blob over the entries; returns {bytes, digest}.
  std::pair<std::string, std::string> addIndex(const nlohmann::json& entries);
  // index.json with these entries.
  void writeIndexJson(const nlohmann::json& entries);

 private:
  std::string dir_;
  bool ok_ = true;
};

std::string sha256Digest(const std::string& bytes);

}  // namespace airlock::images::testing
