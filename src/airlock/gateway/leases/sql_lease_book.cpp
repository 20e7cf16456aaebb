// The lease book over one storage::Connection (lease_book.h): one
// implementation, a table of SQL literals per backend. Every statement is a
// single one, so none needs a transaction: renew is one UPSERT that keeps
// the larger epoch in the database itself (MAX in SQLite, GREATEST in
// PostgreSQL, whose ON CONFLICT DO UPDATE locks the row), which is what
// keeps it forward-only when gateways renew one run at once; stale is one
// join per chunk of leases, handed to the database as a bound JSON array.
#include <algorithm>
#include <array>
#include <mutex>
#include <nlohmann/json.hpp>

#include "airlock/gateway/leases/lease_book.h"
#include "airlock/storage/connection.h"
#include "airlock/storage/migration.h"
#include "airlock/storage/postgres.h"
#include "airlock/storage/sqlite.h"

namespace airlock::gateway {
namespace {

using storage::Migration;
using storage::SqlText;

constexpr int kLeaseSchemaVersion = 1;
// Leases per stale query: one bound JSON text of at most ~1000 x 300 bytes.
constexpr std::size_t kStaleChunk = 1000;

struct LeaseStatements {
  SqlText renew;    // ?1 tenant, ?2 run, ?3 epoch -> the current epoch
  SqlText current;  // ?1 tenant, ?2 run -> its epoch, or no row
  // ?1 a JSON array of [tenant, run, environment_id, epoch] -> the
  // environment ids whose run's epoch is newer, in the array's order.
  SqlText stale;
};

// Append only; the two lists share version numbers.
constexpr std::array<Migration, kLeaseSchemaVersion> kSqliteMigrations{{
    {1,
     "CREATE TABLE run_leases ("
     "  tenant_id TEXT NOT NULL,"
     "  run_id TEXT NOT NULL,"
     "  lease_epoch INTEGER NOT NULL CHECK (lease_epoch >= 0),"
     "  PRIMARY KEY (tenant_id, run_id)"
     ") WITHOUT ROWID"},
}};

constexpr storage::MigrationLedger kSqliteLedger{
    "CREATE TABLE IF NOT EXISTS lease_migrations ("
    "  version INTEGER PRIMARY KEY NOT NULL,"
    "  applied_at_ms INTEGER NOT NULL)",
    {},  // BEGIN IMMEDIATE holds the file's write lock
    "SELECT COALESCE(MAX(version), 0) FROM lease_migrations",
    "INSERT INTO lease_migrations (version, applied_at_ms)"
    " VALUES (?1, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER))",
    "lease"};

constexpr LeaseStatements kSqliteStatements{
    "INSERT INTO run_leases (tenant_id, run_id, lease_epoch) VALUES (?1, ?2, ?3)"
    " ON CONFLICT (tenant_id, run_id)"
    " DO UPDATE SET lease_epoch = MAX(lease_epoch, excluded.lease_epoch)"
    " RETURNING lease_epoch",
    "SELECT lease_epoch FROM run_leases WHERE tenant_id = ?1 AND run_id = ?2",
    "SELECT json_extract(q.value, '$[2]') FROM json_each(?1) AS q"
    " JOIN run_leases AS l ON l.tenant_id = json_extract(q.value, '$[0]')"
    "  AND l.run_id = json_extract(q.value, '$[1]')"
    " WHERE l.lease_epoch > json_extract(q.value, '$[3]')"
    " ORDER BY q.key"};

// Ids compare bytewise (COLLATE "C") as they do in SQLite.
constexpr std::array<Migration, kLeaseSchemaVersion> kPostgresMigrations{{
    {1,
     "CREATE TABLE run_leases ("
     "  tenant_id TEXT COLLATE \"C\" NOT NULL,"
     "  run_id TEXT COLLATE \"C\" NOT NULL,"
     "  lease_epoch BIGINT NOT NULL CHECK (lease_epoch >= 0),"
     "  PRIMARY KEY (tenant_id, run_id))"},
}};

constexpr storage::MigrationLedger kPostgresLedger{
    "CREATE TABLE IF NOT EXISTS lease_migrations ("
    "  version INTEGER PRIMARY KEY,"
    "  applied_at_ms BIGINT NOT NULL)",
    // "lease schema migration", beside the artifact and schedule schemas'
    // 7046311541 and 7046311542 (and the fire outbox's 7046311543).
    "SELECT pg_advisory_xact_lock(7046311544)",
    "SELECT COALESCE(MAX(version), 0)::bigint FROM lease_migrations",
    "INSERT INTO lease_migrations (version, applied_at_ms)"
    " VALUES ($1::integer, (extract(epoch FROM clock_timestamp()) * 1000)::bigint)",
    "lease"};

constexpr LeaseStatements kPostgresStatements{
    "INSERT INTO run_leases (tenant_id, run_id, lease_epoch)"
    " VALUES ($1::text, $2::text, $3::bigint)"
    " ON CONFLICT (tenant_id, run_id)"
    " DO UPDATE SET lease_epoch = GREATEST(run_leases.lease_epoch, EXCLUDED.lease_epoch)"
    " RETURNING lease_epoch::bigint",
    "SELECT lease_epoch::bigint FROM run_leases WHERE tenant_id = $1::text AND run_id = $2::text",
    "SELECT q.v ->> 2 FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS q(v, n)"
    " JOIN run_leases AS l ON l.tenant_id = q.v ->> 0 AND l.run_id = q.v ->> 1"
    " WHERE l.lease_epoch > (q.v ->> 3)::bigint"
    " ORDER BY q.n"};

class SqlLeaseBook final : public LeaseBook {
 public:
  SqlLeaseBook(std::unique_ptr<storage::Connection> db, const LeaseStatements& sql)
      : sql_(sql), db_(std::move(db)) {}

  Result<std::int64_t> renew(const std::string& tenant_id, const std::string& run_id,
                             std::int64_t epoch) override {
    std::lock_guard lk(mu_);
    auto current = storage::queryInt(
        *db_, sql_.renew, {storage::text(tenant_id), storage::text(run_id), storage::int64(epoch)},
        "lease", "lease_epoch");
    if (!current) return tl::unexpected(current.error());
    if (!*current) return storage::corruptRow("lease", "lease_epoch");
    return **current;
  }

  Result<std::optional<std::int64_t>> current(const std::string& tenant_id,
                                              const std::string& run_id) const override {
    std::lock_guard lk(mu_);
    return storage::queryInt(*db_, sql_.current, {storage::text(tenant_id), storage::text(run_id)},
                             "lease", "lease_epoch");
  }

  Result<std::vector<std::string>> stale(const std::vector<LiveLease>& leases) const override {
    std::vector<std::string> out;
    for (std::size_t first = 0; first < leases.size(); first += kStaleChunk) {
      const std::size_t last = std::min(leases.size(), first + kStaleChunk);
      nlohmann::json chunk = nlohmann::json::array();
      for (std::size_t i = first; i < last; ++i)
        chunk.push_back({leases[i].tenant_id, leases[i].run_id, leases[i].environment_id,
                         leases[i].lease_epoch});
      std::lock_guard lk(mu_);
      auto r = db_->query(sql_.stale, {storage::text(chunk.dump())}, 1, "lease",
                          [&](const storage::Row& row) -> Result<void> {
                            if (row.isNull(0))
                              return storage::corruptRow("lease", "environment_id");
                            out.push_back(row.text(0));
                            return {};
                          });
      if (!r) return tl::unexpected(r.error());
    }
    return out;
  }

 private:
  const LeaseStatements& sql_;
  mutable std::mutex mu_;
  std::unique_ptr<storage::Connection> db_;
};

Result<std::shared_ptr<LeaseBook>> openSqlLeaseBook(
    Result<std::unique_ptr<storage::Connection>> opened, const storage::MigrationLedger& ledger,
    std::span<const Migration> migrations, const LeaseStatements& sql) {
  auto db = storage::migrated(std::move(opened), ledger, migrations, kLeaseSchemaVersion);
  if (!db) return tl::unexpected(db.error());
  return std::make_shared<SqlLeaseBook>(std::move(*db), sql);
}

}  // namespace

Result<std::shared_ptr<LeaseBook>> openSqliteLeaseBook(const std::string& path) {
  return openSqlLeaseBook(storage::sqlite::openConnection(path), kSqliteLedger, kSqliteMigrations,
                          kSqliteStatements);
}

Result<std::shared_ptr<LeaseBook>> openPostgresLeaseBook(const std::string& conninfo) {
  return openSqlLeaseBook(storage::postgres::connectConnection(conninfo), kPostgresLedger,
                          kPostgresMigrations, kPostgresStatements);
}

}  // namespace airlock::gateway
