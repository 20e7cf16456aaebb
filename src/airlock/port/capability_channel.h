// The capability channel of one live sandbox (code mode, spec 001;
// docs/capabilities.md "The channel in a sandbox"), as the port hands it
// out (ExecutionEnvironment::openCapabilityChannel): the files the service
// places where the sandbox sees them read-only (kCapabilityDirInSandbox,
// "/run/airlock"), and the socket there that the sandbox's programs connect
// to, with each connection as a byte stream. Nothing here is a host fd or a
// host path, so the channel can later stand for a sandbox on another
// machine; the in-process implementation (openDirectoryCapabilityChannel)
// keeps a directory fd and socket fds underneath.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <span>
#include <string_view>

#include "airlock/core/error.h"
#include "airlock/port/cancel_token.h"
#include "airlock/sys/unique_fd.h"

namespace airlock {

// The channel socket's name in the capability directory: the sandbox
// connects to /run/airlock/cap.sock.
inline constexpr std::string_view kCapabilitySocketName = "cap.sock";

// How long CapabilityConnection::send waits for a peer that has stopped
// reading before it gives up.
inline constexpr std::chrono::seconds kCapabilitySendStall{5};

// How a CapabilityConnection::read ended.
enum class CapabilityReadStatus {
  kData,      // `bytes` bytes (at least one) are at the start of the buffer
  kEnd,       // end of stream: the peer closed its end, shutdownRead() was
              // called, or the connection failed (reset); nothing more comes
  kTimedOut,  // the timeout passed with nothing to read
  kStopped,   // the stop token was cancelled (it wins over waiting bytes)
};

struct CapabilityRead {
  CapabilityReadStatus status = CapabilityReadStatus::kEnd;
  std::size_t bytes = 0;  // kData: bytes read; otherwise 0
};

// One connection a program in the sandbox made to the channel socket: a
// reliable, ordered byte stream in each direction (no message boundaries).
// Closed when destroyed; it does not need its channel to outlive it.
// Thread-safety: read() on one thread at a time and send() on one thread at
// a time (the two may run at once); shutdownRead() and shutdown() from any
// thread, at any time, also while read() or send() waits.
class CapabilityConnection {
 public:
  // read()'s "wait as long as it takes".
  static constexpr std::chrono::milliseconds kNoTimeout{-1};

  virtual ~CapabilityConnection() = default;

  // Reads what is there, up to buffer.size() bytes (buffer not empty),
  // waiting for at least one byte, for the end of the stream, for `stop`
  // (nullptr: none) to be cancelled, or for `timeout` (kNoTimeout: none;
  // zero: do not wait) to pass. With no stop and no timeout it is one
  // blocking read, the hot path of a connection with nothing else to watch.
  virtual CapabilityRead read(std::span<char> buffer, const CancelToken* stop = nullptr,
                              std::chrono::milliseconds timeout = kNoTimeout) noexcept = 0;

  // Writes all of `bytes`, in order. False when the peer is gone, when it
  // stopped reading for kCapabilitySendStall, or after shutdown(); some
  // bytes may have been taken then. Never raises SIGPIPE.
  virtual bool send(std::string_view bytes) noexcept = 0;

  // Ends the reading side: a read() waiting now or made later reports kEnd
  // (after any bytes already received). The peer can still be sent to.
  // Idempotent.
  virtual void shutdownRead() noexcept = 0;

  // Ends both directions: reads report kEnd, sends fail, and the peer sees
  // the end of its stream. Idempotent.
  virtual void shutdown() noexcept = 0;
};

// Who owns a file the service writes into the capability directory. The
// sandbox only ever reads these files (the directory is read-only inside).
enum class CapabilityFileOwner {
  kService,      // the service's own user: the guest library, the program
  kSandboxUser,  // the sandbox user (the directory's owner): the token file, so
                 // that a mode 0400 file is readable by the sandbox and no one else
};

// What CapabilityChannel::waitForConnection saw.
enum class CapabilityWait {
  kConnection,  // a connection is queued: accept() takes it
  kStopped,     // the stop token was cancelled (checked first)
  kClosed,      // the channel is not listening (never was, or close()), or waiting failed
};

// The capability channel of one sandbox, owned by its caller (the broker's
// session, for one execution). Paths are relative to the capability
// directory (the sandbox's /run/airlock): components separated by '/', none
// empty, "." or "..", no NUL byte; anything else is refused before any file
// is touched. Every error is ErrorCode::kExecutionUnavailable, naming what
// failed. Destroying the channel close()s it; files it wrote stay.
// Thread-safety: writeFile and removeFile from any thread (one writer per
// path at a time); connectionQueued from any thread, also while another
// waits or accepts; waitForConnection and accept on one thread at a time;
// listen and close not while another thread is in waitForConnection or
// accept (stop that thread with its token first).
class CapabilityChannel {
 public:
  virtual ~CapabilityChannel() = default;

  // Creates or replaces the regular file at `path` with `contents`,
  // permission bits `mode` (at most 0777, umask not applied) and owner
  // `owner`. Missing parent directories are created (0755, the service's
  // own); the file is replaced atomically (written under a temporary name,
  // then renamed over), so the sandbox never sees it half written. No
  // symlink is followed: a symlink as a parent fails the write, one at
  // `path` itself is replaced by the file.
  virtual Result<void> writeFile(std::string_view path, std::string_view contents, unsigned mode,
                                 CapabilityFileOwner owner) = 0;

  // Removes the file at `path` (not a directory); a path that names nothing
  // is not an error. No symlink is followed.
  virtual Result<void> removeFile(std::string_view path) = 0;

  // Binds and listens on the channel socket (kCapabilitySocketName),
  // replacing whatever file had its name; the socket is the sandbox user's,
  // mode 0600. Errors also when it is listening already.
  virtual Result<void> listen() = 0;

  // Waits until a connection is queued, `stop` is cancelled, or the channel
  // is not listening.
  virtual CapabilityWait waitForConnection(const CancelToken& stop) = 0;

  // Takes the oldest queued connection, without waiting: nullptr when none
  // is queued, when taking it failed, or when the channel is not listening.
  virtual std::unique_ptr<CapabilityConnection> accept() = 0;

  // Whether a connection is queued that accept() has not taken yet; false
  // when the channel is not listening. Does not wait.
  virtual bool connectionQueued() = 0;

  // Stops listening (queued connections are dropped: their peers see the
  // end of the stream) and removes the channel socket. Connections already
  // taken stay open. Idempotent; a no-op when not listening.
  virtual void close() noexcept = 0;
};

// The in-process channel over a host directory: `directory` (any open fd of
// it, O_PATH is enough; the channel keeps it) is the directory the sandbox
// sees read-only at /run/airlock, and its owner is the sandbox user. The
// socket is bound through /proc/self/fd, so no host path is needed; its
// connections are the accepted socket fds. Errors: kExecutionUnavailable
// when `directory` is not an open directory.
Result<std::unique_ptr<CapabilityChannel>> openDirectoryCapabilityChannel(sys::UniqueFd directory);

}  // namespace airlock
