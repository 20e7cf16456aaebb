// Platform-generated identifiers.
#pragma once

#include <optional>
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

// An environment id (EnvironmentHandle::environment_id) that names the
// execution node holding it, so that a gateway can route a call to it:
// "<node>.<UUIDv7>", or the bare UUIDv7 when `node` is empty (one node). The
// id stays opaque to everyone else.
std::string newEnvironmentId(std::string_view node, Timestamp now);
// The node an environment id names ("" for a bare UUIDv7); nullopt when
// `id` is not an environment id of either form.
std::optional<std::string_view> environmentIdNode(std::string_view id) noexcept;
// A node name: 1-63 bytes of a-z 0-9 and "-", not starting or ending with
// "-" (a DNS label, so a node can be named by its host).
bool isNodeName(std::string_view name) noexcept;

// The most bytes of a platform identifier.
inline constexpr std::size_t kMaxPlatformIdBytes = 128;

// A platform identifier (a tenant, a run, an execution the caller names):
// 1 to kMaxPlatformIdBytes bytes of A-Z a-z 0-9 . _ : - (so that it can
// stand in a URL path, a log line and a storage key as it is).
bool isPlatformIdentifier(std::string_view text) noexcept;

}  // namespace airlock
