// Byte-level encodings shared by the JSON layer and error messages: UTF-8
// validation, base64 (RFC 4648, standard alphabet, padded), and quoting of
// untrusted bytes for a message. Pure functions; no allocation beyond the
// returned string.
#pragma once

#include <cstddef>
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

}  // namespace airlock
