// The shim -> host record stream (sandbox/oci/shim_protocol.h): round trip,
// partial tails, and refusal of anything malformed; the host -> keeper
// resize record.
#include "airlock/sandbox/oci/shim_protocol.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <string>

namespace airlock::oci {
namespace {

std::string encode(const std::vector<ShimRecord>& records) {
  std::string out;
  for (const auto& r : records) {
    char buf[kShimRecordBytes];
    encodeShimRecord(r, buf);
    out.append(buf, sizeof buf);
  }
  return out;
}

ShimRecord genRecord(int type, std::int64_t value) {
  return ShimRecord{static_cast<ShimRecordType>(1 + (type % 6 + 6) % 6), value};
}

RC_GTEST_PROP(ShimProtocol, EncodedRecordsDecodeToThemselves,
              (const std::vector<std::pair<int, std::int64_t>>& raw)) {
  std::vector<ShimRecord> records;
  for (auto [t, v] : raw) records.push_back(genRecord(t, v));
  const std::string bytes = encode(records);
  auto d = decodeShimRecords(bytes);
  RC_ASSERT(!d.malformed);
  RC_ASSERT(d.consumed == bytes.size());
  RC_ASSERT(d.records == records);
}

RC_GTEST_PROP(ShimProtocol, APartialTailIsLeftForLater,
              (const std::vector<std::pair<int, std::int64_t>>& raw)) {
  std::vector<ShimRecord> records;
  for (auto [t, v] : raw) records.push_back(genRecord(t, v));
  const std::string bytes = encode(records);
  const std::size_t cut = *rc::gen::inRange<std::size_t>(0, bytes.size() + 1);
  auto d = decodeShimRecords(std::string_view(bytes).substr(0, cut));
  RC_ASSERT(!d.malformed);
  RC_ASSERT(d.records.size() == cut / kShimRecordBytes);
  RC_ASSERT(d.consumed == d.records.size() * kShimRecordBytes);
}

RC_GTEST_PROP(ShimProtocol, ArbitraryBytesNeverOverrun, (const std::string& bytes)) {
  auto d = decodeShimRecords(bytes);
  RC_ASSERT(d.consumed <= bytes.size());
  RC_ASSERT(d.consumed % kShimRecordBytes == 0);
  for (const auto& r : d.records) {
    const auto t = static_cast<std::uint32_t>(r.type);
    RC_ASSERT(t >= 1u && t <= 6u);
  }
}

TEST(ShimProtocol, UnknownTypeIsMalformedAndStopsTheDecode) {
  std::string bytes = encode({ShimRecord{ShimRecordType::kStarted, 42}});
  std::string bad(kShimRecordBytes, '\0');
  bad[0] = 9;
  bytes += bad;
  bytes += encode({ShimRecord{ShimRecordType::kDone, 1}});
  auto d = decodeShimRecords(bytes);
  EXPECT_TRUE(d.malformed);
  ASSERT_EQ(d.records.size(), 1u);
  EXPECT_EQ(d.records[0], (ShimRecord{ShimRecordType::kStarted, 42}));
  EXPECT_EQ(d.consumed, kShimRecordBytes);
}

TEST(ShimProtocol, NonZeroPaddingIsMalformed) {
  std::string bytes = encode({ShimRecord{ShimRecordType::kMainExited, 0}});
  bytes[5] = 1;
  auto d = decodeShimRecords(bytes);
  EXPECT_TRUE(d.malformed);
  EXPECT_TRUE(d.records.empty());
}

TEST(ShimProtocol, TheTypeAfterTheLastIsMalformed) {
  std::string bytes = encode({ShimRecord{ShimRecordType::kKilling, 0}});
  auto d = decodeShimRecords(bytes);
  ASSERT_FALSE(d.malformed);
  ASSERT_EQ(d.records.size(), 1u);
  bytes[0] = static_cast<char>(static_cast<int>(ShimRecordType::kKilling) + 1);
  EXPECT_TRUE(decodeShimRecords(bytes).malformed);
}

TEST(ShimProtocol, ZeroTypeIsMalformed) {
  auto d = decodeShimRecords(std::string(kShimRecordBytes, '\0'));
  EXPECT_TRUE(d.malformed);
}

RC_GTEST_PROP(ShimProtocol, ResizeRecordsDecodeToThemselves,
              (std::uint16_t rows, std::uint16_t columns)) {
  char buf[kResizeRecordBytes];
  encodeTerminalResize(TerminalResize{rows, columns}, buf);
  RC_ASSERT(decodeTerminalResize(buf) == (TerminalResize{rows, columns}));
}

TEST(ShimProtocol, AResizeRecordIsRowsThenColumnsLittleEndian) {
  char buf[kResizeRecordBytes];
  encodeTerminalResize(TerminalResize{0x0102, 0x0304}, buf);
  EXPECT_EQ(std::string(buf, sizeof buf), std::string("\x02\x01\x04\x03", 4));
}

}  // namespace
}  // namespace airlock::oci
