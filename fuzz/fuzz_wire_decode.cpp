// The capability wire's decoder (docs/wire.md) on arbitrary bytes: never
// crashes, never throws, never reads out of bounds; the same stream fed whole
// and in small chunks yields the same events; and every frame it accepts
// re-encodes to bytes that decode to the same frame. Seeds: fuzz/corpus/wire
// (the conformance vectors of at most 4 KiB).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "airlock/capability/wire/frame.h"
#include "airlock/capability/wire/msgpack.h"

namespace {

using airlock::capability::wire::FrameDecoder;

std::vector<FrameDecoder::Event> drain(std::string_view bytes, std::size_t chunk) {
  std::vector<FrameDecoder::Event> events;
  FrameDecoder dec;
  for (std::size_t pos = 0; pos < bytes.size(); pos += chunk) {
    dec.feed(bytes.substr(pos, chunk));
    for (;;) {
      auto e = dec.next();
      if (std::holds_alternative<FrameDecoder::NeedMore>(e)) break;
      const bool fault = std::holds_alternative<airlock::capability::wire::Fault>(e);
      events.push_back(std::move(e));
      if (fault) return events;
    }
  }
  return events;
}

void checkReencodes(const airlock::capability::wire::Frame& f) {
  auto bytes = airlock::capability::wire::encodeFrame(f);
  if (!bytes) std::abort();  // a decoded frame must be encodable
  const auto again = drain(*bytes, bytes->size());
  if (again.size() != 1 || !(again[0] == FrameDecoder::Event(f))) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);

  // The stream as the channel sees it, whole and in chunks of 1..16 bytes
  // (the chunk size taken from the input's last byte, so it is fuzzed too).
  const auto whole = drain(bytes, bytes.empty() ? 1 : bytes.size());
  const std::size_t chunk = size == 0 ? 1 : 1 + data[size - 1] % 16;
  if (drain(bytes, chunk) != whole) std::abort();
  for (const auto& e : whole) {
    if (const auto* f = std::get_if<airlock::capability::wire::Frame>(&e)) checkReencodes(*f);
  }

  // The input as one payload, and as one msgpack value.
  const auto d = airlock::capability::wire::decodePayload(bytes);
  if (const auto* f = std::get_if<airlock::capability::wire::Frame>(&d)) checkReencodes(*f);
  if (auto v = airlock::capability::wire::decodeValue(bytes)) {
    std::string out;
    if (!airlock::capability::wire::encodeValue(*v, out)) std::abort();
    auto back = airlock::capability::wire::decodeValue(out);
    if (!back || !(*back == *v)) std::abort();
  }
  return 0;
}
