// The libpq layer shared by the PostgreSQL adapters (artifact metadata,
// artifacts/postgres_repository.h; schedules, capability/schedule/schedule.h):
// an owned connection and result, bound parameters (storage::Value), rows
// as storage::Row, and the connection as a storage::Connection. The
// PostgreSQL twin of sqlite.h.
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

#include "airlock/core/error.h"
#include "airlock/storage/connection.h"
#include "airlock/storage/row.h"
#include "airlock/storage/sql_text.h"
#include "airlock/storage/sql_value.h"

// libpq's own typedefs (libpq-fe.h), repeated so this header does not pull
// libpq's include path into every user.
typedef struct pg_conn PGconn;
typedef struct pg_result PGresult;

namespace airlock::storage::postgres {

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

// One parameterized statement; rows in binary format. Parameters go as
// text ($n::bigint, $n::boolean in the SQL say their type), bytes as binary
// (BYTEA), NULL as NULL.
Result<PgResult> run(PGconn* conn, SqlText sql, const std::vector<Value>& params);
// Statements without parameters (DDL, BEGIN/COMMIT; several per string).
Result<void> exec(PGconn* conn, SqlText sql);

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

// Row `row` of a binary-format result, as a storage::Row (integers are
// int8, booleans bool; anything else reads as corrupt).
class ResultRow final : public Row {
 public:
  ResultRow(const PGresult* result, int row) : result_(result), row_(row) {}
  bool isNull(int column) const noexcept override;
  std::string text(int column) const override;
  std::optional<std::int64_t> integer(int column) const noexcept override;
  std::optional<bool> boolean(int column) const noexcept override;

 private:
  const PGresult* result_;
  int row_;
};

// `conn` as a storage::Connection (connection.h), owning it.
std::unique_ptr<Connection> postgresConnection(PgConn conn);
// connect, as a Connection.
Result<std::unique_ptr<Connection>> connectConnection(const std::string& conninfo);

}  // namespace airlock::storage::postgres
