#include "airlock/artifacts/filesystem_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <string>
#include <vector>

#include "airlock/artifacts/storage_key.h"
#include "airlock/sys/byte_source.h"
#include "airlock/sys/io.h"
#include "airlock/sys/sha256.h"

namespace airlock::artifacts {
namespace {

constexpr int kDirFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW;
constexpr const char* kPartSuffix = ".part";

tl::unexpected<Error> storageError(std::string what, int err) {
  return failErrno(ErrorCode::kExecutionUnavailable, "artifact store: " + std::move(what), err);
}

Timestamp systemNow() {
  return std::chrono::time_point_cast<std::chrono::milliseconds>(std::chrono::system_clock::now());
}

// mkdirat + open without following a symlink; `created` reports a new entry
// (its parent then needs an fsync for the entry to be durable).
Result<sys::UniqueFd> openOrMakeDir(int parent, const std::string& name, bool* created) {
  if (::mkdirat(parent, name.c_str(), 0700) == 0) {
    if (created) *created = true;
  } else if (errno != EEXIST) {
    return storageError("mkdir " + name, errno);
  }
  auto fd = sys::openAt(parent, name.c_str(), kDirFlags);
  if (!fd) return storageError("open directory " + name, fd.error().sys_errno);
  return fd;
}

// Entry names of a directory (not "." or ".."), read through a dup so the
// caller's fd keeps its own offset.
Result<std::vector<std::string>> listNames(int dirfd) {
  int dup_fd = ::fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
  if (dup_fd < 0) return storageError("dup", errno);
  DIR* dir = ::fdopendir(dup_fd);
  if (!dir) {
    int err = errno;
    ::close(dup_fd);
    return storageError("fdopendir", err);
  }
  ::rewinddir(dir);
  std::vector<std::string> names;
  errno = 0;
  while (struct dirent* entry = ::readdir(dir)) {
    std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(std::move(name));
    errno = 0;
  }
  int err = errno;
  ::closedir(dir);
  if (err != 0) return storageError("readdir", err);
  return names;
}

struct TempFile {
  sys::UniqueFd fd;
  std::string name;  // empty for an O_TMPFILE file
};

Result<TempFile> createTemp(int tmp_dirfd, const ArtifactId& id, TempFileMode mode) {
  if (mode == TempFileMode::kAuto) {
    int fd = ::openat(tmp_dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0) {
      sys::UniqueFd owned(fd);
      if (sys::flockWait(fd, LOCK_EX) != 0) return storageError("flock temporary file", errno);
      return TempFile{std::move(owned), {}};
    }
    // Filesystems without O_TMPFILE say so with one of these.
    if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL && errno != ENOENT)
      return storageError("create temporary file", errno);
  }
  std::string name = id.str() + kPartSuffix;
  auto fd = sys::openAt(tmp_dirfd, name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_NOFOLLOW, 0600);
  if (!fd) return storageError("create temporary file", fd.error().sys_errno);
  if (sys::flockWait(fd->get(), LOCK_EX) != 0) return storageError("flock temporary file", errno);
  // recover() in another process may have taken the lock first and removed
  // the name; writing into an unlinked file would only fail later.
  struct stat st {};
  if (::fstat(fd->get(), &st) != 0) return storageError("fstat temporary file", errno);
  if (st.st_nlink == 0) return storageError("temporary file removed by recovery", ENOENT);
  return TempFile{std::move(*fd), std::move(name)};
}

// Makes the temporary file visible at `name` in `shard_dirfd`; never
// replaces an existing entry.
Result<void> placeObject(TempFile& temp, int tmp_dirfd, int shard_dirfd, const std::string& name) {
  if (temp.name.empty()) {
    if (::linkat(temp.fd.get(), "", shard_dirfd, name.c_str(), AT_EMPTY_PATH) == 0) return {};
    // AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH; /proc/self/fd works without.
    if (errno != ENOENT && errno != EPERM) return storageError("link object", errno);
    const std::string proc = "/proc/self/fd/" + std::to_string(temp.fd.get());
    if (::linkat(AT_FDCWD, proc.c_str(), shard_dirfd, name.c_str(), AT_SYMLINK_FOLLOW) != 0)
      return storageError("link object", errno);
    return {};
  }
  if (::renameat2(tmp_dirfd, temp.name.c_str(), shard_dirfd, name.c_str(), RENAME_NOREPLACE) == 0)
    return {};
  if (errno != EINVAL && errno != ENOSYS) return storageError("rename object", errno);
  // No RENAME_NOREPLACE on this filesystem: link (fails on EEXIST), unlink.
  if (::linkat(tmp_dirfd, temp.name.c_str(), shard_dirfd, name.c_str(), 0) != 0)
    return storageError("link object", errno);
  ::unlinkat(tmp_dirfd, temp.name.c_str(), 0);
  return {};
}

// A committed object is re-hashed as it is read; the end of the stream is
// where corruption at rest shows up.
constexpr sys::DigestCheckWords kObjectChecks{
    "artifact store: read object", "stored object is longer than recorded",
    "stored object no longer matches its recorded SHA-256"};

// The object's shard directory, or NotFound.
Result<sys::UniqueFd> openShard(int objects_dirfd, const StorageKey& key) {
  auto tenant = sys::openAt(objects_dirfd, key.tenant.c_str(), kDirFlags);
  if (!tenant) {
    if (tenant.error().sys_errno == ENOENT) return fail(ErrorCode::kNotFound, "artifact object");
    return storageError("open tenant directory", tenant.error().sys_errno);
  }
  auto shard = sys::openAt(tenant->get(), key.shard.c_str(), kDirFlags);
  if (!shard) {
    if (shard.error().sys_errno == ENOENT) return fail(ErrorCode::kNotFound, "artifact object");
    return storageError("open shard directory", shard.error().sys_errno);
  }
  return shard;
}

}  // namespace

FilesystemArtifactStore::FilesystemArtifactStore(sys::UniqueFd root, sys::UniqueFd tmp,
                                                 sys::UniqueFd objects,
                                                 std::shared_ptr<ArtifactRepository> repository,
                                                 FilesystemStoreOptions options)
    : root_(std::move(root)),
      tmp_(std::move(tmp)),
      objects_(std::move(objects)),
      repository_(std::move(repository)),
      options_(std::move(options)) {
  if (!options_.clock) options_.clock = systemNow;
}

Result<std::unique_ptr<FilesystemArtifactStore>> FilesystemArtifactStore::create(
    sys::UniqueFd root_dirfd, std::shared_ptr<ArtifactRepository> repository,
    FilesystemStoreOptions options) {
  if (options.max_artifact_bytes <= 0)
    return fail(ErrorCode::kConfigurationError, "artifact size cap must be positive");
  if (options.tenant_byte_cap && *options.tenant_byte_cap <= 0)
    return fail(ErrorCode::kConfigurationError, "tenant artifact byte cap must be positive");
  if (!repository) return fail(ErrorCode::kConfigurationError, "artifact store has no repository");
  auto tmp = openOrMakeDir(root_dirfd.get(), "tmp", nullptr);
  if (!tmp) return tl::unexpected(tmp.error());
  auto objects = openOrMakeDir(root_dirfd.get(), "objects", nullptr);
  if (!objects) return tl::unexpected(objects.error());
  return std::unique_ptr<FilesystemArtifactStore>(
      new FilesystemArtifactStore(std::move(root_dirfd), std::move(*tmp), std::move(*objects),
                                  std::move(repository), std::move(options)));
}

Result<ArtifactRef> FilesystemArtifactStore::put(ByteSource& stream,
                                                 const ArtifactMetadata& metadata) {
  if (auto valid = validateMetadata(metadata); !valid) return tl::unexpected(valid.error());
  if (metadata.size_bytes > options_.max_artifact_bytes)
    return fail(ErrorCode::kExecutionRejected,
                "artifact of " + std::to_string(metadata.size_bytes) +
                    " bytes exceeds the size cap of " +
                    std::to_string(options_.max_artifact_bytes) + " bytes");
  if (options_.tenant_byte_cap) {
    auto used = repository_->tenantBytes(metadata.tenant_id);
    if (!used) return tl::unexpected(used.error());
    if (*used + metadata.size_bytes > *options_.tenant_byte_cap)
      return fail(ErrorCode::kExecutionRejected, "tenant artifact byte cap reached");
  }

  const ArtifactId id = ArtifactId::generate(options_.clock());
  auto temp = createTemp(tmp_.get(), id, options_.temp_mode);
  if (!temp) return tl::unexpected(temp.error());
  // Until the object is placed, every failure only has to drop the name.
  auto dropTemp = [&] {
    if (!temp->name.empty()) ::unlinkat(tmp_.get(), temp->name.c_str(), 0);
  };

  // Stop reading one byte past what may legitimately arrive.
  const std::int64_t limit = std::min(metadata.size_bytes, options_.max_artifact_bytes);
  sys::Sha256 hash;
  std::int64_t total = 0;
  std::vector<char> buffer(kStreamBufferBytes);
  for (;;) {
    auto n = stream.read(buffer.data(), buffer.size());
    if (!n) {
      dropTemp();
      return tl::unexpected(n.error());
    }
    if (*n == 0) break;
    if (*n > buffer.size()) {
      dropTemp();
      return fail(ErrorCode::kExecutionUnavailable, "artifact stream reported an impossible read");
    }
    total += static_cast<std::int64_t>(*n);
    if (total > options_.max_artifact_bytes) {
      dropTemp();
      return fail(ErrorCode::kExecutionRejected, "artifact stream exceeds the size cap of " +
                                                     std::to_string(options_.max_artifact_bytes) +
                                                     " bytes");
    }
    if (total > limit) {
      dropTemp();
      return fail(ErrorCode::kArtifactIntegrityError,
                  "artifact stream is longer than its declared size_bytes");
    }
    hash.update(buffer.data(), *n);
    if (!sys::writeAll(temp->fd.get(), buffer.data(), *n)) {
      const int err = errno;
      dropTemp();
      return storageError("write object", err);
    }
  }
  if (total != metadata.size_bytes) {
    dropTemp();
    return fail(ErrorCode::kArtifactIntegrityError,
                "artifact stream ended after " + std::to_string(total) + " of " +
                    std::to_string(metadata.size_bytes) + " declared bytes");
  }
  if (hash.finishHex() != metadata.sha256) {
    dropTemp();
    return fail(ErrorCode::kArtifactIntegrityError,
                "artifact bytes do not match the declared SHA-256");
  }
  if (::fsync(temp->fd.get()) != 0) {
    const int err = errno;
    dropTemp();
    return storageError("fsync object", err);
  }

  const StorageKey key = storageKey(metadata.tenant_id, id);
  bool tenant_created = false;
  bool shard_created = false;
  auto tenant_dir = openOrMakeDir(objects_.get(), key.tenant, &tenant_created);
  if (!tenant_dir) {
    dropTemp();
    return tl::unexpected(tenant_dir.error());
  }
  auto shard_dir = openOrMakeDir(tenant_dir->get(), key.shard, &shard_created);
  if (!shard_dir) {
    dropTemp();
    return tl::unexpected(shard_dir.error());
  }
  if (auto placed = placeObject(*temp, tmp_.get(), shard_dir->get(), key.object); !placed) {
    dropTemp();
    return tl::unexpected(placed.error());
  }
  auto unplace = [&] { ::unlinkat(shard_dir->get(), key.object.c_str(), 0); };
  if (::fsync(shard_dir->get()) != 0 || (shard_created && ::fsync(tenant_dir->get()) != 0) ||
      (tenant_created && ::fsync(objects_.get()) != 0)) {
    const int err = errno;
    unplace();
    return storageError("fsync object directory", err);
  }

  StoredArtifact row{id, metadata};
  if (auto inserted = repository_->insert(row, options_.tenant_byte_cap); !inserted) {
    unplace();
    return tl::unexpected(inserted.error());
  }
  // temp->fd closes here, releasing the lock recover() respects.
  return refOf(row);
}

Result<std::unique_ptr<ByteSource>> FilesystemArtifactStore::open(const ArtifactRef& ref) {
  auto row = repository_->find(ref.artifact_id);
  if (!row) return tl::unexpected(row.error());
  if (row->metadata.sha256 != ref.sha256 || row->metadata.size_bytes != ref.size_bytes)
    return fail(ErrorCode::kNotFound,
                "artifact " + ref.artifact_id.str() + " does not match the reference");
  const StorageKey key = storageKey(row->metadata.tenant_id, row->artifact_id);
  auto shard = openShard(objects_.get(), key);
  if (!shard) return tl::unexpected(shard.error());
  auto fd = sys::openAt(shard->get(), key.object.c_str(), O_RDONLY | O_NOFOLLOW);
  if (!fd) {
    if (fd.error().sys_errno == ENOENT)
      return fail(ErrorCode::kNotFound, "artifact " + ref.artifact_id.str() + " has no object");
    return storageError("open object", fd.error().sys_errno);
  }
  struct stat st {};
  if (::fstat(fd->get(), &st) != 0) return storageError("fstat object", errno);
  if (!S_ISREG(st.st_mode))
    return fail(ErrorCode::kArtifactIntegrityError, "stored object is not a regular file");
  return std::make_unique<sys::DigestCheckedFileSource>(std::move(*fd), row->metadata.size_bytes,
                                                        row->metadata.sha256, kObjectChecks);
}

Result<bool> FilesystemArtifactStore::remove(const ArtifactId& artifact_id) {
  auto row = repository_->find(artifact_id);
  if (!row) {
    if (row.error().code == ErrorCode::kNotFound) return false;
    return tl::unexpected(row.error());
  }
  auto removed = repository_->remove(artifact_id);
  if (!removed) return tl::unexpected(removed.error());
  const StorageKey key = storageKey(row->metadata.tenant_id, artifact_id);
  auto shard = openShard(objects_.get(), key);
  if (!shard) {
    if (shard.error().code == ErrorCode::kNotFound) return *removed;
    return tl::unexpected(shard.error());
  }
  if (::unlinkat(shard->get(), key.object.c_str(), 0) != 0 && errno != ENOENT)
    return storageError("unlink object", errno);
  return *removed;
}

Result<RecoveryReport> FilesystemArtifactStore::recover() {
  RecoveryReport report;
  // Temporary files: whatever no live put holds.
  auto temps = listNames(tmp_.get());
  if (!temps) return tl::unexpected(temps.error());
  for (const auto& name : *temps) {
    auto fd = sys::openAt(tmp_.get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
    if (!fd) {
      if (fd.error().sys_errno == ENOENT) continue;
      // Not a file we could have made (a symlink, say): remove the name.
      if (::unlinkat(tmp_.get(), name.c_str(), 0) == 0) ++report.temp_files_removed;
      continue;
    }
    if (sys::flockWait(fd->get(), LOCK_EX | LOCK_NB) != 0) {
      if (errno == EWOULDBLOCK) {
        ++report.busy_skipped;
        continue;
      }
      return storageError("flock temporary file", errno);
    }
    if (::unlinkat(tmp_.get(), name.c_str(), 0) == 0) ++report.temp_files_removed;
  }

  // Objects without a row, that no live put holds (a crash between link and
  // insert, or between row deletion and unlink).
  auto tenants = listNames(objects_.get());
  if (!tenants) return tl::unexpected(tenants.error());
  for (const auto& tenant_name : *tenants) {
    auto tenant_dir = sys::openAt(objects_.get(), tenant_name.c_str(), kDirFlags);
    if (!tenant_dir) continue;
    auto shards = listNames(tenant_dir->get());
    if (!shards) return tl::unexpected(shards.error());
    for (const auto& shard_name : *shards) {
      auto shard_dir = sys::openAt(tenant_dir->get(), shard_name.c_str(), kDirFlags);
      if (!shard_dir) continue;
      auto objects = listNames(shard_dir->get());
      if (!objects) return tl::unexpected(objects.error());
      for (const auto& object_name : *objects) {
        auto id = ArtifactId::parse(object_name);
        if (!id) continue;  // not ours to judge
        auto fd =
            sys::openAt(shard_dir->get(), object_name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
        if (!fd) continue;
        if (sys::flockWait(fd->get(), LOCK_EX | LOCK_NB) != 0) {
          if (errno == EWOULDBLOCK) {
            ++report.busy_skipped;
            continue;
          }
          return storageError("flock object", errno);
        }
        // Holding the lock: any put of this object has either committed its
        // row already or died.
        auto row = repository_->find(*id);
        if (row) continue;
        if (row.error().code != ErrorCode::kNotFound) return tl::unexpected(row.error());
        if (::unlinkat(shard_dir->get(), object_name.c_str(), 0) == 0)
          ++report.orphan_objects_removed;
      }
    }
  }
  return report;
}

}  // namespace airlock::artifacts
