// Platform-generated identifiers.
#pragma once

#include <string>

#include "airlock/core/types.h"

namespace airlock {

// RFC 9562 UUIDv7 in canonical lowercase form (36 chars). The timestamp is
// taken from `now`; 74 random bits come from the OS CSPRNG.
std::string newUuidV7(Timestamp now);
bool isUuid(std::string_view text) noexcept;

}  // namespace airlock
