#include "airlock/core/types.h"

#include "airlock/core/enum_names.h"

namespace airlock {
namespace {

constexpr EnumNames<KillReason, 8> kKillReasonNames{{
    {KillReason::kTimeout, "TIMEOUT"},
    {KillReason::kMemory, "MEMORY"},
    {KillReason::kOutputLimit, "OUTPUT_LIMIT"},
    {KillReason::kPids, "PIDS"},
    {KillReason::kDisk, "DISK"},
    {KillReason::kCancelled, "CANCELLED"},
    {KillReason::kExpired, "EXPIRED"},
    {KillReason::kServiceShutdown, "SERVICE_SHUTDOWN"},
}};

constexpr EnumNames<ChangeKind, 3> kChangeKindNames{{
    {ChangeKind::kCreated, "CREATED"},
    {ChangeKind::kModified, "MODIFIED"},
    {ChangeKind::kDeleted, "DELETED"},
}};

}  // namespace

std::string_view killReasonName(KillReason reason) noexcept {
  return enumName(kKillReasonNames, reason);
}

std::optional<KillReason> parseKillReason(std::string_view name) noexcept {
  return parseEnum(kKillReasonNames, name);
}

std::string_view changeKindName(ChangeKind kind) noexcept {
  return enumName(kChangeKindNames, kind);
}

std::optional<ChangeKind> parseChangeKind(std::string_view name) noexcept {
  return parseEnum(kChangeKindNames, name);
}

}  // namespace airlock
