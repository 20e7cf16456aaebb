// Defaults and ceilings of the spec's limits table (spec 000, "Resource
// limits, as numbers"). These are configuration, applied above the port.
#pragma once

#include <cstdint>

#include "airlock/core/error.h"
#include "airlock/core/types.h"

namespace airlock {

struct LimitCeilings {
  std::int64_t cpu_millicores;
  std::int64_t memory_bytes;
  std::int64_t pids_max;            // 4096
  std::int64_t workspace_bytes;
  std::int64_t inodes_max;          // 1000000
  std::int64_t wall_clock_seconds;  // 1800
};

ResourceLimits defaultLimits() noexcept;     // 2000 m, 2 GiB, 512, 4 GiB, 100000, 300 s
LimitCeilings defaultCeilings() noexcept;    // operator-adjustable where the spec says so
inline constexpr std::int64_t kDefaultFilesChangedListing = 1000;
inline constexpr std::int64_t kMaxFilesChangedListing = 10000;
inline constexpr std::int64_t kDeclaredRunCommandTimeoutSeconds = 300;
inline constexpr std::int64_t kDefaultMaximumOutputBytes = 1048576;
inline constexpr std::int64_t kMaxArgvBytes = 64 * 1024;

// ExecutionRejected naming the field when a limit is <= 0 or above its ceiling.
Result<void> checkLimits(const ResourceLimits& limits, const LimitCeilings& ceilings);

}  // namespace airlock
