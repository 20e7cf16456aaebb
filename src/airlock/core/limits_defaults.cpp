#include "airlock/core/limits_defaults.h"

#include <string>

#include "airlock/core/units.h"

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

LimitMinimums minimumLimits() noexcept {
  return LimitMinimums{
      .cpu_millicores = 10,
      .memory_bytes = 8 * (std::int64_t{1} << 20),
      .pids_max = 8,
      .workspace_bytes = 1,
      .inodes_max = 1,
      .wall_clock_seconds = 1,
  };
}

Result<void> checkLimits(const ResourceLimits& limits, const LimitCeilings& ceilings) {
  struct Row {
    const char* field;
    std::int64_t value;
    std::int64_t minimum;
    std::int64_t ceiling;
    bool bytes;
  };
  const LimitMinimums mins = minimumLimits();
  const Row rows[] = {
      {"cpu_millicores", limits.cpu_millicores, mins.cpu_millicores, ceilings.cpu_millicores,
       false},
      {"memory_bytes", limits.memory_bytes, mins.memory_bytes, ceilings.memory_bytes, true},
      {"pids_max", limits.pids_max, mins.pids_max, ceilings.pids_max, false},
      {"workspace_bytes", limits.workspace_bytes, mins.workspace_bytes, ceilings.workspace_bytes,
       true},
      {"inodes_max", limits.inodes_max, mins.inodes_max, ceilings.inodes_max, false},
      {"wall_clock_seconds", limits.wall_clock_seconds, mins.wall_clock_seconds,
       ceilings.wall_clock_seconds, false},
  };
  for (const Row& row : rows) {
    auto show = [&](std::int64_t v) { return row.bytes ? formatSize(v) : std::to_string(v); };
    if (row.value <= 0) {
      return fail(ErrorCode::kExecutionRejected, std::string("limits.") + row.field +
                                                     " must be positive, got " +
                                                     std::to_string(row.value));
    }
    if (row.value < row.minimum) {
      return fail(ErrorCode::kExecutionRejected, std::string("limits.") + row.field + " " +
                                                     show(row.value) + " is below the minimum of " +
                                                     show(row.minimum) +
                                                     " a sandbox needs to start");
    }
    if (row.value > row.ceiling) {
      return fail(ErrorCode::kExecutionRejected,
                  std::string("limits.") + row.field + " " + show(row.value) +
                      " is above the operator ceiling of " + show(row.ceiling));
    }
  }
  return {};
}

}  // namespace airlock
