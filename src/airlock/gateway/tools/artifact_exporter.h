// The capability a tool is handed to create an artifact (spec 000,
// "ArtifactWriter"): bytes, a suggested filename, a media type, an origin
// and a trust label. The tenant, the run, the size, the checksum and the
// storage key are not the tool's to choose: the binding (the service's
// adapter over artifacts::ArtifactStore) takes tenant and run from the
// ToolScope the tool layer copies out of its ToolContext, and computes size
// and SHA-256 itself.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "airlock/core/error.h"

namespace airlock::gateway {

// The spec's ArtifactOrigin values a tool can produce.
enum class ExportOrigin {
  kSandboxExport,  // artifact_export of a workspace path: "SANDBOX_EXPORT"
  kModelOutput,    // artifact_export of text the model wrote: "MODEL_OUTPUT"
  kToolOutput,     // the truncation path of sandbox_run_command: "TOOL_OUTPUT"
};
std::string_view exportOriginName(ExportOrigin origin) noexcept;

// Trust is inherited from where the bytes came from, never chosen by the
// model: "INTERNAL_TOOL" or "EXTERNAL_UNTRUSTED".
enum class ExportTrust { kInternalTool, kExternalUntrusted };
std::string_view exportTrustName(ExportTrust trust) noexcept;

// Who the artifact belongs to: copied from the ToolContext, never from
// arguments.
struct ToolScope {
  std::string tenant_id;
  std::string run_id;
};

struct ExportRequest {
  std::string_view bytes;
  std::string filename;    // metadata only, never a path; raw bytes, no NUL
  std::string media_type;  // 1-255 printable ASCII bytes
  ExportOrigin origin = ExportOrigin::kSandboxExport;
  ExportTrust trust = ExportTrust::kExternalUntrusted;
};

// The spec's ArtifactRef: what travels into a tool result. No filename, no
// tenant, no path.
struct ExportedArtifact {
  std::string artifact_id;  // UUIDv7
  std::string sha256;       // 64 lowercase hex digits
  std::int64_t size_bytes = 0;
  std::string media_type;
  bool operator==(const ExportedArtifact&) const = default;
};

class ArtifactExporter {
 public:
  virtual ~ArtifactExporter() = default;
  // Stores the bytes as a new artifact of scope. Errors are the store's
  // (ExecutionRejected above a size or tenant cap, ArtifactIntegrityError,
  // ExecutionUnavailable); the tool passes them on.
  virtual Result<ExportedArtifact> create(const ToolScope& scope, const ExportRequest& request) = 0;
};

}  // namespace airlock::gateway
