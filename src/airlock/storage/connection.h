// One database connection as the artifact repository and the schedule store
// use it, the same for SQLite (sqlite.h sqliteConnection) and PostgreSQL
// (postgres.h postgresConnection): a write transaction, statements with
// bound values (storage::Value), rows read as storage::Row. With it each of
// them is written once, over a table of its SQL per backend: the backends
// differ in their SQL text (literals, SqlText) and in nothing else the
// callers see.
//
// Not thread-safe: the owner holds the connection behind its own lock.
// Errors: a constraint violation (a duplicate key) is ExecutionRejected;
// anything else ExecutionUnavailable naming the step. A PostgreSQL
// connection found broken is reset once before a statement outside a
// transaction, and before begin().
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "airlock/core/error.h"
#include "airlock/storage/row.h"
#include "airlock/storage/sql_text.h"
#include "airlock/storage/sql_value.h"

namespace airlock::storage {

using RowVisitor = std::function<Result<void>(const Row&)>;

class Connection {
 public:
  virtual ~Connection() = default;

  // A write transaction: SQLite BEGIN IMMEDIATE (the file's write lock at
  // once, so a read and the write after it see the same data), PostgreSQL
  // BEGIN (READ COMMITTED; callers take row or advisory locks for more).
  virtual Result<void> begin() = 0;
  virtual Result<void> commit() = 0;
  virtual void rollback() noexcept = 0;

  // Runs statements without values, several in one text (a migration's
  // DDL).
  virtual Result<void> executeScript(SqlText sql) = 0;

  // Runs one statement with values bound to parameters 1..n (any rows it
  // returns are dropped); the rows it changed. Only for INSERT, UPDATE and
  // DELETE (SQLite reports the last such statement's count otherwise).
  virtual Result<std::int64_t> execute(SqlText sql, const std::vector<Value>& values) = 0;

  // Runs one query, handing each row to `each` in order; the first error
  // (the database's, or one `each` returns) ends it. A result without
  // exactly `columns` columns is a corrupt row of `kind` (row.h).
  virtual Result<void> query(SqlText sql, const std::vector<Value>& values, int columns,
                             const char* kind, const RowVisitor& each) = 0;
};

// Every row of a query, decoded.
template <class T>
Result<std::vector<T>> queryAll(Connection& db, SqlText sql, const std::vector<Value>& values,
                                int columns, const char* kind, Result<T> (*decode)(const Row&)) {
  std::vector<T> out;
  auto r = db.query(sql, values, columns, kind, [&](const Row& row) -> Result<void> {
    auto value = decode(row);
    if (!value) return tl::unexpected(value.error());
    out.push_back(std::move(*value));
    return {};
  });
  if (!r) return tl::unexpected(r.error());
  return out;
}

// The one integer a query returns in one column (a COUNT, a SUM, a
// RETURNING): nullopt when it returns no row; corruptRow(kind, column)
// when that is not an integer.
Result<std::optional<std::int64_t>> queryInt(Connection& db, SqlText sql,
                                             const std::vector<Value>& values, const char* kind,
                                             const char* column);

// Rolls back unless committed.
class Transaction {
 public:
  explicit Transaction(Connection& db) : db_(db) {}
  ~Transaction() {
    if (open_) db_.rollback();
  }
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  Result<void> begin() {
    auto r = db_.begin();
    open_ = r.has_value();
    return r;
  }
  // A failed commit leaves the guard to roll back (SQLite keeps the
  // transaction open after a busy COMMIT; PostgreSQL has ended it and
  // ignores the ROLLBACK).
  Result<void> commit() {
    auto r = db_.commit();
    if (r) open_ = false;
    return r;
  }

 private:
  Connection& db_;
  bool open_ = false;
};

}  // namespace airlock::storage
