#include "airlock/core/types.h"

#include <array>
#include <utility>

namespace airlock {
namespace {

constexpr std::array<std::pair<KillReason, std::string_view>, 8> kKillReasonNames{{
    {KillReason::kTimeout, "TIMEOUT"},
    {KillReason::kMemory, "MEMORY"},
    {KillReason::kOutputLimit, "OUTPUT_LIMIT"},
    {KillReason::kPids, "PIDS"},
    {KillReason::kDisk, "DISK"},
    {KillReason::kCancelled, "CANCELLED"},
    {KillReason::kExpired, "EXPIRED"},
    {KillReason::kServiceShutdown, "SERVICE_SHUTDOWN"},
}};

constexpr std::array<std::pair<ChangeKind, std::string_view>, 3> kChangeKindNames{{
    {ChangeKind::kCreated, "CREATED"},
    {ChangeKind::kModified, "MODIFIED"},
    {ChangeKind::kDeleted, "DELETED"},
}};

}  // namespace

std::string_view killReasonName(KillReason reason) noexcept {
  for (const auto& [value, name] : kKillReasonNames) {
    if (value == reason) return name;
  }
  return "UNKNOWN";
}

// Exact, case-sensitive: the vocabulary is closed and spelled one way.
std::optional<KillReason> parseKillReason(std::string_view name) noexcept {
  for (const auto& [value, spelled] : kKillReasonNames) {
    if (spelled == name) return value;
  }
  return std::nullopt;
}

std::string_view changeKindName(ChangeKind kind) noexcept {
  for (const auto& [value, name] : kChangeKindNames) {
    if (value == kind) return name;
  }
  return "UNKNOWN";
}

std::optional<ChangeKind> parseChangeKind(std::string_view name) noexcept {
  for (const auto& [value, spelled] : kChangeKindNames) {
    if (spelled == name) return value;
  }
  return std::nullopt;
}

}  // namespace airlock
