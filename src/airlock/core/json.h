// JSON round-trip for the port's value types (nlohmann-json).
//
// Encoding rules:
// * enums as the spec's upper-case names ("TIMEOUT", "CREATED"), EgressMode as
//   "deny" / "allowlist";
// * timestamps as RFC 3339 UTC with milliseconds ("2026-11-30T02:43:57.123Z");
// * byte strings (stdout, stderr, stdin, FileChange.path, and also argv
//   elements, working_directory and environment values, which may carry
//   host bytes) as a JSON string when they are valid UTF-8, otherwise as
//   {"base64": "..."} so that every byte round-trips (red-team case B08);
// * optional fields as null; on input a missing optional field is null.
//
// Field names:
//   ResourceLimits   cpu_millicores, memory_bytes, pids_max, workspace_bytes,
//                    inodes_max, wall_clock_seconds (all required)
//   EgressPolicy     mode ("deny" | "allowlist"), destinations [{host, ports}]
//                    (destinations may be omitted: empty)
//   EnvironmentSpec  tenant_id, run_id, lease_epoch, image_digest, limits,
//                    egress, environment (object), bridge (null or
//                    {socket_path, token})
//   EnvironmentHandle environment_id, tenant_id, run_id, lease_epoch,
//                    created_at, expires_at
//   ExecutionCommand argv, working_directory, timeout_seconds, stdin (null or
//                    bytes), maximum_output_bytes, env (an object of the
//                    env_additions; omitted when there are none),
//                    execution_id (omitted when "")
//   ExecutionResult  exit_code, stdout, stderr, stdout_truncated,
//                    stderr_truncated, timed_out, killed_by, files_changed,
//                    files_changed_truncated (may be omitted: false),
//                    output_held_open (["stdout", "stderr"] or a part of
//                    it; may be omitted: empty; empty when killed_by is
//                    set), duration_ms, peak_memory_bytes, cpu_time_ms
//   FileChange       path, change, size_bytes, sha256
//
// Decoding checks presence, JSON types, integer ranges and enum names, plus
// the invariants the spec states as "exactly": exit_code is null exactly when
// killed_by is set, timed_out is true exactly when killed_by is TIMEOUT, and
// sha256 is null exactly for DELETED. Unknown object members are ignored.
// from_json throws JsonFieldError; decoding untrusted JSON never throws when
// done through fromJson<T>(), which returns ToolValidationError naming the
// offending field ("field \"limits.memory_bytes\" is missing").
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "airlock/core/error.h"
#include "airlock/core/types.h"

namespace airlock {

// What from_json throws: the dotted path of the offending field ("" for the
// value itself, "argv[2]", "limits.pids_max") and the problem in words.
class JsonFieldError : public nlohmann::json::exception {
 public:
  JsonFieldError(std::string field, std::string problem);
  const std::string& field() const noexcept { return field_; }
  const std::string& problem() const noexcept { return problem_; }
  // `field "argv[2]" must be a string`, or `value must be an object`.
  std::string describe() const;

 private:
  std::string field_;
  std::string problem_;
};

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

// Timestamps. formatTimestamp always writes "YYYY-MM-DDTHH:MM:SS.mmmZ"; a
// time outside years 0000..9999 (a caller bug) is clamped into that range.
// parseTimestamp accepts RFC 3339 date-times for years 0000..9999: 'T' or
// 't', optional fraction (any digits; kept to the millisecond, truncated),
// and 'Z'/'z' or a numeric offset "+HH:MM"/"-HH:MM", converted to UTC. A leap
// second (:60) is refused. ToolValidationError naming the text otherwise.
std::string formatTimestamp(Timestamp t);
Result<Timestamp> parseTimestamp(std::string_view text);

// Bytes that may not be UTF-8: a JSON string when valid UTF-8, otherwise
// {"base64": "..."}. bytesFromJson accepts either form (strict base64).
nlohmann::json bytesToJson(std::string_view bytes);
Result<std::string> bytesFromJson(const nlohmann::json& j);

namespace json_detail {
// "[json.exception.parse_error.101] parse error at ..." -> "parse error at ...".
std::string withoutExceptionTag(const char* what);
}  // namespace json_detail

// The one parser for JSON that arrives from outside: HTTP request bodies,
// tool calls, MCP messages. RFC 8259 text (no comments, UTF-8 strings), and
// an object that names a key twice is refused: nlohmann (like many parsers)
// keeps the last value, so two readers of the same bytes could see two
// different requests. Never throws.
// ToolValidationError whose context describes the problem, for the caller
// to put after the input's name ("the request body is not valid JSON: "):
//   `parse error at line 1, column 2: syntax error while parsing ...`
//   `the key "lease_epoch" appears twice in one object` (the key quoted as
//   quoteForMessage() does).
Result<nlohmann::json> parseUntrustedJson(std::string_view text);

// A JSON integer as a signed 64-bit value, the range of every integer field
// in the port's types and the API's bodies. ToolValidationError whose
// context is a phrase to follow the field's name:
//   `must be a whole number` (a string, a fraction, 1e3, ...)
//   `is out of range: the largest allowed is 9223372036854775807` (2^63 and
//   beyond, including integers too long for any 64-bit type)
//   `is out of range: the smallest allowed is -9223372036854775808`.
Result<std::int64_t> int64FromJson(const nlohmann::json& value);

// A count a caller gives (a duration, a size, a cursor, a sequence number):
// a whole number, 0 or more, at most `max`. `field` names it and `unit` is
// what it counts, plural ("milliseconds", "bytes"; "" for a plain number).
struct CountSpec {
  std::string_view field;
  std::string_view unit;
  std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
};
// What the field takes, as the sentence a refusal of it says:
//   `wall_ms must be a whole number of milliseconds, 0 or more`
//   `wait_ms must be a whole number of milliseconds from 0 to 30000`
// A `max` at or past 2^53 (no caller types it) is not spelled out.
std::string countExpectation(const CountSpec& spec);
// The count in a JSON value, or ToolValidationError whose context is
// countExpectation(spec) (a negative number, a fraction, a string, past a
// spelled-out max), or, past a max that is not spelled out,
// `lease_epoch is out of range: the largest allowed is 9223372036854775807`.
Result<std::uint64_t> countFromJson(const nlohmann::json& value, const CountSpec& spec);
// The same for decimal text (a query parameter): digits only.
Result<std::uint64_t> countFromText(std::string_view text, const CountSpec& spec);

// Parse text into T without throwing (through parseUntrustedJson: a key
// named twice is refused).
template <class T>
Result<T> fromJson(std::string_view text) {
  auto parsed = parseUntrustedJson(text);
  if (!parsed)
    return fail(ErrorCode::kToolValidationError, "invalid JSON: " + parsed.error().context);
  try {
    return parsed->get<T>();
  } catch (const JsonFieldError& e) {
    return fail(ErrorCode::kToolValidationError, "invalid JSON: " + e.describe());
  } catch (const nlohmann::json::exception& e) {
    return fail(ErrorCode::kToolValidationError,
                "invalid JSON: " + json_detail::withoutExceptionTag(e.what()));
  }
}

// Serialize. Never throws on non-UTF-8 bytes: byte fields are encoded above,
// and any other text field that is not UTF-8 (a caller bug) is written with
// U+FFFD replacements rather than throwing.
template <class T>
std::string toJsonText(const T& value, int indent = -1) {
  return nlohmann::json(value).dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace airlock
