// EINTR and short reads/writes handled in one place.
// Every function retries on EINTR; none allocates, so they are safe to call
// between clone and exec.
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <cstddef>
#include <string>
#include <string_view>

#include "airlock/core/error.h"
#include "airlock/sys/unique_fd.h"

namespace airlock::sys {

// Writes all of data; returns false with errno set on failure.
bool writeAll(int fd, const void* data, std::size_t size) noexcept;
// Reads up to size bytes, retrying on EINTR; -1 with errno on failure.
ssize_t readSome(int fd, void* data, std::size_t size) noexcept;
// Writes up to size bytes, retrying on EINTR; -1 with errno on failure.
ssize_t writeSome(int fd, const void* data, std::size_t size) noexcept;
// poll(2), with EINTR answered as 0 (nothing ready: the caller's loop
// recomputes its timeout and polls again); -1 with errno on failure.
int pollSome(pollfd* fds, nfds_t nfds, int timeout_ms) noexcept;
// Reads exactly size bytes; returns bytes read (< size at EOF) or -1.
ssize_t readFull(int fd, void* data, std::size_t size) noexcept;

// Reads a whole small file (cgroup and proc files). Allocates.
Result<std::string> readFile(int dirfd, const char* path, std::size_t max_bytes = 1 << 20);
// Writes text to an existing file (cgroup control files): O_WRONLY|O_CLOEXEC.
Result<void> writeFile(int dirfd, const char* path, std::string_view text);

Result<UniqueFd> openAt(int dirfd, const char* path, int flags, mode_t mode = 0);

}  // namespace airlock::sys
