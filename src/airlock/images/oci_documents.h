// The JSON documents of an image, parsed from untrusted registry bytes:
// image indexes (OCI "Image Index Specification"; Docker "Manifest List"
// v2), image manifests (OCI "Image Manifest Specification"; Docker "Image
// Manifest Version 2, Schema 2") and image configs (OCI "Image
// Configuration"), with their descriptors (OCI "Descriptors").
//
// Every function here takes bytes a registry sent and never throws: a
// document is at most kMaxDocumentBytes, nested at most kMaxJsonDepth deep,
// and parsed with parseUntrustedJson (core/json.h), so an object naming a key
// twice is refused (two readers of the same bytes must see one document).
// Every descriptor's digest must be "sha256:" + 64 lowercase hex (isDigest:
// other algorithms are refused, not skipped) and its size an integer from 0
// to 2^63-1. Unknown members are ignored, as both specs require.
//
// Errors are ExecutionRejected (the image cannot be used as it is; pulling
// again does not help) with a message naming the document and the member:
//   image manifest: layers[2].digest 'sha256:abc' is not sha256: and 64 lowercase hex digits
//   image manifest: Docker schema 1 manifests are not supported (push the image again ...)
//   image manifest: layers[0] is a foreign (non-distributable) layer ...
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/core/error.h"

namespace airlock::images {

// Media types ("Media Types" in the OCI image spec; Docker's schema 2 page).
inline constexpr std::string_view kOciIndexType = "application/vnd.oci.image.index.v1+json";
inline constexpr std::string_view kDockerManifestListType =
    "application/vnd.docker.distribution.manifest.list.v2+json";
inline constexpr std::string_view kOciManifestType = "application/vnd.oci.image.manifest.v1+json";
inline constexpr std::string_view kDockerManifestType =
    "application/vnd.docker.distribution.manifest.v2+json";
inline constexpr std::string_view kOciConfigType = "application/vnd.oci.image.config.v1+json";
inline constexpr std::string_view kDockerConfigType =
    "application/vnd.docker.container.image.v1+json";
inline constexpr std::string_view kOciLayerTarType = "application/vnd.oci.image.layer.v1.tar";
inline constexpr std::string_view kOciLayerGzipType = "application/vnd.oci.image.layer.v1.tar+gzip";
inline constexpr std::string_view kOciLayerZstdType = "application/vnd.oci.image.layer.v1.tar+zstd";
inline constexpr std::string_view kDockerLayerGzipType =
    "application/vnd.docker.image.rootfs.diff.tar.gzip";

// A manifest or index body, and a config, are refused above this size.
inline constexpr std::size_t kMaxDocumentBytes = 4 * 1024 * 1024;
// Arrays and objects nested deeper than this are refused before parsing.
inline constexpr int kMaxJsonDepth = 64;
// Entries of an index, layers of a manifest, Env entries of a config.
inline constexpr std::size_t kMaxIndexEntries = 1024;
inline constexpr std::size_t kMaxLayers = 1024;
inline constexpr std::size_t kMaxEnvEntries = 4096;

struct Platform {
  std::string os;            // "linux"
  std::string architecture;  // "amd64", "arm64" (GOARCH values)
  std::string variant;       // "v8", "" when absent
  bool operator==(const Platform&) const = default;
};

// OCI "Descriptors". digest is always isDigest(); size is in bytes, >= 0.
// The annotation an image layout's index.json names an image by (OCI image
// spec, "Pre-Defined Annotation Keys").
inline constexpr const char* kRefNameAnnotation = "org.opencontainers.image.ref.name";
inline constexpr std::size_t kMaxRefNameBytes = 512;

struct Descriptor {
  std::string media_type;
  std::string digest;
  std::int64_t size = 0;
  std::optional<Platform> platform;  // only in an index's entries
  // Only in an index's entries, and only kRefNameAnnotation (at most
  // kMaxRefNameBytes): the name an image layout gives the image.
  std::map<std::string, std::string> annotations;
  bool operator==(const Descriptor&) const = default;
};

// OCI image index or Docker manifest list v2. Entries keep their order and
// are not filtered: an entry may be of any media type (a nested index, an
// attestation manifest); selectPlatform picks among the image manifests.
struct ImageIndex {
  std::vector<Descriptor> manifests;
};

// OCI image manifest or Docker schema 2. config.media_type is the OCI or
// Docker config type and config.size at most kMaxDocumentBytes; every layer
// is one of the four distributable layer types above (the unpacker decides
// by layers[i].media_type how to decompress).
struct ImageManifest {
  Descriptor config;
  std::vector<Descriptor> layers;
};

// The parts of an OCI image config the sandbox uses ("Properties": os,
// architecture, config.Env, config.User, config.WorkingDir, rootfs.diff_ids).
// Absent or null members are empty. Env entries are "NAME=value" with a
// non-empty NAME, each NAME once: of a name the config gives twice the last
// entry is kept, where it stands; no string contains a NUL byte (they
// reach execve).
struct ImageConfig {
  std::vector<std::string> env;
  std::string user;
  std::string working_dir;
  std::string os, architecture;
  // rootfs.diff_ids: the sha256 of each layer's uncompressed tar, in layer
  // order (each isDigest()); for the unpacker to check what it unpacked.
  std::vector<std::string> diff_ids;
};

enum class DocumentKind { kIndex, kManifest };

// Which document the bytes are, by the bytes alone (a digest names one
// document, so it names one kind: CVE-2021-41190): the JSON's own
// "mediaType" when it has one, else its members ("manifests": an index;
// "config" or "layers": a manifest). Refused: a document with members of
// both kinds (with or without a mediaType), a mediaType its members
// contradict, and one with members of neither. The Content-Type the
// registry sent (`media_type`; parameters after ';' and case ignored) never
// decides: when it names an index or manifest type it must agree with the
// bytes, else the document is refused; a generic or empty one ("",
// application/json, text/plain, application/octet-stream) is ignored. Docker
// schema 1 (application/vnd.docker.distribution.manifest.v1+json,
// ...v1+prettyjws, or "schemaVersion": 1) is refused, and so is any other
// media type. ExecutionRejected with the reason.
Result<DocumentKind> classifyDocument(std::string_view media_type, std::string_view json);

// ExecutionRejected for anything but a schemaVersion 2 index or manifest
// list (a "mediaType" member, if present, must be one of the two index
// types; "config" and "layers" must be absent), with a message naming the
// member at fault.
Result<ImageIndex> parseImageIndex(std::string_view json);

// ExecutionRejected for anything but a schemaVersion 2 OCI or Docker image
// manifest with an image config ("manifests" must be absent); schema 1 and foreign or
// non-distributable layers (application/vnd.docker.image.rootfs.foreign.diff.tar.gzip,
// application/vnd.oci.image.layer.nondistributable.*) are refused by name,
// as is any other layer type (an artifact that is not a container image).
Result<ImageManifest> parseImageManifest(std::string_view json);

// ExecutionRejected unless os and architecture are strings and the members
// above have their types.
Result<ImageConfig> parseImageConfig(std::string_view json);

// The index entry for os/arch among the entries whose media type is an image
// manifest (OCI or Docker schema 2): the first such entry without a variant,
// else the first with one. A nested index is not followed. ExecutionRejected
// when there is none, listing the platforms there are:
//   image index: has no linux/amd64 image; it has "linux/arm64/v8", "linux/s390x",
//   "unknown/unknown"
// (each platform quoted as it came; an entry that is not an image manifest
// is followed by its media type in parentheses).
Result<Descriptor> selectPlatform(const ImageIndex& index, std::string_view os = "linux",
                                  std::string_view arch = "amd64");

// "os/architecture[/variant]".
std::string toString(const Platform& platform);

// The media type of a Content-Type value: the part before ';', trimmed and
// lower-cased.
std::string mediaTypeOf(std::string_view content_type);

}  // namespace airlock::images
