#include "airlock/core/limits_defaults.h"

#include <string>

#include "airlock/core/units.h"

namespace airlock {
namespace {

constexpr std::int64_t kMiB = std::int64_t{1} << 20;
constexpr std::int64_t kGiB = std::int64_t{1} << 30;

constexpr LimitRow kLimitTable[] = {
    // name, bytes, default, ceiling, minimum
    {"cpu_millicores", false, 2000, 64000, 10},
    {"memory_bytes", true, 2 * kGiB, 64 * kGiB, 8 * kMiB},
    {"pids_max", false, 512, 4096, 8},
    {"workspace_bytes", true, 4 * kGiB, 64 * kGiB, 1},
    {"inodes_max", false, 100000, 1000000, 1},
    {"wall_clock_seconds", false, 300, 1800, 1},
};

// The limits whose field i is `column` of row i.
template <class T>
T fromColumn(std::int64_t LimitRow::*column) noexcept {
  T out{};
  const auto fields = limitFields(out);
  for (std::size_t i = 0; i < fields.size(); ++i) *fields[i] = kLimitTable[i].*column;
  return out;
}

}  // namespace

std::span<const LimitRow, 6> limitTable() noexcept {
  return kLimitTable;
}

ResourceLimits defaultLimits() noexcept {
  return fromColumn<ResourceLimits>(&LimitRow::default_value);
}

LimitCeilings defaultCeilings() noexcept {
  return fromColumn<LimitCeilings>(&LimitRow::ceiling);
}

LimitMinimums minimumLimits() noexcept {
  return fromColumn<LimitMinimums>(&LimitRow::minimum);
}

Result<void> checkLimits(const ResourceLimits& limits, const LimitCeilings& ceilings) {
  const auto values = limitFields(limits);
  const auto maxima = limitFields(ceilings);
  for (std::size_t i = 0; i < values.size(); ++i) {
    const LimitRow& row = kLimitTable[i];
    const std::int64_t value = *values[i];
    const std::int64_t ceiling = *maxima[i];
    auto show = [&](std::int64_t v) { return row.bytes ? formatSize(v) : std::to_string(v); };
    const std::string field = std::string("limits.") + row.name;
    if (value <= 0) {
      return fail(ErrorCode::kExecutionRejected,
                  field + " must be positive, got " + std::to_string(value));
    }
    if (value < row.minimum) {
      return fail(ErrorCode::kExecutionRejected,
                  field + " " + show(value) + " is below the minimum of " + show(row.minimum) +
                      " a sandbox needs to start");
    }
    if (value > ceiling) {
      return fail(ErrorCode::kExecutionRejected,
                  field + " " + show(value) + " is above the operator ceiling of " + show(ceiling));
    }
  }
  return {};
}

}  // namespace airlock
