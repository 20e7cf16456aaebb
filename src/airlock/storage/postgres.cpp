#include "airlock/storage/postgres.h"

#include <libpq-fe.h>

#include <charconv>
#include <cstring>

namespace airlock::storage::postgres {
namespace {

constexpr const char* kUniqueViolation = "23505";

}  // namespace

void ConnFinish::operator()(PGconn* conn) const noexcept {
  PQfinish(conn);
}

void ResultFree::operator()(PGresult* result) const noexcept {
  PQclear(result);
}

tl::unexpected<Error> pgError(PGconn* conn, const PGresult* result, const char* what) {
  const char* state = result ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  const bool duplicate = state && std::strcmp(state, kUniqueViolation) == 0;
  std::string message = std::string("postgres ") + what + ": ";
  const char* detail = result ? PQresultErrorMessage(result) : PQerrorMessage(conn);
  message += detail && *detail ? detail : "unknown error";
  while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
  return fail(duplicate ? ErrorCode::kExecutionRejected : ErrorCode::kExecutionUnavailable,
              std::move(message));
}

Result<PgConn> connect(const std::string& conninfo) {
  PgConn conn(PQconnectdb(conninfo.c_str()));
  if (!conn) return fail(ErrorCode::kExecutionUnavailable, "postgres: out of memory");
  if (PQstatus(conn.get()) != CONNECTION_OK) return pgError(conn.get(), nullptr, "connect");
  PQsetNoticeProcessor(
      conn.get(), [](void*, const char*) {}, nullptr);
  return conn;
}

bool ensureConnected(PGconn* conn) {
  if (PQstatus(conn) == CONNECTION_OK) return true;
  PQreset(conn);
  return PQstatus(conn) == CONNECTION_OK;
}

Result<PgResult> run(PGconn* conn, SqlText sql, const std::vector<Value>& params) {
  // Integers and booleans in their text form; these strings back `values`.
  std::vector<std::string> texts(params.size());
  std::vector<const char*> values;
  std::vector<int> lengths;
  std::vector<int> formats;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const Value& p = params[i];
    const std::string* data = &p.bytes;
    if (p.kind == Value::Kind::kInt64) texts[i] = std::to_string(p.integer);
    if (p.kind == Value::Kind::kBool) texts[i] = p.integer ? "true" : "false";
    if (p.kind == Value::Kind::kInt64 || p.kind == Value::Kind::kBool) data = &texts[i];
    const bool null = p.kind == Value::Kind::kNull;
    values.push_back(null ? nullptr : data->data());
    lengths.push_back(null ? 0 : static_cast<int>(data->size()));
    formats.push_back(p.kind == Value::Kind::kBytes ? 1 : 0);
  }
  PgResult result(PQexecParams(conn, sql.c_str(), static_cast<int>(params.size()), nullptr,
                               values.data(), lengths.data(), formats.data(), 1));
  if (!result) return pgError(conn, nullptr, "statement");
  const auto status = PQresultStatus(result.get());
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK)
    return pgError(conn, result.get(), "statement");
  return result;
}

Result<void> exec(PGconn* conn, SqlText sql) {
  PgResult result(PQexec(conn, sql.c_str()));
  if (!result) return pgError(conn, nullptr, "exec");
  const auto status = PQresultStatus(result.get());
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK)
    return pgError(conn, result.get(), "exec");
  return {};
}

int rowCount(const PGresult* r) noexcept {
  return PQntuples(r);
}

int columnCount(const PGresult* r) noexcept {
  return PQnfields(r);
}

bool isNull(const PGresult* r, int row, int column) noexcept {
  return PQgetisnull(r, row, column) != 0;
}

std::string field(const PGresult* r, int row, int column) {
  return std::string(PQgetvalue(r, row, column),
                     static_cast<std::size_t>(PQgetlength(r, row, column)));
}

std::optional<std::int64_t> int8Field(const PGresult* r, int row, int column) noexcept {
  if (PQgetlength(r, row, column) != 8) return std::nullopt;
  const auto* p = reinterpret_cast<const unsigned char*>(PQgetvalue(r, row, column));
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return static_cast<std::int64_t>(v);
}

std::optional<bool> boolField(const PGresult* r, int row, int column) noexcept {
  if (PQgetlength(r, row, column) != 1) return std::nullopt;
  return *PQgetvalue(r, row, column) != 0;
}

bool ResultRow::isNull(int column) const noexcept {
  return postgres::isNull(result_, row_, column);
}
std::string ResultRow::text(int column) const {
  return field(result_, row_, column);
}
std::optional<std::int64_t> ResultRow::integer(int column) const noexcept {
  return int8Field(result_, row_, column);
}
std::optional<bool> ResultRow::boolean(int column) const noexcept {
  return boolField(result_, row_, column);
}

std::int64_t affectedRows(const PGresult* r) noexcept {
  const char* s = PQcmdTuples(const_cast<PGresult*>(r));
  std::int64_t n = 0;
  if (!s || std::from_chars(s, s + std::strlen(s), n).ec != std::errc()) return 0;
  return n;
}

namespace {

class PostgresConnection final : public Connection {
 public:
  explicit PostgresConnection(PgConn conn) : conn_(std::move(conn)) {}

  Result<void> begin() override {
    if (auto r = ready(); !r) return r;
    auto r = exec(conn_.get(), "BEGIN");
    in_transaction_ = r.has_value();
    return r;
  }
  Result<void> commit() override {
    in_transaction_ = false;
    return exec(conn_.get(), "COMMIT");
  }
  void rollback() noexcept override {
    in_transaction_ = false;
    (void)exec(conn_.get(), "ROLLBACK");
  }

  Result<void> executeScript(SqlText sql) override {
    if (auto r = ready(); !r) return r;
    return exec(conn_.get(), sql);
  }

  Result<std::int64_t> execute(SqlText sql, const std::vector<Value>& values) override {
    if (auto r = ready(); !r) return tl::unexpected(r.error());
    auto result = run(conn_.get(), sql, values);
    if (!result) return tl::unexpected(result.error());
    return affectedRows(result->get());
  }

  Result<void> query(SqlText sql, const std::vector<Value>& values, int columns, const char* kind,
                     const RowVisitor& each) override {
    if (auto r = ready(); !r) return r;
    auto result = run(conn_.get(), sql, values);
    if (!result) return tl::unexpected(result.error());
    const PGresult* rows = result->get();
    if (columnCount(rows) != columns) return corruptRow(kind, "column count");
    for (int i = 0; i < rowCount(rows); ++i)
      if (auto r = each(ResultRow(rows, i)); !r) return r;
    return {};
  }

 private:
  // Outside a transaction a broken connection is reset once; inside one
  // the failure surfaces from the statement (the transaction is lost).
  Result<void> ready() {
    if (in_transaction_ || ensureConnected(conn_.get())) return {};
    return pgError(conn_.get(), nullptr, "connect");
  }

  PgConn conn_;
  bool in_transaction_ = false;
};

}  // namespace

std::unique_ptr<Connection> postgresConnection(PgConn conn) {
  return std::make_unique<PostgresConnection>(std::move(conn));
}

Result<std::unique_ptr<Connection>> connectConnection(const std::string& conninfo) {
  return connect(conninfo).map(postgresConnection);
}

}  // namespace airlock::storage::postgres
