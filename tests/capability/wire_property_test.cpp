// Properties of the wire codec (docs/wire.md): encode then decode is the
// identity on values and frames; the encoding is canonical; any chunking of a
// stream gives the same events; a prefix of a stream never faults; and no
// byte string makes the decoder misbehave.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <bit>
#include <set>

#include "airlock/capability/wire/frame.h"
#include "airlock/capability/wire/msgpack.h"
#include "wire_vectors.h"

namespace airlock::capability::wire {
namespace {

void appendUtf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Well-formed UTF-8 mixing ASCII with 2-, 3- and 4-byte sequences.
rc::Gen<std::string> genUtf8() {
  const auto code_point = rc::gen::weightedOneOf<std::uint32_t>({
      {6, rc::gen::inRange<std::uint32_t>(0, 0x80)},
      {1, rc::gen::inRange<std::uint32_t>(0x80, 0x800)},
      {1, rc::gen::inRange<std::uint32_t>(0x800, 0xD800)},
      {1, rc::gen::inRange<std::uint32_t>(0xE000, 0x10000)},
      {1, rc::gen::inRange<std::uint32_t>(0x10000, 0x110000)},
  });
  return rc::gen::map(rc::gen::container<std::vector<std::uint32_t>>(code_point),
                      [](const std::vector<std::uint32_t>& cps) {
                        std::string s;
                        for (auto cp : cps) appendUtf8(s, cp);
                        return s;
                      });
}

rc::Gen<Value> genScalar() {
  return rc::gen::oneOf(
      rc::gen::just(Value()), rc::gen::map(rc::gen::arbitrary<bool>(), &Value::boolean),
      rc::gen::map(rc::gen::arbitrary<std::int64_t>(), &Value::integer),
      rc::gen::map(rc::gen::arbitrary<std::uint64_t>(), &Value::unsignedInteger),
      // Any bit pattern, NaNs and infinities included.
      rc::gen::map(rc::gen::arbitrary<std::uint64_t>(),
                   [](std::uint64_t bits) { return Value::floating(std::bit_cast<double>(bits)); }),
      rc::gen::map(genUtf8(), &Value::string),
      rc::gen::map(rc::gen::arbitrary<std::string>(), &Value::bytes));
}

Map uniqueKeys(std::vector<std::pair<std::string, Value>> entries) {
  Map out;
  std::set<std::string> seen;
  for (auto& [k, v] : entries) {
    if (seen.insert(k).second) out.emplace_back(std::move(k), std::move(v));
  }
  return out;
}

rc::Gen<Value> genValue(int depth) {
  if (depth <= 0) return genScalar();
  const auto child = rc::gen::lazy([depth] { return genValue(depth - 1); });
  return rc::gen::weightedOneOf<Value>({
      {4, genScalar()},
      {1, rc::gen::map(rc::gen::resize(8, rc::gen::container<Array>(child)), &Value::array)},
      {1, rc::gen::map(
              rc::gen::resize(8, rc::gen::container<std::vector<std::pair<std::string, Value>>>(
                                     rc::gen::pair(genUtf8(), child))),
              [](auto entries) { return Value::map(uniqueKeys(std::move(entries))); })},
  });
}

rc::Gen<Answer> genAnswer() {
  return rc::gen::oneOf(rc::gen::cast<Answer>(genValue(3)),
                        rc::gen::map(rc::gen::pair(genUtf8(), genUtf8()), [](auto p) {
                          return Answer(Refusal{std::move(p.first), std::move(p.second)});
                        }));
}

rc::Gen<Body> genBody() {
  const auto token = rc::gen::arbitrary<std::string>();
  const auto deadline = rc::gen::arbitrary<std::uint64_t>();
  return rc::gen::oneOf(
      rc::gen::map(rc::gen::tuple(token, genUtf8(), genValue(3), deadline),
                   [](auto t) {
                     auto [tok, cap, args, d] = std::move(t);
                     return Body(CapCall{std::move(tok), std::move(cap), std::move(args), d});
                   }),
      rc::gen::map(genAnswer(), [](Answer a) { return Body(CapResult{std::move(a)}); }),
      rc::gen::just(Body(Cancel{})),
      rc::gen::map(genValue(3), [](Value v) { return Body(Outcome{Completed{std::move(v)}}); }),
      rc::gen::map(rc::gen::pair(genUtf8(), genValue(2)),
                   [](auto p) {
                     return Body(Outcome{Errored{std::move(p.first), std::move(p.second)}});
                   }),
      rc::gen::map(rc::gen::tuple(token, genUtf8(), genUtf8(), genValue(3), deadline),
                   [](auto t) {
                     auto [tok, hook, name, args, d] = std::move(t);
                     return Body(HookCall{std::move(tok), std::move(hook), std::move(name),
                                          std::move(args), d});
                   }),
      rc::gen::map(genAnswer(), [](Answer a) { return Body(HookResult{std::move(a)}); }));
}

rc::Gen<Frame> genFrame() {
  return rc::gen::map(rc::gen::pair(rc::gen::arbitrary<std::uint64_t>(), genBody()), [](auto p) {
    return Frame{p.first, std::move(p.second)};
  });
}

std::string encodeOrDie(const Value& v) {
  std::string out;
  const auto ok = encodeValue(v, out);
  RC_ASSERT(ok.has_value());
  return out;
}

// A stream of whole frames: valid ones, plus payloads that are dropped or
// invalid (the channel stays open for both).
std::string streamOf(const std::vector<Frame>& frames, const std::vector<int>& extras) {
  std::string out;
  for (std::size_t i = 0; i < frames.size(); ++i) {
    out += *encodeFrame(frames[i]);
    const int extra = extras.empty() ? 0 : extras[i % extras.size()] % 3;
    Value body = extra == 1 ? Value::map({}) : Value::integer(1);
    std::string payload =
        encodeOrDie(Value::map({{"v", Value::integer(1)},
                                {"id", Value::integer(static_cast<int>(i))},
                                {"kind", Value::string(extra == 1 ? "future" : "cancel")},
                                {"body", std::move(body)}}));
    if (extra == 0) continue;
    const auto n = static_cast<std::uint32_t>(payload.size());
    out += std::string{static_cast<char>(n >> 24), static_cast<char>(n >> 16),
                       static_cast<char>(n >> 8), static_cast<char>(n)};
    out += payload;
  }
  return out;
}

RC_GTEST_PROP(WireProperty, DecodeOfEncodeIsIdentityOnValues, ()) {
  const Value v = *genValue(4);
  const std::string bytes = encodeOrDie(v);
  const auto back = decodeValue(bytes);
  RC_ASSERT(back.has_value());
  RC_ASSERT(*back == v);
}

RC_GTEST_PROP(WireProperty, EncodingIsCanonical, ()) {
  const Value v = *genValue(4);
  const std::string bytes = encodeOrDie(v);
  RC_ASSERT(encodeOrDie(*decodeValue(bytes)) == bytes);
}

RC_GTEST_PROP(WireProperty, DecodeOfEncodeIsIdentityOnFrames, ()) {
  const Frame f = *genFrame();
  const auto payload = encodePayload(f);
  RC_ASSERT(payload.has_value());
  const Decoded d = decodePayload(*payload);
  RC_ASSERT(std::holds_alternative<Frame>(d));
  RC_ASSERT(std::get<Frame>(d) == f);
}

RC_GTEST_PROP(WireProperty, AnyChunkingGivesTheSameEvents, ()) {
  const auto frames = *rc::gen::resize(10, rc::gen::container<std::vector<Frame>>(genFrame()));
  const auto extras = *rc::gen::container<std::vector<int>>(rc::gen::inRange(0, 3));
  const std::string stream = streamOf(frames, extras);
  std::vector<Frame> whole_frames;
  const auto whole = testing::runStream(stream, {}, &whole_frames);
  RC_ASSERT(whole_frames == frames);
  RC_ASSERT(whole.back() == "end");
  const auto sizes = *rc::gen::nonEmpty(
      rc::gen::container<std::vector<std::size_t>>(rc::gen::inRange<std::size_t>(1, 64)));
  std::vector<Frame> chunked_frames;
  RC_ASSERT(testing::runStream(stream, sizes, &chunked_frames) == whole);
  RC_ASSERT(chunked_frames == frames);
}

RC_GTEST_PROP(WireProperty, APrefixOfAStreamNeverFaults, ()) {
  const auto frames = *rc::gen::resize(6, rc::gen::container<std::vector<Frame>>(genFrame()));
  const std::string stream = streamOf(frames, {});
  const auto cut = *rc::gen::inRange<std::size_t>(0, stream.size() + 1);
  const auto whole = testing::runStream(stream, {});
  const auto events = testing::runStream(stream.substr(0, cut), {});
  // Every event before the last is one the whole stream produced, in order.
  RC_ASSERT(events.size() <= whole.size());
  for (std::size_t i = 0; i + 1 < events.size(); ++i) RC_ASSERT(events[i] == whole[i]);
  RC_ASSERT(events.back() == (cut == stream.size() ? "end" : events.back()));
  RC_ASSERT(events.back() == "end" || events.back() == "incomplete");
}

// Arbitrary bytes: total, and whatever decodes as a frame re-encodes to a
// frame that decodes equal (the fuzz target's oracle, here on random input).
RC_GTEST_PROP(WireProperty, ArbitraryPayloadsAreJudgedTotally, (const std::string& payload)) {
  const Decoded d = decodePayload(payload);
  if (const Frame* f = std::get_if<Frame>(&d)) {
    const auto again = encodePayload(*f);
    RC_ASSERT(again.has_value());
    const Decoded d2 = decodePayload(*again);
    RC_ASSERT(std::holds_alternative<Frame>(d2) && std::get<Frame>(d2) == *f);
  }
}

// Corrupting one byte of a valid frame gives a verdict, never a crash, and a
// corrupted stream's events match between whole and byte-wise feeding.
RC_GTEST_PROP(WireProperty, CorruptedStreamsAreJudgedAlikeInAnyChunking, ()) {
  const auto frames = *rc::gen::resize(4, rc::gen::container<std::vector<Frame>>(genFrame()));
  std::string stream = streamOf(frames, {1, 2});
  RC_PRE(!stream.empty());
  const auto at = *rc::gen::inRange<std::size_t>(0, stream.size());
  stream[at] = static_cast<char>(*rc::gen::arbitrary<unsigned char>());
  RC_ASSERT(testing::runStream(stream, {}) == testing::runStream(stream, {1}));
}

}  // namespace
}  // namespace airlock::capability::wire
