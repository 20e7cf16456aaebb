#include "airlock/artifacts/postgres.h"

#include <libpq-fe.h>

#include <charconv>
#include <cstring>

namespace airlock::artifacts::postgres {
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

Param text(std::string v) {
  return Param{std::move(v), false};
}
Param bytes(std::string v) {
  return Param{std::move(v), true};
}
Param int64(std::int64_t v) {
  return Param{std::to_string(v), false};
}
Param boolean(bool v) {
  return Param{std::string(v ? "true" : "false"), false};
}
Param optionalInt64(const std::optional<std::int64_t>& v) {
  return v ? int64(*v) : Param{std::nullopt, false};
}
Param optionalText(const std::optional<std::string>& v) {
  return Param{v, false};
}

Result<PgResult> run(PGconn* conn, SqlText sql, const std::vector<Param>& params) {
  std::vector<const char*> values;
  std::vector<int> lengths;
  std::vector<int> formats;
  for (const Param& p : params) {
    values.push_back(p.value ? p.value->data() : nullptr);
    lengths.push_back(p.value ? static_cast<int>(p.value->size()) : 0);
    formats.push_back(p.binary ? 1 : 0);
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

Transaction::~Transaction() {
  if (open_) (void)exec(conn_, "ROLLBACK");
}

Result<void> Transaction::begin() {
  auto r = exec(conn_, "BEGIN");
  open_ = r.has_value();
  return r;
}

Result<void> Transaction::commit() {
  // A failed COMMIT has already ended the transaction on the server.
  open_ = false;
  return exec(conn_, "COMMIT");
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

std::int64_t affectedRows(const PGresult* r) noexcept {
  const char* s = PQcmdTuples(const_cast<PGresult*>(r));
  std::int64_t n = 0;
  if (!s || std::from_chars(s, s + std::strlen(s), n).ec != std::errc()) return 0;
  return n;
}

Result<int> appliedVersion(PGconn* conn, const MigrationLedger& ledger) {
  auto r = run(conn, ledger.max_version, {});
  if (!r) return tl::unexpected(r.error());
  auto v = rowCount(r->get()) == 1 ? int8Field(r->get(), 0, 0) : std::nullopt;
  if (!v)
    return fail(ErrorCode::kExecutionUnavailable,
                std::string("corrupt ") + ledger.schema_name + " migration ledger");
  return static_cast<int>(*v);
}

Result<void> migrate(PGconn* conn, const MigrationLedger& ledger,
                     std::span<const Migration> migrations, int build_version) {
  Transaction tx(conn);
  if (auto r = tx.begin(); !r) return r;
  if (auto r = run(conn, "SELECT pg_advisory_xact_lock($1::bigint)", {int64(ledger.lock_key)}); !r)
    return tl::unexpected(r.error());
  if (auto r = exec(conn, ledger.create); !r) return r;
  auto version = appliedVersion(conn, ledger);
  if (!version) return tl::unexpected(version.error());
  if (*version > build_version)
    return fail(ErrorCode::kConfigurationError,
                std::string(ledger.schema_name) + " database schema " + std::to_string(*version) +
                    " is newer than this build's " + std::to_string(build_version));
  for (const Migration& m : migrations) {
    if (m.version <= *version) continue;
    if (auto r = exec(conn, m.sql); !r) return r;
    if (auto r = run(conn, ledger.record, {int64(m.version)}); !r) return tl::unexpected(r.error());
  }
  return tx.commit();
}

}  // namespace airlock::artifacts::postgres
