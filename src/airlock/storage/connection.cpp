#include "airlock/storage/connection.h"

namespace airlock::storage {

Result<std::optional<std::int64_t>> queryInt(Connection& db, SqlText sql,
                                             const std::vector<Value>& values, const char* kind,
                                             const char* column) {
  std::optional<std::int64_t> out;
  auto r = db.query(sql, values, 1, kind, [&](const Row& row) -> Result<void> {
    out = row.integer(0);
    if (!out) return corruptRow(kind, column);
    return {};
  });
  if (!r) return tl::unexpected(r.error());
  return out;
}

}  // namespace airlock::storage
