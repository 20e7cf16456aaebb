// Byte-level encodings shared by the JSON layer and error messages: UTF-8
// validation, base64 (RFC 4648, standard alphabet, padded), quoting of
// untrusted bytes for a message, and hexadecimal (base16, RFC 4648 section
// 8). Pure functions; no allocation beyond the returned string.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "airlock/core/error.h"

namespace airlock {

// Well-formed UTF-8 (RFC 3629): rejects overlong forms, UTF-16 surrogates
// (U+D800..U+DFFF), code points above U+10FFFF, stray continuation bytes and
// truncated sequences. NUL bytes are valid UTF-8.
bool isValidUtf8(std::string_view bytes) noexcept;

// Standard alphabet with '=' padding, no line breaks.
std::string base64Encode(std::string_view bytes);

// Strict: length a multiple of 4, only the standard alphabet, padding only at
// the end, and unused trailing bits zero (so every byte string has exactly one
// encoding). ToolValidationError otherwise.
Result<std::string> base64Decode(std::string_view text);

// `"text"` with quotes, backslashes, control bytes and non-ASCII bytes escaped
// (\n, \t, \xNN), cut to max_bytes of input with "..." appended. For quoting
// untrusted input (a path, a unit string) inside an error message.
std::string quoteForMessage(std::string_view text, std::size_t max_bytes = 80);

// Which bytes appendEscaped escapes besides the control bytes (< 0x20 and
// 0x7F), which it always does.
struct EscapeSet {
  bool backslash = true;      // '\' as \\ (so that escaped text stays unambiguous)
  bool double_quote = false;  // '"' as \"
  bool non_ascii = false;     // bytes >= 0x80 as \xNN (else UTF-8 passes through)
};

// Appends `bytes` to `out` on one line: \n, \t and \r for those control
// bytes, \xNN (lower case) for the other escaped bytes, every other byte
// unchanged. The one escaper behind quoteForMessage and the CLI's
// escapeForTerminal.
void appendEscaped(std::string& out, std::string_view bytes, EscapeSet escape);

// ---- Hexadecimal --------------------------------------------------------------
// The one hex encoder of the project: digests, random tokens and ids, the
// \xNN escapes of untrusted bytes in messages, percent-encoding. Lower case
// unless a caller asks for upper (percent-encoding, RFC 3986 section 2.1,
// recommends upper). Inline, so the CSPRNG (sys/random.h, below core) uses it
// without linking airlock_core: the writers and checks are noexcept and
// allocate nothing; the appending forms allocate only by growing the string
// they are given.

enum class HexCase { kLower, kUpper };

// Writes the two digits of `byte` (high nibble first) at out[0] and out[1].
constexpr void writeHexByte(char* out, unsigned char byte,
                            HexCase letters = HexCase::kLower) noexcept {
  const char* digits = letters == HexCase::kLower ? "0123456789abcdef" : "0123456789ABCDEF";
  out[0] = digits[byte >> 4];
  out[1] = digits[byte & 0x0F];
}

// Writes 2 * bytes.size() lower-case digits from out[0]; out must have room.
constexpr void writeHexLower(char* out, std::span<const unsigned char> bytes) noexcept {
  for (const unsigned char byte : bytes) {
    writeHexByte(out, byte);
    out += 2;
  }
}

// Appends the two digits of `byte`.
inline void appendHexByte(std::string& out, unsigned char byte, HexCase letters = HexCase::kLower) {
  char two[2];
  writeHexByte(two, byte, letters);
  out.append(two, 2);
}

// Appends 2 * bytes.size() lower-case digits.
inline void appendHexLower(std::string& out, std::span<const unsigned char> bytes) {
  const std::size_t at = out.size();
  out.resize(at + 2 * bytes.size());
  writeHexLower(out.data() + at, bytes);
}

// The lower-case digits of `bytes`, 2 * bytes.size() characters.
inline std::string hexLower(std::span<const unsigned char> bytes) {
  std::string out;
  appendHexLower(out, bytes);
  return out;
}

// The same for bytes held as characters (a std::string of raw bytes).
inline std::string hexLower(std::string_view bytes) {
  return hexLower(std::span<const unsigned char>(
      reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size()));
}

// 0-9 or a-f.
constexpr bool isLowerHexDigit(char c) noexcept {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

// Non-empty and every character 0-9 or a-f: the text hexLower writes. Callers
// check the length they expect (64 for a SHA-256 digest) themselves.
constexpr bool isLowerHex(std::string_view text) noexcept {
  if (text.empty()) return false;
  for (const char c : text)
    if (!isLowerHexDigit(c)) return false;
  return true;
}

// The value 0-15 of a digit in either case, or -1 for any other character.
constexpr int hexDigitValue(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace airlock
