#include "airlock/cli/artifact_store_open.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "airlock/artifacts/sqlite_repository.h"
#include "airlock/sys/unique_fd.h"

namespace airlock::cli {

Result<LocalArtifactStore> openLocalArtifactStore(const std::string& state_dir,
                                                  artifacts::FilesystemStoreOptions options) {
  const std::string where = "the artifact store under " + state_dir;
  if (::mkdir(state_dir.c_str(), 0711) != 0 && errno != EEXIST)
    return failErrno(ErrorCode::kExecutionUnavailable, "create state directory " + state_dir,
                     errno);
  const std::string store_dir = state_dir + "/artifacts";
  if (::mkdir(store_dir.c_str(), 0700) != 0 && errno != EEXIST)
    return failErrno(ErrorCode::kExecutionUnavailable, "create " + where, errno);
  const int store_fd = ::open(store_dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (store_fd < 0) return failErrno(ErrorCode::kExecutionUnavailable, "open " + where, errno);
  sys::UniqueFd root(store_fd);

  auto repository = artifacts::SqliteArtifactRepository::open(store_dir + "/metadata.db");
  if (!repository) {
    Error error = repository.error();
    error.context = where + ": " + error.context;
    return tl::unexpected(std::move(error));
  }
  LocalArtifactStore opened;
  opened.repository = std::move(*repository);
  auto store = artifacts::FilesystemArtifactStore::create(std::move(root), opened.repository,
                                                          std::move(options));
  if (!store) {
    Error error = store.error();
    error.context = where + ": " + error.context;
    return tl::unexpected(std::move(error));
  }
  if (auto recovered = (*store)->recover(); !recovered) {
    Error error = recovered.error();
    error.context = where + ": " + error.context;
    return tl::unexpected(std::move(error));
  }
  opened.store = std::move(*store);
  return opened;
}

Result<LocalArtifactStore> openExistingLocalArtifactStore(const std::string& state_dir) {
  struct stat st {};
  if (::stat(state_dir.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR)
      return fail(ErrorCode::kNotFound,
                  "state directory " + state_dir +
                      " does not exist, so it holds no artifacts (check --state-dir; "
                      "airlock run --export creates it)");
    return failErrno(ErrorCode::kExecutionUnavailable, "state directory " + state_dir, errno);
  }
  if (!S_ISDIR(st.st_mode))
    return fail(ErrorCode::kNotFound,
                "state directory " + state_dir + " is not a directory (check --state-dir)");
  return openLocalArtifactStore(state_dir);
}

namespace {

// <state_dir>/artifacts/metadata.db, its directories created when missing.
Result<std::string> metadataDatabase(const std::string& state_dir) {
  if (::mkdir(state_dir.c_str(), 0711) != 0 && errno != EEXIST)
    return failErrno(ErrorCode::kExecutionUnavailable, "create state directory " + state_dir,
                     errno);
  const std::string store_dir = state_dir + "/artifacts";
  if (::mkdir(store_dir.c_str(), 0700) != 0 && errno != EEXIST)
    return failErrno(ErrorCode::kExecutionUnavailable,
                     "create the metadata directory under " + state_dir, errno);
  return store_dir + "/metadata.db";
}

}  // namespace

Result<std::shared_ptr<capability::schedule::ScheduleStore>> openScheduleStore(
    const std::string& state_dir, const std::string& database) {
  if (!database.empty()) return capability::schedule::openPostgresScheduleStore(database);
  auto path = metadataDatabase(state_dir);
  if (!path) return tl::unexpected(path.error());
  return capability::schedule::openSqliteScheduleStore(*path);
}

Result<std::shared_ptr<gateway::LeaseBook>> openLeaseBook(const std::string& state_dir,
                                                          const std::string& database) {
  if (!database.empty()) return gateway::openPostgresLeaseBook(database);
  auto path = metadataDatabase(state_dir);
  if (!path) return tl::unexpected(path.error());
  return gateway::openSqliteLeaseBook(*path);
}

}  // namespace airlock::cli
