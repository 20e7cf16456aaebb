// Opening the local artifact store (docs/artifacts.md, DESIGN.md 5.6), shared
// by `airlock serve` and the `airlock run --export` / `airlock artifact`
// commands: objects under <state_dir>/artifacts, SQLite metadata in
// <state_dir>/artifacts/metadata.db.
#pragma once

#include <memory>
#include <string>

#include "airlock/artifacts/filesystem_store.h"
#include "airlock/artifacts/metadata_repository.h"
#include "airlock/core/error.h"

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

}  // namespace airlock::cli
