// A cancellation signal that an execute() in progress can wait on with poll.
// Backed by an eventfd; cancel() is async-signal-safe, so a SIGINT handler
// may call it. Thread-safe.
#pragma once

#include "airlock/core/error.h"
#include "airlock/sys/unique_fd.h"

namespace airlock {

class CancelToken {
 public:
  static Result<CancelToken> create();
  void cancel() const noexcept;
  bool cancelled() const noexcept;
  int pollFd() const noexcept { return fd_.get(); }  // readable once cancelled

 private:
  explicit CancelToken(sys::UniqueFd fd) : fd_(std::move(fd)) {}
  sys::UniqueFd fd_;
};

}  // namespace airlock
