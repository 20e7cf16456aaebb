// The wall clock the host layer reads a sandbox's times from: created_at
// and expires_at (spec 000, "EnvironmentHandle"), the expiry check before a
// command, and the kill reason of a destroy (EXPIRED once past expires_at).
// Injectable so that a mechanism (and its tests) can move time without
// waiting; run time inside a command is measured on the steady clock.
#pragma once

#include <chrono>
#include <functional>

#include "airlock/core/types.h"

namespace airlock::host {

// Milliseconds since the epoch. Empty: std::chrono::system_clock.
using WallClock = std::function<Timestamp()>;

// `clock`'s time, or system_clock's when it is empty.
inline Timestamp wallNow(const WallClock& clock) {
  if (clock) return clock();
  return std::chrono::time_point_cast<std::chrono::milliseconds>(std::chrono::system_clock::now());
}

}  // namespace airlock::host
