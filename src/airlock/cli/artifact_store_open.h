// Opening the local artifact store (docs/artifacts.md), shared
// by `airlock serve` and the `airlock run --export` / `airlock artifact`
// commands: objects under <state_dir>/artifacts, SQLite metadata in
// <state_dir>/artifacts/metadata.db.
#pragma once

#include <memory>
#include <string>

#include "airlock/artifacts/filesystem_store.h"
#include "airlock/artifacts/metadata_repository.h"
#include "airlock/capability/schedule/schedule.h"
#include "airlock/core/error.h"
#include "airlock/gateway/leases/lease_book.h"

namespace airlock::cli {

struct LocalArtifactStore {
  std::shared_ptr<artifacts::ArtifactRepository> repository;
  std::unique_ptr<artifacts::FilesystemArtifactStore> store;  // holds a reference to repository
};

// Creates <state_dir> (0711) and <state_dir>/artifacts (0700) when missing,
// opens (and migrates) the SQLite metadata and the filesystem store, and
// cleans up what an interrupted put left behind (FilesystemArtifactStore::
// recover). Errors name only state_dir, never a path below it:
// ExecutionUnavailable for a filesystem or database failure,
// ConfigurationError for a database newer than this build.
Result<LocalArtifactStore> openLocalArtifactStore(const std::string& state_dir,
                                                  artifacts::FilesystemStoreOptions options = {});

// For the commands that only use what is stored (`airlock artifact list`,
// `get`, `rm`): openLocalArtifactStore, except that a state_dir that does
// not exist is an error naming it (NotFound), never a new empty store made
// from a mistyped --state-dir; a state_dir that is not a directory too.
Result<LocalArtifactStore> openExistingLocalArtifactStore(const std::string& state_dir);

// Code mode's schedule store (capability/schedule/schedule.h): with an empty
// `database`, the SQLite file <state_dir>/artifacts/metadata.db (beside the
// artifact metadata; directories created as above); with a postgresql://
// URI, that PostgreSQL database. Errors: ExecutionUnavailable (open,
// migrate), ConfigurationError (a schema newer than this build). An error
// never repeats the URI (it may hold a password).
Result<std::shared_ptr<capability::schedule::ScheduleStore>> openScheduleStore(
    const std::string& state_dir, const std::string& database = {});

// The gateway's lease book (gateway/leases/lease_book.h), in the same
// database as the schedules: with an empty `database` the SQLite file
// <state_dir>/artifacts/metadata.db, with a postgresql:// URI that
// PostgreSQL database (gateways sharing it share their leases). Errors as
// openScheduleStore's.
Result<std::shared_ptr<gateway::LeaseBook>> openLeaseBook(const std::string& state_dir,
                                                          const std::string& database = {});

}  // namespace airlock::cli
