#include "airlock/core/limits_defaults.h"

#include <string>

namespace airlock {
namespace {

constexpr std::int64_t kGiB = std::int64_t{1} << 30;

}  // namespace

ResourceLimits defaultLimits() noexcept {
  return ResourceLimits{
      .cpu_millicores = 2000,
      .memory_bytes = 2 * kGiB,
      .pids_max = 512,
      .workspace_bytes = 4 * kGiB,
      .inodes_max = 100000,
      .wall_clock_seconds = 300,
  };
}

LimitCeilings defaultCeilings() noexcept {
  return LimitCeilings{
      .cpu_millicores = 64000,
      .memory_bytes = 64 * kGiB,
      .pids_max = 4096,
      .workspace_bytes = 64 * kGiB,
      .inodes_max = 1000000,
      .wall_clock_seconds = 1800,
  };
}

Result<void> checkLimits(const ResourceLimits& limits, const LimitCeilings& ceilings) {
  struct Row {
    const char* field;
    std::int64_t value;
    std::int64_t ceiling;
  };
  const Row rows[] = {
      {"cpu_millicores", limits.cpu_millicores, ceilings.cpu_millicores},
      {"memory_bytes", limits.memory_bytes, ceilings.memory_bytes},
      {"pids_max", limits.pids_max, ceilings.pids_max},
      {"workspace_bytes", limits.workspace_bytes, ceilings.workspace_bytes},
      {"inodes_max", limits.inodes_max, ceilings.inodes_max},
      {"wall_clock_seconds", limits.wall_clock_seconds, ceilings.wall_clock_seconds},
  };
  for (const Row& row : rows) {
    if (row.value <= 0) {
      return fail(ErrorCode::kExecutionRejected, std::string("limits.") + row.field +
                                                     " must be positive, got " +
                                                     std::to_string(row.value));
    }
    if (row.value > row.ceiling) {
      return fail(ErrorCode::kExecutionRejected,
                  std::string("limits.") + row.field + " " + std::to_string(row.value) +
                      " is above the operator ceiling of " + std::to_string(row.ceiling));
    }
  }
  return {};
}

}  // namespace airlock
