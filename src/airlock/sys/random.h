// The kernel CSPRNG, EINTR handled here (the one place for it, with io.h),
// and the one way to make a random token or name from it. Its own library
// (airlock_sys_random) depending only on header-only parts of core (the
// Result type, core/encoding.h), so that core's id generation can use it below the
// rest of sys.
#pragma once

#include <cstddef>
#include <string>

#include "airlock/core/error.h"

namespace airlock::sys {

// Fills all size bytes of out from getrandom(2), falling back to
// /dev/urandom where the syscall is absent (ENOSYS). Blocks until the
// kernel's pool is initialised. False with errno set when neither source
// can supply the bytes; out is then partly written and must not be used.
// Allocates nothing.
bool fillRandom(void* out, std::size_t size) noexcept;

// `bytes` bytes of fillRandom as 2 * bytes lower-case hex digits
// (core/encoding.h): for tokens and temporary names that must not be guessable
// (32 bytes for a credential, 8 for a name that only has to be unique).
// ExecutionUnavailable with the errno ("getrandom") when the kernel cannot
// supply the bytes; there is never a predictable stand-in such as a pid.
Result<std::string> randomHexToken(std::size_t bytes);

}  // namespace airlock::sys
