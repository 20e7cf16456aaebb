// The spelling of a closed vocabulary (KillReason "TIMEOUT", ArtifactOrigin
// "SANDBOX_EXPORT", ...): one table per enum, each enumerator with its one
// name, read both ways by the two functions below. Header-only, no
// allocation.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>
#include <utility>

namespace airlock {

template <class E, std::size_t N>
using EnumNames = std::array<std::pair<E, std::string_view>, N>;

// The name of `value`; `fallback` for a value the table lacks (an
// out-of-range cast: a programming error, still given a stable name, which
// a vocabulary may spell its own way: "unknown").
template <class E, std::size_t N>
constexpr std::string_view enumName(const EnumNames<E, N>& names, E value,
                                    std::string_view fallback) noexcept {
  for (const auto& [v, name] : names)
    if (v == value) return name;
  return fallback;
}

// The name of `value`; "UNKNOWN" for a value the table lacks.
template <class E, std::size_t N>
constexpr std::string_view enumName(const EnumNames<E, N>& names, E value) noexcept {
  return enumName(names, value, "UNKNOWN");
}

// The enumerator spelled exactly `name` (case-sensitive: a closed vocabulary
// is spelled one way); nullopt for anything else.
template <class E, std::size_t N>
constexpr std::optional<E> parseEnum(const EnumNames<E, N>& names, std::string_view name) noexcept {
  for (const auto& [v, spelled] : names)
    if (spelled == name) return v;
  return std::nullopt;
}

}  // namespace airlock
