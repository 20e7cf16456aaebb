// Provision's checks and a new sandbox's record, the shutdown signal and
// the small helpers every hosted mechanism shares (no sandbox).
#include "airlock/sandbox/host/hosted_environment.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>

#include "airlock/core/ids.h"

namespace airlock::host {
namespace {

EnvironmentSpec specOf() {
  EnvironmentSpec spec;
  spec.tenant_id = "tenant-a";
  spec.run_id = "run-1";
  spec.lease_epoch = 2;
  spec.image_digest = "sha256:image";
  spec.limits = defaultLimits();
  spec.environment = {{"PATH", "/usr/bin"}};
  return spec;
}

EgressPolicy allowOne() {
  EgressPolicy egress;
  egress.mode = EgressMode::kAllowlist;
  egress.destinations.push_back(EgressDestination{});
  return egress;
}

TEST(CheckProvision, AcceptsThisServicesImageWithinItsCeilings) {
  ServiceShutdown shutdown;
  ASSERT_TRUE(shutdown.init());
  auto egress = checkProvision(specOf(), "sha256:image", defaultCeilings(), false, shutdown);
  ASSERT_TRUE(egress) << egress.error().message();
  EXPECT_FALSE(*egress);
}

TEST(CheckProvision, RefusesEachWayAProvisionCannotStart) {
  ServiceShutdown shutdown;
  ASSERT_TRUE(shutdown.init());
  auto other_image = checkProvision(specOf(), "sha256:other", defaultCeilings(), false, shutdown);
  ASSERT_FALSE(other_image);
  EXPECT_EQ(other_image.error().code, ErrorCode::kExecutionRejected);
  EXPECT_NE(other_image.error().context.find("unknown image digest sha256:image"),
            std::string::npos);

  auto big = specOf();
  big.limits.pids_max = defaultCeilings().pids_max + 1;
  auto over = checkProvision(big, "sha256:image", defaultCeilings(), false, shutdown);
  ASSERT_FALSE(over);
  EXPECT_EQ(over.error().code, ErrorCode::kExecutionRejected);

  auto with_egress = specOf();
  with_egress.egress = allowOne();
  auto no_proxy = checkProvision(with_egress, "sha256:image", defaultCeilings(), false, shutdown);
  ASSERT_FALSE(no_proxy);
  EXPECT_EQ(no_proxy.error().code, ErrorCode::kExecutionRejected);
  auto proxied = checkProvision(with_egress, "sha256:image", defaultCeilings(), true, shutdown);
  ASSERT_TRUE(proxied);
  EXPECT_TRUE(*proxied);

  shutdown.raise();
  auto stopping = checkProvision(specOf(), "sha256:image", defaultCeilings(), false, shutdown);
  ASSERT_FALSE(stopping);
  EXPECT_EQ(stopping.error().code, ErrorCode::kExecutionUnavailable);
}

TEST(ServiceShutdown, RaisingSetsTheFlagAndWakesItsFd) {
  ServiceShutdown shutdown;
  ASSERT_TRUE(shutdown.init());
  pollfd p{shutdown.fd(), POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 0), 0);
  EXPECT_FALSE(shutdown.raised());
  shutdown.raise();
  EXPECT_TRUE(shutdown.raised());
  EXPECT_EQ(::poll(&p, 1, 0), 1);
}

TEST(InitRecord, NamesTheSandboxAndCopiesTheSpec) {
  SandboxRecord record;
  auto spec = specOf();
  ASSERT_TRUE(initRecord(record, spec, true, std::chrono::seconds(60), "airlock-t-", ""));
  EXPECT_TRUE(isUuid(record.handle.environment_id)) << record.handle.environment_id;
  EXPECT_EQ(record.handle.tenant_id, "tenant-a");
  EXPECT_EQ(record.handle.run_id, "run-1");
  EXPECT_EQ(record.handle.lease_epoch, 2);
  EXPECT_EQ(record.handle.expires_at - record.handle.created_at, std::chrono::seconds(60));
  EXPECT_EQ(record.cgroup_name, "airlock-t-" + record.handle.environment_id);
  EXPECT_EQ(record.limits, spec.limits);
  EXPECT_EQ(record.environment.at("PATH"), "/usr/bin");
  EXPECT_TRUE(record.environment.count("HTTPS_PROXY"));  // egress: the proxy variables
  ASSERT_TRUE(record.end_request.has_value());
  EXPECT_FALSE(record.end_request->reason().has_value());

  SandboxRecord second;
  ASSERT_TRUE(initRecord(second, spec, false, std::chrono::seconds(60), "airlock-t-", "n2"));
  EXPECT_NE(second.handle.environment_id, record.handle.environment_id);
  EXPECT_FALSE(second.environment.count("HTTPS_PROXY"));
  EXPECT_EQ(environmentIdNode(second.handle.environment_id), std::optional<std::string_view>("n2"))
      << "a named node's ids carry its name";
  EXPECT_EQ(second.cgroup_name, "airlock-t-" + second.handle.environment_id);
}

TEST(CgroupPrefixFor, IsStablePerStateDirectory) {
  EXPECT_EQ(cgroupPrefixFor("airlock-", ""), "airlock-811c9dc5-");  // FNV-1a offset basis
  EXPECT_EQ(cgroupPrefixFor("airlock-", "/run/a"), cgroupPrefixFor("airlock-", "/run/a"));
  EXPECT_NE(cgroupPrefixFor("airlock-", "/run/a"), cgroupPrefixFor("airlock-", "/run/b"));
  EXPECT_NE(cgroupPrefixFor("airlock-", "/run/a"), cgroupPrefixFor("airlock-gv-", "/run/a"));
}

TEST(MakeDirectories, CreatesParentsAndSetsTheMode) {
  char tmpl[] = "/tmp/airlock-mkdirs-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string base = tmpl;
  ASSERT_TRUE(makeDirectories(base + "/a/b/c", 0711));
  struct stat st {};
  ASSERT_EQ(::stat((base + "/a/b/c").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0711u);
  EXPECT_TRUE(makeDirectories(base + "/a/b/c", 0700));  // exists: mode updated
  ASSERT_EQ(::stat((base + "/a/b/c").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  auto under_file = makeDirectories("/proc/self/status/x", 0700);
  ASSERT_FALSE(under_file);
  EXPECT_EQ(under_file.error().code, ErrorCode::kExecutionUnavailable);
  std::error_code ec;
  std::filesystem::remove_all(base, ec);
}

TEST(UndoUnlessDismissed, RunsOnlyWhenNotDismissed) {
  int runs = 0;
  {
    UndoUnlessDismissed undo([&] { ++runs; });
  }
  EXPECT_EQ(runs, 1);
  {
    UndoUnlessDismissed undo([&] { ++runs; });
    undo.dismiss();
  }
  EXPECT_EQ(runs, 1);
}

}  // namespace
}  // namespace airlock::host
