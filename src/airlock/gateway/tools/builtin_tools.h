// The built-in tools' call functions (internal to gateway/tools; the
// registry in tool_registry.h is the public entry point). Each assumes the
// registry's checks passed: context.execution is set and the environment
// belongs to the context's tenant and run.
#pragma once

#include <nlohmann/json.hpp>

#include "airlock/gateway/tools/tool.h"

namespace airlock::gateway {

ToolResult runCommand(const nlohmann::json& arguments, ToolContext& context,
                      const ToolOptions& options);
ToolResult readText(const nlohmann::json& arguments, ToolContext& context,
                    const ToolOptions& options);
ToolResult writeText(const nlohmann::json& arguments, ToolContext& context,
                     const ToolOptions& options);
ToolResult listWorkspace(const nlohmann::json& arguments, ToolContext& context,
                         const ToolOptions& options);
ToolResult exportArtifact(const nlohmann::json& arguments, ToolContext& context,
                          const ToolOptions& options);

// {"artifact_id", "sha256", "size_bytes", "media_type"}: the spec's ArtifactRef.
nlohmann::json artifactRefJson(const ExportedArtifact& ref);

// A media type from a file name's extension; application/octet-stream when
// unknown.
std::string mediaTypeFor(std::string_view filename);

}  // namespace airlock::gateway
