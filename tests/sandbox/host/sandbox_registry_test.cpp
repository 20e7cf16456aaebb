// The live-sandbox registry's lookup and its errors, without a sandbox.
#include "airlock/sandbox/host/sandbox_registry.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace airlock::host {
namespace {

struct Record {
  EnvironmentHandle handle;
};

EnvironmentHandle handleOf(const std::string& id, const std::string& tenant = "tenant-a") {
  EnvironmentHandle h;
  h.environment_id = id;
  h.tenant_id = tenant;
  h.run_id = "run-1";
  h.lease_epoch = 3;
  return h;
}

std::shared_ptr<Record> recordOf(const std::string& id) {
  auto r = std::make_shared<Record>();
  r->handle = handleOf(id);
  return r;
}

TEST(SandboxRegistry, FindsALiveSandboxForItsTenant) {
  SandboxRegistry<Record> registry;
  auto record = recordOf("env-1");
  registry.add(record);
  auto found = registry.live(handleOf("env-1"));
  ASSERT_TRUE(found) << found.error().message();
  EXPECT_EQ(found->get(), record.get());
  auto owned = registry.live(handleOf("env-1"), HandleMatch::kOwner);
  ASSERT_TRUE(owned) << owned.error().message();
  EXPECT_EQ(owned->get(), record.get());
}

TEST(SandboxRegistry, AnUnknownIdIsGone) {
  SandboxRegistry<Record> registry;
  auto found = registry.live(handleOf("env-9"));
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error().code, ErrorCode::kEnvironmentGone);
  EXPECT_EQ(found.error().context, "unknown or destroyed environment env-9");
}

TEST(SandboxRegistry, ATakenSandboxIsGoneAndTakingAgainFindsNothing) {
  SandboxRegistry<Record> registry;
  registry.add(recordOf("env-1"));
  auto taken = registry.take("env-1");
  ASSERT_NE(taken, nullptr);
  EXPECT_EQ(taken->handle.environment_id, "env-1");
  EXPECT_EQ(registry.take("env-1"), nullptr);
  auto found = registry.live(handleOf("env-1"));
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error().code, ErrorCode::kEnvironmentGone);
  EXPECT_EQ(found.error().context, "unknown or destroyed environment env-1");
}

TEST(SandboxRegistry, AnExpiredIdSaysExpired) {
  SandboxRegistry<Record> registry;
  registry.add(recordOf("env-1"));
  (void)registry.take("env-1");
  registry.noteExpired("env-1");
  auto found = registry.live(handleOf("env-1"));
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error().code, ErrorCode::kEnvironmentGone);
  EXPECT_EQ(found.error().context, "environment env-1 has expired");
}

TEST(SandboxRegistry, AnotherTenantsHandleIsSuspected) {
  SandboxRegistry<Record> registry;
  registry.add(recordOf("env-1"));
  auto found = registry.live(handleOf("env-1", "tenant-b"));
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error().code, ErrorCode::kSandboxEscapeSuspected);
  EXPECT_EQ(found.error().context, "environment does not belong to this tenant");
  // Code mode's calls refuse it instead.
  auto refused = registry.live(handleOf("env-1", "tenant-b"), HandleMatch::kTenantRefused);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kExecutionRejected);
  EXPECT_EQ(refused.error().context, "environment does not belong to this tenant");
  // The tenant check alone leaves the sandbox where it is.
  EXPECT_TRUE(registry.live(handleOf("env-1")));
}

TEST(SandboxRegistry, TheOwnerMatchComparesRunAndEpochToo) {
  SandboxRegistry<Record> registry;
  registry.add(recordOf("env-1"));
  auto stale = handleOf("env-1");
  stale.lease_epoch = 2;
  EXPECT_TRUE(registry.live(stale, HandleMatch::kTenant));
  auto owned = registry.live(stale, HandleMatch::kOwner);
  ASSERT_FALSE(owned);
  EXPECT_EQ(owned.error().code, ErrorCode::kSandboxEscapeSuspected);
  EXPECT_EQ(owned.error().context, ownerMismatch("env-1").context);
  auto other_run = handleOf("env-1");
  other_run.run_id = "run-2";
  EXPECT_FALSE(registry.live(other_run, HandleMatch::kOwner));
}

TEST(SandboxRegistry, HandlesAndIdsListEveryLiveSandbox) {
  SandboxRegistry<Record> registry;
  registry.add(recordOf("env-1"));
  registry.add(recordOf("env-2"));
  (void)registry.take("env-1");
  const auto ids = registry.ids();
  ASSERT_EQ(ids.size(), 1u);
  EXPECT_EQ(ids[0], "env-2");
  const auto handles = registry.handles();
  ASSERT_EQ(handles.size(), 1u);
  EXPECT_EQ(handles[0].environment_id, "env-2");
}

TEST(ExpiredIds, RemembersTheMostRecentUpToItsCapacity) {
  ExpiredIds ids;
  for (std::size_t i = 0; i <= ExpiredIds::kCapacity; ++i) ids.add("env-" + std::to_string(i));
  EXPECT_EQ(ids.size(), ExpiredIds::kCapacity);
  EXPECT_FALSE(ids.contains("env-0"));  // the oldest was forgotten
  EXPECT_TRUE(ids.contains("env-1"));
  EXPECT_TRUE(ids.contains("env-" + std::to_string(ExpiredIds::kCapacity)));
}

}  // namespace
}  // namespace airlock::host
