#include "airlock/sys/io.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

namespace airlock::sys {
namespace {

// `call()` (one syscall) again while it fails with EINTR; its result
// otherwise. No allocation: the lambdas capture by reference.
template <class Call>
auto retryOnEintr(const Call& call) noexcept {
  for (;;) {
    const auto n = call();
    if (n < 0 && errno == EINTR) continue;
    return n;
  }
}

}  // namespace

bool writeAll(int fd, const void* data, std::size_t size) noexcept {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

ssize_t readSome(int fd, void* data, std::size_t size) noexcept {
  return retryOnEintr([&] { return ::read(fd, data, size); });
}

ssize_t writeSome(int fd, const void* data, std::size_t size) noexcept {
  return retryOnEintr([&] { return ::write(fd, data, size); });
}

int pollSome(pollfd* fds, nfds_t nfds, int timeout_ms) noexcept {
  const int rc = ::poll(fds, nfds, timeout_ms);
  return rc < 0 && errno == EINTR ? 0 : rc;
}

ssize_t readFull(int fd, void* data, std::size_t size) noexcept {
  char* p = static_cast<char*>(data);
  std::size_t done = 0;
  while (done < size) {
    ssize_t n = readSome(fd, p + done, size - done);
    if (n < 0) return -1;
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  return static_cast<ssize_t>(done);
}

ssize_t preadSome(int fd, void* data, std::size_t size, off_t offset) noexcept {
  return retryOnEintr([&] { return ::pread(fd, data, size, offset); });
}

bool sendAll(int fd, const void* data, std::size_t size) noexcept {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::send(fd, p, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

ssize_t recvmsgSome(int fd, msghdr* msg, int flags) noexcept {
  return retryOnEintr([&] { return ::recvmsg(fd, msg, flags); });
}

ssize_t spliceSome(int fd_in, int fd_out, std::size_t size, unsigned int flags) noexcept {
  return retryOnEintr([&] { return ::splice(fd_in, nullptr, fd_out, nullptr, size, flags); });
}

ssize_t getdentsSome(int dirfd, void* buffer, std::size_t size) noexcept {
  return retryOnEintr([&] { return ::getdents64(dirfd, buffer, size); });
}

int flockWait(int fd, int operation) noexcept {
  return retryOnEintr([&] { return ::flock(fd, operation); });
}

int openAtRaw(int dirfd, const char* path, int flags, mode_t mode) noexcept {
  return retryOnEintr([&] { return ::openat(dirfd, path, flags | O_CLOEXEC, mode); });
}

int openat2Raw(int dirfd, const char* path, const ::open_how& how) noexcept {
  return static_cast<int>(
      retryOnEintr([&] { return ::syscall(SYS_openat2, dirfd, path, &how, sizeof how); }));
}

Result<UniqueFd> openAt(int dirfd, const char* path, int flags, mode_t mode) {
  const int fd = openAtRaw(dirfd, path, flags, mode);
  if (fd >= 0) return UniqueFd(fd);
  return failErrno(ErrorCode::kExecutionUnavailable, std::string("openat ") + path, errno);
}

Result<std::string> readFile(int dirfd, const char* path, std::size_t max_bytes) {
  auto fd = openAt(dirfd, path, O_RDONLY);
  if (!fd) return tl::unexpected(fd.error());
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = readSome(fd->get(), buf, sizeof buf);
    if (n < 0)
      return failErrno(ErrorCode::kExecutionUnavailable, std::string("read ") + path, errno);
    if (n == 0) break;
    if (out.size() + static_cast<std::size_t>(n) > max_bytes)
      return fail(ErrorCode::kExecutionUnavailable, std::string("file too large: ") + path);
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

Result<void> writeFile(int dirfd, const char* path, std::string_view text) {
  auto fd = openAt(dirfd, path, O_WRONLY);
  if (!fd) return tl::unexpected(fd.error());
  if (!writeAll(fd->get(), text.data(), text.size()))
    return failErrno(ErrorCode::kExecutionUnavailable, std::string("write ") + path, errno);
  return {};
}

Result<void> writeFileAtomically(int dirfd, const std::string& path, std::string_view text,
                                 mode_t mode) {
  const std::string tmp = path + ".tmp";
  (void)::unlinkat(dirfd, tmp.c_str(), 0);
  auto fd = openAt(dirfd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode);
  if (!fd)
    return failErrno(ErrorCode::kExecutionUnavailable, "write " + path, fd.error().sys_errno);
  const bool written = writeAll(fd->get(), text.data(), text.size()) && ::fsync(fd->get()) == 0;
  const int saved = errno;
  fd->reset();
  if (!written || ::renameat(dirfd, tmp.c_str(), dirfd, path.c_str()) != 0) {
    const int cause = written ? errno : saved;
    (void)::unlinkat(dirfd, tmp.c_str(), 0);
    return failErrno(ErrorCode::kExecutionUnavailable, "write " + path, cause);
  }
  return {};
}

}  // namespace airlock::sys
