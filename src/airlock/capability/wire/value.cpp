#include "airlock/capability/wire/value.h"

#include <bit>
#include <limits>

#include "airlock/core/enum_names.h"

namespace airlock::capability::wire {

Value Value::boolean(bool b) {
  return Value(Storage(b));
}

Value Value::integer(std::int64_t n) {
  if (n >= 0) return Value(Storage(static_cast<std::uint64_t>(n)));
  return Value(Storage(n));
}

Value Value::unsignedInteger(std::uint64_t n) {
  return Value(Storage(n));
}
Value Value::floating(double d) {
  return Value(Storage(d));
}
Value Value::string(std::string utf8) {
  return Value(Storage(std::in_place_type<std::string>, std::move(utf8)));
}
Value Value::bytes(std::string raw) {
  return Value(Storage(Bytes{std::move(raw)}));
}
Value Value::array(Array items) {
  return Value(Storage(std::move(items)));
}
Value Value::map(Map entries) {
  return Value(Storage(std::move(entries)));
}

Value::Type Value::type() const noexcept {
  switch (storage_.index()) {
    case 0:
      return Type::kNil;
    case 1:
      return Type::kBool;
    case 2:
    case 3:
      return Type::kInteger;
    case 4:
      return Type::kFloat;
    case 5:
      return Type::kString;
    case 6:
      return Type::kBytes;
    case 7:
      return Type::kArray;
    default:
      return Type::kMap;
  }
}

std::optional<bool> Value::asBool() const noexcept {
  if (const auto* b = std::get_if<bool>(&storage_)) return *b;
  return std::nullopt;
}

std::optional<std::uint64_t> Value::asUnsigned() const noexcept {
  if (const auto* u = std::get_if<std::uint64_t>(&storage_)) return *u;
  return std::nullopt;
}

std::optional<std::int64_t> Value::asSigned() const noexcept {
  if (const auto* i = std::get_if<std::int64_t>(&storage_)) return *i;
  if (const auto* u = std::get_if<std::uint64_t>(&storage_)) {
    if (*u <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      return static_cast<std::int64_t>(*u);
    }
  }
  return std::nullopt;
}

std::optional<double> Value::asFloat() const noexcept {
  if (const auto* d = std::get_if<double>(&storage_)) return *d;
  return std::nullopt;
}

const std::string* Value::asString() const noexcept {
  return std::get_if<std::string>(&storage_);
}

const std::string* Value::asBytes() const noexcept {
  if (const auto* b = std::get_if<Bytes>(&storage_)) return &b->data;
  return nullptr;
}

const Array* Value::asArray() const noexcept {
  return std::get_if<Array>(&storage_);
}
const Map* Value::asMap() const noexcept {
  return std::get_if<Map>(&storage_);
}

std::string* Value::mutableString() noexcept {
  return std::get_if<std::string>(&storage_);
}

std::string* Value::mutableBytes() noexcept {
  if (auto* b = std::get_if<Bytes>(&storage_)) return &b->data;
  return nullptr;
}

Map* Value::mutableMap() noexcept {
  return std::get_if<Map>(&storage_);
}

const Value* Value::find(std::string_view key) const noexcept {
  const Map* m = asMap();
  if (m == nullptr) return nullptr;
  for (const auto& [k, v] : *m) {
    if (k == key) return &v;
  }
  return nullptr;
}

bool operator==(const Value& a, const Value& b) noexcept {
  if (a.storage_.index() != b.storage_.index()) return false;
  // Floats by bit pattern, so that NaN == NaN and -0.0 != 0.0: equality means
  // "encodes to the same bytes".
  if (const auto* d = std::get_if<double>(&a.storage_)) {
    return std::bit_cast<std::uint64_t>(*d) ==
           std::bit_cast<std::uint64_t>(std::get<double>(b.storage_));
  }
  return a.storage_ == b.storage_;
}

constexpr EnumNames<Value::Type, 8> kTypeNames{{
    {Value::Type::kNil, "nil"},
    {Value::Type::kBool, "boolean"},
    {Value::Type::kInteger, "integer"},
    {Value::Type::kFloat, "float"},
    {Value::Type::kString, "string"},
    {Value::Type::kBytes, "bytes"},
    {Value::Type::kArray, "array"},
    {Value::Type::kMap, "map"},
}};

std::string_view typeName(Value::Type type) noexcept {
  return enumName(kTypeNames, type, "unknown");
}

}  // namespace airlock::capability::wire
