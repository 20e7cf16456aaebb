#include "airlock/core/units.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <limits>
#include <string>

namespace airlock {
namespace {

using std::chrono::milliseconds;
constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

TEST(ParseSize, BareNumbersAreBytes) {
  EXPECT_EQ(parseSize("0").value(), 0);
  EXPECT_EQ(parseSize("512").value(), 512);
  EXPECT_EQ(parseSize("007").value(), 7);
}

TEST(ParseSize, UnitsAreBinaryAndCaseInsensitive) {
  EXPECT_EQ(parseSize("1B").value(), 1);
  EXPECT_EQ(parseSize("1K").value(), 1024);
  EXPECT_EQ(parseSize("1kb").value(), 1024);
  EXPECT_EQ(parseSize("1KiB").value(), 1024);
  EXPECT_EQ(parseSize("512M").value(), 512LL << 20);
  EXPECT_EQ(parseSize("512mib").value(), 512LL << 20);
  EXPECT_EQ(parseSize("2G").value(), 2LL << 30);
  EXPECT_EQ(parseSize("2GB").value(), 2LL << 30);
  EXPECT_EQ(parseSize("3T").value(), 3LL << 40);
  EXPECT_EQ(parseSize("3TiB").value(), 3LL << 40);
  EXPECT_EQ(parseSize("512 MiB").value(), 512LL << 20);
  EXPECT_EQ(parseSize(" 4G ").value(), 4LL << 30);
}

TEST(ParseSize, ErrorsNameTheTextAndShowAnExample) {
  const auto r = parseSize("12Q");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kToolValidationError);
  EXPECT_EQ(r.error().context,
            "invalid size \"12Q\": unknown unit \"Q\"; expected a whole number with an optional "
            "unit B, K, M, G or T (e.g. 512M)");
}

TEST(ParseSize, RejectsNegativesFractionsGarbageAndOverflow) {
  for (const char* bad :
       {"", " ", "-1", "-1K", "1.5G", "1,5G", "G", "0x10", "1 G B", "1e6", "+5", "1P", "1KK",
        "9223372036854775808", "8388608T", "99999999999999999999K"}) {
    const auto r = parseSize(bad);
    ASSERT_FALSE(r.has_value()) << bad;
    EXPECT_EQ(r.error().code, ErrorCode::kToolValidationError);
    EXPECT_NE(r.error().context.find("invalid size"), std::string::npos);
  }
  EXPECT_NE(parseSize("-1").error().context.find("negative"), std::string::npos);
  EXPECT_NE(parseSize("1.5G").error().context.find("whole number"), std::string::npos);
  EXPECT_NE(parseSize("8388608T").error().context.find("too large"), std::string::npos);
}

// `--memory -- true` hands the option separator over as the value: the
// error says the value is missing, not that "--" is negative.
TEST(ParseUnits, AnOptionWhereTheValueShouldBeIsNamedAsAMissingValue) {
  for (const char* bad : {"--", "-x", "--cpus"}) {
    EXPECT_NE(parseSize(bad).error().context.find("the value is missing"), std::string::npos)
        << bad;
    EXPECT_NE(parseDuration(bad).error().context.find("the value is missing"), std::string::npos)
        << bad;
    EXPECT_NE(parseCpus(bad).error().context.find("the value is missing"), std::string::npos)
        << bad;
  }
  EXPECT_NE(parseCpus("-1").error().context.find("negative"), std::string::npos);
  EXPECT_NE(parseDuration("-.5s").error().context.find("negative"), std::string::npos);
}

TEST(ParseSize, TheLargestValuesJustFit) {
  EXPECT_EQ(parseSize("9223372036854775807").value(), kMax);
  EXPECT_EQ(parseSize("8388607T").value(), 8388607LL << 40);
}

TEST(FormatSize, UsesTheLargestExactUnit) {
  EXPECT_EQ(formatSize(0), "0 B");
  EXPECT_EQ(formatSize(1), "1 B");
  EXPECT_EQ(formatSize(1536), "1536 B");
  EXPECT_EQ(formatSize(1024), "1 KiB");
  EXPECT_EQ(formatSize(512LL << 20), "512 MiB");
  EXPECT_EQ(formatSize(2LL << 30), "2 GiB");
  EXPECT_EQ(formatSize(1536LL << 20), "1536 MiB");
  EXPECT_EQ(formatSize(5LL << 40), "5 TiB");
}

TEST(FormatSize, RoundTripsThroughParseSize) {
  EXPECT_TRUE(rc::check("parseSize(formatSize(n)) == n", [] {
    const auto n = *rc::gen::inRange<std::int64_t>(0, kMax);
    const auto back = parseSize(formatSize(n));
    RC_ASSERT(back.has_value());
    RC_ASSERT(*back == n);
  }));
  EXPECT_TRUE(rc::check("multiples of a unit format with that unit and round-trip", [] {
    const int shift = *rc::gen::element(10, 20, 30, 40);
    const auto k = *rc::gen::inRange<std::int64_t>(1, std::int64_t{1} << 20);
    const std::int64_t n = k << shift;
    const auto back = parseSize(formatSize(n));
    RC_ASSERT(back.has_value());
    RC_ASSERT(*back == n);
    RC_ASSERT(formatSize(n).find(" B") == std::string::npos);
  }));
}

TEST(ParseSize, OverflowIsRejectedNeverWrapped) {
  EXPECT_TRUE(rc::check("k * unit above INT64_MAX is an error", [] {
    const int shift = *rc::gen::element(10, 20, 30, 40);
    const char* unit = shift == 10 ? "K" : shift == 20 ? "M" : shift == 30 ? "G" : "T";
    const std::int64_t limit = kMax >> shift;  // the largest k that fits
    // Half the cases straddle the boundary, the rest anywhere up to INT64_MAX.
    const auto k = *rc::gen::oneOf(rc::gen::inRange<std::int64_t>(limit - 1000, limit + 1000),
                                   rc::gen::inRange<std::int64_t>(1, kMax));
    const auto r = parseSize(std::to_string(k) + unit);
    if (k > limit) {
      RC_ASSERT(!r.has_value());
    } else {
      RC_ASSERT(r.has_value());
      RC_ASSERT(*r == (k << shift));
    }
  }));
}

TEST(ParseDuration, UnitsAndBareSeconds) {
  EXPECT_EQ(parseDuration("30").value(), milliseconds{30000});
  EXPECT_EQ(parseDuration("30s").value(), milliseconds{30000});
  EXPECT_EQ(parseDuration("250ms").value(), milliseconds{250});
  EXPECT_EQ(parseDuration("5m").value(), milliseconds{300000});
  EXPECT_EQ(parseDuration("2h").value(), milliseconds{7200000});
  EXPECT_EQ(parseDuration("0").value(), milliseconds{0});
  EXPECT_EQ(parseDuration("10 S").value(), milliseconds{10000});
}

TEST(ParseDuration, RejectsBadText) {
  for (const char* bad : {"", "-1s", "1.5s", "5x", "s", "1d", "1 h m", "9223372036854775807s",
                          "99999999999999999999"}) {
    const auto r = parseDuration(bad);
    ASSERT_FALSE(r.has_value()) << bad;
    EXPECT_EQ(r.error().code, ErrorCode::kToolValidationError);
    EXPECT_NE(r.error().context.find("invalid duration"), std::string::npos);
  }
  EXPECT_EQ(parseDuration("5x").error().context,
            "invalid duration \"5x\": unknown unit \"x\"; expected a whole number with an "
            "optional unit ms, s, m or h (e.g. 30s)");
  EXPECT_EQ(parseDuration("9223372036854775807ms").value(), milliseconds{kMax});
}

TEST(ParseCpus, DecimalsBecomeMillicores) {
  EXPECT_EQ(parseCpus("1").value(), 1000);
  EXPECT_EQ(parseCpus("0.5").value(), 500);
  EXPECT_EQ(parseCpus("2.25").value(), 2250);
  EXPECT_EQ(parseCpus("0.125").value(), 125);
  EXPECT_EQ(parseCpus("1.5000").value(), 1500);
  EXPECT_EQ(parseCpus("64").value(), 64000);
  EXPECT_EQ(parseCpus("500m").value(), 500);
  EXPECT_EQ(parseCpus("0").value(), 0);
}

TEST(ParseCpus, RejectsBadText) {
  for (const char* bad : {"", "-1", "abc", "1.", ".5", "0.0001", "1.2.3", "1e3", "1 cpu",
                          "9223372036854775807", "99999999999999999999m"}) {
    const auto r = parseCpus(bad);
    ASSERT_FALSE(r.has_value()) << bad;
    EXPECT_EQ(r.error().code, ErrorCode::kToolValidationError);
    EXPECT_NE(r.error().context.find("invalid CPU count \""), std::string::npos);
  }
  EXPECT_NE(parseCpus("0.0001").error().context.find("three decimal places"), std::string::npos);
  EXPECT_NE(parseCpus("abc").error().context.find("like 1, 0.5 or 2.25"), std::string::npos);
}

}  // namespace
}  // namespace airlock
