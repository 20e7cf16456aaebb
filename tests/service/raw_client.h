// Test support: plain TCP clients of `airlock serve` on 127.0.0.1, for what
// an HTTP library would not do: idle connections that send nothing, clients
// that read slowly or stop reading, malformed requests.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace airlock::testing {

class RawConnection {
 public:
  RawConnection() = default;
  // Connects to 127.0.0.1:port (blocking unless `nonblocking`). With
  // `receive_buffer` > 0 the socket's receive buffer is set first, so that a
  // client that does not read pushes back on the sender soon.
  static RawConnection open(int port, bool nonblocking = false, int receive_buffer = 0) {
    RawConnection c;
    c.fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0), 0);
    if (c.fd_ < 0) return c;
    if (receive_buffer > 0)
      ::setsockopt(c.fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(c.fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 &&
        errno != EINPROGRESS)
      c.close();
    return c;
  }
  RawConnection(RawConnection&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  RawConnection& operator=(RawConnection&& o) noexcept {
    if (this != &o) {
      close();
      fd_ = o.fd_;
      o.fd_ = -1;
    }
    return *this;
  }
  ~RawConnection() { close(); }

  bool valid() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  bool sendAll(std::string_view data) const {
    while (!data.empty()) {
      const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      data.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }

  // Reads up to `max` bytes, waiting at most `limit` for the first: "" at
  // end of stream or on timeout (`timed_out` tells them apart).
  std::string readSome(std::size_t max, std::chrono::milliseconds limit,
                       bool* timed_out = nullptr) const {
    if (timed_out != nullptr) *timed_out = false;
    pollfd p{fd_, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(limit.count()));
    if (ready <= 0) {
      if (timed_out != nullptr) *timed_out = true;
      return {};
    }
    std::string out(max, '\0');
    const ssize_t n = ::recv(fd_, out.data(), max, 0);
    out.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
    return out;
  }

  // Everything until the peer closes, or until `limit` passes (then
  // `complete` is false).
  std::string readToEnd(std::chrono::milliseconds limit, bool* complete = nullptr) const {
    std::string all;
    const auto until = std::chrono::steady_clock::now() + limit;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          until - std::chrono::steady_clock::now());
      bool timed_out = false;
      std::string part =
          readSome(1 << 16, std::max(left, std::chrono::milliseconds(0)), &timed_out);
      if (timed_out) {
        if (complete != nullptr) *complete = false;
        return all;
      }
      if (part.empty()) {
        if (complete != nullptr) *complete = true;
        return all;
      }
      all += part;
    }
  }

 private:
  int fd_ = -1;
};

// "POST <path> HTTP/1.1" with a JSON body and the bearer token; the
// connection closes after the answer.
inline std::string postRequest(const std::string& path, const std::string& body,
                               const std::string& token) {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + token +
         "\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

}  // namespace airlock::testing
