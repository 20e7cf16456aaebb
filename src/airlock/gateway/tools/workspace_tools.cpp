// workspace_read_text, workspace_write_text, workspace_list and
// artifact_export (spec 000, "WorkspaceHandle", "ArtifactWriter"). All four
// are in-process tools: they hold the workspace port and never execute.
#include <algorithm>
#include <array>

#include "airlock/core/encoding.h"
#include "airlock/core/json.h"
#include "airlock/gateway/tools/builtin_tools.h"
#include "airlock/gateway/tools/tool_support.h"
#include "airlock/sys/sha256.h"

namespace airlock::gateway {

using detail::invalidArgument;
using nlohmann::json;

namespace {

tl::expected<std::shared_ptr<WorkspaceHandle>, ToolFailure> workspaceOf(ToolContext& context) {
  auto ws = context.execution->workspace(context.environment);
  if (!ws) return detail::failureFrom(ws.error());
  return *ws;
}

// Trust follows provenance: only the platform's own write is INTERNAL_TOOL;
// what a command wrote, and anything unknown, is EXTERNAL_UNTRUSTED.
ExportTrust trustOf(WorkspaceProvenance provenance) {
  return provenance == WorkspaceProvenance::kToolWritten ? ExportTrust::kInternalTool
                                                         : ExportTrust::kExternalUntrusted;
}

// A port failure about `path`, with a message that names the argument.
tl::unexpected<ToolFailure> pathFailure(const Error& error, const std::string& path) {
  if (error.code == ErrorCode::kNotFound) {
    return tl::unexpected<ToolFailure>(
        ToolFailure{ErrorCode::kNotFound, "path",
                    "path " + detail::quoteArg(path) + " does not exist in the workspace"});
  }
  return detail::failureFrom(error, "path");
}

// The longest prefix of at most `limit` bytes that does not end inside a
// UTF-8 sequence.
std::size_t utf8Prefix(std::string_view bytes, std::size_t limit) {
  if (bytes.size() <= limit) return bytes.size();
  std::size_t end = limit;
  for (int i = 0; i < 3 && end > 0 && (static_cast<unsigned char>(bytes[end]) & 0xC0) == 0x80;
       ++i) {
    --end;
  }
  return end;
}

tl::expected<std::string, ToolFailure> filenameArgument(const json& arguments,
                                                        std::string fallback) {
  auto name = detail::optionalString(arguments, "filename", std::move(fallback));
  if (!name) return name;
  if (name->empty() || name->size() > 255) {
    return invalidArgument("filename", "filename must be 1 to 255 bytes long");
  }
  if (name->find('\0') != std::string::npos || name->find('/') != std::string::npos) {
    return invalidArgument("filename",
                           "filename is a name for the download, not a path: it may not "
                           "contain '/' or NUL");
  }
  return name;
}

tl::expected<std::string, ToolFailure> mediaTypeArgument(const json& arguments,
                                                         std::string fallback) {
  auto type = detail::optionalString(arguments, "media_type", std::move(fallback));
  if (!type) return type;
  const bool printable =
      std::all_of(type->begin(), type->end(), [](char c) { return c >= 0x20 && c <= 0x7e; });
  if (type->empty() || type->size() > 255 || !printable) {
    return invalidArgument("media_type",
                           "media_type must be 1 to 255 printable ASCII characters, like "
                           "\"text/csv\"");
  }
  return type;
}

tl::expected<void, ToolFailure> requireObject(const json& arguments, const char* example) {
  if (arguments.is_object()) return {};
  return invalidArgument("arguments",
                         std::string("arguments must be a JSON object like ") + example);
}

// A workspace file's bytes and where they came from (the trust they carry).
struct FileRead {
  std::string bytes;
  WorkspaceProvenance provenance;
};

tl::expected<FileRead, ToolFailure> readWithProvenance(ToolContext& context,
                                                       const std::string& path) {
  auto ws = workspaceOf(context);
  if (!ws) return tl::unexpected(ws.error());
  auto bytes = (*ws)->read(path);
  if (!bytes) return pathFailure(bytes.error(), path);
  auto provenance = (*ws)->provenance(path);
  if (!provenance) return pathFailure(provenance.error(), path);
  return FileRead{std::move(*bytes), *provenance};
}

// What a "path" argument names: a file (required), or a directory ("."
// when absent; the workspace root allowed).
enum class PathKind { kFile, kDirectory };

// The "path" argument, checked as a workspace path.
tl::expected<std::string, ToolFailure> pathArgument(const json& arguments, PathKind kind) {
  const bool directory = kind == PathKind::kDirectory;
  auto raw = directory ? detail::optionalString(arguments, "path", ".")
                       : detail::requiredString(arguments, "path");
  if (!raw) return tl::unexpected(raw.error());
  return detail::workspacePath("path", *raw, /*allow_root=*/directory);
}

// Arguments that are an object like `example` with a "path" and nothing
// else: the path.
tl::expected<std::string, ToolFailure> onlyPathArgument(const json& arguments, const char* example,
                                                        PathKind kind) {
  if (auto ok = requireObject(arguments, example); !ok) return tl::unexpected(ok.error());
  auto path = pathArgument(arguments, kind);
  if (!path) return path;
  if (auto known = detail::onlyKnownArguments(arguments, {"path"}); !known) {
    return tl::unexpected(known.error());
  }
  return path;
}

}  // namespace

json artifactRefJson(const ExportedArtifact& ref) {
  return json{{"artifact_id", ref.artifact_id},
              {"sha256", ref.sha256},
              {"size_bytes", ref.size_bytes},
              {"media_type", ref.media_type}};
}

std::string mediaTypeFor(std::string_view filename) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 22> kTypes{{
      {".txt", "text/plain; charset=utf-8"},
      {".log", "text/plain; charset=utf-8"},
      {".md", "text/markdown; charset=utf-8"},
      {".csv", "text/csv; charset=utf-8"},
      {".tsv", "text/tab-separated-values; charset=utf-8"},
      {".json", "application/json"},
      {".jsonl", "application/jsonl"},
      {".html", "text/html; charset=utf-8"},
      {".xml", "application/xml"},
      {".yaml", "application/yaml"},
      {".yml", "application/yaml"},
      {".py", "text/x-python; charset=utf-8"},
      {".png", "image/png"},
      {".jpg", "image/jpeg"},
      {".jpeg", "image/jpeg"},
      {".gif", "image/gif"},
      {".svg", "image/svg+xml"},
      {".pdf", "application/pdf"},
      {".zip", "application/zip"},
      {".gz", "application/gzip"},
      {".tar", "application/x-tar"},
      {".parquet", "application/vnd.apache.parquet"},
  }};
  const auto dot = filename.rfind('.');
  if (dot == std::string_view::npos) return "application/octet-stream";
  std::string ext(filename.substr(dot));
  std::transform(ext.begin(), ext.end(), ext.begin(), [](char c) {
    return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
  });
  for (const auto& [suffix, type] : kTypes) {
    if (ext == suffix) return std::string(type);
  }
  return "application/octet-stream";
}

ToolResult readText(const json& arguments, ToolContext& context, const ToolOptions& options) {
  auto path = onlyPathArgument(arguments, "{\"path\": \"results.csv\"}", PathKind::kFile);
  if (!path) return tl::unexpected(path.error());

  auto file = readWithProvenance(context, *path);
  if (!file) return tl::unexpected(file.error());
  const std::string& bytes = file->bytes;

  const std::size_t limit =
      static_cast<std::size_t>(std::max<std::int64_t>(options.read_text_max_bytes, 0));
  const std::size_t keep = utf8Prefix(bytes, limit);
  const std::string_view text = std::string_view(bytes).substr(0, keep);
  if (!isValidUtf8(text)) {
    return invalidArgument(
        "path", "path " + detail::quoteArg(*path) + " is not UTF-8 text (" +
                    std::to_string(bytes.size()) +
                    " bytes); inspect it with sandbox_run_command (e.g. [\"xxd\", \"" + *path +
                    "\"] or [\"file\", \"" + *path +
                    "\"]) or give it to the user with "
                    "artifact_export");
  }
  return json{{"path", bytesToJson(*path)},
              {"text", std::string(text)},
              {"size_bytes", static_cast<std::int64_t>(bytes.size())},
              {"truncated", keep < bytes.size()},
              {"provenance", workspaceProvenanceName(file->provenance)},
              {"trust", exportTrustName(trustOf(file->provenance))}};
}

ToolResult writeText(const json& arguments, ToolContext& context, const ToolOptions& options) {
  if (auto ok = requireObject(arguments, "{\"path\": \"notes.md\", \"text\": \"...\"}"); !ok) {
    return tl::unexpected(ok.error());
  }
  auto path = pathArgument(arguments, PathKind::kFile);
  if (!path) return tl::unexpected(path.error());
  auto text = detail::requiredString(arguments, "text");
  if (!text) return tl::unexpected(text.error());
  if (static_cast<std::int64_t>(text->size()) > options.write_text_max_bytes) {
    return invalidArgument("text", "text is " + std::to_string(text->size()) +
                                       " bytes; workspace_write_text takes at most " +
                                       std::to_string(options.write_text_max_bytes));
  }
  if (!isValidUtf8(*text)) return invalidArgument("text", "text must be valid UTF-8");
  if (auto known = detail::onlyKnownArguments(arguments, {"path", "text"}); !known) {
    return tl::unexpected(known.error());
  }

  auto ws = workspaceOf(context);
  if (!ws) return tl::unexpected(ws.error());
  if (auto written = (*ws)->write(*path, *text); !written) {
    return pathFailure(written.error(), *path);
  }
  return json{{"path", bytesToJson(*path)},
              {"size_bytes", static_cast<std::int64_t>(text->size())},
              {"sha256", sys::sha256Hex(*text)}};
}

ToolResult listWorkspace(const json& arguments, ToolContext& context, const ToolOptions& options) {
  auto path = onlyPathArgument(arguments, "{\"path\": \".\"}", PathKind::kDirectory);
  if (!path) return tl::unexpected(path.error());

  auto ws = workspaceOf(context);
  if (!ws) return tl::unexpected(ws.error());
  auto entries = (*ws)->listdir(*path == "." ? std::string(".") : *path);
  if (!entries) return pathFailure(entries.error(), *path);
  std::sort(entries->begin(), entries->end(),
            [](const WorkspaceEntry& a, const WorkspaceEntry& b) { return a.name < b.name; });

  const std::size_t cap =
      static_cast<std::size_t>(std::max<std::int64_t>(options.list_max_entries, 0));
  json listed = json::array();
  for (std::size_t i = 0; i < entries->size() && i < cap; ++i) {
    const WorkspaceEntry& e = (*entries)[i];
    listed.push_back(json{{"name", bytesToJson(e.name)},
                          {"type", workspaceEntryTypeName(e.type)},
                          {"size_bytes", e.size_bytes}});
  }
  return json{{"path", bytesToJson(*path)},
              {"entries", std::move(listed)},
              {"total_entries", static_cast<std::int64_t>(entries->size())},
              {"truncated", entries->size() > cap}};
}

ToolResult exportArtifact(const json& arguments, ToolContext& context, const ToolOptions&) {
  if (auto ok = requireObject(arguments, "{\"path\": \"report.pdf\"}"); !ok) {
    return tl::unexpected(ok.error());
  }
  const bool has_path = detail::member(arguments, "path") != nullptr;
  const bool has_text = detail::member(arguments, "text") != nullptr;
  if (has_path == has_text) {
    return invalidArgument("path", has_path
                                       ? "path and text: give exactly one of them, not both: "
                                         "path exports a workspace file, text exports text you "
                                         "wrote"
                                       : "path and text: give exactly one of them (path: the "
                                         "workspace file to export; text: text you wrote)");
  }

  ExportRequest request;
  std::string bytes;
  std::optional<std::string> workspace_path;
  std::string default_filename = "export.txt";
  if (has_path) {
    auto path = pathArgument(arguments, PathKind::kFile);
    if (!path) return tl::unexpected(path.error());
    workspace_path = *path;
    default_filename = path->substr(path->rfind('/') + 1);  // the basename
    request.origin = ExportOrigin::kSandboxExport;
  } else {
    auto text = detail::requiredString(arguments, "text");
    if (!text) return tl::unexpected(text.error());
    if (!isValidUtf8(*text)) return invalidArgument("text", "text must be valid UTF-8");
    bytes = std::move(*text);
    request.origin = ExportOrigin::kModelOutput;
    // The model's own words, as workspace_write_text labels them.
    request.trust = ExportTrust::kInternalTool;
  }
  auto filename = filenameArgument(arguments, std::move(default_filename));
  if (!filename) return tl::unexpected(filename.error());
  request.filename = *filename;
  auto media = mediaTypeArgument(arguments, mediaTypeFor(request.filename));
  if (!media) return tl::unexpected(media.error());
  request.media_type = *media;
  if (auto known =
          detail::onlyKnownArguments(arguments, {"path", "text", "filename", "media_type"});
      !known) {
    return tl::unexpected(known.error());
  }

  if (context.artifacts == nullptr) {
    return tl::unexpected<ToolFailure>(
        ToolFailure{ErrorCode::kExecutionUnavailable,
                    {},
                    "artifact export is not available: this session has no artifact store"});
  }
  if (workspace_path) {
    auto file = readWithProvenance(context, *workspace_path);
    if (!file) return tl::unexpected(file.error());
    bytes = std::move(file->bytes);
    request.trust = trustOf(file->provenance);
  }
  request.bytes = bytes;
  auto created = context.artifacts->create(ToolScope{context.tenant_id, context.run_id}, request);
  if (!created) return detail::failureFrom(created.error());
  return artifactRefJson(*created);
}

std::string_view exportOriginName(ExportOrigin origin) noexcept {
  switch (origin) {
    case ExportOrigin::kSandboxExport:
      return "SANDBOX_EXPORT";
    case ExportOrigin::kModelOutput:
      return "MODEL_OUTPUT";
    case ExportOrigin::kToolOutput:
      break;
  }
  return "TOOL_OUTPUT";
}

std::string_view exportTrustName(ExportTrust trust) noexcept {
  return trust == ExportTrust::kInternalTool ? "INTERNAL_TOOL" : "EXTERNAL_UNTRUSTED";
}

}  // namespace airlock::gateway
