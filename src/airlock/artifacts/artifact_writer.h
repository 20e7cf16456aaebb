// ArtifactWriter, the narrow capability a tool is handed (spec 000,
// "ArtifactWriter"). A tool supplies bytes, a suggested filename, a media
// type and a trust label. Everything else — tenant, run, origin, size,
// checksum, created_at, expires_at, the storage key — comes from the scope
// the pipeline bound the writer to, or from the bytes themselves, so a tool
// cannot write into another tenant or run. ArtifactStore is the port;
// ArtifactWriter is the capability; the gap between them is authorization.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "airlock/artifacts/artifact_store.h"
#include "airlock/artifacts/retention.h"

namespace airlock::artifacts {

// Bytes whose producer measured them while reading (the execution side
// hashing a workspace file, or bytes in memory). put() verifies the claim.
struct MeasuredStream {
  std::unique_ptr<ByteSource> source;
  std::int64_t size_bytes = 0;
  std::string sha256;
};

// Bytes in memory, measured (tool outputs, model text).
MeasuredStream measuredBytes(std::string bytes);

class ArtifactWriter {
 public:
  virtual ~ArtifactWriter() = default;
  // Errors: those of ArtifactStore::put.
  virtual Result<ArtifactRef> create(MeasuredStream stream, std::string filename,
                                     std::string media_type, TrustLevel trust) = 0;
};

// What the pipeline binds a writer to, from the execution context.
struct ArtifactWriterScope {
  TenantId tenant_id;
  std::optional<std::string> run_id;
  ArtifactOrigin origin = ArtifactOrigin::kToolOutput;
  // Trust is inherited, never raised by the producer: the stored label is
  // the less trusted of this floor and the tool's label. Sandbox exports
  // bind kExternalUntrusted.
  TrustLevel trust_floor = TrustLevel::kExternalUntrusted;
};

// The pipeline's ArtifactWriter over a store. created_at from `clock`
// (system clock when empty), expires_at from expiresAtFor(origin).
std::unique_ptr<ArtifactWriter> makeArtifactWriter(ArtifactStore& store, ArtifactWriterScope scope,
                                                   RetentionSettings retention = {},
                                                   std::function<Timestamp()> clock = {});

}  // namespace airlock::artifacts
