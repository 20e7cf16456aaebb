#include "airlock/core/encoding.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <cstdint>
#include <string>

namespace airlock {
namespace {

std::string bytes(std::initializer_list<int> values) {
  std::string out;
  for (const int v : values) out += static_cast<char>(v);
  return out;
}

// Straightforward reference: decode a sequence by its lead byte, then judge
// the code point. Used only to cross-check isValidUtf8 on random bytes.
bool referenceUtf8(const std::string& s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    std::size_t len;
    std::uint32_t cp;
    if (b < 0x80) {
      len = 1, cp = b;
    } else if ((b & 0xE0) == 0xC0) {
      len = 2, cp = b & 0x1F;
    } else if ((b & 0xF0) == 0xE0) {
      len = 3, cp = b & 0x0F;
    } else if ((b & 0xF8) == 0xF0) {
      len = 4, cp = b & 0x07;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    for (std::size_t k = 1; k < len; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      if ((c & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (c & 0x3F);
    }
    const std::uint32_t min = len == 1 ? 0 : len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

TEST(Utf8, AcceptsWellFormedTextAtEveryBoundary) {
  EXPECT_TRUE(isValidUtf8(""));
  EXPECT_TRUE(isValidUtf8("plain ascii"));
  EXPECT_TRUE(isValidUtf8(std::string("nul\0inside", 10)));
  EXPECT_TRUE(isValidUtf8(bytes({0xC2, 0x80})));              // U+0080
  EXPECT_TRUE(isValidUtf8(bytes({0xDF, 0xBF})));              // U+07FF
  EXPECT_TRUE(isValidUtf8(bytes({0xE0, 0xA0, 0x80})));        // U+0800
  EXPECT_TRUE(isValidUtf8(bytes({0xED, 0x9F, 0xBF})));        // U+D7FF
  EXPECT_TRUE(isValidUtf8(bytes({0xEE, 0x80, 0x80})));        // U+E000
  EXPECT_TRUE(isValidUtf8(bytes({0xEF, 0xBF, 0xBF})));        // U+FFFF
  EXPECT_TRUE(isValidUtf8(bytes({0xF0, 0x90, 0x80, 0x80})));  // U+10000
  EXPECT_TRUE(isValidUtf8(bytes({0xF4, 0x8F, 0xBF, 0xBF})));  // U+10FFFF
  EXPECT_TRUE(isValidUtf8("héllo wörld ✓ 😀"));
}

TEST(Utf8, RejectsOverlongForms) {
  EXPECT_FALSE(isValidUtf8(bytes({0xC0, 0x80})));  // overlong NUL
  EXPECT_FALSE(isValidUtf8(bytes({0xC1, 0xBF})));
  EXPECT_FALSE(isValidUtf8(bytes({0xE0, 0x80, 0x80})));
  EXPECT_FALSE(isValidUtf8(bytes({0xE0, 0x9F, 0xBF})));
  EXPECT_FALSE(isValidUtf8(bytes({0xF0, 0x80, 0x80, 0x80})));
  EXPECT_FALSE(isValidUtf8(bytes({0xF0, 0x8F, 0xBF, 0xBF})));
  EXPECT_FALSE(isValidUtf8(bytes({0xC0, 0xAF})));  // overlong '/'
}

TEST(Utf8, RejectsSurrogatesAndCodePointsAboveTheMaximum) {
  EXPECT_FALSE(isValidUtf8(bytes({0xED, 0xA0, 0x80})));        // U+D800
  EXPECT_FALSE(isValidUtf8(bytes({0xED, 0xBF, 0xBF})));        // U+DFFF
  EXPECT_FALSE(isValidUtf8(bytes({0xF4, 0x90, 0x80, 0x80})));  // U+110000
  EXPECT_FALSE(isValidUtf8(bytes({0xF5, 0x80, 0x80, 0x80})));
  EXPECT_FALSE(isValidUtf8(bytes({0xFF})));
  EXPECT_FALSE(isValidUtf8(bytes({0xFE})));
}

TEST(Utf8, RejectsTruncatedAndStraySequences) {
  EXPECT_FALSE(isValidUtf8(bytes({0x80})));
  EXPECT_FALSE(isValidUtf8(bytes({'a', 0xBF, 'b'})));
  EXPECT_FALSE(isValidUtf8(bytes({0xC2})));
  EXPECT_FALSE(isValidUtf8(bytes({0xE2, 0x9C})));
  EXPECT_FALSE(isValidUtf8(bytes({0xF0, 0x9F, 0x98})));
  EXPECT_FALSE(isValidUtf8(bytes({0xE2, 'x', 0x93})));
  EXPECT_FALSE(isValidUtf8(bytes({0xFF, 0xFE, '.', 't', 'x', 't'})));
}

TEST(Utf8, AgreesWithAReferenceDecoderOnArbitraryBytes) {
  EXPECT_TRUE(rc::check("isValidUtf8 == reference", [](const std::string& s) {
    RC_ASSERT(isValidUtf8(s) == referenceUtf8(s));
  }));
  // Random bytes are rarely valid; also test from code points.
  EXPECT_TRUE(rc::check("encoded code points are valid", [] {
    const auto cps = *rc::gen::container<std::vector<std::uint32_t>>(
        rc::gen::suchThat(rc::gen::inRange<std::uint32_t>(0, 0x110000),
                          [](std::uint32_t c) { return c < 0xD800 || c > 0xDFFF; }));
    std::string s;
    for (const auto c : cps) {
      if (c < 0x80) {
        s += static_cast<char>(c);
      } else if (c < 0x800) {
        s += static_cast<char>(0xC0 | (c >> 6));
        s += static_cast<char>(0x80 | (c & 0x3F));
      } else if (c < 0x10000) {
        s += static_cast<char>(0xE0 | (c >> 12));
        s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
        s += static_cast<char>(0x80 | (c & 0x3F));
      } else {
        s += static_cast<char>(0xF0 | (c >> 18));
        s += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
        s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
        s += static_cast<char>(0x80 | (c & 0x3F));
      }
    }
    RC_ASSERT(isValidUtf8(s));
  }));
}

TEST(Base64, MatchesRfc4648Vectors) {
  EXPECT_EQ(base64Encode(""), "");
  EXPECT_EQ(base64Encode("f"), "Zg==");
  EXPECT_EQ(base64Encode("fo"), "Zm8=");
  EXPECT_EQ(base64Encode("foo"), "Zm9v");
  EXPECT_EQ(base64Encode("foob"), "Zm9vYg==");
  EXPECT_EQ(base64Encode("fooba"), "Zm9vYmE=");
  EXPECT_EQ(base64Encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(base64Encode(bytes({0xFF, 0xFE, 0xFD})), "//79");
  EXPECT_EQ(*base64Decode("Zm9vYmE="), "fooba");
  EXPECT_EQ(*base64Decode("Zg=="), "f");
  EXPECT_EQ(*base64Decode(""), "");
}

TEST(Base64, DecodingIsStrict) {
  EXPECT_FALSE(base64Decode("Zg").has_value());        // missing padding
  EXPECT_FALSE(base64Decode("Zg=").has_value());       // bad length
  EXPECT_FALSE(base64Decode("Zh==").has_value());      // non-zero trailing bits
  EXPECT_FALSE(base64Decode("Zm9=").has_value());      // non-zero trailing bits
  EXPECT_FALSE(base64Decode("Zg==Zg==").has_value());  // padding in the middle
  EXPECT_FALSE(base64Decode("Z===").has_value());
  EXPECT_FALSE(base64Decode("====").has_value());
  EXPECT_FALSE(base64Decode("Zm9v\n").has_value());
  EXPECT_FALSE(base64Decode("Zm-_").has_value());  // URL alphabet is not accepted
  const auto r = base64Decode("Zm$v");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kToolValidationError);
  EXPECT_NE(r.error().context.find("offset 2"), std::string::npos) << r.error().context;
}

TEST(Base64, RoundTripsAnyBytes) {
  EXPECT_TRUE(rc::check("decode(encode(b)) == b", [](const std::string& b) {
    const std::string text = base64Encode(b);
    RC_ASSERT(text.size() % 4 == 0);
    const auto back = base64Decode(text);
    RC_ASSERT(back.has_value());
    RC_ASSERT(*back == b);
  }));
}

TEST(QuoteForMessage, EscapesControlAndNonAsciiBytes) {
  EXPECT_EQ(quoteForMessage("a/b"), "\"a/b\"");
  EXPECT_EQ(quoteForMessage(std::string("a\0b", 3)), "\"a\\x00b\"");
  EXPECT_EQ(quoteForMessage("x\n\"y\"\\"), "\"x\\n\\\"y\\\"\\\\\"");
  EXPECT_EQ(quoteForMessage(bytes({0xFF, 'z'})), "\"\\xffz\"");
}

TEST(AppendEscaped, EscapesOnlyWhatTheSetNames) {
  std::string out = ">";
  appendEscaped(out, "\t\"\\\x7f\xc3\xa9", {});
  EXPECT_EQ(out, ">\\t\"\\\\\\x7f\xc3\xa9");  // appends; UTF-8 and quotes pass
  out.clear();
  appendEscaped(out, "\\\"\xc3", {.backslash = false, .double_quote = true, .non_ascii = true});
  EXPECT_EQ(out, "\\\\\"\\xc3");
}

TEST(QuoteForMessage, CutsLongText) {
  EXPECT_EQ(quoteForMessage(std::string(100, 'a'), 4), "\"aaaa\"...");
  EXPECT_EQ(quoteForMessage("abcd", 4), "\"abcd\"");
}

}  // namespace
}  // namespace airlock
