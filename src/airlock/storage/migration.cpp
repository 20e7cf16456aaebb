#include "airlock/storage/migration.h"

#include <string>

namespace airlock::storage {

Result<std::unique_ptr<Connection>> migrated(Result<std::unique_ptr<Connection>> opened,
                                             const MigrationLedger& ledger,
                                             std::span<const Migration> migrations,
                                             int build_version) {
  if (!opened) return opened;
  if (auto r = migrate(**opened, ledger, migrations, build_version); !r)
    return tl::unexpected(r.error());
  return opened;
}

Result<void> checkSchemaVersion(const char* schema_name, int applied, int build_version) {
  if (applied <= build_version) return {};
  return fail(ErrorCode::kConfigurationError,
              std::string(schema_name) + " database schema " + std::to_string(applied) +
                  " is newer than this build's " + std::to_string(build_version));
}

Result<int> appliedVersion(Connection& db, const MigrationLedger& ledger) {
  const std::string kind = std::string(ledger.schema_name) + " migration";
  auto version = queryInt(db, ledger.max_version, {}, kind.c_str(), "version");
  if (!version) return tl::unexpected(version.error());
  return static_cast<int>(version->value_or(0));
}

Result<void> migrate(Connection& db, const MigrationLedger& ledger,
                     std::span<const Migration> migrations, int build_version) {
  Transaction tx(db);
  if (auto r = tx.begin(); !r) return r;
  if (!ledger.lock.empty()) {
    auto locked =
        db.query(ledger.lock, {}, 1, ledger.schema_name, [](const Row&) { return Result<void>{}; });
    if (!locked) return locked;
  }
  if (auto r = db.executeScript(ledger.create); !r) return r;
  auto version = appliedVersion(db, ledger);
  if (!version) return tl::unexpected(version.error());
  if (auto r = checkSchemaVersion(ledger.schema_name, *version, build_version); !r) return r;
  for (const Migration& m : migrations) {
    if (m.version <= *version) continue;
    if (auto r = db.executeScript(m.sql); !r) return r;
    auto recorded = db.execute(ledger.record, {int64(m.version)});
    if (!recorded) return tl::unexpected(recorded.error());
  }
  return tx.commit();
}

}  // namespace airlock::storage
