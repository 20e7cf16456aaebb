#include "airlock/port/capability_channel.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "airlock/core/thread_annotations.h"
#include "airlock/sys/io.h"

namespace airlock {
namespace {

using sys::UniqueFd;
using Clock = std::chrono::steady_clock;

// kCapabilitySocketName as a C string (close() must not allocate).
constexpr char kSocketFile[] = "cap.sock";
static_assert(kCapabilitySocketName == kSocketFile);

// A connection the directory channel accepted: the socket fd itself.
class FdConnection final : public CapabilityConnection {
 public:
  explicit FdConnection(UniqueFd fd) : fd_(std::move(fd)) {
    // A peer that stops reading must not stall a writer forever.
    timeval tv{kCapabilitySendStall.count(), 0};
    ::setsockopt(fd_.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  }

  CapabilityRead read(std::span<char> buffer, const CancelToken* stop,
                      std::chrono::milliseconds timeout) noexcept override {
    if (stop == nullptr && timeout < std::chrono::milliseconds::zero()) return readNow(buffer);
    std::optional<Clock::time_point> until;
    if (timeout >= std::chrono::milliseconds::zero()) until = Clock::now() + timeout;
    for (;;) {
      int wait_ms = -1;
      if (until) {
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(*until - Clock::now());
        wait_ms = static_cast<int>(std::clamp<long long>(left.count(), 0, INT_MAX));
      }
      pollfd p[2] = {{fd_.get(), POLLIN, 0}, {stop ? stop->pollFd() : -1, POLLIN, 0}};
      const int rc = sys::pollSome(p, stop ? 2 : 1, wait_ms);
      if (rc < 0) return {CapabilityReadStatus::kEnd, 0};
      if (stop && (p[1].revents & POLLIN)) return {CapabilityReadStatus::kStopped, 0};
      if (p[0].revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL)) return readNow(buffer);
      // Nothing ready: the timeout, or a signal (poll again for what is left).
      if (until && Clock::now() >= *until) return {CapabilityReadStatus::kTimedOut, 0};
    }
  }

  bool send(std::string_view bytes) noexcept override {
    return sys::sendAll(fd_.get(), bytes.data(), bytes.size());
  }
  void shutdownRead() noexcept override { ::shutdown(fd_.get(), SHUT_RD); }
  void shutdown() noexcept override { ::shutdown(fd_.get(), SHUT_RDWR); }

 private:
  CapabilityRead readNow(std::span<char> buffer) noexcept {
    const ssize_t n = sys::readSome(fd_.get(), buffer.data(), buffer.size());
    if (n <= 0) return {CapabilityReadStatus::kEnd, 0};
    return {CapabilityReadStatus::kData, static_cast<std::size_t>(n)};
  }

  UniqueFd fd_;
};

// The path's components, or a refusal naming the rule it breaks.
Result<std::vector<std::string>> splitCapabilityPath(std::string_view path) {
  auto refuse = [&](const char* why) -> Result<std::vector<std::string>> {
    return fail(ErrorCode::kExecutionUnavailable,
                "capability file path \"" + std::string(path) + "\" refused: " + why);
  };
  if (path.empty()) return refuse("it is empty");
  if (path.front() == '/') return refuse("it must be relative to the capability directory");
  if (path.find('\0') != std::string_view::npos) return refuse("it contains a NUL byte");
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (;;) {
    const std::size_t slash = path.find('/', start);
    const std::string_view part = path.substr(
        start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (part == "..") return refuse("it must not contain \"..\"");
    if (part.empty() || part == ".") return refuse("it has an empty or \".\" component");
    parts.emplace_back(part);
    if (slash == std::string_view::npos) return parts;
    start = slash + 1;
  }
}

class DirectoryCapabilityChannel final : public CapabilityChannel {
 public:
  DirectoryCapabilityChannel(UniqueFd dir, uid_t uid, gid_t gid)
      : dir_(std::move(dir)), uid_(uid), gid_(gid) {}
  ~DirectoryCapabilityChannel() override { close(); }
  DirectoryCapabilityChannel(const DirectoryCapabilityChannel&) = delete;
  DirectoryCapabilityChannel& operator=(const DirectoryCapabilityChannel&) = delete;

  Result<void> writeFile(std::string_view path, std::string_view contents, unsigned mode,
                         CapabilityFileOwner owner) override;
  Result<void> removeFile(std::string_view path) override;
  Result<void> listen() override EXCLUDES(mu_);
  CapabilityWait waitForConnection(const CancelToken& stop) override EXCLUDES(mu_);
  std::unique_ptr<CapabilityConnection> accept() override EXCLUDES(mu_);
  bool connectionQueued() override EXCLUDES(mu_);
  void close() noexcept override EXCLUDES(mu_);

 private:
  // The directory holding the last of `parts`, walked from dir_ one
  // component at a time, never following a symlink; missing ones are
  // created (0755) when `create`.
  Result<UniqueFd> parentOf(const std::vector<std::string>& parts, bool create) const;
  // bind + chown + chmod + listen of a new socket; the socket fd.
  Result<UniqueFd> bindSocket() const;
  int listenerFd() EXCLUDES(mu_) {
    MutexLock lk(mu_);
    return listener_.get();
  }

  const UniqueFd dir_;
  const uid_t uid_;  // the directory's owner: the sandbox user
  const gid_t gid_;
  Mutex mu_;
  UniqueFd listener_ GUARDED_BY(mu_);  // non-blocking; invalid when not listening
};

Result<UniqueFd> DirectoryCapabilityChannel::parentOf(const std::vector<std::string>& parts,
                                                      bool create) const {
  UniqueFd dir(::fcntl(dir_.get(), F_DUPFD_CLOEXEC, 3));
  if (!dir.valid())
    return failErrno(ErrorCode::kExecutionUnavailable, "dup the capability directory", errno);
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    const char* part = parts[i].c_str();
    bool created = false;
    if (create) {
      created = ::mkdirat(dir.get(), part, 0755) == 0;
      if (!created && errno != EEXIST)
        return failErrno(ErrorCode::kExecutionUnavailable, "mkdir " + parts[i], errno);
    }
    // A directory just made is opened readable, to set its mode past the umask.
    UniqueFd next(::openat(dir.get(), part,
                           (created ? O_RDONLY : O_PATH) | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next.valid())
      return failErrno(ErrorCode::kExecutionUnavailable, "open directory " + parts[i], errno);
    if (created && ::fchmod(next.get(), 0755) != 0)
      return failErrno(ErrorCode::kExecutionUnavailable, "chmod " + parts[i], errno);
    dir = std::move(next);
  }
  return dir;
}

Result<void> DirectoryCapabilityChannel::writeFile(std::string_view path, std::string_view contents,
                                                   unsigned mode, CapabilityFileOwner owner) {
  auto parts = splitCapabilityPath(path);
  if (!parts) return tl::unexpected(parts.error());
  const std::string p(path);
  if ((mode & ~0777u) != 0)
    return fail(ErrorCode::kExecutionUnavailable,
                "capability file " + p + ": mode must be permission bits (at most 0777)");
  auto dir = parentOf(*parts, true);
  if (!dir) return tl::unexpected(dir.error());
  const std::string& name = parts->back();
  const std::string tmp = name + ".new";
  ::unlinkat(dir->get(), tmp.c_str(), 0);
  UniqueFd fd(::openat(dir->get(), tmp.c_str(),
                       O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid()) return failErrno(ErrorCode::kExecutionUnavailable, "create " + p, errno);
  const bool written =
      sys::writeAll(fd.get(), contents.data(), contents.size()) &&
      (owner == CapabilityFileOwner::kService || ::fchown(fd.get(), uid_, gid_) == 0) &&
      ::fchmod(fd.get(), mode) == 0 &&
      ::renameat(dir->get(), tmp.c_str(), dir->get(), name.c_str()) == 0;
  if (!written) {
    const int err = errno;
    ::unlinkat(dir->get(), tmp.c_str(), 0);
    return failErrno(ErrorCode::kExecutionUnavailable, "write " + p, err);
  }
  return {};
}

Result<void> DirectoryCapabilityChannel::removeFile(std::string_view path) {
  auto parts = splitCapabilityPath(path);
  if (!parts) return tl::unexpected(parts.error());
  auto dir = parentOf(*parts, false);
  if (!dir) {
    if (dir.error().sys_errno == ENOENT) return {};
    return tl::unexpected(dir.error());
  }
  if (::unlinkat(dir->get(), parts->back().c_str(), 0) != 0 && errno != ENOENT)
    return failErrno(ErrorCode::kExecutionUnavailable, "remove " + std::string(path), errno);
  return {};
}

Result<UniqueFd> DirectoryCapabilityChannel::bindSocket() const {
  UniqueFd sock(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!sock.valid()) return failErrno(ErrorCode::kExecutionUnavailable, "socket", errno);
  const std::string name(kSocketFile);
  ::unlinkat(dir_.get(), name.c_str(), 0);
  // Bound through the directory fd: no host path is needed.
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string path = "/proc/self/fd/" + std::to_string(dir_.get()) + "/" + name;
  if (path.size() >= sizeof addr.sun_path)
    return fail(ErrorCode::kExecutionUnavailable, "socket path too long");
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  if (::bind(sock.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    return failErrno(ErrorCode::kExecutionUnavailable, "bind the capability socket", errno);
  if (::fchownat(dir_.get(), name.c_str(), uid_, gid_, AT_SYMLINK_NOFOLLOW) != 0 ||
      ::fchmodat(dir_.get(), name.c_str(), 0600, 0) != 0 || ::listen(sock.get(), 64) != 0) {
    const int err = errno;
    ::unlinkat(dir_.get(), name.c_str(), 0);
    return failErrno(ErrorCode::kExecutionUnavailable, "set up the capability socket", err);
  }
  return sock;
}

Result<void> DirectoryCapabilityChannel::listen() {
  MutexLock lk(mu_);
  if (listener_.valid())
    return fail(ErrorCode::kExecutionUnavailable, "the capability channel is listening already");
  auto sock = bindSocket();
  if (!sock) return tl::unexpected(sock.error());
  listener_ = std::move(*sock);
  return {};
}

CapabilityWait DirectoryCapabilityChannel::waitForConnection(const CancelToken& stop) {
  // Read once: close() does not run while this waits (the class's rule).
  const int listener = listenerFd();
  if (listener < 0) return CapabilityWait::kClosed;
  for (;;) {
    pollfd p[2] = {{listener, POLLIN, 0}, {stop.pollFd(), POLLIN, 0}};
    const int rc = sys::pollSome(p, 2, -1);
    if (rc == 0) continue;  // interrupted
    if (rc < 0) return CapabilityWait::kClosed;
    if (p[1].revents & POLLIN) return CapabilityWait::kStopped;
    if (p[0].revents & POLLIN) return CapabilityWait::kConnection;
    if (p[0].revents & (POLLERR | POLLHUP | POLLNVAL)) return CapabilityWait::kClosed;
  }
}

std::unique_ptr<CapabilityConnection> DirectoryCapabilityChannel::accept() {
  const int listener = listenerFd();
  if (listener < 0) return nullptr;
  UniqueFd fd(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
  if (!fd.valid()) return nullptr;
  return std::make_unique<FdConnection>(std::move(fd));
}

bool DirectoryCapabilityChannel::connectionQueued() {
  MutexLock lk(mu_);
  if (!listener_.valid()) return false;
  pollfd p{listener_.get(), POLLIN, 0};
  return sys::pollSome(&p, 1, 0) > 0 && (p.revents & POLLIN);
}

void DirectoryCapabilityChannel::close() noexcept {
  MutexLock lk(mu_);
  if (!listener_.valid()) return;
  ::unlinkat(dir_.get(), kSocketFile, 0);
  listener_.reset();
}

}  // namespace

Result<std::unique_ptr<CapabilityChannel>> openDirectoryCapabilityChannel(UniqueFd directory) {
  struct stat st {};
  if (!directory.valid() || ::fstat(directory.get(), &st) != 0 || !S_ISDIR(st.st_mode))
    return fail(ErrorCode::kExecutionUnavailable, "the capability directory is not a directory");
  return std::unique_ptr<CapabilityChannel>(
      new DirectoryCapabilityChannel(std::move(directory), st.st_uid, st.st_gid));
}

}  // namespace airlock
