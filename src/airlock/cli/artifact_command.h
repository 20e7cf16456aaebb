// `airlock run --export PATH` and `airlock artifact list|get|rm` (docs/cli.md,
// "airlock artifact"; spec 000 "Artifacts"). The local store
// is <state_dir>/artifacts (cli/artifact_store_open.h); the CLI acts as the
// tenant "local".
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/artifacts/artifact_store.h"
#include "airlock/core/error.h"
#include "airlock/core/types.h"
#include "airlock/port/execution_environment.h"

namespace airlock::cli {

inline constexpr const char* kLocalTenant = "local";
inline constexpr const char* kDefaultStateDir = "/run/airlock";

// The tenant the CLI acts as (kLocalTenant, validated).
Result<artifacts::TenantId> localTenant();

// The containment check of an --export PATH (core checkRelativePath:
// workspace-relative, not absolute, no "." or ".." or empty component), with
// the error text the export itself gives: `--export "../x": path "../x" has
// a "." or ".." component (DOT_COMPONENT); ...`. planRun calls it before
// anything is provisioned; exportWorkspacePath calls it first.
Result<void> checkExportPath(const std::string& path);

// Exports one workspace path of a live sandbox as an artifact of tenant
// "local" and the handle's run id (origin SANDBOX_EXPORT, trust
// EXTERNAL_UNTRUSTED, media type application/octet-stream). Streams through
// the workspace's root fd and the containment function when the adapter has
// one (symlinks leaving the workspace, devices and FIFOs are refused);
// otherwise reads through the port, bounded by the artifact cap. Errors are
// those of the workspace and of ArtifactStore::put, with the path (as the
// user typed it) in the message.
Result<artifacts::ArtifactRef> exportWorkspacePath(ExecutionEnvironment& env,
                                                   const EnvironmentHandle& handle,
                                                   artifacts::ArtifactStore& store,
                                                   const std::string& path);

// "airlock: artifact <id> <size> bytes, sha256 <first 12 hex>… (<path>)\n",
// the path escaped for the terminal.
std::string formatExportLine(const artifacts::ArtifactRef& ref, std::string_view path);

// The name a download is written under in the current directory when no -o
// is given: the last path component of the stored filename (both '/' and
// '\\' separate), control bytes (< 0x20, 0x7f) replaced by '_', leading dots
// replaced by '_', at most 255 bytes. "" / "." / ".." and anything that
// ends up empty become "artifact-<id>".
std::string sanitizeDownloadName(std::string_view original, std::string_view artifact_id);

// The subcommands. Each returns the process exit status: 0, or 125 with
// one "airlock: error: ..." line on stderr.
int runArtifactList(const std::string& state_dir, bool json);
int runArtifactGet(const std::string& state_dir, const std::string& id,
                   const std::optional<std::string>& output);
int runArtifactRm(const std::string& state_dir, const std::string& id);

}  // namespace airlock::cli
