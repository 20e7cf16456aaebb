// ArtifactRepository in an embedded SQLite database (the default; spec 000
// "Artifacts"). One file under the state directory, WAL
// journal, numbered migrations recorded in schema_migrations and applied
// at open inside BEGIN IMMEDIATE (two processes opening one file at once
// apply each migration once). The repository is sql_repository.h's over
// this backend's statements. Thread-safe: one connection behind a mutex.
// Several processes may share the file (SQLite's locking; busy timeout 5 s).
#pragma once

#include <memory>
#include <string>

#include "airlock/artifacts/sql_repository.h"

namespace airlock::artifacts {

// The schema version this build migrates to.
inline constexpr int kArtifactSchemaVersion = 2;  // 2: run_notes

struct SqliteArtifactRepository {
  // `path` names the database file (operator configuration, e.g.
  // <state>/artifacts.db; the directory must exist). Opens or creates it
  // and migrates. ExecutionUnavailable on failure; ConfigurationError when
  // the file's schema is newer than this build.
  static Result<std::unique_ptr<SqlArtifactRepository>> open(const std::string& path);
};

}  // namespace airlock::artifacts
