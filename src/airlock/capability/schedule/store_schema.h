// The schedule schema of each ScheduleStore backend: its migrations (append
// only; the two lists share version numbers) and the ledger that records
// which are applied. Internal to airlock_capability_schedule and its tests:
// a test brings a database to an older version by migrating it with the
// first migrations of the list only.
#pragma once

#include <span>

#include "airlock/storage/migration.h"

namespace airlock::capability::schedule::schema {

std::span<const storage::Migration> sqliteMigrations();
const storage::MigrationLedger& sqliteLedger();

std::span<const storage::Migration> postgresMigrations();
const storage::MigrationLedger& postgresLedger();

}  // namespace airlock::capability::schedule::schema
