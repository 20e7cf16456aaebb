// Internal to workspace/: reading one directory's names through its fd.
// Names are raw bytes (any byte but '/' and NUL), never decoded.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "airlock/core/error.h"

namespace airlock::workspace::detail {

struct DirEntryName {
  std::string name;
  unsigned char d_type = 0;  // DT_* from getdents64; DT_UNKNOWN means "stat it"
};

// All entries of the directory open (O_RDONLY | O_DIRECTORY) on dirfd except
// "." and "..", in the order the filesystem returns them. Fails when the
// directory holds more than max_entries names, so a hostile directory cannot
// make the caller allocate without bound. Reads from the fd's current offset.
Result<std::vector<DirEntryName>> readDirEntries(int dirfd, std::int64_t max_entries);

}  // namespace airlock::workspace::detail
