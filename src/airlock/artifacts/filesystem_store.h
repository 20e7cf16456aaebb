// The filesystem adapter of ArtifactStore (spec 000, "ArtifactStore"; red-team case B48: an
// interrupted write leaves nothing visible).
//
// Layout beneath the store's root directory (given as an fd; the caller
// picks it under the state directory):
//   tmp/                     objects being written (named only when the
//                            filesystem lacks O_TMPFILE)
//   objects/<tenant>/<aa>/<artifact_id>
//                            committed objects, mode 0600, at
//                            storageKey(tenant_id, artifact_id); every
//                            component is opened through a directory fd
//                            with O_NOFOLLOW, never by a joined path.
//
// put(): validates the metadata, refuses a claimed size above the cap,
// generates the id, creates a temporary file inside the store (O_TMPFILE
// in tmp/, or tmp/<id>.part), takes an exclusive flock(2) on it, streams
// with SHA-256 (sys/sha256.h) and a running byte count that stops the
// stream at min(size_bytes, cap) + 1 bytes, compares size and digest,
// fsyncs, links (O_TMPFILE) or renames (RENAME_NOREPLACE) the file to its
// key, fsyncs the directory, inserts the metadata row (with the tenant byte
// cap) and only then releases the lock. A failure before the link leaves
// no object; a failed insert unlinks the object again.
//
// Crash safety: an O_TMPFILE file that was never linked vanishes with the
// process. A named temporary file, or an object linked but without its row
// (a crash between link and insert), stays behind without anyone holding
// its lock; recover() removes exactly those, and skips files whose lock is
// held (a put in progress in another process sharing the store). A reader
// never sees a partial object: objects appear at their key only complete
// and verified.
//
// Thread-safe when the repository is (every adapter here is): after
// create() the store only reads its own directory fds.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

#include "airlock/artifacts/artifact_store.h"
#include "airlock/artifacts/metadata_repository.h"
#include "airlock/sys/unique_fd.h"

namespace airlock::artifacts {

enum class TempFileMode {
  kAuto,   // O_TMPFILE where the filesystem supports it, a named file otherwise
  kNamed,  // always tmp/<id>.part (tests of the recovery path)
};

struct FilesystemStoreOptions {
  std::int64_t max_artifact_bytes = kDefaultMaxArtifactBytes;  // per artifact
  std::optional<std::int64_t> tenant_byte_cap;                 // nullopt: none
  TempFileMode temp_mode = TempFileMode::kAuto;
  // Source of created-at times for ids; system clock when empty.
  std::function<Timestamp()> clock;
};

// What recover() removed.
struct RecoveryReport {
  std::int64_t temp_files_removed = 0;
  std::int64_t orphan_objects_removed = 0;  // objects with no metadata row
  std::int64_t busy_skipped = 0;            // locked by a put in progress
};

class FilesystemArtifactStore final : public ArtifactStore {
 public:
  // Creates tmp/ and objects/ beneath root_dirfd when missing (mode 0700).
  // ExecutionUnavailable when they cannot be created or opened;
  // ConfigurationError for a cap <= 0.
  static Result<std::unique_ptr<FilesystemArtifactStore>> create(
      sys::UniqueFd root_dirfd, std::shared_ptr<ArtifactRepository> repository,
      FilesystemStoreOptions options = {});

  Result<ArtifactRef> put(ByteSource& stream, const ArtifactMetadata& metadata) override;
  Result<std::unique_ptr<ByteSource>> open(const ArtifactRef& ref) override;
  Result<bool> remove(const ArtifactId& artifact_id) override;

  // The restart cleanup described above. Walks every object (one repository
  // lookup each), so it is meant for start-up, not for a hot path.
  Result<RecoveryReport> recover();

  const FilesystemStoreOptions& options() const noexcept { return options_; }

 private:
  FilesystemArtifactStore(sys::UniqueFd root, sys::UniqueFd tmp, sys::UniqueFd objects,
                          std::shared_ptr<ArtifactRepository> repository,
                          FilesystemStoreOptions options);
  struct Impl;

  sys::UniqueFd root_;
  sys::UniqueFd tmp_;
  sys::UniqueFd objects_;
  std::shared_ptr<ArtifactRepository> repository_;
  FilesystemStoreOptions options_;
};

}  // namespace airlock::artifacts
