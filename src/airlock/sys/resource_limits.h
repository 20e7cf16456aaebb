// Process resource limits raised at service start.
#pragma once

#include <cstdint>

#include "airlock/core/error.h"

namespace airlock::sys {

// Raises RLIMIT_NOFILE so that a service holding many connections does not
// run out of descriptors: the soft limit to `want` (at most the hard limit,
// or, for a process allowed to raise its hard limit, at most
// /proc/sys/fs/nr_open). Never lowers a limit. Returns the soft limit now in
// force; an error only when getrlimit itself fails.
Result<std::uint64_t> raiseOpenFileLimit(std::uint64_t want);

}  // namespace airlock::sys
