// The bearer credential reader (service/bearer.h) every API's check uses.
#include "airlock/service/bearer.h"

#include <gtest/gtest.h>

#include <string>

namespace airlock::service {
namespace {

TEST(Bearer, TheTokenFollowsTheSchemeInAnyCase) {
  EXPECT_EQ(bearerToken("Bearer abc"), "abc");
  EXPECT_EQ(bearerToken("bEaReR abc"), "abc");
  EXPECT_TRUE(bearerMatches("BEARER s3cret", "s3cret"));
}

TEST(Bearer, AnythingAroundTheTokenRefusesIt) {
  for (const std::string value :
       {"Bearer", "Bearer ", "Bearer  abc", "Bearer abc ", "Bearer abc\r\n", "Bearer\tabc",
        "Basic abc", "Bearerabc", "Bearer a\tb", "Token abc", ""}) {
    EXPECT_FALSE(bearerToken(value).has_value()) << "'" << value << "'";
    EXPECT_FALSE(bearerMatches(value, "abc")) << "'" << value << "'";
  }
}

TEST(Bearer, OnlyTheExactTokenMatchesAndAnEmptyOneNever) {
  EXPECT_FALSE(bearerMatches("Bearer abcd", "abc"));
  EXPECT_FALSE(bearerMatches("Bearer ab", "abc"));
  EXPECT_FALSE(bearerMatches("Bearer abd", "abc"));
  EXPECT_FALSE(bearerMatches("Bearer x", ""));
}

}  // namespace
}  // namespace airlock::service
