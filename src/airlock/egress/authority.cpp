#include "airlock/egress/authority.h"

#include "airlock/core/encoding.h"
#include "airlock/egress/address.h"

namespace airlock::egress {
namespace {

constexpr std::size_t kMaxHostLength = 253;
constexpr std::size_t kMaxLabelLength = 63;

tl::unexpected<AuthorityError> refuse(Reason reason, std::string detail) {
  return tl::unexpected(AuthorityError{reason, std::move(detail)});
}

bool isLabelChar(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

// Step 1: bytes that are never part of a host or port. Returned as a
// refusal before any other parsing so no later stage sees them.
std::optional<AuthorityError> checkBytes(std::string_view text) {
  bool non_ascii = false;
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7f || c == ' ' || c == '%' || c == '@' || c == '\\') {
      return AuthorityError{Reason::kMalformedAuthority,
                            "forbidden byte in authority \"" + sanitizeForLog(text) + "\""};
    }
    if (c >= 0x80) non_ascii = true;
  }
  if (non_ascii) {
    return AuthorityError{Reason::kNonAsciiHost, "non-ASCII authority \"" + sanitizeForLog(text) +
                                                     "\" (names must be ASCII; use Punycode)"};
  }
  return std::nullopt;
}

tl::expected<std::string, AuthorityError> canonicalHost(std::string_view host) {
  if (!host.empty() && host.back() == '.') host.remove_suffix(1);
  if (host.empty()) return refuse(Reason::kMalformedAuthority, "empty host");
  if (host.size() > kMaxHostLength)
    return refuse(Reason::kMalformedAuthority, "host longer than 253 characters");
  std::string out;
  out.reserve(host.size());
  std::size_t label_start = 0;
  for (std::size_t i = 0; i <= host.size(); ++i) {
    if (i == host.size() || host[i] == '.') {
      const std::size_t len = i - label_start;
      if (len == 0)
        return refuse(Reason::kMalformedAuthority,
                      "empty label in host \"" + sanitizeForLog(host) + "\"");
      if (len > kMaxLabelLength)
        return refuse(Reason::kMalformedAuthority, "label longer than 63 characters");
      if (i < host.size()) out.push_back('.');
      label_start = i + 1;
      continue;
    }
    const char c = host[i];
    if (!isLabelChar(c))
      return refuse(Reason::kMalformedAuthority, "character '" + sanitizeForLog({&c, 1}) +
                                                     "' not allowed in host \"" +
                                                     sanitizeForLog(host) + "\"");
    out.push_back(c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c);
  }
  const auto last_dot = out.rfind('.');
  const std::string_view last = last_dot == std::string::npos
                                    ? std::string_view(out)
                                    : std::string_view(out).substr(last_dot + 1);
  if (isNumericLabel(last))
    return refuse(Reason::kIpLiteral, "host \"" + out + "\" is an IPv4 literal");
  return out;
}

tl::expected<Authority, AuthorityError> parse(std::string_view text,
                                              std::optional<std::uint16_t> default_port) {
  if (auto bad = checkBytes(text)) return tl::unexpected(std::move(*bad));
  if (text.empty()) return refuse(Reason::kMalformedAuthority, "empty authority");

  std::string_view host;
  std::string_view port_text;
  bool has_port = false;
  if (text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string_view::npos)
      return refuse(Reason::kMalformedAuthority, "unterminated '[' in authority");
    const std::string_view inner = text.substr(1, close - 1);
    const std::string_view after = text.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':')
        return refuse(Reason::kMalformedAuthority, "garbage after ']' in authority");
      port_text = after.substr(1);
      has_port = true;
    }
    if (inner.find(':') != std::string_view::npos && IpAddress::parse(inner)) {
      if (has_port && !parsePort(port_text))
        return refuse(Reason::kMalformedAuthority, "invalid port");
      return refuse(Reason::kIpLiteral,
                    "IPv6 literal [" + std::string(inner) + "] is never a destination");
    }
    return refuse(Reason::kMalformedAuthority,
                  "brackets are only for IPv6 literals: \"" + sanitizeForLog(text) + "\"");
  }

  const auto colon = text.find(':');
  if (colon == std::string_view::npos) {
    host = text;
  } else {
    if (text.find(':', colon + 1) != std::string_view::npos)
      return refuse(Reason::kMalformedAuthority,
                    "more than one ':' in authority \"" + sanitizeForLog(text) + "\"");
    host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
    has_port = true;
  }

  std::uint16_t port = 0;
  if (has_port) {
    auto p = parsePort(port_text);
    if (!p)
      return refuse(Reason::kMalformedAuthority,
                    "invalid port \"" + sanitizeForLog(port_text) +
                        "\" (1-65535, decimal, no sign or leading zero)");
    port = *p;
  } else if (default_port) {
    port = *default_port;
  } else {
    return refuse(Reason::kMalformedAuthority, "authority has no port");
  }

  auto canonical = canonicalHost(host);
  if (!canonical) return tl::unexpected(std::move(canonical.error()));
  return Authority{std::move(*canonical), port};
}

}  // namespace

tl::expected<Authority, AuthorityError> parseAuthority(std::string_view text) {
  return parse(text, std::nullopt);
}

tl::expected<Authority, AuthorityError> parseAuthority(std::string_view text,
                                                       std::uint16_t default_port) {
  return parse(text, default_port);
}

tl::expected<std::string, AuthorityError> parseHostName(std::string_view text) {
  if (auto bad = checkBytes(text)) return tl::unexpected(std::move(*bad));
  if (!text.empty() && text.front() == '[') {
    const std::string_view inner = text.substr(1, text.size() >= 2 ? text.size() - 2 : 0);
    if (text.back() == ']' && inner.find(':') != std::string_view::npos && IpAddress::parse(inner))
      return refuse(Reason::kIpLiteral, "IPv6 literal is never a destination");
    return refuse(Reason::kMalformedAuthority, "brackets are only for IPv6 literals");
  }
  if (text.find(':') != std::string_view::npos)
    return refuse(Reason::kMalformedAuthority, "':' in host name");
  return canonicalHost(text);
}

std::optional<std::uint16_t> parsePort(std::string_view text) noexcept {
  if (text.empty() || text.size() > 5 || text.front() < '1' || text.front() > '9')
    return std::nullopt;
  std::uint32_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + static_cast<std::uint32_t>(c - '0');
  }
  if (value > 65535) return std::nullopt;
  return static_cast<std::uint16_t>(value);
}

bool isNumericLabel(std::string_view label) noexcept {
  if (label.empty()) return false;
  if (label.size() >= 2 && label[0] == '0' && (label[1] == 'x' || label[1] == 'X')) {
    for (char c : label.substr(2)) {
      if (hexDigitValue(c) < 0) return false;
    }
    return true;
  }
  for (char c : label)
    if (c < '0' || c > '9') return false;
  return true;
}

namespace {

// `text` cut to `max` bytes (then "..."), each byte outside printable ASCII
// or in `escaped` as \xNN.
std::string escapeBytes(std::string_view text, std::size_t max, std::string_view escaped) {
  std::string out;
  const std::string_view kept = text.substr(0, max);
  out.reserve(kept.size());
  for (const char ch : kept) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c < 0x7f && escaped.find(ch) == std::string_view::npos) {
      out.push_back(ch);
    } else {
      out += "\\x";
      appendHexByte(out, c);
    }
  }
  if (text.size() > max) out += "...";
  return out;
}

}  // namespace

std::string sanitizeForLog(std::string_view bytes, std::size_t max) {
  return escapeBytes(bytes, max, "\"\\");
}

std::string printableMessage(std::string_view text, std::size_t max) {
  return escapeBytes(text, max, "");
}

}  // namespace airlock::egress
