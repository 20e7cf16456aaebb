// Test support: the conformance vector format of docs/wire.md §7 (parser,
// rendering of frames and values, and a runner that feeds a vector's bytes
// to a FrameDecoder in given chunks and lists the events as text).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/capability/wire/frame.h"

namespace airlock::capability::wire::testing {

struct Vector {
  std::string file;
  std::string name;
  int line = 0;  // of the `vector` directive
  std::string bytes;
  std::vector<std::string> expected;  // "frame ...", "fault malformed", "end", ...
  bool canonical = false;
};

// Parses one .vectors file; a syntax error is reported as a failed
// expectation naming the line (returned in `error`).
std::vector<Vector> parseVectors(const std::string& file, std::string_view text,
                                 std::string& error);

std::string renderValue(const Value& v);
std::string renderString(std::string_view s);
std::string renderFrame(const Frame& f);

// Feeds `bytes` to a fresh FrameDecoder in chunks whose sizes are given by
// `chunk_sizes` cyclically (empty: all at once) and returns the events as
// vector text: "frame <rendering>", "invalid id=N kind=K",
// "dropped id=N kind=S", "fault NAME", then "end" or "incomplete" unless a
// fault ended the stream. `frames` receives the decoded frames.
std::vector<std::string> runStream(std::string_view bytes,
                                   const std::vector<std::size_t>& chunk_sizes,
                                   std::vector<Frame>* frames = nullptr);

// True when `actual` matches the expectation `expected` (the " ..." prefix
// rule of docs/wire.md §7).
bool eventMatches(const std::string& expected, const std::string& actual);

}  // namespace airlock::capability::wire::testing
