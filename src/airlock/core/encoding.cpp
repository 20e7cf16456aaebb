#include "airlock/core/encoding.h"

#include <array>
#include <cstdint>

namespace airlock {

bool isValidUtf8(std::string_view bytes) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const std::size_t n = bytes.size();
  std::size_t i = 0;
  while (i < n) {
    const unsigned char b0 = p[i];
    if (b0 < 0x80) {
      ++i;
      continue;
    }
    // Lead byte decides the length and the allowed range of the second byte;
    // the narrowed ranges are what exclude overlongs, surrogates and
    // code points above U+10FFFF (RFC 3629 section 4 table).
    std::size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
      len = 2;
    } else if (b0 == 0xE0) {
      len = 3, lo = 0xA0;
    } else if ((b0 >= 0xE1 && b0 <= 0xEC) || b0 == 0xEE || b0 == 0xEF) {
      len = 3;
    } else if (b0 == 0xED) {
      len = 3, hi = 0x9F;
    } else if (b0 == 0xF0) {
      len = 4, lo = 0x90;
    } else if (b0 >= 0xF1 && b0 <= 0xF3) {
      len = 4;
    } else if (b0 == 0xF4) {
      len = 4, hi = 0x8F;
    } else {
      return false;  // 0x80..0xC1 and 0xF5..0xFF never lead
    }
    if (n - i < len) return false;
    if (p[i + 1] < lo || p[i + 1] > hi) return false;
    for (std::size_t k = 2; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return false;
    }
    i += len;
  }
  return true;
}

namespace {

constexpr std::string_view kAlphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

constexpr std::array<std::int8_t, 256> makeDecodeTable() {
  std::array<std::int8_t, 256> table{};
  for (auto& v : table) v = -1;
  for (std::size_t i = 0; i < kAlphabet.size(); ++i) {
    table[static_cast<unsigned char>(kAlphabet[i])] = static_cast<std::int8_t>(i);
  }
  return table;
}
constexpr auto kDecode = makeDecodeTable();

}  // namespace

std::string base64Encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  std::size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const std::uint32_t v = (std::uint32_t{p[i]} << 16) | (std::uint32_t{p[i + 1]} << 8) | p[i + 2];
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  const std::size_t rest = bytes.size() - i;
  if (rest == 1) {
    const std::uint32_t v = std::uint32_t{p[i]} << 16;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += "==";
  } else if (rest == 2) {
    const std::uint32_t v = (std::uint32_t{p[i]} << 16) | (std::uint32_t{p[i + 1]} << 8);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

Result<std::string> base64Decode(std::string_view text) {
  if (text.size() % 4 != 0) {
    return fail(
        ErrorCode::kToolValidationError,
        "invalid base64: length " + std::to_string(text.size()) + " is not a multiple of 4");
  }
  std::size_t padding = 0;
  if (!text.empty() && text.back() == '=') padding = (text[text.size() - 2] == '=') ? 2 : 1;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (std::size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    const std::size_t pad_here = last ? padding : 0;
    std::uint32_t v = 0;
    for (std::size_t k = 0; k < 4; ++k) {
      const unsigned char c = static_cast<unsigned char>(text[i + k]);
      if (k >= 4 - pad_here) {
        v <<= 6;
        continue;  // a '=' in its allowed place
      }
      const std::int8_t d = kDecode[c];
      if (d < 0) {
        return fail(ErrorCode::kToolValidationError,
                    "invalid base64: unexpected character at offset " + std::to_string(i + k));
      }
      v = (v << 6) | static_cast<std::uint32_t>(d);
    }
    out += static_cast<char>((v >> 16) & 0xFF);
    if (pad_here < 2) out += static_cast<char>((v >> 8) & 0xFF);
    if (pad_here < 1) out += static_cast<char>(v & 0xFF);
    // Bits that the padding drops must be zero: one encoding per byte string.
    if ((pad_here == 1 && (v & 0xFF) != 0) || (pad_here == 2 && (v & 0xFFFF) != 0)) {
      return fail(ErrorCode::kToolValidationError, "invalid base64: non-zero padding bits");
    }
  }
  return out;
}

void appendEscaped(std::string& out, std::string_view bytes, EscapeSet escape) {
  for (const char ch : bytes) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\\':
        out += escape.backslash ? "\\\\" : "\\";
        break;
      case '"':
        out += escape.double_quote ? "\\\"" : "\"";
        break;
      default:
        if (c < 0x20 || c == 0x7F || (c > 0x7F && escape.non_ascii)) {
          out += "\\x";
          appendHexByte(out, c);
        } else {
          out += ch;
        }
    }
  }
}

std::string quoteForMessage(std::string_view text, std::size_t max_bytes) {
  const bool cut = text.size() > max_bytes;
  if (cut) text = text.substr(0, max_bytes);
  std::string out = "\"";
  appendEscaped(out, text, {.backslash = true, .double_quote = true, .non_ascii = true});
  out += '"';
  if (cut) out += "...";
  return out;
}

}  // namespace airlock
