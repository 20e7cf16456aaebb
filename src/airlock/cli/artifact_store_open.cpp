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
    return failErrno(ErrorCode::kExecutionUnavailable, "create state directory " + state_dir, errno);
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
  auto store = artifacts::FilesystemArtifactStore::create(std::move(root), opened.repository, std::move(options));
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

}  // namespace airlock::cli
