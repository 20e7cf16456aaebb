// The bearer credential of a request (RFC 6750, "Authorization Request
// Header Field"): the public API's service token and tenant keys, and the
// internal API's service credential, are all read here.
#pragma once

#include <optional>
#include <string_view>

namespace airlock::service {

// The token of an Authorization value "<scheme> SP <token>" whose scheme is
// "Bearer" in any case (RFC 9110, "Authentication Scheme"), and nothing
// else: any other byte around them (CR, LF, HT, a second space: what is left
// of a folded or padded value) makes it nullopt, as does an empty token.
// The view points into `authorization`.
std::optional<std::string_view> bearerToken(std::string_view authorization) noexcept;

// True when `authorization` carries exactly `token` (non-empty), compared
// in constant time for a given length.
bool bearerMatches(std::string_view authorization, std::string_view token) noexcept;

}  // namespace airlock::service
