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

// Grows the process's descriptor table to `slots` entries now (at most the
// soft RLIMIT_NOFILE), so that it does not grow while the service runs. The
// kernel grows a table that several threads share only after an RCU grace
// period (expand_fdtable), and every thread that opens a descriptor in the
// meantime, the event loop's accept() included, waits for it in
// uninterruptible sleep; with both cores of a loaded machine busy, one such
// wait held /healthz for 750 ms. The table never shrinks. Costs about 8
// bytes of kernel memory per slot (65,536 slots: about 530 KiB). Returns the
// table's size now ("FDSize" in /proc/self/status); an error names the call
// that failed.
Result<std::uint64_t> reserveDescriptorTable(std::uint64_t slots);

}  // namespace airlock::sys
