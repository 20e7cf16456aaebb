// The libpq layer shared by the PostgreSQL adapters (artifact metadata,
// postgres_repository.h; schedules, capability/schedule/schedule.h): an owned
// connection and result, bound parameters, one transaction guard and one
// migration runner. The PostgreSQL twin of sqlite.h.
//
// SQL comes only from SqlText literals; every value is
// a bound parameter (PQexecParams) sent as text, or as bytes for BYTEA.
// Results come back in binary format: read integers with int8Field (the
// SQL casts them to bigint) and strings/bytes with field.
//
// Errors: a unique-key violation (SQLSTATE 23505) is ExecutionRejected;
// anything else ExecutionUnavailable with the server's message. A
// connection string is a credential: it is never part of an error.
//
// Nothing here locks: each adapter holds its connection behind its own mutex.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "airlock/artifacts/sql_text.h"
#include "airlock/core/error.h"

// libpq's own typedefs (libpq-fe.h), repeated so this header does not pull
// libpq's include path into every user.
typedef struct pg_conn PGconn;
typedef struct pg_result PGresult;

namespace airlock::artifacts::postgres {

struct ConnFinish {
  void operator()(PGconn* conn) const noexcept;
};
using PgConn = std::unique_ptr<PGconn, ConnFinish>;

struct ResultFree {
  void operator()(PGresult* result) const noexcept;
};
using PgResult = std::unique_ptr<PGresult, ResultFree>;

// Connects (libpq connection string or URI) and silences notices ("relation
// already exists, skipping" is not an error). ExecutionUnavailable with
// libpq's message, which names the server but not the password.
Result<PgConn> connect(const std::string& conninfo);

// Resets a connection found broken; whether it is usable afterwards.
bool ensureConnected(PGconn* conn);

// The error for a failed call: `result` may be null (then the connection's
// message is used). `what` names the step ("statement", "connect").
tl::unexpected<Error> pgError(PGconn* conn, const PGresult* result, const char* what);

// One bound value: text, raw bytes (BYTEA), or NULL.
struct Param {
  std::optional<std::string> value;
  bool binary = false;
};
Param text(std::string v);
Param bytes(std::string v);
Param int64(std::int64_t v);
Param boolean(bool v);
Param optionalInt64(const std::optional<std::int64_t>& v);
Param optionalText(const std::optional<std::string>& v);

// One parameterized statement; rows in binary format.
Result<PgResult> run(PGconn* conn, SqlText sql, const std::vector<Param>& params);
// Statements without parameters (DDL, BEGIN/COMMIT; several per string).
Result<void> exec(PGconn* conn, SqlText sql);

// Rolls back unless committed. begin() opens READ COMMITTED (the server's
// default); callers that need more take row or advisory locks.
class Transaction {
 public:
  explicit Transaction(PGconn* conn) : conn_(conn) {}
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  Result<void> begin();
  Result<void> commit();

 private:
  PGconn* conn_;
  bool open_ = false;
};

// Reading a binary-format result. Rows and columns are 0-based.
int rowCount(const PGresult* r) noexcept;
int columnCount(const PGresult* r) noexcept;
bool isNull(const PGresult* r, int row, int column) noexcept;
std::string field(const PGresult* r, int row, int column);  // text or bytea, exactly
// A binary int8 (big-endian); nullopt for a wrong length (a corrupt row).
std::optional<std::int64_t> int8Field(const PGresult* r, int row, int column) noexcept;
// A binary bool; nullopt for a wrong length.
std::optional<bool> boolField(const PGresult* r, int row, int column) noexcept;
// Rows an INSERT/UPDATE/DELETE touched (PQcmdTuples).
std::int64_t affectedRows(const PGresult* r) noexcept;

// One schema step: applied once, in version order.
struct Migration {
  int version;
  SqlText sql;
};

// A schema's migration bookkeeping (literals, like all SQL here).
struct MigrationLedger {
  SqlText
      create;  // CREATE TABLE IF NOT EXISTS <t> (version INTEGER PRIMARY KEY, applied_at_ms BIGINT)
  SqlText max_version;    // SELECT COALESCE(MAX(version), 0)::bigint FROM <t>
  SqlText record;         // INSERT INTO <t> (version, applied_at_ms) VALUES ($1::integer, <now ms>)
  std::int64_t lock_key;  // pg_advisory_xact_lock key that serializes concurrent starts
  const char* schema_name;  // "artifact", "schedule" (in errors)
};

// The highest applied version (0 when the ledger is empty).
Result<int> appliedVersion(PGconn* conn, const MigrationLedger& ledger);

// Applies every migration newer than the applied version in one
// transaction holding the ledger's advisory lock, so concurrent starts apply
// each once. A database newer than `build_version` is a ConfigurationError
// naming the schema.
Result<void> migrate(PGconn* conn, const MigrationLedger& ledger,
                     std::span<const Migration> migrations, int build_version);

}  // namespace airlock::artifacts::postgres
