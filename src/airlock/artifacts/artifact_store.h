// The ArtifactStore port (spec 000, "ArtifactStore").
//
// Shaped for an object store: bytes go in and come out as streams, objects
// are named by an opaque key (storage_key.h), and nothing here has
// directory semantics. The filesystem adapter is filesystem_store.h; an
// S3-shaped adapter implements the same three methods.
//
// The store is not an authorization boundary: a caller holding a ref gets
// the bytes. Authorization happens before open(), in the application
// service, and nothing here pretends otherwise.
#pragma once

#include <cstdint>
#include <memory>

#include "airlock/artifacts/artifact_types.h"
#include "airlock/artifacts/byte_stream.h"
#include "airlock/core/error.h"

namespace airlock::artifacts {

inline constexpr std::int64_t kDefaultMaxArtifactBytes = std::int64_t{512} << 20;  // 512 MiB

class ArtifactStore {
 public:
  virtual ~ArtifactStore() = default;

  // Streams `stream` into a new object and records `metadata` for it. The
  // store generates the artifact id (UUIDv7) and derives the key from
  // (metadata.tenant_id, id) only. It hashes while writing, never holds the
  // object in memory, and commits only when the bytes match both
  // metadata.size_bytes and metadata.sha256.
  //
  // Errors (in every case no object and no metadata row exist afterwards):
  // * ToolValidationError: metadata invalid (validateMetadata);
  // * ExecutionRejected: size_bytes above the per-artifact cap (refused
  //   before a byte is read), the stream running past the cap (abandoned
  //   mid-write), or the tenant's byte cap reached;
  // * ArtifactIntegrityError: the stream is longer or shorter than
  //   size_bytes, or its SHA-256 differs from metadata.sha256;
  // * the stream's own error when it fails (this is how a producer
  //   cancels); ExecutionUnavailable for a storage or database failure.
  virtual Result<ArtifactRef> put(ByteSource& stream, const ArtifactMetadata& metadata) = 0;

  // A stream of the object's bytes. NotFound when no such artifact exists
  // or the ref's sha256/size_bytes disagree with what was stored. The
  // stream re-hashes what it reads and fails with ArtifactIntegrityError at
  // the end if the stored bytes no longer match (corruption at rest).
  virtual Result<std::unique_ptr<ByteSource>> open(const ArtifactRef& ref) = 0;

  // Deletes the metadata row, then the object (the retention sweeper and
  // `artifact rm`). Returns false when the artifact did not exist. A crash
  // between the two leaves an object without a row, which the adapter's
  // recovery removes.
  virtual Result<bool> remove(const ArtifactId& artifact_id) = 0;
};

}  // namespace airlock::artifacts
