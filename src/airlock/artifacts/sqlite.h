// A small RAII wrapper over libsqlite3 (embedded metadata):
// one owner for a connection, one for a prepared statement, errors as
// values. SQL comes only from SqlText (string literals); values are bound.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "airlock/artifacts/sql_text.h"
#include "airlock/core/error.h"

struct sqlite3;
struct sqlite3_stmt;

namespace airlock::artifacts::sqlite {

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
class Statement {
 public:
  Statement(Statement&&) noexcept = default;
  Statement& operator=(Statement&&) noexcept = default;

  Statement& bind(int index, std::int64_t value);
  Statement& bind(int index, std::string_view text);  // TEXT
  Statement& bindBlob(int index, std::string_view bytes);
  Statement& bindNull(int index);
  Statement& bind(int index, const std::optional<std::int64_t>& value);
  Statement& bind(int index, const std::optional<std::string>& text);

  // kRow while rows remain. A failed bind surfaces here. A constraint
  // violation is ExecutionRejected; anything else ExecutionUnavailable.
  Result<Step> step();

  bool isNull(int column) const noexcept;  // columns are 0-based
  std::int64_t int64(int column) const noexcept;
  std::string text(int column) const;  // TEXT or BLOB bytes, exactly

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

// Rolls back unless committed.
class Transaction {
 public:
  explicit Transaction(Database& db) : db_(db) {}
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  Result<void> beginImmediate();
  Result<void> commit();

 private:
  Database& db_;
  bool open_ = false;
};

// One schema step: applied once, in version order.
struct Migration {
  int version;
  SqlText sql;
};

// A schema's migration bookkeeping: the three statements that name its
// version table (literals, like all SQL here), and what the schema is called
// in errors ("artifact", "schedule").
struct MigrationTable {
  SqlText create;  // CREATE TABLE IF NOT EXISTS <t> (version INTEGER PRIMARY KEY, applied_at_ms
                   // INTEGER)
  SqlText max_version;  // SELECT COALESCE(MAX(version), 0) FROM <t>
  SqlText record;       // INSERT INTO <t> (version, applied_at_ms) VALUES (?1, <now ms>)
  const char* schema_name;
};

// The highest applied version (0 for a new database).
Result<int> appliedVersion(Database& db, const MigrationTable& table);

// Applies every migration newer than the applied version in one immediate
// transaction (several processes may open the same file). A database newer
// than `build_version` is a ConfigurationError naming the schema.
Result<void> migrate(Database& db, const MigrationTable& table,
                     std::span<const Migration> migrations, int build_version);

}  // namespace airlock::artifacts::sqlite
