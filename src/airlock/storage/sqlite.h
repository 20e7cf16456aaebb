// A small RAII wrapper over libsqlite3 (the embedded metadata database of
// artifacts and schedules): one owner for a connection, one for a prepared
// statement, errors as values. SQL comes only from SqlText (string
// literals); values are bound. The SQLite twin of postgres.h.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/core/error.h"
#include "airlock/storage/connection.h"
#include "airlock/storage/row.h"
#include "airlock/storage/sql_text.h"
#include "airlock/storage/sql_value.h"

struct sqlite3;
struct sqlite3_stmt;

namespace airlock::storage::sqlite {

class Statement;

// Owner of one connection. Not shareable between threads without a lock
// (the repository holds one).
class Database {
 public:
  // Opens or creates the file (SQLITE_OPEN_FULLMUTEX off: callers lock),
  // sets a busy timeout, turns on WAL and foreign keys.
  // ExecutionUnavailable naming the failing step.
  static Result<Database> open(const std::string& path);

  Database(Database&&) noexcept = default;
  Database& operator=(Database&&) noexcept = default;

  Result<Statement> prepare(SqlText sql);
  // Runs statements that bind nothing and return no rows (DDL, BEGIN).
  Result<void> exec(SqlText sql);
  std::int64_t changes() const noexcept;
  sqlite3* handle() const noexcept { return db_.get(); }

 private:
  struct Close {
    void operator()(sqlite3* db) const noexcept;
  };
  explicit Database(sqlite3* db) : db_(db) {}
  std::unique_ptr<sqlite3, Close> db_;
};

enum class Step { kRow, kDone };

// Owner of one prepared statement. Bind indexes are 1-based as in SQLite.
// After a step that returned kRow it is that row (storage::Row).
class Statement final : public Row {
 public:
  Statement(Statement&&) noexcept = default;
  Statement& operator=(Statement&&) noexcept = default;

  Statement& bind(int index, std::int64_t value);
  Statement& bind(int index, std::string_view text);  // TEXT
  Statement& bindBlob(int index, std::string_view bytes);
  Statement& bindNull(int index);
  Statement& bind(int index, const std::optional<std::int64_t>& value);
  Statement& bind(int index, const std::optional<std::string>& text);
  Statement& bind(int index, const Value& value);
  // values[i] to parameter ?(i+1).
  Statement& bindAll(std::span<const Value> values);

  // kRow while rows remain. A failed bind surfaces here. A constraint
  // violation is ExecutionRejected; anything else ExecutionUnavailable.
  Result<Step> step();

  int columnCount() const noexcept;
  bool isNull(int column) const noexcept override;  // columns are 0-based
  std::int64_t int64(int column) const noexcept;
  std::string text(int column) const override;  // TEXT or BLOB bytes, exactly
  // Row: SQLite columns are dynamically typed; an INTEGER reads as itself,
  // anything else as corrupt. A boolean is an integer, non-zero true.
  std::optional<std::int64_t> integer(int column) const noexcept override;
  std::optional<bool> boolean(int column) const noexcept override;

 private:
  friend class Database;
  struct Finalize {
    void operator()(sqlite3_stmt* stmt) const noexcept;
  };
  Statement(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  sqlite3* db_;
  std::unique_ptr<sqlite3_stmt, Finalize> stmt_;
  int bind_error_ = 0;
};

// `db` as a storage::Connection (connection.h), owning it.
std::unique_ptr<Connection> sqliteConnection(Database db);
// Database::open, as a Connection.
Result<std::unique_ptr<Connection>> openConnection(const std::string& path);

}  // namespace airlock::storage::sqlite
