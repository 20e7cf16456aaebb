#include "airlock/port/cancel_token.h"

#include <poll.h>
#include <sys/eventfd.h>

#include <cerrno>
#include <cstdint>

#include "airlock/sys/io.h"

namespace airlock {

Result<CancelToken> CancelToken::create() {
  int fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd < 0) return failErrno(ErrorCode::kExecutionUnavailable, "eventfd", errno);
  return CancelToken(sys::UniqueFd(fd));
}

void CancelToken::cancel() const noexcept {
  std::uint64_t one = 1;
  (void)sys::writeAll(fd_.get(), &one, sizeof one);
}

bool CancelToken::cancelled() const noexcept {
  pollfd p{fd_.get(), POLLIN, 0};
  return ::poll(&p, 1, 0) == 1;
}

}  // namespace airlock
