#include "airlock/service/bearer.h"

#include <openssl/crypto.h>

#include <cstddef>

namespace airlock::service {

std::optional<std::string_view> bearerToken(std::string_view authorization) noexcept {
  constexpr std::string_view kScheme = "bearer";
  if (authorization.size() <= kScheme.size() + 1) return std::nullopt;
  for (std::size_t i = 0; i < kScheme.size(); ++i)
    if ((authorization[i] | 0x20) != kScheme[i]) return std::nullopt;
  if (authorization[kScheme.size()] != ' ') return std::nullopt;
  const std::string_view token = authorization.substr(kScheme.size() + 1);
  for (const char c : token)
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') return std::nullopt;
  return token;
}

bool bearerMatches(std::string_view authorization, std::string_view token) noexcept {
  if (token.empty()) return false;
  const auto given = bearerToken(authorization);
  return given && given->size() == token.size() &&
         CRYPTO_memcmp(given->data(), token.data(), token.size()) == 0;
}

}  // namespace airlock::service
