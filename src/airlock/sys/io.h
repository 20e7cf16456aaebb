// EINTR and short reads/writes handled in one place.
// Every function retries on EINTR; none allocates, so they are safe to call
// between clone and exec.
#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <cstddef>
#include <string>
#include <string_view>

#include "airlock/core/error.h"
#include "airlock/sys/unique_fd.h"

struct open_how;  // <linux/openat2.h>

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
// pread(2) of up to size bytes at offset; -1 with errno on failure.
ssize_t preadSome(int fd, void* data, std::size_t size, off_t offset) noexcept;
// Sends all of data with MSG_NOSIGNAL (a closed peer is EPIPE, not SIGPIPE);
// false with errno set on failure.
bool sendAll(int fd, const void* data, std::size_t size) noexcept;
// recvmsg(2); -1 with errno on failure (EAGAIN when flags has MSG_DONTWAIT
// and nothing is queued).
ssize_t recvmsgSome(int fd, msghdr* msg, int flags) noexcept;
// splice(2) of up to size bytes between fds, without offsets; -1 with errno.
ssize_t spliceSome(int fd_in, int fd_out, std::size_t size, unsigned int flags) noexcept;
// getdents64(2) into buffer (aligned for struct dirent64): bytes filled, 0
// at the end of the directory, -1 with errno.
ssize_t getdentsSome(int dirfd, void* buffer, std::size_t size) noexcept;
// flock(2); 0, or -1 with errno (EWOULDBLOCK for a busy LOCK_NB).
int flockWait(int fd, int operation) noexcept;

// openat(2) with O_CLOEXEC added: the fd, or -1 with errno, for callers
// that map errno to their own errors (openAt below answers a Result).
// dirfd may be AT_FDCWD.
int openAtRaw(int dirfd, const char* path, int flags, mode_t mode = 0) noexcept;
// openat2(2) with *how as given (the caller sets O_CLOEXEC in how->flags):
// the fd, or -1 with errno. EAGAIN (a concurrent rename under
// RESOLVE_BENEATH) is the caller's to retry or not.
int openat2Raw(int dirfd, const char* path, const ::open_how& how) noexcept;

// Reads a whole small file (cgroup and proc files). Allocates.
Result<std::string> readFile(int dirfd, const char* path, std::size_t max_bytes = 1 << 20);
// Writes text to an existing file (cgroup control files): O_WRONLY|O_CLOEXEC.
Result<void> writeFile(int dirfd, const char* path, std::string_view text);

Result<UniqueFd> openAt(int dirfd, const char* path, int flags, mode_t mode = 0);

// Replaces (or creates) path with exactly `text`, atomically: a reader sees
// the old file or the whole new one, never a part. Written to "<path>.tmp"
// (a stale one is removed first; created O_EXCL|O_NOFOLLOW with `mode`),
// flushed with fsync, then renamed over path. ExecutionUnavailable naming
// path when a step fails; the temporary file is removed then. Allocates.
Result<void> writeFileAtomically(int dirfd, const std::string& path, std::string_view text,
                                 mode_t mode);

}  // namespace airlock::sys
