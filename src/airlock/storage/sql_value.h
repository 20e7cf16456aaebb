// One bound value of a statement, the same for SQLite (bound by index,
// sqlite.h) and PostgreSQL (a PQexecParams parameter, postgres.h), so the
// code that turns a record into its column values is written once. Values
// own their bytes; nothing here touches a database.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace airlock::storage {

struct Value {
  enum class Kind { kNull, kInt64, kBool, kText, kBytes };
  Kind kind = Kind::kNull;
  std::int64_t integer = 0;  // kInt64; kBool as 0 or 1
  std::string bytes;         // kText (UTF-8 by the caller's contract) or kBytes (any bytes)
};

Value null();
Value int64(std::int64_t v);
Value boolean(bool v);
Value text(std::string v);   // TEXT
Value bytes(std::string v);  // BLOB / BYTEA: kept exactly, NUL bytes included
Value optionalInt64(const std::optional<std::int64_t>& v);  // NULL when empty
Value optionalText(const std::optional<std::string>& v);    // NULL when empty

// An unsigned count as a signed 64-bit column value, clamped at INT64_MAX
// (a LIMIT of "no limit", a count that cannot be that large anyway).
std::int64_t clampToInt64(std::uint64_t v) noexcept;

}  // namespace airlock::storage
