#include "airlock/core/limits_defaults.h"

#include <gtest/gtest.h>

#include <string>

namespace airlock {
namespace {

constexpr std::int64_t kGiB = std::int64_t{1} << 30;

TEST(DefaultLimits, MatchTheSpecTable) {
  const ResourceLimits l = defaultLimits();
  EXPECT_EQ(l.cpu_millicores, 2000);
  EXPECT_EQ(l.memory_bytes, 2 * kGiB);
  EXPECT_EQ(l.pids_max, 512);
  EXPECT_EQ(l.workspace_bytes, 4 * kGiB);
  EXPECT_EQ(l.inodes_max, 100000);
  EXPECT_EQ(l.wall_clock_seconds, 300);
}

TEST(DefaultCeilings, MatchTheSpecTableAndTheChosenOperatorValues) {
  const LimitCeilings c = defaultCeilings();
  EXPECT_EQ(c.cpu_millicores, 64000);
  EXPECT_EQ(c.memory_bytes, 64 * kGiB);
  EXPECT_EQ(c.pids_max, 4096);
  EXPECT_EQ(c.workspace_bytes, 64 * kGiB);
  EXPECT_EQ(c.inodes_max, 1000000);
  EXPECT_EQ(c.wall_clock_seconds, 1800);
}

TEST(CheckLimits, DefaultsAndExactCeilingsPass) {
  EXPECT_TRUE(checkLimits(defaultLimits(), defaultCeilings()).has_value());
  const LimitCeilings c = defaultCeilings();
  const ResourceLimits at_ceiling{c.cpu_millicores,  c.memory_bytes, c.pids_max,
                                  c.workspace_bytes, c.inodes_max,   c.wall_clock_seconds};
  EXPECT_TRUE(checkLimits(at_ceiling, c).has_value());
}

TEST(CheckLimits, AboveTheCeilingIsRejectedNamingFieldValueAndCeiling) {
  ResourceLimits l = defaultLimits();
  l.pids_max = 4097;
  const auto r = checkLimits(l, defaultCeilings());
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kExecutionRejected);
  EXPECT_EQ(r.error().context, "limits.pids_max 4097 is above the operator ceiling of 4096");
}

TEST(CheckLimits, EveryFieldMustBePositive) {
  int64_t ResourceLimits::*fields[] = {
      &ResourceLimits::cpu_millicores, &ResourceLimits::memory_bytes,
      &ResourceLimits::pids_max,       &ResourceLimits::workspace_bytes,
      &ResourceLimits::inodes_max,     &ResourceLimits::wall_clock_seconds};
  const char* names[] = {"cpu_millicores",  "memory_bytes", "pids_max",
                         "workspace_bytes", "inodes_max",   "wall_clock_seconds"};
  for (int i = 0; i < 6; ++i) {
    for (const std::int64_t bad : {std::int64_t{0}, std::int64_t{-1}}) {
      ResourceLimits l = defaultLimits();
      l.*fields[i] = bad;
      const auto r = checkLimits(l, defaultCeilings());
      ASSERT_FALSE(r.has_value()) << names[i];
      EXPECT_EQ(r.error().code, ErrorCode::kExecutionRejected);
      EXPECT_EQ(r.error().context, std::string("limits.") + names[i] + " must be positive, got " +
                                       std::to_string(bad));
    }
    ResourceLimits l = defaultLimits();
    l.*fields[i] = std::int64_t{1} << 62;
    const auto r = checkLimits(l, defaultCeilings());
    ASSERT_FALSE(r.has_value());
    EXPECT_NE(r.error().context.find(names[i]), std::string::npos);
  }
}

TEST(Constants, MatchTheSpec) {
  EXPECT_EQ(kDefaultFilesChangedListing, 1000);
  EXPECT_EQ(kMaxFilesChangedListing, 10000);
  EXPECT_EQ(kDeclaredRunCommandTimeoutSeconds, 300);
  EXPECT_EQ(kDefaultMaximumOutputBytes, 1048576);
  EXPECT_EQ(kMaxArgvBytes, 65536);
}

}  // namespace
}  // namespace airlock
