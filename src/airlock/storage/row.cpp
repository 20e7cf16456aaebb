#include "airlock/storage/row.h"

namespace airlock::storage {

tl::unexpected<Error> corruptRow(const char* kind, const char* column) {
  return fail(ErrorCode::kExecutionUnavailable, std::string("corrupt ") + kind + " row: " + column);
}

std::optional<std::string> ColumnReader::optionalText(int column) const {
  if (row_.isNull(column)) return std::nullopt;
  return row_.text(column);
}

std::int64_t ColumnReader::int64(int column, const char* name) {
  const auto v = row_.integer(column);
  if (!v) bad(name);
  return v.value_or(0);
}

std::optional<std::int64_t> ColumnReader::optionalInt64(int column, const char* name) {
  if (row_.isNull(column)) return std::nullopt;
  return int64(column, name);
}

bool ColumnReader::boolean(int column, const char* name) {
  const auto v = row_.boolean(column);
  if (!v) bad(name);
  return v.value_or(false);
}

Result<void> ColumnReader::status() const {
  if (bad_) return corruptRow(kind_, bad_);
  return {};
}

}  // namespace airlock::storage
