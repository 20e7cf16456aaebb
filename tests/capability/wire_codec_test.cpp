// Unit tests of the capability wire: the msgpack value codec, the frame
// envelope and bodies, and the incremental frame decoder (docs/wire.md).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "airlock/capability/wire/frame.h"
#include "airlock/capability/wire/msgpack.h"
#include "airlock/capability/wire/value.h"

namespace airlock::capability::wire {
namespace {

std::string hex(std::string_view text) {
  std::string out;
  int nibbles = 0;
  unsigned value = 0;
  for (char c : text) {
    if (c == ' ') continue;
    value = value * 16 + static_cast<unsigned>(std::isdigit(static_cast<unsigned char>(c))
                                                   ? c - '0'
                                                   : std::tolower(c) - 'a' + 10);
    if (++nibbles == 2) {
      out += static_cast<char>(value);
      nibbles = 0;
      value = 0;
    }
  }
  return out;
}

std::string encoded(const Value& v) {
  std::string out;
  auto ok = encodeValue(v, out);
  EXPECT_TRUE(ok) << ok.error().message();
  return out;
}

ValueProblem problemOf(std::string_view bytes) {
  auto d = decodeValue(bytes);
  EXPECT_FALSE(d) << "decoded although it should not";
  return d ? ValueProblem::kMalformed : d.error().problem;
}

std::string withPrefix(const std::string& payload) {
  const auto n = static_cast<std::uint32_t>(payload.size());
  std::string out{static_cast<char>(n >> 24), static_cast<char>(n >> 16), static_cast<char>(n >> 8),
                  static_cast<char>(n)};
  return out + payload;
}

Value envelope(Value v, Value id, Value kind, Value body) {
  return Value::map({{"v", std::move(v)},
                     {"id", std::move(id)},
                     {"kind", std::move(kind)},
                     {"body", std::move(body)}});
}

Decoded decodeEnvelope(const Value& env) {
  return decodePayload(encoded(env));
}

// Nested arrays, `depth` containers deep, built without recursion.
Value nestedArrays(std::size_t depth) {
  Value v = Value::array({});
  for (std::size_t i = 1; i < depth; ++i) v = Value::array({std::move(v)});
  return v;
}

Frame sampleCall() {
  return Frame{7, CapCall{"tok", "proc.run",
                          Value::map({{"argv", Value::array({Value::string("ls")})}}), 5000}};
}

// ------------------------------------------------------------------ values

TEST(WireValue, NonNegativeIntegersHaveOneRepresentation) {
  EXPECT_EQ(Value::integer(5), Value::unsignedInteger(5));
  EXPECT_EQ(Value::integer(-1).asSigned(), -1);
  EXPECT_FALSE(Value::integer(-1).asUnsigned());
  EXPECT_EQ(Value::unsignedInteger(std::numeric_limits<std::uint64_t>::max()).asSigned(),
            std::nullopt);
  EXPECT_NE(Value::integer(1), Value::floating(1.0));
}

TEST(WireValue, FloatsCompareByBitPattern) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(Value::floating(nan), Value::floating(nan));
  EXPECT_NE(Value::floating(0.0), Value::floating(-0.0));
}

TEST(WireValue, AccessorsDoNotCoerce) {
  EXPECT_EQ(Value::string("x").asBytes(), nullptr);
  EXPECT_EQ(Value::bytes("x").asString(), nullptr);
  EXPECT_FALSE(Value::floating(2.0).asUnsigned());
  EXPECT_FALSE(Value::integer(2).asFloat());
  const Value m = Value::map({{"a", Value::integer(1)}});
  ASSERT_NE(m.find("a"), nullptr);
  EXPECT_EQ(*m.find("a"), Value::integer(1));
  EXPECT_EQ(m.find("b"), nullptr);
  EXPECT_EQ(Value::integer(1).find("a"), nullptr);
}

// ------------------------------------------------------------------ msgpack

TEST(WireMsgpack, EncodesTheShortestForms) {
  EXPECT_EQ(encoded(Value()), hex("c0"));
  EXPECT_EQ(encoded(Value::boolean(true)), hex("c3"));
  EXPECT_EQ(encoded(Value::integer(127)), hex("7f"));
  EXPECT_EQ(encoded(Value::integer(128)), hex("cc80"));
  EXPECT_EQ(encoded(Value::integer(-32)), hex("e0"));
  EXPECT_EQ(encoded(Value::integer(-33)), hex("d0df"));
  EXPECT_EQ(encoded(Value::unsignedInteger(1ull << 32)), hex("cf 0000000100000000"));
  EXPECT_EQ(encoded(Value::floating(1.5)), hex("cb 3ff8000000000000"));
  EXPECT_EQ(encoded(Value::string("hi")), hex("a26869"));
  EXPECT_EQ(encoded(Value::string(std::string(32, 'a'))), hex("d920") + std::string(32, 'a'));
  EXPECT_EQ(encoded(Value::bytes("hi")), hex("c4026869"));
  EXPECT_EQ(encoded(Value::array({Value::integer(1)})), hex("9101"));
  EXPECT_EQ(encoded(Value::map({{"a", Value()}})), hex("81a161c0"));
}

TEST(WireMsgpack, DecodesEveryTypeOfTheSubset) {
  EXPECT_EQ(decodeValue(hex("c0")), Value());
  EXPECT_EQ(decodeValue(hex("c2")), Value::boolean(false));
  EXPECT_EQ(decodeValue(hex("cd0100")), Value::integer(256));
  EXPECT_EQ(decodeValue(hex("d3 8000000000000000")),
            Value::integer(std::numeric_limits<std::int64_t>::min()));
  EXPECT_EQ(decodeValue(hex("ca 3fc00000")), Value::floating(1.5));  // float32 widened
  EXPECT_EQ(decodeValue(hex("c50002 6869")), Value::bytes("hi"));
  EXPECT_EQ(decodeValue(hex("dc0001 c0")), Value::array({Value()}));
  EXPECT_EQ(decodeValue(hex("de0001 a161 01")), Value::map({{"a", Value::integer(1)}}));
}

TEST(WireMsgpack, SignedFamilyCarryingAPositiveNumberIsThatNumber) {
  EXPECT_EQ(decodeValue(hex("d005")), Value::unsignedInteger(5));
  EXPECT_EQ(decodeValue(hex("d3 7fffffffffffffff")),
            Value::unsignedInteger(std::numeric_limits<std::int64_t>::max()));
}

TEST(WireMsgpack, RefusesBytesOutsideTheSubset) {
  EXPECT_EQ(problemOf(""), ValueProblem::kMalformed);
  EXPECT_EQ(problemOf(hex("c1")), ValueProblem::kMalformed);
  EXPECT_EQ(problemOf(hex("d4 01 00")), ValueProblem::kMalformed);            // fixext1
  EXPECT_EQ(problemOf(hex("c7 01 05 00")), ValueProblem::kMalformed);         // ext8
  EXPECT_EQ(problemOf(hex("81 01 c0")), ValueProblem::kMalformed);            // integer key
  EXPECT_EQ(problemOf(hex("a2 c3 28")), ValueProblem::kMalformed);            // not UTF-8
  EXPECT_EQ(problemOf(hex("a3 eda080")), ValueProblem::kMalformed);           // surrogate
  EXPECT_EQ(problemOf(hex("82 a161 01 a161 02")), ValueProblem::kMalformed);  // repeated key
  EXPECT_EQ(problemOf(hex("c0 c0")), ValueProblem::kMalformed);               // trailing byte
}

TEST(WireMsgpack, RefusesTruncationAnywhere) {
  const std::string whole = encoded(
      Value::map({{"k", Value::array({Value::integer(300), Value::string("abc"), Value::bytes("xy"),
                                      Value::floating(2.5), Value::integer(-70000)})}}));
  for (std::size_t n = 0; n < whole.size(); ++n) {
    EXPECT_EQ(problemOf(whole.substr(0, n)), ValueProblem::kMalformed) << "prefix " << n;
  }
  EXPECT_TRUE(decodeValue(whole));
}

TEST(WireMsgpack, HugeDeclaredCountsAreRefusedBeforeAllocating) {
  // msgpuck's own mp_check() would accept a map32 of 2^31 pairs as empty.
  EXPECT_EQ(problemOf(hex("df 80000000")), ValueProblem::kMalformed);
  EXPECT_EQ(problemOf(hex("dd ffffffff c0 c0")), ValueProblem::kMalformed);
  EXPECT_EQ(problemOf(hex("db ffffffff 61")), ValueProblem::kMalformed);
  EXPECT_EQ(problemOf(hex("c6 ffffffff 61")), ValueProblem::kMalformed);
}

TEST(WireMsgpack, RepeatedKeyInALargeMapIsFound) {
  Map m;
  for (int i = 0; i < 40; ++i) m.emplace_back("k" + std::to_string(i), Value::integer(i));
  std::string bytes = encoded(Value::map(m));
  // Rename the last key (k39) to k38.
  const auto at = bytes.rfind("k39");
  ASSERT_NE(at, std::string::npos);
  bytes[at + 2] = '8';
  EXPECT_EQ(problemOf(bytes), ValueProblem::kMalformed);
}

TEST(WireMsgpack, NestingStopsAtTheDepthLimit) {
  EXPECT_TRUE(decodeValue(encoded(nestedArrays(kWireLimits.max_depth))));
  std::string deeper(kWireLimits.max_depth + 1, static_cast<char>(0x91));
  deeper += static_cast<char>(0x90);  // innermost: an empty array
  EXPECT_EQ(problemOf(deeper), ValueProblem::kLimit);
  // Far deeper than any stack would allow if the decoder recursed blindly.
  std::string hostile(1 << 20, static_cast<char>(0x91));
  EXPECT_EQ(problemOf(hostile), ValueProblem::kLimit);
  std::string out;
  EXPECT_FALSE(encodeValue(nestedArrays(kWireLimits.max_depth + 1), out));
}

TEST(WireMsgpack, ValueCountStopsAtTheLimit) {
  const std::size_t children = kWireLimits.max_values - 1;  // plus the array itself
  std::string ok =
      hex("dd") + std::string{static_cast<char>(children >> 24), static_cast<char>(children >> 16),
                              static_cast<char>(children >> 8), static_cast<char>(children)};
  ok += std::string(children, static_cast<char>(0xc0));
  EXPECT_TRUE(decodeValue(ok));
  const std::size_t over = children + 1;
  std::string too_many =
      hex("dd") + std::string{static_cast<char>(over >> 24), static_cast<char>(over >> 16),
                              static_cast<char>(over >> 8), static_cast<char>(over)};
  too_many += std::string(over, static_cast<char>(0xc0));
  EXPECT_EQ(problemOf(too_many), ValueProblem::kLimit);
  // A map's keys count: 131072 pairs plus the map is one value too many.
  std::string out;
  Map m;
  for (std::size_t i = 0; i < kWireLimits.max_values / 2; ++i) {
    m.emplace_back(std::to_string(i), Value());
  }
  EXPECT_FALSE(encodeValue(Value::map(std::move(m)), out));
}

TEST(WireMsgpack, EncoderRefusesWhatTheDecoderWould) {
  std::string out;
  EXPECT_FALSE(encodeValue(Value::string(hex("ff")), out));
  EXPECT_FALSE(encodeValue(Value::map({{"a", Value()}, {"a", Value()}}), out));
  EXPECT_FALSE(encodeValue(Value::map({{hex("c328"), Value()}}), out));
}

// ------------------------------------------------------------------ frames

TEST(WireFrame, CapCallHasTheDocumentedBytes) {
  auto bytes = encodeFrame(sampleCall());
  ASSERT_TRUE(bytes) << bytes.error().message();
  const std::string payload = hex("84 a176 01 a26964 07 a46b696e64 a8") + "cap_call" + hex("a4") +
                              "body" + hex("84 a5") + "token" + hex("c403") + "tok" + hex("a3") +
                              "cap" + hex("a8") + "proc.run" + hex("a4") + "args" + hex("81 a4") +
                              "argv" + hex("91 a2") + "ls" + hex("ab") + "deadline_ms" +
                              hex("cd1388");
  EXPECT_EQ(*bytes, withPrefix(payload));
}

TEST(WireFrame, EveryKindRoundTrips) {
  const std::vector<Frame> frames = {
      sampleCall(),
      Frame{7, CapResult{Value::map({{"exit_code", Value::integer(0)}})}},
      Frame{8, CapResult{Refusal{"deadline_exceeded", "the call's deadline passed"}}},
      Frame{9, Cancel{}},
      Frame{0, Outcome{Completed{Value::array({Value::integer(1), Value::floating(0.5)})}}},
      Frame{0, Outcome{Errored{"boom", Value::map({{"line", Value::integer(3)}})}}},
      Frame{0, Outcome{Errored{"no details", Value()}}},
      Frame{12, HookCall{std::string("\0\xff", 2), "tool", "lint", Value(), 30000}},
      Frame{12, HookResult{Value::string("done")}},
      Frame{13, HookResult{Refusal{"busy", "an invocation is open"}}},
  };
  for (const Frame& f : frames) {
    auto payload = encodePayload(f);
    ASSERT_TRUE(payload) << payload.error().message();
    const Decoded d = decodePayload(*payload);
    ASSERT_TRUE(std::holds_alternative<Frame>(d)) << kindName(f.kind());
    EXPECT_EQ(std::get<Frame>(d), f) << kindName(f.kind());
  }
}

TEST(WireFrame, EnvelopeDefectsAreFaults) {
  auto faultOf = [](const Decoded& d) {
    EXPECT_TRUE(std::holds_alternative<Fault>(d));
    return std::holds_alternative<Fault>(d) ? std::get<Fault>(d).kind : FaultKind::kMalformed;
  };
  const Value body = Value::map({});
  const Value one = Value::integer(1);
  const Value cancel = Value::string("cancel");
  EXPECT_EQ(faultOf(decodePayload("")), FaultKind::kMalformed);
  EXPECT_EQ(faultOf(decodeEnvelope(Value::array({}))), FaultKind::kBadEnvelope);
  EXPECT_EQ(faultOf(decodeEnvelope(Value::map({{"id", one}, {"kind", cancel}, {"body", body}}))),
            FaultKind::kBadEnvelope);
  EXPECT_EQ(faultOf(decodeEnvelope(envelope(Value::string("1"), one, cancel, body))),
            FaultKind::kBadEnvelope);
  EXPECT_EQ(faultOf(decodeEnvelope(envelope(Value::integer(2), one, cancel, body))),
            FaultKind::kUnsupportedVersion);
  EXPECT_EQ(faultOf(decodeEnvelope(envelope(Value::integer(-1), one, cancel, body))),
            FaultKind::kUnsupportedVersion);
  // The version is judged first: v 2 with nothing else is still "unsupported".
  EXPECT_EQ(faultOf(decodeEnvelope(Value::map({{"v", Value::integer(2)}}))),
            FaultKind::kUnsupportedVersion);
  EXPECT_EQ(faultOf(decodeEnvelope(envelope(one, Value::integer(-3), cancel, body))),
            FaultKind::kBadEnvelope);
  EXPECT_EQ(faultOf(decodeEnvelope(envelope(one, one, Value::bytes("cancel"), body))),
            FaultKind::kBadEnvelope);
  EXPECT_EQ(faultOf(decodeEnvelope(Value::map({{"v", one}, {"id", one}, {"kind", cancel}}))),
            FaultKind::kBadEnvelope);
}

TEST(WireFrame, UnknownKindIsDroppedWithItsId) {
  const Decoded d = decodeEnvelope(envelope(Value::integer(1), Value::integer(44),
                                            Value::string("telemetry"), Value::integer(5)));
  ASSERT_TRUE(std::holds_alternative<Dropped>(d));
  EXPECT_EQ(std::get<Dropped>(d), (Dropped{44, "telemetry"}));
}

TEST(WireFrame, WrongBodyShapeIsInvalidAndNamesTheField) {
  auto invalid = [](std::string_view kind, Value body) {
    const Decoded d = decodeEnvelope(envelope(Value::integer(1), Value::integer(3),
                                              Value::string(std::string(kind)), std::move(body)));
    EXPECT_TRUE(std::holds_alternative<Invalid>(d)) << kind;
    return std::holds_alternative<Invalid>(d) ? std::get<Invalid>(d) : Invalid{};
  };
  const Value tok = Value::bytes("t");
  Invalid i = invalid("cap_call", Value::map({{"token", Value::string("t")},
                                              {"cap", Value::string("fs.read")},
                                              {"args", Value()},
                                              {"deadline_ms", Value::integer(1)}}));
  EXPECT_EQ(i.id, 3u);
  EXPECT_EQ(i.kind, Kind::kCapCall);
  EXPECT_EQ(i.reason, "body.token must be bytes (msgpack bin)");
  i = invalid("cap_call", Value::map({{"token", tok},
                                      {"cap", Value::string("fs.read")},
                                      {"deadline_ms", Value::integer(1)}}));
  EXPECT_EQ(i.reason, "body.args is missing");
  i = invalid("cap_call", Value::map({{"token", tok},
                                      {"cap", Value::string("fs.read")},
                                      {"args", Value()},
                                      {"deadline_ms", Value::integer(-1)}}));
  EXPECT_EQ(i.reason, "body.deadline_ms must be a non-negative integer");
  i = invalid("cap_result", Value::map({{"ok", Value()}, {"error", Value()}}));
  EXPECT_EQ(i.reason, "body must hold exactly one of ok, error");
  i = invalid("hook_result", Value::map({{"error", Value::map({{"code", Value::string("x")}})}}));
  EXPECT_EQ(i.reason, "body.error.message is missing");
  i = invalid("outcome", Value::map({}));
  EXPECT_EQ(i.reason, "body must hold exactly one of completed, errored");
  i = invalid("outcome", Value::map({{"errored", Value::map({{"message", Value::integer(1)}})}}));
  EXPECT_EQ(i.reason, "body.errored.message must be a string");
  i = invalid("cancel", Value());
  EXPECT_EQ(i.reason, "body must be a map");
  i = invalid("hook_call", Value::map({{"token", tok}}));
  EXPECT_EQ(i.reason, "body.hook is missing");
}

TEST(WireFrame, UnknownKeysAreIgnoredAndIntegerFamiliesAccepted) {
  // id carried as int8 (d0 05) and an extra envelope key and body key.
  const std::string payload = hex("85 a176 01 a26964 d005 a46b696e64 a6") + "cancel" + hex("a4") +
                              "body" + hex("81 a1 78 c0") + hex("a5") + "extra" + hex("c3");
  const Decoded d = decodePayload(payload);
  ASSERT_TRUE(std::holds_alternative<Frame>(d));
  EXPECT_EQ(std::get<Frame>(d), (Frame{5, Cancel{}}));
}

TEST(WireFrame, EncoderRefusesPayloadsOverTheCap) {
  Frame f = sampleCall();
  std::get<CapCall>(f.body).args = Value::bytes(std::string(kMaxPayloadBytes, 'x'));
  auto r = encodeFrame(f);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().context.find("exceeds"), std::string::npos);
  std::get<CapCall>(f.body).capability = hex("ff");
  std::get<CapCall>(f.body).args = Value();
  EXPECT_FALSE(encodeFrame(f));
}

TEST(WireFrame, PayloadExactlyAtTheCapIsAccepted) {
  Frame f = sampleCall();
  auto base = encodePayload(f);
  ASSERT_TRUE(base);
  // args goes from a 16-byte map to bin32 (5 header bytes) of n bytes.
  const std::size_t args_now = encoded(std::get<CapCall>(f.body).args).size();
  const std::size_t n = kMaxPayloadBytes - (base->size() - args_now) - 5;
  std::get<CapCall>(f.body).args = Value::bytes(std::string(n, 'x'));
  auto bytes = encodeFrame(f);
  ASSERT_TRUE(bytes) << bytes.error().message();
  EXPECT_EQ(bytes->size(), kLengthPrefixBytes + kMaxPayloadBytes);
  FrameDecoder dec;
  dec.feed(*bytes);
  auto e = dec.next();
  ASSERT_TRUE(std::holds_alternative<Frame>(e));
  EXPECT_EQ(std::get<Frame>(e), f);
}

// ------------------------------------------------------------------ decoder

TEST(WireDecoder, OversizedLengthFaultsBeforeThePayloadArrives) {
  FrameDecoder dec;
  dec.feed(hex("01 00 00"));
  EXPECT_TRUE(std::holds_alternative<FrameDecoder::NeedMore>(dec.next()));
  dec.feed(hex("01"));  // 16 MiB + 1
  auto e = dec.next();
  ASSERT_TRUE(std::holds_alternative<Fault>(e));
  EXPECT_EQ(std::get<Fault>(e).kind, FaultKind::kOversizedLength);
  EXPECT_TRUE(dec.faulted());
  EXPECT_FALSE(dec.hasPartialFrame());
}

TEST(WireDecoder, AFaultIsFinal) {
  FrameDecoder dec;
  dec.feed(withPrefix(hex("c1")));
  const auto first = dec.next();
  ASSERT_TRUE(std::holds_alternative<Fault>(first));
  EXPECT_EQ(std::get<Fault>(first).kind, FaultKind::kMalformed);
  dec.feed(*encodeFrame(sampleCall()));
  EXPECT_EQ(dec.next(), first);
  EXPECT_EQ(dec.next(), first);
}

TEST(WireDecoder, ContinuesAfterDroppedAndInvalidFrames) {
  const std::string unknown = withPrefix(encoded(
      envelope(Value::integer(1), Value::integer(2), Value::string("later_kind"), Value::map({}))));
  const std::string bad = withPrefix(encoded(
      envelope(Value::integer(1), Value::integer(3), Value::string("cap_result"), Value())));
  const std::string good = *encodeFrame(sampleCall());
  FrameDecoder dec;
  dec.feed(unknown + bad + good);
  EXPECT_EQ(dec.next(), FrameDecoder::Event(Dropped{2, "later_kind"}));
  EXPECT_EQ(dec.next(), FrameDecoder::Event(Invalid{3, Kind::kCapResult, "body must be a map"}));
  EXPECT_EQ(dec.next(), FrameDecoder::Event(sampleCall()));
  EXPECT_EQ(dec.next(), FrameDecoder::Event(FrameDecoder::NeedMore{}));
  EXPECT_FALSE(dec.hasPartialFrame());
}

TEST(WireDecoder, ByteAtATimeGivesTheSameFrames) {
  const std::string first = *encodeFrame(sampleCall());
  const std::string stream = first + *encodeFrame(Frame{7, Cancel{}});
  FrameDecoder dec;
  std::vector<FrameDecoder::Event> events;
  for (std::size_t i = 0; i < stream.size(); ++i) {
    dec.feed(std::string_view(stream).substr(i, 1));
    for (auto e = dec.next(); !std::holds_alternative<FrameDecoder::NeedMore>(e); e = dec.next()) {
      events.push_back(std::move(e));
    }
    const bool at_boundary = i + 1 == first.size() || i + 1 == stream.size();
    EXPECT_EQ(dec.hasPartialFrame(), !at_boundary) << "after byte " << i;
  }
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0], FrameDecoder::Event(sampleCall()));
  EXPECT_EQ(events[1], FrameDecoder::Event(Frame{7, Cancel{}}));
  EXPECT_FALSE(dec.hasPartialFrame());
}

TEST(WireDecoder, ZeroLengthFrameIsMalformed) {
  FrameDecoder dec;
  dec.feed(hex("00000000"));
  auto e = dec.next();
  ASSERT_TRUE(std::holds_alternative<Fault>(e));
  EXPECT_EQ(std::get<Fault>(e).kind, FaultKind::kMalformed);
}

}  // namespace
}  // namespace airlock::capability::wire
