#include "airlock/sys/random.h"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>

#include "airlock/core/encoding.h"

namespace airlock::sys {
namespace {

bool readUrandom(unsigned char* out, std::size_t size) noexcept {
  int fd = -1;
  do fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  while (fd < 0 && errno == EINTR);
  if (fd < 0) return false;
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(fd, out + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  const int saved = errno;
  ::close(fd);
  errno = saved;
  return done == size;
}

}  // namespace

bool fillRandom(void* out, std::size_t size) noexcept {
  auto* bytes = static_cast<unsigned char*>(out);
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::getrandom(bytes + done, size - done, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == ENOSYS) return readUrandom(bytes + done, size - done);
      return false;
    }
    done += static_cast<std::size_t>(n);
  }
  return true;
}

Result<std::string> randomHexToken(std::size_t bytes) {
  std::string raw(bytes, '\0');
  if (!fillRandom(raw.data(), raw.size()))
    return tl::unexpected(Error{ErrorCode::kExecutionUnavailable, errno, "getrandom"});
  return hexLower(raw);
}

}  // namespace airlock::sys
