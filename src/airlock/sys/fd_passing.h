// Passing file descriptors over a UNIX socket (sendmsg/recvmsg with one
// SCM_RIGHTS control message), for every mechanism's host side and for the
// code that runs in a sandbox between clone and exec: no allocation, no
// lock, the control buffer on the stack, EINTR retried here.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <cstddef>

namespace airlock::sys {

// The most fds one message carries.
inline constexpr int kMaxPassedFds = 8;

// One sendmsg of `iov[0..iovcnt)` carrying `fds[0..nfds)` (none when nfds
// is 0; the fds stay the caller's), with MSG_NOSIGNAL | flags. Returns the
// bytes sent (a stream socket may take fewer than offered: the fds went with
// the first byte) or -1 with errno (EINVAL for nfds outside 0..kMaxPassedFds).
ssize_t sendWithFds(int sock, const iovec* iov, std::size_t iovcnt, const int* fds, int nfds,
                    int flags = 0) noexcept;

// What receiveWithFds took: the fds (close-on-exec, now the caller's) and
// whether the data or the control message was cut (MSG_TRUNC, MSG_CTRUNC).
struct ReceivedFds {
  int fds[kMaxPassedFds] = {-1, -1, -1, -1, -1, -1, -1, -1};
  int count = 0;
  bool truncated = false;
};

// One recvmsg into `iov[0..iovcnt)` with MSG_CMSG_CLOEXEC | flags. At most
// `max_fds` (<= kMaxPassedFds) fds are kept in `out`; any further fd the
// peer sent is closed here. Returns the bytes received (0: the peer closed)
// or -1 with errno (EAGAIN under MSG_DONTWAIT when nothing is queued).
ssize_t receiveWithFds(int sock, const iovec* iov, std::size_t iovcnt, int max_fds,
                       ReceivedFds& out, int flags = 0) noexcept;

}  // namespace airlock::sys
