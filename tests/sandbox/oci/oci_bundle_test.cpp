// The generated OCI config.json (sandbox/oci/oci_bundle.h): checked field by
// field, and the rootfs preparation on a scratch directory.
#include "airlock/sandbox/oci/oci_bundle.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "airlock/core/limits_defaults.h"

namespace airlock::oci {
namespace {

using nlohmann::json;

const std::string kDigest = std::string("sha256:") + std::string(64, 'a');

// The host image of `dirs` and `etc` (the entries of `etc` the host lacks
// are left out).
SandboxImage imageOf(const std::vector<std::string>& dirs, const std::vector<std::string>& etc) {
  auto image = hostImage(kDigest, dirs, etc);
  EXPECT_TRUE(image) << image.error().message();
  return image ? *image : SandboxImage{};
}

BundleInputs inputs() {
  BundleInputs in;
  in.rootfs_dir = "/state/rootfs";
  in.image = std::make_shared<const SandboxImage>(
      SandboxImage{kDigest,
                   {{ImageEntry::Kind::kDirectory, "/usr", "/usr"},
                    {ImageEntry::Kind::kSymlink, "/bin", "usr/bin"},
                    {ImageEntry::Kind::kFile, "/etc/ld.so.cache", "/etc/ld.so.cache"}},
                   {}});
  in.workspace_dir = "/state/sandboxes/x/workspace";
  in.tmp_dir = "/state/sandboxes/x/tmp";
  in.shim_path = "/opt/airlock/airlock-gvisor-shim";
  in.control_dir = "/state/sandboxes/x/ctl";
  in.limits = defaultLimits();
  in.limits.memory_bytes = 256 << 20;
  in.limits.pids_max = 64;
  in.limits.cpu_millicores = 1500;
  return in;
}

const json* mountAt(const json& config, const std::string& destination) {
  for (const auto& m : config["mounts"])
    if (m["destination"] == destination) return &m;
  return nullptr;
}

bool hasOption(const json& mount, const std::string& option) {
  for (const auto& o : mount["options"])
    if (o == option) return true;
  return false;
}

TEST(OciConfig, RootIsTheSharedRootfsReadOnly) {
  auto c = makeConfig(inputs());
  ASSERT_TRUE(c) << c.error().message();
  EXPECT_EQ((*c)["root"]["path"], "/state/rootfs");
  EXPECT_EQ((*c)["root"]["readonly"], true);
  EXPECT_EQ((*c)["hostname"], "sandbox");
  EXPECT_EQ((*c)["ociVersion"], "1.0.2");
}

TEST(OciConfig, TheProcessIsTheShimAsPidOneWithFourCapabilities) {
  auto c = makeConfig(inputs());
  ASSERT_TRUE(c);
  const json& p = (*c)["process"];
  EXPECT_EQ(p["args"], json::array({"/.airlock/shim", "init"}));
  EXPECT_EQ(p["user"]["uid"], 0);
  EXPECT_EQ(p["noNewPrivileges"], true);
  EXPECT_EQ(p["terminal"], false);
  const json caps = json::array({"CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP"});
  EXPECT_EQ(p["capabilities"]["bounding"], caps);
  EXPECT_EQ(p["capabilities"]["effective"], caps);
  EXPECT_EQ(p["capabilities"]["permitted"], caps);
  EXPECT_EQ(p["capabilities"]["inheritable"], json::array());
  EXPECT_EQ(p["capabilities"]["ambient"], json::array());
  bool core = false, nofile = false;
  for (const auto& r : p["rlimits"]) {
    if (r["type"] == "RLIMIT_CORE") core = r["hard"] == 0 && r["soft"] == 0;
    if (r["type"] == "RLIMIT_NOFILE") nofile = r["hard"] == kNofileLimit;
  }
  EXPECT_TRUE(core);
  EXPECT_TRUE(nofile);
}

TEST(OciConfig, ImageIsBoundReadOnlyAndWorkspaceReadWrite) {
  auto c = makeConfig(inputs());
  ASSERT_TRUE(c);
  const json* usr = mountAt(*c, "/usr");
  ASSERT_NE(usr, nullptr);
  EXPECT_EQ((*usr)["source"], "/usr");
  EXPECT_EQ((*usr)["type"], "bind");
  EXPECT_TRUE(hasOption(*usr, "ro"));
  const json* cache = mountAt(*c, "/etc/ld.so.cache");
  ASSERT_NE(cache, nullptr);
  EXPECT_TRUE(hasOption(*cache, "ro"));
  const json* ws = mountAt(*c, "/workspace");
  ASSERT_NE(ws, nullptr);
  EXPECT_EQ((*ws)["source"], "/state/sandboxes/x/workspace");
  EXPECT_TRUE(hasOption(*ws, "rw"));
  EXPECT_TRUE(hasOption(*ws, "nosuid"));
  EXPECT_TRUE(hasOption(*ws, "nodev"));
  const json* tmp = mountAt(*c, "/tmp");
  ASSERT_NE(tmp, nullptr);
  EXPECT_EQ((*tmp)["source"], "/state/sandboxes/x/tmp");
  const json* shim = mountAt(*c, "/.airlock/shim");
  ASSERT_NE(shim, nullptr);
  EXPECT_TRUE(hasOption(*shim, "ro"));
  const json* ctl = mountAt(*c, "/.airlock/ctl");
  ASSERT_NE(ctl, nullptr);
  EXPECT_EQ((*ctl)["source"], "/state/sandboxes/x/ctl");
  for (const char* fs : {"/proc", "/dev", "/dev/shm"}) EXPECT_NE(mountAt(*c, fs), nullptr) << fs;
  // Nothing of the host but the named sources.
  EXPECT_EQ(mountAt(*c, "/sys"), nullptr);
  EXPECT_EQ(mountAt(*c, "/home"), nullptr);
}

TEST(OciConfig, PseudoTerminalsComeFromAPrivateDevpts) {
  auto c = makeConfig(inputs());
  ASSERT_TRUE(c);
  const json* pts = mountAt(*c, "/dev/pts");
  ASSERT_NE(pts, nullptr);
  EXPECT_EQ((*pts)["type"], "devpts");
  for (const char* o : {"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"})
    EXPECT_TRUE(hasOption(*pts, o)) << o;
  // After /dev, whose tmpfs it is mounted on.
  std::size_t dev = 0, at = 0;
  for (std::size_t i = 0; i < (*c)["mounts"].size(); ++i) {
    if ((*c)["mounts"][i]["destination"] == "/dev") dev = i;
    if ((*c)["mounts"][i]["destination"] == "/dev/pts") at = i;
  }
  EXPECT_LT(dev, at);
}

TEST(OciConfig, EgressBindsItsDirectoryAndStartsTheRelayOnlyWhenGiven) {
  auto without = makeConfig(inputs());
  ASSERT_TRUE(without);
  EXPECT_EQ(mountAt(*without, "/.airlock/egress"), nullptr);
  EXPECT_EQ((*without)["process"]["args"], json::array({"/.airlock/shim", "init"}));

  auto in = inputs();
  in.egress_dir = "/state/sandboxes/x/egress";
  auto with = makeConfig(in);
  ASSERT_TRUE(with) << with.error().message();
  const json* egress = mountAt(*with, "/.airlock/egress");
  ASSERT_NE(egress, nullptr);
  EXPECT_EQ((*egress)["source"], "/state/sandboxes/x/egress");
  EXPECT_TRUE(hasOption(*egress, "nosuid"));
  EXPECT_EQ((*with)["process"]["args"], json::array({"/.airlock/shim", "init", "egress"}));

  in.egress_dir = "/state/../etc";
  auto bad = makeConfig(in);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code, ErrorCode::kExecutionRejected);
}

TEST(OciConfig, TheCapabilityDirectoryIsBoundReadOnlyAtRunAirlockWhenGiven) {
  auto without = makeConfig(inputs());
  ASSERT_TRUE(without);
  EXPECT_EQ(mountAt(*without, "/run/airlock"), nullptr);

  auto in = inputs();
  in.capability_dir = "/state/sandboxes/x/cap";
  auto with = makeConfig(in);
  ASSERT_TRUE(with) << with.error().message();
  const json* cap = mountAt(*with, "/run/airlock");
  ASSERT_NE(cap, nullptr);
  EXPECT_EQ((*cap)["source"], "/state/sandboxes/x/cap");
  EXPECT_EQ((*cap)["type"], "bind");
  EXPECT_TRUE(hasOption(*cap, "ro"));
  EXPECT_FALSE(hasOption(*cap, "rw"));
  EXPECT_TRUE(hasOption(*cap, "nosuid"));
  EXPECT_TRUE(hasOption(*cap, "nodev"));

  in.capability_dir = "/state/../etc";
  auto bad = makeConfig(in);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code, ErrorCode::kExecutionRejected);
}

TEST(OciConfig, NamespacesIncludeAnEmptyNetwork) {
  auto c = makeConfig(inputs());
  ASSERT_TRUE(c);
  std::vector<std::string> types;
  for (const auto& ns : (*c)["linux"]["namespaces"]) {
    types.push_back(ns["type"]);
    EXPECT_FALSE(ns.contains("path")) << "a namespace joined from the host";
  }
  EXPECT_EQ(types, (std::vector<std::string>{"pid", "network", "ipc", "uts", "mount"}));
}

TEST(OciConfig, ResourcesComeFromTheLimits) {
  auto c = makeConfig(inputs());
  ASSERT_TRUE(c);
  const json& r = (*c)["linux"]["resources"];
  EXPECT_EQ(r["memory"]["limit"], 256 << 20);
  EXPECT_EQ(r["memory"]["swap"], 256 << 20);
  EXPECT_EQ(r["pids"]["limit"], 64);
  EXPECT_EQ(r["cpu"]["quota"], 150000);
  EXPECT_EQ(r["cpu"]["period"], 100000);
}

TEST(OciConfig, RelativeOrDotDotPathsAreRejected) {
  for (auto bad : {std::string("relative/ws"), std::string("/state/../etc"), std::string("")}) {
    auto in = inputs();
    in.workspace_dir = bad;
    auto c = makeConfig(in);
    ASSERT_FALSE(c) << bad;
    EXPECT_EQ(c.error().code, ErrorCode::kExecutionRejected);
  }
  auto in = inputs();
  in.image = std::make_shared<const SandboxImage>(
      SandboxImage{kDigest, {{ImageEntry::Kind::kDirectory, "usr", "/usr"}}, {}});
  EXPECT_FALSE(makeConfig(in));
  in.image = std::make_shared<const SandboxImage>(
      SandboxImage{kDigest, {{ImageEntry::Kind::kFile, "/etc/x", "../etc/x"}}, {}});
  EXPECT_FALSE(makeConfig(in));
  in.image = nullptr;
  EXPECT_FALSE(makeConfig(in));
}

TEST(OciConfig, NonPositiveLimitsAreRejected) {
  auto in = inputs();
  in.limits.pids_max = 0;
  EXPECT_FALSE(makeConfig(in));
}

TEST(OciRootfs, PreparesMountPointsSymlinksAndGeneratedEtc) {
  char tmpl[] = "/tmp/airlock-rootfs-test-XXXXXX";
  const std::string base = ::mkdtemp(tmpl);
  const std::string dir = base + "/rootfs";
  ASSERT_TRUE(prepareRootfs(dir, imageOf({"/usr"}, {"/etc/ld.so.cache"})));
  // Twice: idempotent.
  ASSERT_TRUE(prepareRootfs(dir, imageOf({"/usr"}, {"/etc/ld.so.cache"})));
  struct stat st {};
  for (const char* d : {"/usr", "/proc", "/dev", "/tmp", "/workspace", "/.airlock/ctl",
                        "/.airlock/egress", "/run/airlock"}) {
    ASSERT_EQ(::stat((dir + d).c_str(), &st), 0) << d;
    EXPECT_TRUE(S_ISDIR(st.st_mode)) << d;
  }
  ASSERT_EQ(::stat((dir + "/.airlock/ctl").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  ASSERT_EQ(::stat((dir + "/.airlock/shim").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  // The usr-merge links mirror the host's.
  for (const char* top : {"/bin", "/lib"}) {
    char host[256] = {}, mine[256] = {};
    if (::readlink(top, host, sizeof host - 1) <= 0) continue;
    ASSERT_GT(::readlink((dir + top).c_str(), mine, sizeof mine - 1), 0) << top;
    EXPECT_STREQ(host, mine);
  }
  // A nested image entry gets its parents; the time zone is a fixed link.
  ASSERT_TRUE(prepareRootfs(dir, imageOf({"/usr"}, {"/etc/ssl/certs"})));
  if (::access("/etc/ssl/certs", F_OK) == 0) {
    ASSERT_EQ(::stat((dir + "/etc/ssl/certs").c_str(), &st), 0);
    EXPECT_TRUE(S_ISDIR(st.st_mode));
  }
  char zone[256] = {};
  ASSERT_GT(::readlink((dir + "/etc/localtime").c_str(), zone, sizeof zone - 1), 0);
  EXPECT_STREQ(zone, "/usr/share/zoneinfo/Etc/UTC");
  std::ifstream group(dir + "/etc/group");
  std::stringstream groups;
  groups << group.rdbuf();
  EXPECT_NE(groups.str().find("tty:x:5:\n"), std::string::npos);
  std::ifstream passwd(dir + "/etc/passwd");
  std::stringstream text;
  text << passwd.rdbuf();
  EXPECT_NE(text.str().find("sandbox:x:1000:1000:sandbox:/workspace:/bin/sh"), std::string::npos);
  EXPECT_EQ(text.str().find("root:x:0:0:"), 0u);
  std::error_code ec;
  std::filesystem::remove_all(base, ec);
}

}  // namespace
}  // namespace airlock::oci
