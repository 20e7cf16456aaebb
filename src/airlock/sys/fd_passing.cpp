#include "airlock/sys/fd_passing.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace airlock::sys {

ssize_t sendWithFds(int sock, const iovec* iov, std::size_t iovcnt, const int* fds, int nfds,
                    int flags) noexcept {
  if (nfds < 0 || nfds > kMaxPassedFds || (nfds > 0 && fds == nullptr)) {
    errno = EINVAL;
    return -1;
  }
  msghdr msg{};
  msg.msg_iov = const_cast<iovec*>(iov);
  msg.msg_iovlen = iovcnt;
  alignas(cmsghdr) char control[CMSG_SPACE(kMaxPassedFds * sizeof(int))] = {};
  if (nfds > 0) {
    const std::size_t bytes = static_cast<std::size_t>(nfds) * sizeof(int);
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(bytes);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(bytes);
    std::memcpy(CMSG_DATA(c), fds, bytes);
  }
  for (;;) {
    const ssize_t n = ::sendmsg(sock, &msg, MSG_NOSIGNAL | flags);
    if (n >= 0 || errno != EINTR) return n;
  }
}

ssize_t receiveWithFds(int sock, const iovec* iov, std::size_t iovcnt, int max_fds,
                       ReceivedFds& out, int flags) noexcept {
  out = ReceivedFds{};
  if (max_fds < 0 || max_fds > kMaxPassedFds) {
    errno = EINVAL;
    return -1;
  }
  msghdr msg{};
  msg.msg_iov = const_cast<iovec*>(iov);
  msg.msg_iovlen = iovcnt;
  alignas(cmsghdr) char control[CMSG_SPACE(kMaxPassedFds * sizeof(int))];
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  do {
    n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | flags);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return n;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      if (out.count < max_fds)
        out.fds[out.count++] = fd;
      else
        ::close(fd);
    }
  }
  out.truncated = (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0;
  return n;
}

}  // namespace airlock::sys
