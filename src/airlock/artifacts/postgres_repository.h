// ArtifactRepository in PostgreSQL through libpq (the scaled deployment;
// spec 000 "Artifacts": metadata in PostgreSQL). Same
// semantics and the same test suite as the SQLite adapter.
//
// SQL comes only from SqlText literals; every value is a bound parameter
// (PQexecParams). Results are read in binary format. Migrations are
// numbered, recorded in schema_migrations and applied at connect inside one
// transaction holding an advisory lock, so concurrent starts apply each
// once. The tenant byte cap is checked and the row inserted in one
// transaction that holds a per-tenant advisory lock, so two concurrent puts
// of a tenant cannot both pass the cap.
//
// The repository is sql_repository.h's over this backend's statements.
// Thread-safe: one connection behind a mutex, reset once when it is found
// broken. The connection string is a credential: it is never logged and
// never part of an error.
#pragma once

#include <memory>
#include <string>

#include "airlock/artifacts/sql_repository.h"

namespace airlock::artifacts {

struct PostgresArtifactRepository {
  // `conninfo`: a libpq connection string or URI. Connects and migrates.
  // ExecutionUnavailable when the server cannot be reached or a statement
  // fails; ConfigurationError when the database's schema is newer than
  // this build.
  static Result<std::unique_ptr<SqlArtifactRepository>> connect(const std::string& conninfo);
};

}  // namespace airlock::artifacts
