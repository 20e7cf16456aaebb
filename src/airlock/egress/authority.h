// The one strict parser for a destination authority `host:port` (against parser differentials:
// numeric IPv4 spellings, userinfo, percent-encoding, NUL, whitespace, odd ports) and the host-name
// canonicalization both enforcement points and the policy loader share.
//
// Accepted grammar (ASCII only):
//   authority = host [ "." ] ":" port
//   host      = label *( "." label )          ; at most 253 characters
//   label     = 1*63( ALPHA / DIGIT / "-" / "_" )
//   port      = %x31-39 *4DIGIT               ; 1..65535, no sign, no leading zero
// Checked in this order, the first failure deciding the reason:
//   1. any NUL, whitespace or other control byte, '%', '@', '\\', DEL:
//      malformed_authority; any byte >= 0x80: non_ascii_host;
//   2. "[...]:port": an IPv6 literal inside the brackets is ip_literal,
//      anything else in brackets is malformed_authority;
//   3. exactly one ':' outside brackets and a canonical port, else
//      malformed_authority;
//   4. labels as above ('*' included) else malformed_authority;
//   5. a host whose last label is all digits or "0x" plus hex digits is an
//      IPv4 literal in some parser's eyes (WHATWG "ends in a number"; glibc
//      inet_aton reads 127.1, 0x7f.1, 2130706433, 017700000001): ip_literal.
// Canonical form: letters lowercased, exactly one trailing dot dropped.
// Never throws; input is untrusted bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tl/expected.hpp>

#include "airlock/egress/reason.h"

namespace airlock::egress {

struct Authority {
  std::string host;  // canonical: lowercase, no trailing dot, never an IP literal
  std::uint16_t port = 0;
  friend bool operator==(const Authority&, const Authority&) = default;
};

struct AuthorityError {
  Reason reason;       // kMalformedAuthority, kNonAsciiHost or kIpLiteral
  std::string detail;  // what is wrong, for logs; may quote the (sanitized) input
};

// `host:port` as in a CONNECT request-target. The port is required.
tl::expected<Authority, AuthorityError> parseAuthority(std::string_view text);

// As parseAuthority, but `host` alone is accepted and gets `default_port`
// (the authority of an http(s) URL or a Host header).
tl::expected<Authority, AuthorityError> parseAuthority(std::string_view text,
                                                       std::uint16_t default_port);

// A host name alone (no port), by the same rules, returned canonical.
tl::expected<std::string, AuthorityError> parseHostName(std::string_view text);

// A decimal port by the rule above; nullopt otherwise.
std::optional<std::uint16_t> parsePort(std::string_view text) noexcept;

// True if `label` (one label, no dots) makes a host an IPv4 literal when it
// is the last label: all digits, or "0x"/"0X" followed by hex digits.
bool isNumericLabel(std::string_view label) noexcept;

// Printable form of untrusted bytes for log details: non-printable and
// non-ASCII bytes as \xNN, at most `max` input bytes.
std::string sanitizeForLog(std::string_view bytes, std::size_t max = 300);

// Printable form of a message built from sanitized parts (a Decision's
// detail, a tunnel error): control and non-ASCII bytes as \xNN, at most
// `max` input bytes; quotes and backslashes are kept, so a user reads
// `host "example.com"` as it was written. (sanitizeForLog is for raw
// untrusted bytes; applied to such a message it would print every quote
// the message meant as \x22.)
std::string printableMessage(std::string_view text, std::size_t max = 300);

}  // namespace airlock::egress
