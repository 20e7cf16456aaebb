#include "airlock/storage/sql_value.h"

#include <limits>

namespace airlock::storage {

Value null() {
  return Value{};
}
Value int64(std::int64_t v) {
  return Value{Value::Kind::kInt64, v, {}};
}
Value boolean(bool v) {
  return Value{Value::Kind::kBool, v ? 1 : 0, {}};
}
Value text(std::string v) {
  return Value{Value::Kind::kText, 0, std::move(v)};
}
Value bytes(std::string v) {
  return Value{Value::Kind::kBytes, 0, std::move(v)};
}
Value optionalInt64(const std::optional<std::int64_t>& v) {
  return v ? int64(*v) : null();
}
Value optionalText(const std::optional<std::string>& v) {
  return v ? text(*v) : null();
}

std::int64_t clampToInt64(std::uint64_t v) noexcept {
  constexpr auto kMax = std::numeric_limits<std::int64_t>::max();
  return v > static_cast<std::uint64_t>(kMax) ? kMax : static_cast<std::int64_t>(v);
}

}  // namespace airlock::storage
