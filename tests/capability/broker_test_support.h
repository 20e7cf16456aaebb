// A minimal program-side client of the capability channel for tests: it
// connects to a session's socket, writes frames and reads decoded events.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "airlock/capability/wire/frame.h"
#include "airlock/port/capability_channel.h"
#include "airlock/sys/unique_fd.h"

namespace airlock::testing {

// A temporary directory used as a capability directory, with an O_PATH fd,
// and channels over it (the in-process channel the mechanisms hand out).
class TempCapDir {
 public:
  TempCapDir() {
    char tmpl[] = "/tmp/airlock-cap-test-XXXXXX";
    path_ = ::mkdtemp(tmpl);
    fd_.reset(::open(path_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  }
  ~TempCapDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  int fd() const { return fd_.get(); }
  // A new channel over the directory (a BrokerSession takes it); null, and
  // the test failed, when it cannot be made.
  std::unique_ptr<CapabilityChannel> channel() const {
    auto c = openDirectoryCapabilityChannel(sys::UniqueFd(::fcntl(fd_.get(), F_DUPFD_CLOEXEC, 3)));
    EXPECT_TRUE(c.has_value()) << (c ? "" : c.error().message());
    return c ? std::move(*c) : nullptr;
  }

 private:
  std::string path_;
  sys::UniqueFd fd_;
};

class WireClient {
 public:
  explicit WireClient(const std::string& socket_path) {
    fd_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, socket_path.c_str(), sizeof addr.sun_path - 1);
    connected_ = ::connect(fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  bool connected() const { return connected_; }
  void close() { fd_.reset(); }

  void send(const capability::wire::Frame& f) {
    auto bytes = capability::wire::encodeFrame(f);
    ASSERT_TRUE(bytes.has_value());
    sendRaw(*bytes);
  }
  void sendRaw(const std::string& bytes) {
    ASSERT_EQ(::send(fd_.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
  }
  std::uint64_t call(const std::string& token, const std::string& cap, capability::wire::Value args,
                     std::uint64_t deadline_ms = 10000) {
    const std::uint64_t id = next_id_++;
    send(capability::wire::Frame{
        id, capability::wire::CapCall{token, cap, std::move(args), deadline_ms}});
    return id;
  }

  // The next event (a frame, invalid or dropped), or nullopt at end of
  // stream or after `timeout`.
  std::optional<capability::wire::FrameDecoder::Event> next(
      std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      auto ev = decoder_.next();
      if (!std::holds_alternative<capability::wire::FrameDecoder::NeedMore>(ev)) return ev;
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          until - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd p{fd_.get(), POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return std::nullopt;
      char buf[65536];
      ssize_t n = ::read(fd_.get(), buf, sizeof buf);
      if (n <= 0) return std::nullopt;
      decoder_.feed(std::string_view(buf, static_cast<std::size_t>(n)));
    }
  }
  // The next cap_result's answer (skipping nothing: fails on another event).
  std::optional<std::pair<std::uint64_t, capability::wire::Answer>> result(
      std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    auto ev = next(timeout);
    if (!ev) return std::nullopt;
    auto* f = std::get_if<capability::wire::Frame>(&*ev);
    if (f == nullptr || f->kind() != capability::wire::Kind::kCapResult) return std::nullopt;
    return std::pair{f->id, std::get<capability::wire::CapResult>(f->body).answer};
  }

 private:
  sys::UniqueFd fd_;
  bool connected_ = false;
  std::uint64_t next_id_ = 1;
  capability::wire::FrameDecoder decoder_;
};

inline std::string refusalCode(const capability::wire::Answer& a) {
  auto* r = std::get_if<capability::wire::Refusal>(&a);
  return r ? r->code : std::string("(ok)");
}
inline std::string refusalMessage(const capability::wire::Answer& a) {
  auto* r = std::get_if<capability::wire::Refusal>(&a);
  return r ? r->message : std::string();
}

}  // namespace airlock::testing
