// The kernel CSPRNG, EINTR handled here (the one place for it, with io.h).
// Its own library (airlock_sys_random) with no dependency, so that core's
// id generation can use it below the rest of sys.
#pragma once

#include <cstddef>

namespace airlock::sys {

// Fills all size bytes of out from getrandom(2), falling back to
// /dev/urandom where the syscall is absent (ENOSYS). Blocks until the
// kernel's pool is initialised. False with errno set when neither source
// can supply the bytes; out is then partly written and must not be used.
// Allocates nothing.
bool fillRandom(void* out, std::size_t size) noexcept;

}  // namespace airlock::sys
