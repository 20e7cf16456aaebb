#include "airlock/cli/artifact_command.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <nlohmann/json.hpp>

#include "airlock/artifacts/artifact_writer.h"
#include "airlock/artifacts/workspace_export.h"
#include "airlock/cli/artifact_store_open.h"
#include "airlock/cli/exit_codes.h"
#include "airlock/cli/summary.h"
#include "airlock/core/command_validation.h"
#include "airlock/core/json.h"
#include "airlock/sys/io.h"
#include "airlock/sys/sha256.h"

namespace airlock::cli {
namespace {

constexpr const char* kMediaType = "application/octet-stream";
// Filenames on the user's disk: NAME_MAX.
constexpr std::size_t kMaxDownloadName = 255;
// `artifact list` shows at most this many (the local store is one user's).
constexpr std::size_t kListLimit = 100000;

std::string quoteName(std::string_view text) {
  return "\"" + escapeForTerminal(text) + "\"";
}

// The artifact with this id if it exists and is the local tenant's; any
// other case is "no artifact ID" (another tenant's does not exist here).
Result<artifacts::StoredArtifact> findLocal(LocalArtifactStore& opened, const std::string& id) {
  auto not_found = [&] { return fail(ErrorCode::kNotFound, "no artifact " + quoteName(id)); };
  auto parsed = artifacts::ArtifactId::parse(id);
  if (!parsed) return not_found();
  auto stored = opened.repository->find(*parsed);
  if (!stored) {
    if (stored.error().code == ErrorCode::kNotFound) return not_found();
    return tl::unexpected(stored.error());
  }
  if (stored->metadata.tenant_id.str() != kLocalTenant) return not_found();
  return stored;
}

}  // namespace

Result<artifacts::TenantId> localTenant() {
  return artifacts::TenantId::parse(kLocalTenant);
}

Result<void> checkExportPath(const std::string& path) {
  if (auto contained = checkRelativePath(path); !contained) {
    Error error = contained.error();
    error.context = "--export " + quoteName(path) + ": " + error.context;
    return tl::unexpected(std::move(error));
  }
  return {};
}

Result<artifacts::ArtifactRef> exportWorkspacePath(ExecutionEnvironment& env,
                                                   const EnvironmentHandle& handle,
                                                   artifacts::ArtifactStore& store,
                                                   const std::string& path) {
  auto with_path = [&](Error error) {
    error.context = "--export " + quoteName(path) + ": " + error.context;
    return tl::unexpected(std::move(error));
  };
  // The same check (and text) as before the run (planRun), for any caller.
  if (auto checked = checkExportPath(path); !checked) return tl::unexpected(checked.error());
  auto tenant = localTenant();
  if (!tenant) return tl::unexpected(tenant.error());
  auto ws = env.workspace(handle);
  if (!ws) return with_path(ws.error());

  auto opened = artifacts::openWorkspaceExport(**ws, path);
  if (!opened) return with_path(opened.error());
  artifacts::MeasuredStream stream = std::move(opened->stream);
  std::string filename = std::move(opened->filename);
  artifacts::ArtifactWriterScope scope{*tenant, handle.run_id,
                                       artifacts::ArtifactOrigin::kSandboxExport,
                                       artifacts::TrustLevel::kExternalUntrusted};
  auto writer = artifacts::makeArtifactWriter(store, scope);
  auto ref = writer->create(std::move(stream), filename, kMediaType,
                            artifacts::TrustLevel::kExternalUntrusted);
  if (!ref) return with_path(ref.error());
  return ref;
}

std::string formatExportLine(const artifacts::ArtifactRef& ref, std::string_view path) {
  return "airlock: artifact " + ref.artifact_id.str() + " " + std::to_string(ref.size_bytes) +
         " bytes, sha256 " + ref.sha256.substr(0, 12) + "\u2026 (" + escapeForTerminal(path) +
         ")\n";
}

std::string sanitizeDownloadName(std::string_view original, std::string_view artifact_id) {
  const std::size_t cut = original.find_last_of("/\\");
  std::string_view base = cut == std::string_view::npos ? original : original.substr(cut + 1);
  std::string name;
  bool leading = true;
  for (char ch : base) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f || (leading && c == '.')) {
      name.push_back('_');
    } else {
      name.push_back(ch);
      leading = false;
    }
  }
  if (name.size() > kMaxDownloadName) name.resize(kMaxDownloadName);
  // Only underscores left from dots or control bytes: nothing of the name.
  if (name.empty() || name.find_first_not_of('_') == std::string::npos)
    return "artifact-" + std::string(artifact_id);
  return name;
}

int runArtifactList(const std::string& state_dir, bool json) {
  auto opened = openExistingLocalArtifactStore(state_dir);
  if (!opened) return printErrorLine(opened.error().message());
  auto tenant = localTenant();
  if (!tenant) return printErrorLine(tenant.error().message());
  auto rows = opened->repository->listForTenant(*tenant, kListLimit);
  if (!rows) return printErrorLine(rows.error().message());
  if (json) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& row : *rows) {
      const auto& m = row.metadata;
      list.push_back({{"artifact_id", row.artifact_id.str()},
                      {"size_bytes", m.size_bytes},
                      {"sha256", m.sha256},
                      {"filename", m.filename},
                      {"media_type", m.media_type},
                      {"origin", artifacts::artifactOriginName(m.origin)},
                      {"trust", artifacts::trustLevelName(m.trust)},
                      {"run_id", m.run_id ? nlohmann::json(*m.run_id) : nlohmann::json(nullptr)},
                      {"created_at", formatTimestamp(m.created_at)},
                      {"expires_at", m.expires_at ? nlohmann::json(formatTimestamp(*m.expires_at))
                                                  : nlohmann::json(nullptr)}});
    }
    writeOut(STDOUT_FILENO,
             list.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
    return 0;
  }
  // One line each: id, size, created, filename (last: it may contain
  // spaces; escaped so it cannot drive the terminal).
  std::string out;
  for (const auto& row : *rows) {
    const auto& m = row.metadata;
    out += row.artifact_id.str() + "  " + std::to_string(m.size_bytes) + "  " +
           formatTimestamp(m.created_at) + "  " + escapeForTerminal(m.filename) + "\n";
  }
  writeOut(STDOUT_FILENO, out);
  return 0;
}

int runArtifactGet(const std::string& state_dir, const std::string& id,
                   const std::optional<std::string>& output) {
  auto opened = openExistingLocalArtifactStore(state_dir);
  if (!opened) return printErrorLine(opened.error().message());
  auto stored = findLocal(*opened, id);
  if (!stored) return printErrorLine(stored.error().message());
  const auto& m = stored->metadata;
  const std::string target =
      output ? *output : sanitizeDownloadName(m.filename, stored->artifact_id.str());
  if (target.empty()) return printErrorLine("-o: the file name is empty");
  // `-o -`: the bytes go to stdout (a file named "-" is `-o ./-`).
  const bool to_stdout = target == "-";
  const std::string where = to_stdout ? std::string("stdout") : quoteName(target);

  auto source = opened->store->open(artifacts::refOf(*stored));
  if (!source) return printErrorLine(source.error().message());
  sys::UniqueFd file;
  if (!to_stdout) {
    // O_EXCL: never overwrite; O_NOFOLLOW: never write through a symlink.
    const int fd =
        ::open(target.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
      if (errno == EEXIST)
        return printErrorLine(quoteName(target) +
                              " already exists; not overwriting it (choose another name with -o)");
      return printErrorLine(
          Error{ErrorCode::kExecutionUnavailable, errno, "create " + quoteName(target)}.message());
    }
    file.reset(fd);
  }
  const int out = to_stdout ? STDOUT_FILENO : file.get();
  // Re-hash on the way out: the bytes written are the bytes recorded.
  sys::Sha256 hash;
  std::int64_t total = 0;
  std::string buffer(artifacts::kStreamBufferBytes, '\0');
  std::optional<std::string> problem;
  for (;;) {
    auto n = (*source)->read(buffer.data(), buffer.size());
    if (!n) {
      problem = n.error().message();
      break;
    }
    if (*n == 0) break;
    hash.update(buffer.data(), *n);
    total += static_cast<std::int64_t>(*n);
    if (!sys::writeAll(out, buffer.data(), *n)) {
      problem = Error{ErrorCode::kExecutionUnavailable, errno, "write " + where}.message();
      break;
    }
  }
  if (!problem && (total != m.size_bytes || hash.finishHex() != m.sha256))
    problem = "artifact " + stored->artifact_id.str() + " does not match its recorded sha256; " +
              (to_stdout ? "the bytes written to stdout are not the artifact" : "nothing written");
  if (!problem && !to_stdout && ::fsync(out) != 0)
    problem = Error{ErrorCode::kExecutionUnavailable, errno, "write " + where}.message();
  if (problem) {
    if (!to_stdout) ::unlink(target.c_str());
    return printErrorLine(*problem);
  }
  // On stdout the bytes are the output: nothing is added to stderr either.
  if (!to_stdout)
    writeOut(STDERR_FILENO,
             "airlock: wrote " + std::to_string(total) + " bytes to " + where + "\n");
  return 0;
}

int runArtifactRm(const std::string& state_dir, const std::string& id) {
  auto opened = openExistingLocalArtifactStore(state_dir);
  if (!opened) return printErrorLine(opened.error().message());
  auto stored = findLocal(*opened, id);
  if (!stored) return printErrorLine(stored.error().message());
  auto removed = opened->store->remove(stored->artifact_id);
  if (!removed) return printErrorLine(removed.error().message());
  if (!*removed) return printErrorLine("no artifact " + quoteName(id));
  return 0;
}

}  // namespace airlock::cli
