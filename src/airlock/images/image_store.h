// The image store (spec 000, "EnvironmentSpec": image_digest is a digest,
// never a tag): OCI images kept by digest under one directory, each blob
// verified by SHA-256 before it is used, and one unpacked root per image
// shared read-only by every sandbox of that image.
//
// Layout below the store's directory:
//   blobs/sha256/<hex>    manifests, configs and layers, by the SHA-256 of
//                         their bytes (written to tmp/, verified, renamed)
//   images/<hex>.json     one record per image: its manifest digest, config
//                         and layer digests, the references that named it
//   locks/<hex>           held while the blob <hex> is fetched (one fetch
//                         of a blob at a time across processes); unlinked
//                         by its holder
//   roots/<hex>/          the image's unpacked root (layer_unpack.h), made
//                         once under roots/<hex>.lock and renamed into place
//   tmp/                  what is being written; swept at open
//   lock                  held while the records are read or rewritten
//   gc.lock               held shared by every import and pull while it
//                         writes blobs it has not recorded yet; garbage
//                         collection leaves blobs alone while it is held
//
// An image is named by the digest of its image manifest (the digest a
// registry reports for it). A reference ("127.0.0.1:5000/team/py:3.12") is
// resolved once, at pull or import, to that digest; afterwards only the
// digest is used, so moving the tag in the registry changes nothing here
// until the reference is pulled again. A digest names only its own image:
// a reference that is a bare digest, or a name@digest of another image's
// digest, is never recorded. An image is recorded (and references move to
// it) only once its root is unpacked: a refused image changes no record.
//
// Concurrency: any number of threads and processes may use one store. Two
// pulls of one blob share one download: in a process the second waits for
// the first's result; across processes the second waits on the blob's lock
// (locks/<hex>) and then finds the blob stored, fetching it itself only when
// the first failed. A root in use is held with a shared lock on
// roots/<hex>.lock (ImageStore::use); remove() and collectGarbage() skip a
// root someone holds.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/core/error.h"
#include "airlock/images/image_reference.h"
#include "airlock/images/layer_unpack.h"
#include "airlock/images/oci_documents.h"
#include "airlock/sys/unique_fd.h"

namespace airlock::images {

class RegistryClient;

// One stored image, as list() and the import and pull calls give it.
struct StoredImage {
  std::string digest;         // "sha256:<hex>" of the image manifest
  std::string config_digest;  // of the image config blob
  std::vector<std::string> layer_digests;
  std::vector<std::string> references;  // every reference that resolved to it
  std::int64_t size_bytes = 0;          // the manifest's layers and config, as stored
  ImageConfig config;                   // Env, User, WorkingDir, os, architecture
};

// A root held for use: while it lives the root is not removed. Its
// directory is absolute; the image's Env joins the sandbox's platform tier.
struct ImageRoot {
  std::string digest;
  std::string root_dir;
  std::vector<std::string> env;  // the image config's Env, "NAME=value"
  sys::UniqueFd hold;            // the shared lock on roots/<hex>.lock
};

struct ImageStoreOptions {
  UnpackLimits unpack_limits;  // caps of one image's unpack
  // Largest blob accepted: a manifest's declared size above it is refused
  // before anything is fetched. Bytes.
  std::int64_t max_blob_bytes = 8LL << 30;
  std::string os = "linux";
  std::string architecture = "amd64";
};

struct GarbageCollected {
  std::int64_t blobs = 0;
  std::int64_t roots = 0;
  std::int64_t bytes = 0;  // of the blobs removed
};

class ImageStore {
 public:
  // Opens (creating where missing) the store at `dir`, an absolute path, and
  // sweeps what an interrupted writer left in tmp/. ExecutionUnavailable
  // naming the directory when it cannot be made or used.
  static Result<std::unique_ptr<ImageStore>> open(std::string dir, ImageStoreOptions options = {});
  virtual ~ImageStore() = default;

  // Resolves `ref` at its registry to the linux/amd64 image manifest, fetches
  // and verifies every blob that is not stored yet, records the image under
  // its digest with `ref` among its references, and unpacks its root.
  // Errors: those of the registry client (which name the registry and
  // repository), ExecutionRejected for a manifest or layer the store cannot
  // use, and the unpacker's errors naming the entry. Nothing of a failed pull
  // is recorded, and the blobs it stored are removed again (unless another
  // pull or import is writing meanwhile: collectGarbage removes them later).
  virtual Result<StoredImage> pull(const ImageReference& ref, RegistryClient& registry) = 0;

  // Imports the image of an OCI image layout directory (oci-layout,
  // index.json, blobs/), or of a tar archive holding one, or of a
  // `docker save` archive (manifest.json and its layer tars). A layout or
  // archive with several images takes the one for the store's platform, or
  // the only one there is; its reference (the index's
  // org.opencontainers.image.ref.name, docker's RepoTags) is recorded.
  // ExecutionRejected naming the file or entry that is wrong, and for an
  // image named "host" (the name of the host image, which an image may not
  // take).
  // `ref_name`, when not empty, picks the layout's image by the name its
  // index gives it (org.opencontainers.image.ref.name: umoci's and skopeo's
  // tag), among several; ExecutionRejected listing the names when none has
  // it, and, when it is empty and several images name no platform (two
  // tags of one layout, even of one digest), listing them and saying to
  // pick one with --ref (the command line's spelling).
  virtual Result<StoredImage> importPath(const std::string& path, const std::string& ref_name) = 0;
  Result<StoredImage> importPath(const std::string& path) { return importPath(path, ""); }

  // The stored image a digest or a recorded reference names; NotFound
  // otherwise.
  virtual Result<StoredImage> find(std::string_view digest_or_reference) = 0;
  // Every stored image, by digest.
  virtual std::vector<StoredImage> list() = 0;

  // The image's unpacked root, unpacked first if it is not there, held for
  // use until the ImageRoot is dropped. NotFound for an image not stored.
  virtual Result<ImageRoot> use(std::string_view digest) = 0;

  // Forgets what a digest or reference names, then collects garbage: a
  // digest forgets its image; a reference is dropped from its image, and
  // the image is forgotten once no reference names it. Returns the image as
  // it was. NotFound when nothing matches.
  virtual Result<StoredImage> remove(std::string_view digest_or_reference) = 0;

  // Removes the blobs no recorded image uses and the roots of images no
  // longer recorded, except roots held by use().
  virtual Result<GarbageCollected> collectGarbage() = 0;

  // The directory this store lives in.
  virtual const std::string& directory() const = 0;
};

}  // namespace airlock::images
