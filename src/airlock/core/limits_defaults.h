// Defaults and ceilings of the spec's limits table (spec 000, "Resource
// limits, as numbers"). These are configuration, applied above the port.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <utility>

#include "airlock/core/error.h"
#include "airlock/core/types.h"

namespace airlock {

// Highest value a ResourceLimits field may take. The spec fixes pids_max
// (4096), inodes_max (1000000) and wall_clock_seconds (1800); it leaves cpu,
// memory and workspace to the operator, and defaultCeilings() picks
// generous values for those (64 CPUs, 64 GiB, 64 GiB) that settings may
// lower or raise (serve hands its ceilings to the mechanism).
struct LimitCeilings {
  std::int64_t cpu_millicores;      // default 64000 (operator)
  std::int64_t memory_bytes;        // default 64 GiB (operator)
  std::int64_t pids_max;            // 4096
  std::int64_t workspace_bytes;     // default 64 GiB (operator)
  std::int64_t inodes_max;          // 1000000
  std::int64_t wall_clock_seconds;  // 1800
};

// The smallest values a sandbox can start with: below them init itself
// cannot set up (memory), nothing can fork (pids), or the kernel refuses the
// CFS quota (cpu: 1 ms per 100 ms period). Workspace bytes and inodes may be
// tiny (a full workspace is a DISK result, not a start failure).
struct LimitMinimums {
  std::int64_t cpu_millicores;      // 10
  std::int64_t memory_bytes;        // 8 MiB
  std::int64_t pids_max;            // 8
  std::int64_t workspace_bytes;     // 1
  std::int64_t inodes_max;          // 1 (the workspace root is one)
  std::int64_t wall_clock_seconds;  // 1
};
LimitMinimums minimumLimits() noexcept;

// One row of the spec's limits table, per ResourceLimits field in
// declaration order: the field's name ("cpu_millicores", ...), whether it
// is a size in bytes (else a count), and its default, its ceiling (the
// defaultCeilings() value) and its minimum.
struct LimitRow {
  const char* name;
  bool bytes;
  std::int64_t default_value;
  std::int64_t ceiling;
  std::int64_t minimum;
};
std::span<const LimitRow, 6> limitTable() noexcept;

// Pointers to the six fields of a ResourceLimits, LimitCeilings or
// LimitMinimums (const or not), in declaration order: row i of
// limitTable() describes field i.
template <class T>
constexpr std::array<decltype(&std::declval<T&>().cpu_millicores), 6> limitFields(T& t) noexcept {
  return {&t.cpu_millicores,  &t.memory_bytes, &t.pids_max,
          &t.workspace_bytes, &t.inodes_max,   &t.wall_clock_seconds};
}

ResourceLimits defaultLimits() noexcept;   // 2000 m, 2 GiB, 512, 4 GiB, 100000, 300 s
LimitCeilings defaultCeilings() noexcept;  // see LimitCeilings
inline constexpr std::int64_t kDefaultFilesChangedListing = 1000;
inline constexpr std::int64_t kMaxFilesChangedListing = 10000;
// The sandbox start budget: default and ceiling, in seconds.
inline constexpr std::int64_t kDefaultStartBudgetSeconds = 30;
inline constexpr std::int64_t kMaxStartBudgetSeconds = 60;
// An environment's lifetime from created_at to expires_at (the service's
// hard cap): the default, in seconds, and the highest hard cap an operator
// may set (24 h; the spec fixes no ceiling for it).
inline constexpr std::int64_t kDefaultEnvironmentLifetimeSeconds = 1800;
inline constexpr std::int64_t kEnvironmentHardCapCeiling = 86400;
inline constexpr std::int64_t kDeclaredRunCommandTimeoutSeconds = 300;
inline constexpr std::int64_t kDefaultMaximumOutputBytes = 1048576;
// Cap on an argv: the sum over elements of (length + 1 for the terminating
// NUL), the bytes execve(2) copies.
inline constexpr std::int64_t kMaxArgvBytes = 64 * 1024;

// ExecutionRejected naming the field, the value and the ceiling when a limit
// is <= 0 or above its ceiling ("limits.pids_max 5000 is above the operator
// ceiling of 4096"). Fields are checked in declaration order.
Result<void> checkLimits(const ResourceLimits& limits, const LimitCeilings& ceilings);

}  // namespace airlock
