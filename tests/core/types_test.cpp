#include "airlock/core/types.h"

#include <gtest/gtest.h>

namespace airlock {
namespace {

TEST(KillReason, NamesAndParsesEveryValue) {
  const std::pair<KillReason, std::string_view> cases[] = {
      {KillReason::kTimeout, "TIMEOUT"},
      {KillReason::kMemory, "MEMORY"},
      {KillReason::kOutputLimit, "OUTPUT_LIMIT"},
      {KillReason::kPids, "PIDS"},
      {KillReason::kDisk, "DISK"},
      {KillReason::kCancelled, "CANCELLED"},
      {KillReason::kExpired, "EXPIRED"},
      {KillReason::kServiceShutdown, "SERVICE_SHUTDOWN"},
  };
  for (const auto& [reason, name] : cases) {
    EXPECT_EQ(killReasonName(reason), name);
    EXPECT_EQ(parseKillReason(name), reason) << name;
  }
}

TEST(KillReason, RejectsUnknownAndMiscasedNames) {
  EXPECT_EQ(parseKillReason(""), std::nullopt);
  EXPECT_EQ(parseKillReason("timeout"), std::nullopt);
  EXPECT_EQ(parseKillReason("OOM"), std::nullopt);
  EXPECT_EQ(parseKillReason("TIMEOUT "), std::nullopt);
  EXPECT_EQ(parseKillReason(std::string_view("TIMEOUT\0", 8)), std::nullopt);
  // An out-of-range value (a bad cast) still has a stable name.
  EXPECT_EQ(killReasonName(static_cast<KillReason>(99)), "UNKNOWN");
}

TEST(ChangeKind, NamesAndParsesEveryValue) {
  EXPECT_EQ(changeKindName(ChangeKind::kCreated), "CREATED");
  EXPECT_EQ(changeKindName(ChangeKind::kModified), "MODIFIED");
  EXPECT_EQ(changeKindName(ChangeKind::kDeleted), "DELETED");
  EXPECT_EQ(parseChangeKind("CREATED"), ChangeKind::kCreated);
  EXPECT_EQ(parseChangeKind("MODIFIED"), ChangeKind::kModified);
  EXPECT_EQ(parseChangeKind("DELETED"), ChangeKind::kDeleted);
}

TEST(ChangeKind, RejectsUnknownNames) {
  EXPECT_EQ(parseChangeKind("created"), std::nullopt);
  EXPECT_EQ(parseChangeKind("RENAMED"), std::nullopt);
  EXPECT_EQ(parseChangeKind(""), std::nullopt);
}

}  // namespace
}  // namespace airlock
