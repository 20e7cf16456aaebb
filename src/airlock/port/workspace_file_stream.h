// A workspace file as a byte stream, for export (spec 000,
// "WorkspaceHandle" and "ArtifactStore": the execution side measures the
// digest, the store measures it again). What WorkspaceHandle::openExport
// returns; no host fd crosses the port.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "airlock/core/error.h"
#include "airlock/sys/byte_source.h"

namespace airlock {

// A workspace file being exported (WorkspaceHandle::openExport): `reader`
// yields its bytes from the start in chunks and returns 0 at the end; a
// file that changed since it was measured (other bytes, grown or shrunk)
// ends the stream with ArtifactIntegrityError, so a consumer keeps nothing
// of it. One thread at a time.
struct WorkspaceFileStream {
  std::unique_ptr<sys::ByteSource> reader;
  std::int64_t size_bytes = 0;
  std::string sha256;    // lowercase hex, of the bytes measured at open
  std::string filename;  // the path's last component, as metadata
};

// The errors every openExport shares, naming the path as the caller gave
// it after the containment check (`relative`).
Error exportOfTheRootError();
Error exportTooLargeError(const std::string& relative, std::int64_t max_bytes);
// A stream over bytes already read (the measuring is done here).
WorkspaceFileStream streamOfBytes(std::string bytes, const std::string& relative);

}  // namespace airlock
