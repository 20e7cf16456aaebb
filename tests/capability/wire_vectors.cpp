#include "wire_vectors.h"

#include <bit>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <sstream>

namespace airlock::capability::wire::testing {
namespace {

std::string hexOf(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

int hexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Appends the tokens of a `bytes` line; false on a syntax error.
bool appendTokens(std::string_view args, std::string& out) {
  std::size_t i = 0;
  while (i < args.size()) {
    const char c = args[i];
    if (c == ' ') {
      ++i;
    } else if (c == '"') {
      const auto close = args.find('"', i + 1);
      if (close == std::string_view::npos) return false;
      out.append(args.substr(i + 1, close - i - 1));
      i = close + 1;
    } else {
      const int hi = hexDigit(c);
      if (hi < 0 || i + 1 >= args.size()) return false;
      const int lo = hexDigit(args[i + 1]);
      if (lo < 0) return false;
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    }
  }
  return true;
}

std::string renderAnswer(const Answer& a) {
  if (const Value* ok = std::get_if<Value>(&a)) return "ok=" + renderValue(*ok);
  const Refusal& r = std::get<Refusal>(a);
  return "error.code=" + renderString(r.code) + " error.message=" + renderString(r.message);
}

}  // namespace

std::vector<Vector> parseVectors(const std::string& file, std::string_view text,
                                 std::string& error) {
  std::vector<Vector> out;
  std::size_t begin_at = std::string::npos;
  int line_no = 0;
  std::size_t pos = 0;
  auto bad = [&](const std::string& what) {
    error = file + ":" + std::to_string(line_no) + ": " + what;
    return std::vector<Vector>{};
  };
  while (pos <= text.size()) {
    auto nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    const auto space = line.find(' ');
    const std::string_view directive = line.substr(0, space);
    const std::string_view args =
        space == std::string_view::npos ? std::string_view() : line.substr(space + 1);
    if (directive == "vector") {
      if (begin_at != std::string::npos) return bad("begin without end");
      out.push_back(Vector{file, std::string(args), line_no, {}, {}, false});
      continue;
    }
    if (out.empty()) return bad("directive before the first vector");
    Vector& v = out.back();
    if (directive == "bytes") {
      if (!appendTokens(args, v.bytes)) return bad("bad bytes token");
    } else if (directive == "fill") {
      unsigned long count = 0;
      unsigned byte = 0;
      if (std::sscanf(std::string(args).c_str(), "%lu %x", &count, &byte) != 2 || byte > 255) {
        return bad("fill needs a count and a hex byte");
      }
      v.bytes.append(count, static_cast<char>(byte));
    } else if (directive == "begin") {
      if (begin_at != std::string::npos) return bad("nested begin");
      begin_at = v.bytes.size();
    } else if (directive == "end") {
      if (begin_at == std::string::npos) return bad("end without begin");
      const auto n = static_cast<std::uint32_t>(v.bytes.size() - begin_at);
      const std::string prefix{static_cast<char>(n >> 24), static_cast<char>(n >> 16),
                               static_cast<char>(n >> 8), static_cast<char>(n)};
      v.bytes.insert(begin_at, prefix);
      begin_at = std::string::npos;
    } else if (directive == "expect") {
      v.expected.emplace_back(args);
    } else if (directive == "canonical") {
      v.canonical = true;
    } else {
      return bad("unknown directive " + std::string(directive));
    }
  }
  if (begin_at != std::string::npos) return bad("begin without end at end of file");
  return out;
}

std::string renderString(std::string_view s) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out = "\"";
  for (char c : s) {
    const auto b = static_cast<unsigned char>(c);
    if (b >= 0x20 && b <= 0x7e && c != '"' && c != '\\') {
      out += c;
    } else {
      out += "\\x";
      out += kDigits[b >> 4];
      out += kDigits[b & 15];
    }
  }
  return out + "\"";
}

std::string renderValue(const Value& v) {
  switch (v.type()) {
    case Value::Type::kNil:
      return "nil";
    case Value::Type::kBool:
      return *v.asBool() ? "true" : "false";
    case Value::Type::kInteger:
      if (auto u = v.asUnsigned()) return std::to_string(*u);
      return std::to_string(*v.asSigned());
    case Value::Type::kFloat: {
      char buf[24];
      std::snprintf(buf, sizeof buf, "f:%016llx",
                    static_cast<unsigned long long>(std::bit_cast<std::uint64_t>(*v.asFloat())));
      return buf;
    }
    case Value::Type::kString:
      return renderString(*v.asString());
    case Value::Type::kBytes:
      return "b:" + hexOf(*v.asBytes());
    case Value::Type::kArray: {
      std::string out = "[";
      for (const Value& item : *v.asArray()) {
        if (out.size() > 1) out += ',';
        out += renderValue(item);
      }
      return out + "]";
    }
    case Value::Type::kMap: {
      std::string out = "{";
      for (const auto& [key, value] : *v.asMap()) {
        if (out.size() > 1) out += ',';
        out += renderString(key) + ":" + renderValue(value);
      }
      return out + "}";
    }
  }
  return "?";
}

std::string renderFrame(const Frame& f) {
  std::string out = std::string(kindName(f.kind())) + " id=" + std::to_string(f.id);
  std::visit(
      [&out](const auto& b) {
        using T = std::decay_t<decltype(b)>;
        if constexpr (std::is_same_v<T, CapCall>) {
          out += " token=b:" + hexOf(b.token) + " cap=" + renderString(b.capability) +
                 " args=" + renderValue(b.args) + " deadline_ms=" + std::to_string(b.deadline_ms);
        } else if constexpr (std::is_same_v<T, CapResult> || std::is_same_v<T, HookResult>) {
          out += " " + renderAnswer(b.answer);
        } else if constexpr (std::is_same_v<T, Outcome>) {
          if (const auto* c = std::get_if<Completed>(&b.result)) {
            out += " completed=" + renderValue(c->value);
          } else {
            const Errored& e = std::get<Errored>(b.result);
            out += " errored.message=" + renderString(e.message) +
                   " errored.details=" + renderValue(e.details);
          }
        } else if constexpr (std::is_same_v<T, HookCall>) {
          out += " token=b:" + hexOf(b.token) + " hook=" + renderString(b.hook) +
                 " name=" + renderString(b.name) + " args=" + renderValue(b.args) +
                 " deadline_ms=" + std::to_string(b.deadline_ms);
        }
      },
      f.body);
  return out;
}

std::vector<std::string> runStream(std::string_view bytes,
                                   const std::vector<std::size_t>& chunk_sizes,
                                   std::vector<Frame>* frames) {
  std::vector<std::string> events;
  FrameDecoder dec;
  std::size_t pos = 0;
  std::size_t which = 0;
  bool faulted = false;
  while (!faulted && pos < bytes.size()) {
    std::size_t n = chunk_sizes.empty() ? bytes.size() : chunk_sizes[which++ % chunk_sizes.size()];
    if (n == 0) n = 1;
    dec.feed(bytes.substr(pos, n));
    pos += std::min(n, bytes.size() - pos);
    for (;;) {
      auto e = dec.next();
      if (std::holds_alternative<FrameDecoder::NeedMore>(e)) break;
      if (const auto* f = std::get_if<Frame>(&e)) {
        events.push_back("frame " + renderFrame(*f));
        if (frames != nullptr) frames->push_back(*f);
      } else if (const auto* i = std::get_if<Invalid>(&e)) {
        events.push_back("invalid id=" + std::to_string(i->id) +
                         " kind=" + std::string(kindName(i->kind)));
      } else if (const auto* d = std::get_if<Dropped>(&e)) {
        events.push_back("dropped id=" + std::to_string(d->id) + " kind=" + renderString(d->kind));
      } else {
        events.push_back("fault " + std::string(faultKindName(std::get<Fault>(e).kind)));
        faulted = true;
        break;
      }
    }
  }
  if (!faulted) events.push_back(dec.hasPartialFrame() ? "incomplete" : "end");
  return events;
}

bool eventMatches(const std::string& expected, const std::string& actual) {
  constexpr std::string_view kEllipsis = " ...";
  if (expected.size() >= kEllipsis.size() &&
      expected.compare(expected.size() - kEllipsis.size(), kEllipsis.size(), kEllipsis) == 0) {
    const std::string prefix = expected.substr(0, expected.size() - kEllipsis.size());
    return actual.compare(0, prefix.size(), prefix) == 0;
  }
  return expected == actual;
}

}  // namespace airlock::capability::wire::testing
