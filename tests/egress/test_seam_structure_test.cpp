// The loopback test seam cannot leak into production: no file under src/
// other than classifier.h (which declares it) names makeTestSinkToken, and
// no production CMake file links airlock_egress_testing.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace {

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(EgressTestSeam, OnlyTestsCanMintATestSinkToken) {
  const std::filesystem::path src = std::filesystem::path(AIRLOCK_SOURCE_DIR) / "src";
  ASSERT_TRUE(std::filesystem::is_directory(src)) << src;
  int files = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(src)) {
    if (!entry.is_regular_file()) continue;
    ++files;
    const auto rel = std::filesystem::relative(entry.path(), src).string();
    const std::string text = slurp(entry.path());
    if (rel != "airlock/egress/classifier.h") {
      EXPECT_EQ(text.find("makeTestSinkToken"), std::string::npos) << rel;
    }
    if (entry.path().filename() == "CMakeLists.txt") {
      EXPECT_EQ(text.find("airlock_egress_testing"), std::string::npos) << rel;
    }
  }
  EXPECT_GT(files, 10);
}

}  // namespace
