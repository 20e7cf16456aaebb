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

using Images = std::vector<std::shared_ptr<const SandboxImage>>;

std::shared_ptr<const SandboxImage> imageNamed(const std::string& digest,
                                               std::vector<std::string> env = {}) {
  return std::make_shared<const SandboxImage>(SandboxImage{digest, {}, std::move(env)});
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
  const Images images = {imageNamed("sha256:host"), imageNamed("sha256:image")};
  auto checks = checkProvision(specOf(), images, defaultCeilings(), false, shutdown);
  ASSERT_TRUE(checks) << checks.error().message();
  EXPECT_FALSE(checks->egress);
  EXPECT_EQ(checks->image, images[1]) << "the spec's image, of the service's several";
}

TEST(CheckProvision, RefusesEachWayAProvisionCannotStart) {
  ServiceShutdown shutdown;
  ASSERT_TRUE(shutdown.init());
  const Images images = {imageNamed("sha256:image")};
  auto other_image = checkProvision(specOf(), {imageNamed("sha256:other"), imageNamed("sha256:x")},
                                    defaultCeilings(), false, shutdown);
  ASSERT_FALSE(other_image);
  EXPECT_EQ(other_image.error().code, ErrorCode::kExecutionRejected);
  EXPECT_NE(other_image.error().context.find(
                "unknown image digest sha256:image (this service runs sha256:other, sha256:x)"),
            std::string::npos)
      << other_image.error().context;

  auto big = specOf();
  big.limits.pids_max = defaultCeilings().pids_max + 1;
  auto over = checkProvision(big, images, defaultCeilings(), false, shutdown);
  ASSERT_FALSE(over);
  EXPECT_EQ(over.error().code, ErrorCode::kExecutionRejected);

  auto with_egress = specOf();
  with_egress.egress = allowOne();
  auto no_proxy = checkProvision(with_egress, images, defaultCeilings(), false, shutdown);
  ASSERT_FALSE(no_proxy);
  EXPECT_EQ(no_proxy.error().code, ErrorCode::kExecutionRejected);
  auto proxied = checkProvision(with_egress, images, defaultCeilings(), true, shutdown);
  ASSERT_TRUE(proxied);
  EXPECT_TRUE(proxied->egress);

  shutdown.raise();
  auto stopping = checkProvision(specOf(), images, defaultCeilings(), false, shutdown);
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
  const ProvisionChecks with_egress{imageNamed("sha256:image"), true};
  ASSERT_TRUE(initRecord(record, spec, with_egress, std::chrono::seconds(60), "airlock-t-", ""));
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
  const ProvisionChecks without{imageNamed("sha256:image"), false};
  ASSERT_TRUE(initRecord(second, spec, without, std::chrono::seconds(60), "airlock-t-", "n2"));
  EXPECT_NE(second.handle.environment_id, record.handle.environment_id);
  EXPECT_FALSE(second.environment.count("HTTPS_PROXY"));
  EXPECT_EQ(environmentIdNode(second.handle.environment_id), std::optional<std::string_view>("n2"))
      << "a named node's ids carry its name";
  EXPECT_EQ(second.cgroup_name, "airlock-t-" + second.handle.environment_id);
}

TEST(InitRecord, TakesItsTimesFromTheInjectedClock) {
  const Timestamp at{std::chrono::milliseconds(1'700'000'000'123)};
  SandboxRecord record;
  const ProvisionChecks checks{imageNamed("sha256:image"), false};
  ASSERT_TRUE(initRecord(record, specOf(), checks, std::chrono::seconds(60), "airlock-t-", "",
                         [&] { return at; }));
  EXPECT_EQ(record.handle.created_at, at);
  EXPECT_EQ(record.handle.expires_at, at + std::chrono::seconds(60));
}

TEST(WallNow, AnEmptyClockIsTheSystemClock) {
  const auto before = std::chrono::system_clock::now();
  const Timestamp now = wallNow({});
  EXPECT_GE(now + std::chrono::milliseconds(1), before);
  EXPECT_LE(now, std::chrono::system_clock::now());
  const Timestamp fixed{std::chrono::milliseconds(42)};
  EXPECT_EQ(wallNow([&] { return fixed; }), fixed);
}

TEST(DestroyKillReason, NamesShutdownThenExpiryAtTheGivenTimeElseCancel) {
  const Timestamp expires{std::chrono::milliseconds(10'000)};
  const Timestamp before = expires - std::chrono::milliseconds(1);
  EXPECT_EQ(destroyKillReason(true, expires, expires), KillReason::kServiceShutdown);
  EXPECT_EQ(destroyKillReason(false, expires, expires), KillReason::kExpired);
  EXPECT_EQ(destroyKillReason(false, expires, before), KillReason::kCancelled);
}

// The image's Env joins the environment: its PATH replaces the platform's,
// its other names fill what is unset, and nothing of tier 0 or tier 2 but
// PATH comes from it.
TEST(InitRecord, TheImagesEnvironmentJoinsThePlatformTier) {
  SandboxRecord record;
  auto spec = specOf();
  spec.environment["HOME"] = "/workspace";
  spec.environment["KEPT"] = "from-the-spec";
  const ProvisionChecks checks{
      imageNamed("sha256:image", {"PATH=/opt/py/bin:/usr/bin", "PYTHON_VERSION=3.12.1",
                                  "HOME=/root", "KEPT=from-the-image", "AWS_SECRET_ACCESS_KEY=x",
                                  "no-equals", "1BAD=x", "HTTPS_PROXY=http://elsewhere"}),
      false};
  ASSERT_TRUE(initRecord(record, spec, checks, std::chrono::seconds(60), "airlock-t-", ""));
  EXPECT_EQ(record.image, checks.image);
  EXPECT_EQ(record.environment.at("PATH"), "/opt/py/bin:/usr/bin");
  EXPECT_EQ(record.environment.at("PYTHON_VERSION"), "3.12.1");
  EXPECT_EQ(record.environment.at("HOME"), "/workspace");
  EXPECT_EQ(record.environment.at("KEPT"), "from-the-spec");
  EXPECT_FALSE(record.environment.count("AWS_SECRET_ACCESS_KEY"));
  EXPECT_FALSE(record.environment.count("1BAD"));
  EXPECT_FALSE(record.environment.count("HTTPS_PROXY"));
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
