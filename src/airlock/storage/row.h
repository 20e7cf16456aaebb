// One row of a query result, read the same way from either backend (a
// stepped sqlite::Statement, one row of a postgres result), so the mapping
// from columns to a record is written once per record. Columns are 0-based,
// in the order of the statement's SELECT list.
//
// A row is untrusted data (the database file or server may hold anything):
// ColumnReader turns a column that does not read as its type into
// ExecutionUnavailable "corrupt <kind> row: <column>", never an exception.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "airlock/core/error.h"

namespace airlock::storage {

class Row {
 public:
  virtual ~Row() = default;
  virtual bool isNull(int column) const noexcept = 0;
  // TEXT or BLOB/BYTEA bytes, exactly ("" for NULL).
  virtual std::string text(int column) const = 0;
  // nullopt when the column does not hold a 64-bit integer.
  virtual std::optional<std::int64_t> integer(int column) const noexcept = 0;
  // nullopt when the column does not hold a boolean (SQLite: any integer;
  // non-zero is true).
  virtual std::optional<bool> boolean(int column) const noexcept = 0;
};

// "corrupt <kind> row: <column>", ExecutionUnavailable.
tl::unexpected<Error> corruptRow(const char* kind, const char* column);

// Reads the columns of one row, remembering the first that did not read;
// status() is then its error. `kind` names the record in that error
// ("artifact", "schedule"); both strings must outlive the reader.
class ColumnReader {
 public:
  ColumnReader(const Row& row, const char* kind) : row_(row), kind_(kind) {}

  std::string text(int column) const { return row_.text(column); }
  std::optional<std::string> optionalText(int column) const;
  std::int64_t int64(int column, const char* name);  // 0 when corrupt
  std::optional<std::int64_t> optionalInt64(int column, const char* name);
  bool boolean(int column, const char* name);  // false when corrupt

  // Success, or the first corrupt column.
  Result<void> status() const;

 private:
  void bad(const char* name) {
    if (!bad_) bad_ = name;
  }
  const Row& row_;
  const char* kind_;
  const char* bad_ = nullptr;
};

}  // namespace airlock::storage
