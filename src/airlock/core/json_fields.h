// Readers of one JSON member for the decoders of the port's values
// (core/json.h's, and the wire's beside it): each throws JsonFieldError
// naming the member's dotted path ("limits.pids_max") and the problem, so
// fromJson<T>() turns any of them into one ToolValidationError. Inline, for
// from_json functions in any library.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "airlock/core/encoding.h"
#include "airlock/core/json.h"

namespace airlock::json_fields {

[[noreturn]] inline void fieldError(std::string field, std::string problem) {
  throw JsonFieldError(std::move(field), std::move(problem));
}

inline std::string joinField(std::string_view outer, std::string_view inner) {
  if (inner.empty()) return std::string(outer);
  if (outer.empty()) return std::string(inner);
  std::string out(outer);
  if (inner.front() != '[') out += '.';
  out += inner;
  return out;
}

// Runs fn, re-throwing any JsonFieldError with `outer` prefixed to its path,
// so that a nested decoder reports "limits.pids_max" and not just "pids_max".
template <class F>
auto nested(std::string_view outer, F&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const JsonFieldError& e) {
    throw JsonFieldError(joinField(outer, e.field()), e.problem());
  }
}

inline void requireObject(const nlohmann::json& j) {
  if (!j.is_object()) fieldError("", "must be an object");
}

inline const nlohmann::json& member(const nlohmann::json& j, const char* name) {
  const auto it = j.find(name);
  if (it == j.end()) fieldError(name, "is missing");
  return *it;
}

// nullptr when the member is absent or null.
inline const nlohmann::json* optionalMember(const nlohmann::json& j, const char* name) {
  const auto it = j.find(name);
  if (it == j.end() || it->is_null()) return nullptr;
  return &*it;
}

inline std::int64_t int64Value(const nlohmann::json& v, const std::string& name) {
  auto n = int64FromJson(v);
  if (!n) fieldError(name, n.error().context);
  return *n;
}

inline std::int64_t int64Field(const nlohmann::json& j, const char* name) {
  return int64Value(member(j, name), name);
}

inline std::int64_t nonNegativeField(const nlohmann::json& j, const char* name) {
  const std::int64_t v = int64Field(j, name);
  if (v < 0) fieldError(name, "must not be negative");
  return v;
}

inline int intValue(const nlohmann::json& v, const std::string& name) {
  const std::int64_t wide = int64Value(v, name);
  if (wide < std::numeric_limits<int>::min() || wide > std::numeric_limits<int>::max()) {
    fieldError(name, "is out of range for a 32-bit integer");
  }
  return static_cast<int>(wide);
}

inline bool boolField(const nlohmann::json& j, const char* name) {
  const nlohmann::json& v = member(j, name);
  if (!v.is_boolean()) fieldError(name, "must be true or false");
  return v.get<bool>();
}

inline std::string stringValue(const nlohmann::json& v, const std::string& name) {
  if (!v.is_string()) fieldError(name, "must be a string");
  return v.get<std::string>();
}

inline std::string stringField(const nlohmann::json& j, const char* name) {
  return stringValue(member(j, name), name);
}

inline std::string bytesValue(const nlohmann::json& v, const std::string& name) {
  auto bytes = bytesFromJson(v);
  if (!bytes) fieldError(name, bytes.error().context);
  return std::move(*bytes);
}

inline std::string bytesField(const nlohmann::json& j, const char* name) {
  return bytesValue(member(j, name), name);
}

inline Timestamp timestampField(const nlohmann::json& j, const char* name) {
  const std::string text = stringField(j, name);
  auto t = parseTimestamp(text);
  if (!t) {
    fieldError(name, "must be an RFC 3339 timestamp like 2026-11-30T02:43:57.123Z (got " +
                         quoteForMessage(text) + ")");
  }
  return *t;
}

template <class T>
T decodeField(const nlohmann::json& j, const char* name) {
  const nlohmann::json& v = member(j, name);
  return nested(name, [&] { return v.get<T>(); });
}

// The enumerator `j` spells (`parse` reads the closed vocabulary);
// otherwise "must be one of <choices>", with the string given.
template <class E>
E enumValue(const nlohmann::json& j, std::optional<E> (*parse)(std::string_view) noexcept,
            std::initializer_list<std::string_view> choices) {
  if (j.is_string()) {
    if (auto parsed = parse(j.get_ref<const std::string&>())) return *parsed;
  }
  std::string out = "must be one of ";
  std::string_view separator;
  for (const auto name : choices) {
    out += separator;
    out += name;
    separator = ", ";
  }
  if (j.is_string()) out += " (got " + quoteForMessage(j.get<std::string>()) + ")";
  fieldError("", std::move(out));
}

}  // namespace airlock::json_fields
