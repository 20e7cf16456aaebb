// Runs the wire conformance vectors (tests/data/wire/*.vectors, format in
// docs/wire.md §7) against the C++ FrameDecoder: each vector whole, one byte
// at a time (up to 64 KiB), and in several pseudo-random chunkings; plus the
// canonical re-encoding check. With AIRLOCK_WIRE_CORPUS_OUT=DIR set, writes
// every vector's bytes of at most 4 KiB to DIR (the fuzz seed corpus).
#include "wire_vectors.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

namespace airlock::capability::wire::testing {
namespace {

std::vector<Vector> load(const std::string& name) {
  const std::filesystem::path path = std::filesystem::path(AIRLOCK_WIRE_VECTORS_DIR) / name;
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << "cannot open " << path;
  std::stringstream text;
  text << in.rdbuf();
  std::string error;
  auto vectors = parseVectors(name, text.str(), error);
  EXPECT_EQ(error, "");
  return vectors;
}

void maybeWriteSeed(const Vector& v) {
  const char* dir = std::getenv("AIRLOCK_WIRE_CORPUS_OUT");
  if (dir == nullptr || v.bytes.size() > 4096) return;
  std::ofstream out(std::filesystem::path(dir) / v.name, std::ios::binary);
  out << v.bytes;
}

void checkEvents(const Vector& v, const std::vector<std::string>& actual, const std::string& how) {
  SCOPED_TRACE(v.file + ":" + std::to_string(v.line) + " vector " + v.name + ", fed " + how);
  ASSERT_EQ(actual.size(), v.expected.size()) << [&] {
    std::string all;
    for (const auto& e : actual) all += "\n  " + e.substr(0, 300);
    return "actual events:" + all;
  }();
  for (std::size_t i = 0; i < actual.size(); ++i) {
    EXPECT_TRUE(eventMatches(v.expected[i], actual[i]))
        << "event " << i << "\n  expected: " << v.expected[i]
        << "\n  actual:   " << actual[i].substr(0, 1000);
  }
}

void runVector(const Vector& v) {
  maybeWriteSeed(v);
  ASSERT_FALSE(v.expected.empty()) << v.name << " expects nothing";
  std::vector<Frame> frames;
  checkEvents(v, runStream(v.bytes, {}, &frames), "whole");
  if (v.bytes.size() <= 65536) checkEvents(v, runStream(v.bytes, {1}), "byte by byte");
  std::mt19937 rng(static_cast<unsigned>(std::hash<std::string>{}(v.name)));
  for (int round = 0; round < 3; ++round) {
    std::vector<std::size_t> sizes;
    const std::size_t top = std::max<std::size_t>(2, v.bytes.size() / 3);
    for (int i = 0; i < 16; ++i) sizes.push_back(1 + rng() % top);
    checkEvents(v, runStream(v.bytes, sizes), "in random chunks");
  }
  if (v.canonical) {
    std::string again;
    for (const Frame& f : frames) {
      auto bytes = encodeFrame(f);
      ASSERT_TRUE(bytes) << v.name << ": " << bytes.error().message();
      again += *bytes;
    }
    EXPECT_TRUE(again == v.bytes) << v.name << ": re-encoding differs from the vector's bytes";
  }
}

void runFile(const std::string& name, std::size_t at_least) {
  const auto vectors = load(name);
  EXPECT_GE(vectors.size(), at_least) << name;
  std::set<std::string> names;
  for (const Vector& v : vectors) {
    EXPECT_TRUE(names.insert(v.name).second) << "vector name repeats: " << v.name;
    runVector(v);
  }
}

TEST(WireVectors, Valid) {
  runFile("valid.vectors", 20);
}
TEST(WireVectors, Malformed) {
  runFile("malformed.vectors", 20);
}
TEST(WireVectors, Limits) {
  runFile("limits.vectors", 8);
}

// The set is only useful if it exercises every verdict, every kind and every
// fault name; a vector file losing them fails here rather than silently.
TEST(WireVectors, CoverEveryKindVerdictAndFault) {
  std::set<std::string> seen;
  for (const char* file : {"valid.vectors", "malformed.vectors", "limits.vectors"}) {
    for (const Vector& v : load(file)) {
      for (const std::string& e : v.expected) {
        std::istringstream words(e);
        std::string first, second;
        words >> first >> second;
        seen.insert(first == "frame" || first == "fault" ? first + " " + second : first);
        if (v.canonical) seen.insert("canonical");
      }
    }
  }
  for (const char* want : {"frame cap_call", "frame cap_result", "frame cancel", "frame outcome",
                           "frame hook_call", "frame hook_result", "invalid", "dropped", "end",
                           "incomplete", "canonical", "fault oversized_length", "fault malformed",
                           "fault limit", "fault bad_envelope", "fault unsupported_version"}) {
    EXPECT_TRUE(seen.count(want)) << "no vector expects " << want;
  }
}

}  // namespace
}  // namespace airlock::capability::wire::testing
