#include "airlock/workspace/dir_entries.h"

#include <dirent.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <memory>

#include "airlock/sys/io.h"

namespace airlock::workspace::detail {

Result<std::vector<DirEntryName>> readDirEntries(int dirfd, std::int64_t max_entries) {
  constexpr std::size_t kBufferBytes = 64 * 1024;
  // getdents64 needs a buffer aligned for struct dirent64.
  auto buffer = std::make_unique<std::max_align_t[]>(kBufferBytes / sizeof(std::max_align_t));
  char* base = reinterpret_cast<char*>(buffer.get());
  std::vector<DirEntryName> out;
  for (;;) {
    ssize_t n = sys::getdentsSome(dirfd, base, kBufferBytes);
    if (n < 0) return failErrno(ErrorCode::kExecutionUnavailable, "getdents64", errno);
    if (n == 0) return out;
    for (ssize_t off = 0; off < n;) {
      const auto* ent = reinterpret_cast<const struct dirent64*>(base + off);
      off += ent->d_reclen;
      const char* name = ent->d_name;
      if (std::strcmp(name, ".") == 0 || std::strcmp(name, "..") == 0) continue;
      if (static_cast<std::int64_t>(out.size()) >= max_entries) {
        return fail(ErrorCode::kExecutionUnavailable,
                    "directory holds more than " + std::to_string(max_entries) + " entries");
      }
      out.push_back(DirEntryName{std::string(name), ent->d_type});
    }
  }
}

}  // namespace airlock::workspace::detail
