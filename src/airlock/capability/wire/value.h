// The msgpack value type of the capability wire (spec 001, "Wire"; docs/wire.md "Values").
//
// The wire carries a subset of msgpack: nil, booleans, integers in
// -2^63 .. 2^64-1, floats (64-bit on output; 32-bit accepted on input),
// UTF-8 strings, byte strings (bin), arrays, and maps whose keys are strings.
// Extension types are not part of the subset. A Value owns all of its data.
//
// Integers have one representation per number: a non-negative integer is
// always held unsigned, whichever msgpack family carried it, so two Values
// are equal exactly when they denote the same number. Floats compare by bit
// pattern (a NaN equals itself), so decode(encode(v)) == v holds for every v.
//
// Maps keep their entries in wire order. The decoder refuses duplicate keys,
// so a decoded map's keys are distinct; a Map built in code should keep them
// distinct too (the encoder refuses duplicates rather than picking one).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace airlock::capability::wire {

class Value;
using Array = std::vector<Value>;
using Map = std::vector<std::pair<std::string, Value>>;

class Value {
 public:
  enum class Type { kNil, kBool, kInteger, kFloat, kString, kBytes, kArray, kMap };

  Value() = default;  // nil

  static Value nil() { return Value(); }
  static Value boolean(bool b);
  static Value integer(std::int64_t n);
  static Value unsignedInteger(std::uint64_t n);
  static Value floating(double d);
  // `utf8` should be well-formed UTF-8; the encoder refuses it otherwise.
  static Value string(std::string utf8);
  // Arbitrary bytes, carried as msgpack bin.
  static Value bytes(std::string raw);
  static Value array(Array items);
  static Value map(Map entries);

  Type type() const noexcept;
  bool isNil() const noexcept { return type() == Type::kNil; }

  // Each accessor answers nullopt / nullptr when the Value holds another type.
  // No coercion: an integer is not a float, a string is not bytes.
  std::optional<bool> asBool() const noexcept;
  // A non-negative integer.
  std::optional<std::uint64_t> asUnsigned() const noexcept;
  // Any integer in int64 range.
  std::optional<std::int64_t> asSigned() const noexcept;
  std::optional<double> asFloat() const noexcept;
  const std::string* asString() const noexcept;
  const std::string* asBytes() const noexcept;
  const Array* asArray() const noexcept;
  const Map* asMap() const noexcept;
  // The same, mutable: for a decoder that moves the parts of a Value it owns
  // out instead of copying them (frame.cpp).
  std::string* mutableString() noexcept;
  std::string* mutableBytes() noexcept;
  Map* mutableMap() noexcept;

  // For a map, the value of the first entry named `key`; nullptr when absent
  // or when this is not a map.
  const Value* find(std::string_view key) const noexcept;

  friend bool operator==(const Value& a, const Value& b) noexcept;

 private:
  struct Bytes {
    std::string data;
    bool operator==(const Bytes&) const = default;
  };
  // Negative integers only in int64_t; non-negative ones only in uint64_t.
  using Storage = std::variant<std::monostate, bool, std::uint64_t, std::int64_t, double,
                               std::string, Bytes, Array, Map>;
  explicit Value(Storage s) : storage_(std::move(s)) {}

  Storage storage_;
};

// Stable lower-case name of a type ("nil", "integer", "map"), for messages.
std::string_view typeName(Value::Type type) noexcept;

}  // namespace airlock::capability::wire
