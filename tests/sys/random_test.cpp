#include "airlock/sys/random.h"

#include <gtest/gtest.h>

#include <set>

#include "airlock/core/encoding.h"

namespace airlock::sys {
namespace {

TEST(RandomHexToken, TwoLowerCaseDigitsPerByte) {
  for (std::size_t bytes : {1u, 8u, 32u}) {
    auto token = randomHexToken(bytes);
    ASSERT_TRUE(token.has_value()) << token.error().message();
    EXPECT_EQ(token->size(), 2 * bytes);
    EXPECT_TRUE(isLowerHex(*token)) << *token;
  }
  auto none = randomHexToken(0);
  ASSERT_TRUE(none.has_value());
  EXPECT_EQ(*none, "");
}

TEST(RandomHexToken, TokensDoNotRepeat) {
  // 128 bits each: a repeat among a hundred means the bytes are not random.
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    auto token = randomHexToken(16);
    ASSERT_TRUE(token.has_value());
    EXPECT_TRUE(seen.insert(*token).second) << "repeated " << *token;
  }
}

}  // namespace
}  // namespace airlock::sys
