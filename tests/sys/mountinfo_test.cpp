#include "airlock/sys/mountinfo.h"

#include <gtest/gtest.h>

namespace airlock::sys {
namespace {

TEST(Mountinfo, TakesTheFieldsEitherSideOfTheSeparator) {
  const auto entries = parseMountinfo(
      "35 31 0:32 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate\n"
      "36 31 0:33 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n");
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].mount_point, "/sys/fs/cgroup");
  EXPECT_EQ(entries[0].fstype, "cgroup2");
  EXPECT_EQ(entries[0].super_options, "rw,nsdelegate");
  EXPECT_EQ(entries[1].mount_point, "/sys/fs/cgroup/memory");
  EXPECT_EQ(entries[1].fstype, "cgroup");
  EXPECT_EQ(entries[1].super_options, "rw,memory");
}

TEST(Mountinfo, KeepsEscapesAndSkipsMalformedLines) {
  const auto entries = parseMountinfo(
      "no separator here\n"
      "1 2 3 4 - tmpfs tmpfs rw\n"             // too few fields before " - "
      "1 2 0:1 / /a\\040b rw - tmpfs tmpfs\n"  // too few fields after
      "40 31 0:40 / /mnt/with\\040space rw - tmpfs tmpfs rw\n"
      "41 31 0:41 / /last rw - tmpfs tmpfs ro");  // no final newline
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].mount_point, "/mnt/with\\040space");
  EXPECT_EQ(entries[1].mount_point, "/last");
  EXPECT_EQ(entries[1].super_options, "ro");
}

}  // namespace
}  // namespace airlock::sys
