#include "airlock/core/ids.h"

#include <gtest/gtest.h>

#include <optional>
#include <set>
#include <string>

namespace airlock {
namespace {

using std::chrono::milliseconds;

int hexValue(char c) {
  return c <= '9' ? c - '0' : c - 'a' + 10;
}

TEST(UuidV7, HasTheCanonicalShapeVersionAndVariant) {
  const std::string id = newUuidV7(Timestamp{milliseconds{1796006637123}});
  ASSERT_EQ(id.size(), 36u);
  EXPECT_TRUE(isUuid(id)) << id;
  EXPECT_EQ(id[14], '7');  // version nibble
  EXPECT_TRUE(id[19] == '8' || id[19] == '9' || id[19] == 'a' || id[19] == 'b') << id;
}

TEST(UuidV7, EncodesTheTimestampInTheFirst48Bits) {
  const std::int64_t ms = 0x0190163d8694;
  const std::string id = newUuidV7(Timestamp{milliseconds{ms}});
  EXPECT_EQ(id.substr(0, 13), "0190163d-8694") << id;
  std::int64_t decoded = 0;
  for (const char c : id.substr(0, 8) + id.substr(9, 4)) decoded = decoded * 16 + hexValue(c);
  EXPECT_EQ(decoded, ms);
}

TEST(UuidV7, IdsSortByTimeAcrossMilliseconds) {
  const std::string earlier = newUuidV7(Timestamp{milliseconds{1000}});
  const std::string later = newUuidV7(Timestamp{milliseconds{1001}});
  EXPECT_LT(earlier, later);
}

TEST(UuidV7, PreEpochTimesAreWrittenAsZero) {
  EXPECT_EQ(newUuidV7(Timestamp{milliseconds{-5}}).substr(0, 13), "00000000-0000");
}

TEST(UuidV7, RandomBitsDifferBetweenIdsInTheSameMillisecond) {
  std::set<std::string> ids;
  const Timestamp now{milliseconds{1796006637123}};
  for (int i = 0; i < 1000; ++i) ids.insert(newUuidV7(now));
  EXPECT_EQ(ids.size(), 1000u);
}

TEST(IsUuid, AcceptsOnlyTheCanonicalLowercaseForm) {
  EXPECT_TRUE(isUuid("0190163d-8694-739b-aea5-966c26f8ad91"));
  EXPECT_TRUE(isUuid("00000000-0000-0000-0000-000000000000"));
  EXPECT_FALSE(isUuid("0190163D-8694-739B-AEA5-966C26F8AD91"));
  EXPECT_FALSE(isUuid("0190163d8694739baea5966c26f8ad91"));
  EXPECT_FALSE(isUuid("{0190163d-8694-739b-aea5-966c26f8ad91}"));
  EXPECT_FALSE(isUuid("0190163d-8694-739b-aea5-966c26f8ad9"));
  EXPECT_FALSE(isUuid("0190163d-8694-739b-aea5-966c26f8ad91 "));
  EXPECT_FALSE(isUuid("0190163d_8694-739b-aea5-966c26f8ad91"));
  EXPECT_FALSE(isUuid("0190163g-8694-739b-aea5-966c26f8ad91"));
  EXPECT_FALSE(isUuid("../../etc/passwd-aaaa-bbbb-cccc-dddd"));
  EXPECT_FALSE(isUuid(""));
}

TEST(EnvironmentId, NamesItsNodeOrIsABareUuid) {
  const Timestamp now =
      std::chrono::time_point_cast<std::chrono::milliseconds>(std::chrono::system_clock::now());
  const std::string bare = newEnvironmentId("", now);
  EXPECT_TRUE(isUuid(bare)) << bare;
  EXPECT_EQ(environmentIdNode(bare), std::optional<std::string_view>(""));
  const std::string named = newEnvironmentId("node-7", now);
  ASSERT_EQ(named.rfind("node-7.", 0), 0u) << named;
  EXPECT_TRUE(isUuid(std::string_view(named).substr(7))) << named;
  EXPECT_EQ(environmentIdNode(named), std::optional<std::string_view>("node-7"));
  EXPECT_TRUE(isPlatformIdentifier(named)) << "it stands in a URL path and a storage key as it is";
}

TEST(EnvironmentId, ANodeIsReadOnlyFromAWellFormedId) {
  const std::string uuid = "0190163d-8694-739b-aea5-966c26f8ad91";
  EXPECT_EQ(environmentIdNode("n1." + uuid), std::optional<std::string_view>("n1"));
  EXPECT_EQ(environmentIdNode("N1." + uuid), std::nullopt) << "node names are lowercase";
  EXPECT_EQ(environmentIdNode("-n." + uuid), std::nullopt);
  EXPECT_EQ(environmentIdNode("." + uuid), std::nullopt);
  EXPECT_EQ(environmentIdNode("n1.n2." + uuid), std::nullopt);
  EXPECT_EQ(environmentIdNode("n1.not-a-uuid"), std::nullopt);
  EXPECT_EQ(environmentIdNode("../" + uuid), std::nullopt);
  EXPECT_EQ(environmentIdNode(""), std::nullopt);
  EXPECT_TRUE(isNodeName(std::string(63, 'a')));
  EXPECT_FALSE(isNodeName(std::string(64, 'a')));
  EXPECT_FALSE(isNodeName("a_b"));
  EXPECT_FALSE(isNodeName("a-"));
  EXPECT_FALSE(isNodeName(""));
}

}  // namespace
}  // namespace airlock
