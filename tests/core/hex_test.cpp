#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <array>
#include <string>
#include <vector>

#include "airlock/core/encoding.h"

namespace airlock {
namespace {

// Decodes text written by hexLower (either case), for the round trip.
std::vector<unsigned char> decode(std::string_view text) {
  std::vector<unsigned char> out;
  for (std::size_t i = 0; i + 1 < text.size(); i += 2)
    out.push_back(
        static_cast<unsigned char>(hexDigitValue(text[i]) * 16 + hexDigitValue(text[i + 1])));
  return out;
}

TEST(Hex, EncodesEveryByteHighNibbleFirst) {
  const std::array<unsigned char, 5> bytes = {0x00, 0x0f, 0xa5, 0xf0, 0xff};
  EXPECT_EQ(hexLower(bytes), "000fa5f0ff");
  EXPECT_EQ(hexLower(std::string_view("\x01\xab", 2)), "01ab");
  EXPECT_EQ(hexLower(std::span<const unsigned char>()), "");
}

TEST(Hex, AppendsAfterWhatTheStringHolds) {
  std::string out = "id-";
  const std::array<unsigned char, 2> bytes = {0xde, 0xad};
  appendHexLower(out, bytes);
  EXPECT_EQ(out, "id-dead");
  appendHexByte(out, 0x2f);
  EXPECT_EQ(out, "id-dead2f");
  appendHexByte(out, 0x2f, HexCase::kUpper);
  appendHexByte(out, 0xab, HexCase::kUpper);
  EXPECT_EQ(out, "id-dead2f2FAB");
}

TEST(Hex, WritesWithoutAllocating) {
  char buf[7] = "......";
  const std::array<unsigned char, 2> bytes = {0x12, 0xef};
  writeHexLower(buf + 1, bytes);
  EXPECT_STREQ(buf, ".12ef.");
  writeHexByte(buf, 0xc3, HexCase::kUpper);
  EXPECT_STREQ(buf, "C32ef.");
}

TEST(Hex, LowerHexAcceptsOnlyWhatTheEncoderWrites) {
  EXPECT_TRUE(isLowerHex("0123456789abcdef"));
  EXPECT_FALSE(isLowerHex(""));
  EXPECT_FALSE(isLowerHex("ABCDEF"));
  EXPECT_FALSE(isLowerHex("abcdeg"));
  EXPECT_FALSE(isLowerHex(std::string_view("ab\0c", 4)));
  EXPECT_FALSE(isLowerHex("ab cd"));
  EXPECT_TRUE(isLowerHexDigit('f'));
  EXPECT_FALSE(isLowerHexDigit('F'));
}

TEST(Hex, DigitValuesInEitherCase) {
  EXPECT_EQ(hexDigitValue('0'), 0);
  EXPECT_EQ(hexDigitValue('9'), 9);
  EXPECT_EQ(hexDigitValue('a'), 10);
  EXPECT_EQ(hexDigitValue('F'), 15);
  EXPECT_EQ(hexDigitValue('g'), -1);
  EXPECT_EQ(hexDigitValue('/'), -1);
  EXPECT_EQ(hexDigitValue(':'), -1);
  EXPECT_EQ(hexDigitValue('\0'), -1);
}

TEST(Hex, RoundTripsEveryByteString) {
  EXPECT_TRUE(rc::check("decode(hexLower(b)) == b, in 2*|b| lower-case digits", [] {
    const auto bytes = *rc::gen::arbitrary<std::vector<unsigned char>>();
    const std::string text = hexLower(bytes);
    RC_ASSERT(text.size() == 2 * bytes.size());
    RC_ASSERT(bytes.empty() || isLowerHex(text));
    RC_ASSERT(decode(text) == bytes);
  }));
}

TEST(Hex, UpperCaseDecodesToTheSameByte) {
  EXPECT_TRUE(rc::check("both cases of a byte decode to it", [] {
    const auto byte = *rc::gen::arbitrary<unsigned char>();
    char lower[2];
    char upper[2];
    writeHexByte(lower, byte);
    writeHexByte(upper, byte, HexCase::kUpper);
    RC_ASSERT(decode(std::string_view(lower, 2)) == std::vector<unsigned char>{byte});
    RC_ASSERT(decode(std::string_view(upper, 2)) == std::vector<unsigned char>{byte});
  }));
}

}  // namespace
}  // namespace airlock
