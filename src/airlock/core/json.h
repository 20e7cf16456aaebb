// JSON round-trip for the port's value types (nlohmann-json).
//
// Encoding rules:
// * enums as the spec's upper-case names ("TIMEOUT", "CREATED"), EgressMode as
//   "deny" / "allowlist";
// * timestamps as RFC 3339 UTC with milliseconds ("2026-11-30T02:43:57.123Z");
// * byte strings (stdout, stderr, stdin, FileChange.path) as a JSON string when
//   they are valid UTF-8, otherwise as {"base64": "..."} so that every byte
//   round-trips (bug-log B08);
// * optional fields as null.
// Decoding untrusted JSON never throws: use fromJson<T>(), which returns
// ToolValidationError naming the offending field.
#pragma once

#include <nlohmann/json.hpp>

#include "airlock/core/error.h"
#include "airlock/core/types.h"

namespace airlock {

void to_json(nlohmann::json& j, const ResourceLimits& v);
void from_json(const nlohmann::json& j, ResourceLimits& v);
void to_json(nlohmann::json& j, const EgressPolicy& v);
void from_json(const nlohmann::json& j, EgressPolicy& v);
void to_json(nlohmann::json& j, const EnvironmentSpec& v);
void from_json(const nlohmann::json& j, EnvironmentSpec& v);
void to_json(nlohmann::json& j, const EnvironmentHandle& v);
void from_json(const nlohmann::json& j, EnvironmentHandle& v);
void to_json(nlohmann::json& j, const ExecutionCommand& v);
void from_json(const nlohmann::json& j, ExecutionCommand& v);
void to_json(nlohmann::json& j, const ExecutionResult& v);
void from_json(const nlohmann::json& j, ExecutionResult& v);
void to_json(nlohmann::json& j, const FileChange& v);
void from_json(const nlohmann::json& j, FileChange& v);
void to_json(nlohmann::json& j, KillReason v);
void from_json(const nlohmann::json& j, KillReason& v);
void to_json(nlohmann::json& j, ChangeKind v);
void from_json(const nlohmann::json& j, ChangeKind& v);

// Timestamps.
std::string formatTimestamp(Timestamp t);
Result<Timestamp> parseTimestamp(std::string_view text);

// Bytes that may not be UTF-8.
nlohmann::json bytesToJson(std::string_view bytes);
Result<std::string> bytesFromJson(const nlohmann::json& j);

// Parse text into T without throwing.
template <class T>
Result<T> fromJson(std::string_view text) {
  auto parsed = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return fail(ErrorCode::kToolValidationError, "invalid JSON");
  try {
    return parsed.get<T>();
  } catch (const nlohmann::json::exception& e) {
    return fail(ErrorCode::kToolValidationError, std::string("invalid JSON: ") + e.what());
  }
}

// Serialize; never throws on non-UTF-8 bytes because bytes are encoded above.
template <class T>
std::string toJsonText(const T& value, int indent = -1) {
  return nlohmann::json(value).dump(indent);
}

}  // namespace airlock
