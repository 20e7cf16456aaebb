// Numbered schema migrations, written once for SQLite and PostgreSQL over a
// storage::Connection (connection.h): a schema is an append-only list of
// steps, each applied once in version order and recorded in its schema's
// ledger table. A database whose recorded version is newer than the build is
// refused rather than used: an older build cannot know what the newer schema
// means.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "airlock/core/error.h"
#include "airlock/storage/connection.h"
#include "airlock/storage/sql_text.h"

namespace airlock::storage {

// One schema step: applied once, in version order.
struct Migration {
  int version;
  SqlText sql;
};

// A schema's migration bookkeeping in one backend's SQL (literals, like all
// SQL here).
struct MigrationLedger {
  // CREATE TABLE IF NOT EXISTS <t> (version INTEGER PRIMARY KEY,
  // applied_at_ms <64-bit integer>)
  SqlText create;
  // Run first inside the migration's transaction, returning one row, so
  // concurrent starts apply each step once (PostgreSQL: an advisory
  // transaction lock); empty where begin() already excludes every other
  // writer (SQLite's BEGIN IMMEDIATE).
  SqlText lock;
  SqlText max_version;  // SELECT COALESCE(MAX(version), 0) FROM <t>, as a 64-bit integer
  SqlText record;       // INSERT INTO <t> (version, applied_at_ms) VALUES (parameter 1, <now ms>)
  const char* schema_name;  // "artifact", "schedule" (in errors)
};

// The highest applied version (0 for a new, empty ledger). A ledger that
// does not answer one integer is ExecutionUnavailable "corrupt <schema>
// migration row: version".
Result<int> appliedVersion(Connection& db, const MigrationLedger& ledger);

// Applies every migration newer than the applied version in one write
// transaction (several processes may open the same database). A database
// newer than `build_version` is the ConfigurationError of
// checkSchemaVersion; a failing step rolls every step back.
Result<void> migrate(Connection& db, const MigrationLedger& ledger,
                     std::span<const Migration> migrations, int build_version);

// How a user of the storage layer opens its database: `opened` (a backend's
// openConnection, or the error opening it) with migrate() run on it. The
// error of either step; the connection otherwise.
Result<std::unique_ptr<Connection>> migrated(Result<std::unique_ptr<Connection>> opened,
                                             const MigrationLedger& ledger,
                                             std::span<const Migration> migrations,
                                             int build_version);

// ConfigurationError "<schema> database schema N is newer than this build's
// M" when applied > build_version; success otherwise.
Result<void> checkSchemaVersion(const char* schema_name, int applied, int build_version);

}  // namespace airlock::storage
