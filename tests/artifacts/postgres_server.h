// A throwaway PostgreSQL 15 server for the metadata suite: initdb into a
// temporary directory, postgres listening only on a UNIX socket in that
// directory (no TCP), run as an unprivileged user when the tests run as
// root (postgres refuses root): the `postgres` account if it exists,
// otherwise nobody. The server gets PR_SET_PDEATHSIG so it dies with the
// test process; stop() shuts it down and removes the directory.
//
// Binaries come from $AIRLOCK_PG_BINDIR, default /usr/lib/postgresql/15/bin
// (Debian's postgresql-15, installed by scripts/bootstrap).
#pragma once

#include <sys/types.h>

#include <string>

#include "airlock/core/error.h"

namespace airlock::artifacts::testing {

class PostgresServer {
 public:
  PostgresServer() = default;
  ~PostgresServer() { stop(); }
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  // initdb + start + wait until it accepts connections (at most 60 s).
  // The error says which step failed and where its log is.
  Result<void> start();
  void stop();

  // A libpq connection string for `database` as the superuser "airlock".
  std::string conninfo(const std::string& database) const;
  // CREATE DATABASE <name> (name: [a-z0-9_] only).
  Result<void> createDatabase(const std::string& name);

 private:
  std::string dir_;
  pid_t pid_ = -1;
};

}  // namespace airlock::artifacts::testing
