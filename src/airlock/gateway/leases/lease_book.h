// The lease book of the gateway (spec 000, "Nothing outlives its lease"):
// the current lease epoch of each (tenant, run), as the platform last
// reported it (PUT /v1/runs/{run_id}/lease). An environment whose epoch is
// older than its run's current one is stale, and the execution node's
// reaper destroys it: the book answers its StaleLeaseQuery (in process, or
// over POST /internal/v1/leases/stale from a node on another machine). Run
// ids are the platform's and only unique within a tenant: two tenants' runs
// of one id are two leases.
//
// Three books, one contract (tests/gateway/lease_book_suite.h runs it
// against each):
//   - memory: this process only, forgotten on exit (tests, embedding);
//   - SQLite: one gateway, the file beside the artifact metadata under
//     state_dir; a restarted gateway reads what it renewed before;
//   - PostgreSQL: shared by several gateways, each on its own connection;
//     what one renews the others answer with at once.
// The SQL books keep the table run_leases (tenant_id, run_id, lease_epoch),
// migrated like every schema of the storage layer (storage/migration.h,
// ledger lease_migrations).
//
// Thread-safe. Errors: ExecutionUnavailable when the database fails (the
// caller answers 503, or keeps every environment: expires_at still ends
// each one), ConfigurationError for a schema newer than this build.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "airlock/core/error.h"
#include "airlock/port/execution_node.h"

namespace airlock::gateway {

class LeaseBook {
 public:
  virtual ~LeaseBook() = default;
  // Raises the run's current epoch to `epoch` when that is newer; a lower
  // one changes nothing (leases move forward, also when several gateways
  // renew the same run at once). Returns the current epoch after the call.
  virtual Result<std::int64_t> renew(const std::string& tenant_id, const std::string& run_id,
                                     std::int64_t epoch) = 0;
  // The run's current epoch; nullopt when it was never renewed.
  virtual Result<std::optional<std::int64_t>> current(const std::string& tenant_id,
                                                      const std::string& run_id) const = 0;
  // The environment ids of `leases` whose run's current epoch is newer than
  // theirs, in the order given. A run the book does not know is not stale.
  virtual Result<std::vector<std::string>> stale(const std::vector<LiveLease>& leases) const = 0;
};

// The in-memory book.
std::shared_ptr<LeaseBook> makeMemoryLeaseBook();

// The SQLite book in the file `path` (created when missing; it may hold
// other schemas' tables: artifacts, schedules).
Result<std::shared_ptr<LeaseBook>> openSqliteLeaseBook(const std::string& path);

// The PostgreSQL book on a new connection (a libpq connection string or
// postgresql:// URI, never repeated in an error: it may hold a password).
Result<std::shared_ptr<LeaseBook>> openPostgresLeaseBook(const std::string& conninfo);

}  // namespace airlock::gateway
