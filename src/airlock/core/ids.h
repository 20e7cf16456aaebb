// Platform-generated identifiers.
#pragma once

#include <string>
#include <string_view>

#include "airlock/core/types.h"

namespace airlock {

// RFC 9562 UUIDv7 in canonical lowercase form (36 chars): 48-bit big-endian
// Unix milliseconds from `now` (times before 1970 are written as 0), version
// 7, variant 10, and 74 random bits from getrandom(2). Aborts only if the
// kernel has no CSPRNG at all (a guessable id is worse than no id).
std::string newUuidV7(Timestamp now);

// Canonical form only: 8-4-4-4-12 lowercase hex digits with hyphens. Any
// version and variant; uppercase is refused so that one id has one spelling
// (ids become storage-key components).
bool isUuid(std::string_view text) noexcept;

// The most bytes of a platform identifier.
inline constexpr std::size_t kMaxPlatformIdBytes = 128;

// A platform identifier (a tenant, a run, an execution the caller names):
// 1 to kMaxPlatformIdBytes bytes of A-Z a-z 0-9 . _ : - (so that it can
// stand in a URL path, a log line and a storage key as it is).
bool isPlatformIdentifier(std::string_view text) noexcept;

}  // namespace airlock
