#include "airlock/storage/sqlite.h"

#include <sqlite3.h>

namespace airlock::storage::sqlite {
namespace {

tl::unexpected<Error> sqliteError(sqlite3* db, int rc, const std::string& what) {
  const ErrorCode code = (rc & 0xff) == SQLITE_CONSTRAINT ? ErrorCode::kExecutionRejected
                                                          : ErrorCode::kExecutionUnavailable;
  std::string message = "sqlite " + what + ": ";
  message += db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  return fail(code, std::move(message));
}

}  // namespace

void Database::Close::operator()(sqlite3* db) const noexcept {
  sqlite3_close_v2(db);
}
void Statement::Finalize::operator()(sqlite3_stmt* stmt) const noexcept {
  sqlite3_finalize(stmt);
}

Result<Database> Database::open(const std::string& path) {
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(
      path.c_str(), &raw,
      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW,
      nullptr);
  Database db(raw);  // owns raw even on failure
  if (rc != SQLITE_OK) return sqliteError(raw, rc, "open");
  sqlite3_extended_result_codes(raw, 1);
  sqlite3_busy_timeout(raw, 5000);
  // journal_mode returns a row; the rest return none.
  auto wal = db.prepare("PRAGMA journal_mode=WAL");
  if (!wal) return tl::unexpected(wal.error());
  auto stepped = wal->step();
  if (!stepped) return tl::unexpected(stepped.error());
  if (*stepped != Step::kRow || wal->text(0) != "wal")
    return fail(ErrorCode::kExecutionUnavailable, "sqlite: the database cannot use WAL");
  if (auto r = db.exec("PRAGMA synchronous=NORMAL"); !r) return tl::unexpected(r.error());
  if (auto r = db.exec("PRAGMA foreign_keys=ON"); !r) return tl::unexpected(r.error());
  return db;
}

Result<Statement> Database::prepare(SqlText sql) {
  sqlite3_stmt* stmt = nullptr;
  const int rc = sqlite3_prepare_v2(db_.get(), sql.c_str(), -1, &stmt, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(stmt);
    return sqliteError(db_.get(), rc, "prepare");
  }
  return Statement(db_.get(), stmt);
}

Result<void> Database::exec(SqlText sql) {
  char* message = nullptr;
  const int rc = sqlite3_exec(db_.get(), sql.c_str(), nullptr, nullptr, &message);
  sqlite3_free(message);
  if (rc != SQLITE_OK) return sqliteError(db_.get(), rc, "exec");
  return {};
}

std::int64_t Database::changes() const noexcept {
  return sqlite3_changes(db_.get());
}

Statement& Statement::bind(int index, std::int64_t value) {
  if (int rc = sqlite3_bind_int64(stmt_.get(), index, value); rc != SQLITE_OK && !bind_error_)
    bind_error_ = rc;
  return *this;
}

Statement& Statement::bind(int index, std::string_view text) {
  if (int rc = sqlite3_bind_text64(stmt_.get(), index, text.data(), text.size(), SQLITE_TRANSIENT,
                                   SQLITE_UTF8);
      rc != SQLITE_OK && !bind_error_)
    bind_error_ = rc;
  return *this;
}

Statement& Statement::bindBlob(int index, std::string_view bytes) {
  // A zero-length blob must still be a blob, not NULL: pass a valid pointer.
  static const char kEmpty = 0;
  if (int rc = sqlite3_bind_blob64(stmt_.get(), index, bytes.empty() ? &kEmpty : bytes.data(),
                                   bytes.size(), SQLITE_TRANSIENT);
      rc != SQLITE_OK && !bind_error_)
    bind_error_ = rc;
  return *this;
}

Statement& Statement::bindNull(int index) {
  if (int rc = sqlite3_bind_null(stmt_.get(), index); rc != SQLITE_OK && !bind_error_)
    bind_error_ = rc;
  return *this;
}

Statement& Statement::bind(int index, const std::optional<std::int64_t>& value) {
  return value ? bind(index, *value) : bindNull(index);
}

Statement& Statement::bind(int index, const std::optional<std::string>& text) {
  return text ? bind(index, std::string_view(*text)) : bindNull(index);
}

Statement& Statement::bind(int index, const Value& value) {
  switch (value.kind) {
    case Value::Kind::kNull:
      return bindNull(index);
    case Value::Kind::kInt64:
    case Value::Kind::kBool:
      return bind(index, value.integer);
    case Value::Kind::kText:
      return bind(index, std::string_view(value.bytes));
    case Value::Kind::kBytes:
      return bindBlob(index, value.bytes);
  }
  return *this;
}

Statement& Statement::bindAll(std::span<const Value> values) {
  for (std::size_t i = 0; i < values.size(); ++i) bind(static_cast<int>(i + 1), values[i]);
  return *this;
}

Result<Step> Statement::step() {
  if (bind_error_) return sqliteError(db_, bind_error_, "bind");
  const int rc = sqlite3_step(stmt_.get());
  if (rc == SQLITE_ROW) return Step::kRow;
  if (rc == SQLITE_DONE) return Step::kDone;
  return sqliteError(db_, rc, "step");
}

int Statement::columnCount() const noexcept {
  return sqlite3_column_count(stmt_.get());
}

bool Statement::isNull(int column) const noexcept {
  return sqlite3_column_type(stmt_.get(), column) == SQLITE_NULL;
}

std::int64_t Statement::int64(int column) const noexcept {
  return sqlite3_column_int64(stmt_.get(), column);
}

std::string Statement::text(int column) const {
  const void* data = sqlite3_column_blob(stmt_.get(), column);
  const int size = sqlite3_column_bytes(stmt_.get(), column);
  if (!data || size <= 0) return {};
  return std::string(static_cast<const char*>(data), static_cast<std::size_t>(size));
}

std::optional<std::int64_t> Statement::integer(int column) const noexcept {
  if (sqlite3_column_type(stmt_.get(), column) != SQLITE_INTEGER) return std::nullopt;
  return sqlite3_column_int64(stmt_.get(), column);
}

std::optional<bool> Statement::boolean(int column) const noexcept {
  const auto v = integer(column);
  if (!v) return std::nullopt;
  return *v != 0;
}

namespace {

class SqliteConnection final : public Connection {
 public:
  explicit SqliteConnection(Database db) : db_(std::move(db)) {}

  Result<void> begin() override { return db_.exec("BEGIN IMMEDIATE"); }
  Result<void> commit() override { return db_.exec("COMMIT"); }
  void rollback() noexcept override { (void)db_.exec("ROLLBACK"); }

  Result<void> executeScript(SqlText sql) override { return db_.exec(sql); }

  Result<std::int64_t> execute(SqlText sql, const std::vector<Value>& values) override {
    auto stmt = db_.prepare(sql);
    if (!stmt) return tl::unexpected(stmt.error());
    stmt->bindAll(values);
    for (;;) {
      auto step = stmt->step();
      if (!step) return tl::unexpected(step.error());
      if (*step == Step::kDone) return db_.changes();
    }
  }

  Result<void> query(SqlText sql, const std::vector<Value>& values, int columns, const char* kind,
                     const RowVisitor& each) override {
    auto stmt = db_.prepare(sql);
    if (!stmt) return tl::unexpected(stmt.error());
    stmt->bindAll(values);
    if (stmt->columnCount() != columns) return corruptRow(kind, "column count");
    for (;;) {
      auto step = stmt->step();
      if (!step) return tl::unexpected(step.error());
      if (*step == Step::kDone) return {};
      if (auto r = each(*stmt); !r) return r;
    }
  }

 private:
  Database db_;
};

}  // namespace

std::unique_ptr<Connection> sqliteConnection(Database db) {
  return std::make_unique<SqliteConnection>(std::move(db));
}

Result<std::unique_ptr<Connection>> openConnection(const std::string& path) {
  return Database::open(path).map(sqliteConnection);
}

}  // namespace airlock::storage::sqlite
