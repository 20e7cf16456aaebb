#include "airlock/artifacts/postgres_repository.h"

#include <libpq-fe.h>

#include <array>
#include <charconv>
#include <cstring>
#include <limits>

#include "airlock/artifacts/repository_rows.h"
#include "airlock/artifacts/sql_text.h"
#include "airlock/artifacts/sqlite_repository.h"  // kArtifactSchemaVersion

namespace airlock::artifacts {
namespace {

struct Migration {
  int version;
  SqlText sql;
};

// Append only, like the SQLite list; the two share version numbers.
constexpr std::array<Migration, kArtifactSchemaVersion> kMigrations{{
    {1,
     "CREATE TABLE artifacts ("
     "  artifact_id TEXT COLLATE \"C\" PRIMARY KEY,"
     "  tenant_id TEXT COLLATE \"C\" NOT NULL,"
     "  run_id TEXT,"
     "  origin TEXT NOT NULL,"
     "  filename BYTEA NOT NULL,"
     "  media_type TEXT NOT NULL,"
     "  size_bytes BIGINT NOT NULL CHECK (size_bytes >= 0),"
     "  sha256 TEXT NOT NULL,"
     "  trust TEXT NOT NULL,"
     "  created_at_ms BIGINT NOT NULL,"
     "  expires_at_ms BIGINT);"
     "CREATE INDEX artifacts_by_expiry ON artifacts (expires_at_ms)"
     "  WHERE expires_at_ms IS NOT NULL;"
     "CREATE INDEX artifacts_by_tenant ON artifacts (tenant_id, artifact_id) INCLUDE "
     "(size_bytes);"},
}};

struct ResultFree {
  void operator()(PGresult* r) const noexcept { PQclear(r); }
};
using PgResult = std::unique_ptr<PGresult, ResultFree>;

// One bound value: text, raw bytes, or NULL.
struct Param {
  std::optional<std::string> value;
  bool binary = false;
};
Param text(std::string v) {
  return Param{std::move(v), false};
}
Param bytes(std::string v) {
  return Param{std::move(v), true};
}
Param int64(std::int64_t v) {
  return Param{std::to_string(v), false};
}
Param optionalInt64(const std::optional<std::int64_t>& v) {
  return v ? int64(*v) : Param{std::nullopt, false};
}
Param optionalText(const std::optional<std::string>& v) {
  return Param{v, false};
}

constexpr const char* kDuplicateKey = "23505";

tl::unexpected<Error> pgError(PGconn* conn, const PGresult* result, const char* what) {
  const char* state = result ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  if (state && std::strcmp(state, kDuplicateKey) == 0)
    return fail(ErrorCode::kExecutionRejected, "artifact id already exists");
  std::string message = std::string("postgres ") + what + ": ";
  const char* detail = result ? PQresultErrorMessage(result) : PQerrorMessage(conn);
  message += detail && *detail ? detail : "unknown error";
  while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
  return fail(ErrorCode::kExecutionUnavailable, std::move(message));
}

bool ensureConnected(PGconn* conn) {
  if (PQstatus(conn) == CONNECTION_OK) return true;
  PQreset(conn);
  return PQstatus(conn) == CONNECTION_OK;
}

// Runs one parameterized statement; binary results.
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

// Statements without parameters (DDL, BEGIN/COMMIT; several per string).
Result<void> exec(PGconn* conn, SqlText sql) {
  PgResult result(PQexec(conn, sql.c_str()));
  if (!result) return pgError(conn, nullptr, "exec");
  const auto status = PQresultStatus(result.get());
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK)
    return pgError(conn, result.get(), "exec");
  return {};
}

// Rolls back unless committed.
class Transaction {
 public:
  explicit Transaction(PGconn* conn) : conn_(conn) {}
  ~Transaction() {
    if (open_) (void)exec(conn_, "ROLLBACK");
  }
  Result<void> begin() {
    auto r = exec(conn_, "BEGIN");
    open_ = r.has_value();
    return r;
  }
  Result<void> commit() {
    open_ = false;
    return exec(conn_, "COMMIT");
  }

 private:
  PGconn* conn_;
  bool open_ = false;
};

std::string field(const PGresult* r, int row, int column) {
  return std::string(PQgetvalue(r, row, column),
                     static_cast<std::size_t>(PQgetlength(r, row, column)));
}

// Binary int8 (big-endian); a wrong length is a corrupt row.
std::optional<std::int64_t> int8Field(const PGresult* r, int row, int column) {
  if (PQgetlength(r, row, column) != 8) return std::nullopt;
  const auto* p = reinterpret_cast<const unsigned char*>(PQgetvalue(r, row, column));
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return static_cast<std::int64_t>(v);
}

Result<std::vector<StoredArtifact>> collect(const PGresult* r) {
  if (PQnfields(r) != 11)
    return fail(ErrorCode::kExecutionUnavailable, "corrupt artifact row: column count");
  std::vector<StoredArtifact> out;
  for (int i = 0; i < PQntuples(r); ++i) {
    ArtifactRow row;
    row.artifact_id = field(r, i, 0);
    row.tenant_id = field(r, i, 1);
    if (!PQgetisnull(r, i, 2)) row.run_id = field(r, i, 2);
    row.origin = field(r, i, 3);
    row.filename = field(r, i, 4);
    row.media_type = field(r, i, 5);
    auto size = int8Field(r, i, 6);
    auto created = int8Field(r, i, 9);
    if (!size || !created)
      return fail(ErrorCode::kExecutionUnavailable, "corrupt artifact row: integer column");
    row.size_bytes = *size;
    row.sha256 = field(r, i, 7);
    row.trust = field(r, i, 8);
    row.created_at_ms = *created;
    if (!PQgetisnull(r, i, 10)) {
      auto expires = int8Field(r, i, 10);
      if (!expires)
        return fail(ErrorCode::kExecutionUnavailable, "corrupt artifact row: expires_at_ms");
      row.expires_at_ms = *expires;
    }
    auto decoded = decodeRow(row);
    if (!decoded) return tl::unexpected(decoded.error());
    out.push_back(std::move(*decoded));
  }
  return out;
}

std::int64_t clampLimit(std::size_t limit) {
  return limit > static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max())
             ? std::numeric_limits<std::int64_t>::max()
             : static_cast<std::int64_t>(limit);
}

Result<int> currentVersion(PGconn* conn) {
  auto r = run(conn, "SELECT COALESCE(MAX(version), 0)::bigint FROM schema_migrations", {});
  if (!r) return tl::unexpected(r.error());
  auto v = int8Field(r->get(), 0, 0);
  if (!v) return fail(ErrorCode::kExecutionUnavailable, "corrupt schema_migrations");
  return static_cast<int>(*v);
}

Result<void> migrate(PGconn* conn) {
  Transaction tx(conn);
  if (auto r = tx.begin(); !r) return r;
  // One lock key for "artifact schema migration" (an arbitrary constant).
  if (auto r = run(conn, "SELECT pg_advisory_xact_lock(7046311541)", {}); !r)
    return tl::unexpected(r.error());
  if (auto r = exec(conn,
                    "CREATE TABLE IF NOT EXISTS schema_migrations ("
                    "  version INTEGER PRIMARY KEY,"
                    "  applied_at_ms BIGINT NOT NULL)");
      !r)
    return r;
  auto version = currentVersion(conn);
  if (!version) return tl::unexpected(version.error());
  if (*version > kArtifactSchemaVersion)
    return fail(ErrorCode::kConfigurationError,
                "artifact database schema " + std::to_string(*version) +
                    " is newer than this build's " + std::to_string(kArtifactSchemaVersion));
  for (const Migration& m : kMigrations) {
    if (m.version <= *version) continue;
    if (auto r = exec(conn, m.sql); !r) return r;
    if (auto r = run(conn,
                     "INSERT INTO schema_migrations (version, applied_at_ms)"
                     " VALUES ($1::integer,"
                     "  (extract(epoch FROM clock_timestamp()) * 1000)::bigint)",
                     {int64(m.version)});
        !r)
      return tl::unexpected(r.error());
  }
  return tx.commit();
}

}  // namespace

Result<std::unique_ptr<PostgresArtifactRepository>> PostgresArtifactRepository::connect(
    const std::string& conninfo) {
  PGconn* conn = PQconnectdb(conninfo.c_str());
  if (!conn) return fail(ErrorCode::kExecutionUnavailable, "postgres: out of memory");
  std::unique_ptr<PostgresArtifactRepository> repo(new PostgresArtifactRepository(conn));
  if (PQstatus(conn) != CONNECTION_OK) return pgError(conn, nullptr, "connect");
  // Notices (e.g. "relation already exists, skipping") are not errors.
  PQsetNoticeProcessor(
      conn, [](void*, const char*) {}, nullptr);
  if (auto r = migrate(conn); !r) return tl::unexpected(r.error());
  return repo;
}

PostgresArtifactRepository::~PostgresArtifactRepository() {
  PQfinish(conn_);
}

Result<int> PostgresArtifactRepository::schemaVersion() {
  std::lock_guard lock(mutex_);
  if (!ensureConnected(conn_)) return pgError(conn_, nullptr, "connect");
  return currentVersion(conn_);
}

Result<void> PostgresArtifactRepository::insert(const StoredArtifact& artifact,
                                                std::optional<std::int64_t> tenant_byte_cap) {
  ArtifactRow row = encodeRow(artifact);
  std::lock_guard lock(mutex_);
  if (!ensureConnected(conn_)) return pgError(conn_, nullptr, "connect");
  Transaction tx(conn_);
  if (auto r = tx.begin(); !r) return r;
  // Serializes inserts of one tenant until commit, so the sum below counts
  // every row committed before this one.
  if (auto r = run(conn_, "SELECT pg_advisory_xact_lock(hashtextextended($1::text, 7046))",
                   {text(row.tenant_id)});
      !r)
    return tl::unexpected(r.error());
  auto inserted =
      run(conn_,
          "INSERT INTO artifacts (artifact_id, tenant_id, run_id, origin, filename, media_type,"
          "  size_bytes, sha256, trust, created_at_ms, expires_at_ms)"
          " SELECT $1::text, $2::text, $3::text, $4::text, $5::bytea, $6::text, $7::bigint,"
          "  $8::text, $9::text, $10::bigint, $11::bigint"
          " WHERE $12::bigint IS NULL OR"
          "  (SELECT COALESCE(SUM(size_bytes), 0) FROM artifacts WHERE tenant_id = $2::text)"
          "   + $7::bigint <= $12::bigint",
          {text(row.artifact_id), text(row.tenant_id), optionalText(row.run_id), text(row.origin),
           bytes(row.filename), text(row.media_type), int64(row.size_bytes), text(row.sha256),
           text(row.trust), int64(row.created_at_ms), optionalInt64(row.expires_at_ms),
           optionalInt64(tenant_byte_cap)});
  if (!inserted) return tl::unexpected(inserted.error());
  if (std::strcmp(PQcmdTuples(inserted->get()), "0") == 0)
    return fail(ErrorCode::kExecutionRejected, "tenant artifact byte cap reached");
  return tx.commit();
}

Result<StoredArtifact> PostgresArtifactRepository::find(const ArtifactId& artifact_id) {
  std::lock_guard lock(mutex_);
  if (!ensureConnected(conn_)) return pgError(conn_, nullptr, "connect");
  auto r = run(conn_,
               "SELECT artifact_id, tenant_id, run_id, origin, filename, media_type, size_bytes,"
               "  sha256, trust, created_at_ms, expires_at_ms FROM artifacts"
               " WHERE artifact_id = $1::text",
               {text(artifact_id.str())});
  if (!r) return tl::unexpected(r.error());
  auto rows = collect(r->get());
  if (!rows) return tl::unexpected(rows.error());
  if (rows->empty()) return fail(ErrorCode::kNotFound, "artifact " + artifact_id.str());
  return std::move(rows->front());
}

Result<bool> PostgresArtifactRepository::remove(const ArtifactId& artifact_id) {
  std::lock_guard lock(mutex_);
  if (!ensureConnected(conn_)) return pgError(conn_, nullptr, "connect");
  auto r =
      run(conn_, "DELETE FROM artifacts WHERE artifact_id = $1::text", {text(artifact_id.str())});
  if (!r) return tl::unexpected(r.error());
  return std::strcmp(PQcmdTuples(r->get()), "0") != 0;
}

Result<std::vector<StoredArtifact>> PostgresArtifactRepository::listExpired(Timestamp now,
                                                                            std::size_t limit) {
  std::lock_guard lock(mutex_);
  if (!ensureConnected(conn_)) return pgError(conn_, nullptr, "connect");
  auto r = run(conn_,
               "SELECT artifact_id, tenant_id, run_id, origin, filename, media_type, size_bytes,"
               "  sha256, trust, created_at_ms, expires_at_ms FROM artifacts"
               " WHERE expires_at_ms IS NOT NULL AND expires_at_ms <= $1::bigint"
               " ORDER BY expires_at_ms, artifact_id LIMIT $2::bigint",
               {int64(toUnixMs(now)), int64(clampLimit(limit))});
  if (!r) return tl::unexpected(r.error());
  return collect(r->get());
}

Result<std::vector<StoredArtifact>> PostgresArtifactRepository::listForTenant(
    const TenantId& tenant_id, std::size_t limit) {
  std::lock_guard lock(mutex_);
  if (!ensureConnected(conn_)) return pgError(conn_, nullptr, "connect");
  auto r = run(conn_,
               "SELECT artifact_id, tenant_id, run_id, origin, filename, media_type, size_bytes,"
               "  sha256, trust, created_at_ms, expires_at_ms FROM artifacts"
               " WHERE tenant_id = $1::text ORDER BY artifact_id LIMIT $2::bigint",
               {text(tenant_id.str()), int64(clampLimit(limit))});
  if (!r) return tl::unexpected(r.error());
  return collect(r->get());
}

Result<std::int64_t> PostgresArtifactRepository::tenantBytes(const TenantId& tenant_id) {
  std::lock_guard lock(mutex_);
  if (!ensureConnected(conn_)) return pgError(conn_, nullptr, "connect");
  auto r = run(conn_,
               "SELECT COALESCE(SUM(size_bytes), 0)::bigint FROM artifacts"
               " WHERE tenant_id = $1::text",
               {text(tenant_id.str())});
  if (!r) return tl::unexpected(r.error());
  auto v = int8Field(r->get(), 0, 0);
  if (!v) return fail(ErrorCode::kExecutionUnavailable, "postgres: bad sum");
  return *v;
}

}  // namespace airlock::artifacts
