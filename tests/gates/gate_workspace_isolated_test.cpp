// Gate "Workspaces do not see each other" (spec 000, hard gates;
// gate.sandbox.workspace_isolated): two sandboxes on one adapter, alive at
// the same time, in two tenants and then in one tenant. The target plants a
// canary with a random token in its /workspace (and /tmp, /dev/shm) and
// keeps a command running; the prober, which planted symlinks to likely host
// paths before the target was provisioned, tries every path it has: its
// /proc/*/root/workspace and /proc/*/cwd, /proc/1/root, find -inum with the
// target's canary inode (with and without -xdev), /tmp, /dev/shm, /run, a
// full-filesystem grep for the token's shape, and its symlinks. It also
// tries to write through all of them. Asserted: the prober's output never
// holds the target's token, the target's workspace then holds only its own
// files, and the prober's WorkspaceHandle cannot read the canary by any
// relative path. Both directions are checked.
//
// The prober is never told the token (its own command line would otherwise
// carry it into /proc): it dumps what it finds and the test looks.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "../sandbox/linux/linux_test_support.h"

namespace airlock::testing {
namespace {

std::string randomHex(std::size_t n) {
  std::random_device rd;
  std::mt19937_64 gen((static_cast<std::uint64_t>(rd()) << 32) ^ rd());
  static const char* kHex = "0123456789abcdef";
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s += kHex[gen() % 16];
  return s;
}

// Every token is "AIRLOCKCANARY" + 32 hex; the probe greps for that shape.
std::string newToken() {
  return "AIRLOCKCANARY" + randomHex(32);
}

// Symlinks planted in a sandbox's /workspace/links right after it is
// provisioned (so before the other sandbox exists): the host paths where a
// workspace or its state could plausibly live.
std::string plantLinksScript(const std::string& state_dir) {
  return "mkdir -p /workspace/links && cd /workspace/links && "
         "ln -s '" +
         state_dir +
         "' state && "
         "ln -s '" +
         state_dir +
         "/root' state_root && "
         "ln -s '" +
         state_dir +
         "/sandboxes' state_sandboxes && "
         "ln -s /run/airlock run_airlock && "
         "ln -s /tmp host_tmp && "
         "ln -s /proc/1/root/workspace proc1_ws && "
         "ln -s /proc/1/cwd proc1_cwd && "
         "ln -s / slash && "
         "ln -s ../../.. up3 && echo planted";
}

// What the prober runs. It never learns the token; `inode` is the target
// canary's inode number.
std::string probeScript(const std::string& inode, const std::string& tag) {
  const std::string w = "intrusion-" + tag;
  return "cd /workspace; "
         "echo '== proc roots'; ls -la /proc/*/root /proc/1/root/ 2>&1; "
         "for p in /proc/[0-9]*; do "
         "  echo \"== $p\"; ls -laR $p/root/workspace/ $p/cwd/ 2>&1 | head -n 500; "
         "  stat $p/root/workspace $p/cwd 2>&1; "
         "  find $p/root/workspace/ $p/cwd/ -xdev -type f -size -64k -exec cat {} + 2>&1 | head -c "
         "200000; "
         "  echo " +
         w + " > $p/root/workspace/" + w +
         " 2>&1; "
         "  echo " +
         w + " > $p/cwd/" + w +
         " 2>&1; "
         "done; "
         "echo '== inode xdev'; "
         "find / -xdev -inum " +
         inode +
         " 2>/dev/null | while read -r f; do "
         "  echo \"HIT $f\"; stat \"$f\"; head -c 4096 \"$f\"; done; "
         "echo '== inode all'; "
         "find / -inum " +
         inode +
         " 2>/dev/null | while read -r f; do "
         "  echo \"HIT $f\"; stat \"$f\"; head -c 4096 \"$f\"; done; "
         "for d in /tmp /dev/shm /run /workspace/links/*; do "
         "  echo \"== $d\"; ls -laR \"$d\"/ 2>&1 | head -n 500; "
         "  find \"$d\"/ -xdev -type f -size -64k 2>/dev/null | head -n 2000 | "
         "    while read -r f; do cat \"$f\" 2>&1 | head -c 4096; done; "
         "  echo " +
         w + " > \"$d\"/" + w +
         " 2>&1; "
         "  mkdir \"$d\"/" +
         w +
         "-dir 2>&1; "
         "done; "
         "echo '== token shape grep'; "
         "grep -raoI 'AIRLOCKCANARY[0-9a-f]\\{32\\}' / --exclude-dir=proc --exclude-dir=sys "
         "  --exclude-dir=usr --exclude-dir=dev 2>/dev/null | head -n 100; "
         "grep -raoI 'AIRLOCKCANARY[0-9a-f]\\{32\\}' /dev/shm /proc/[0-9]*/root/workspace "
         "  /proc/[0-9]*/cwd/ 2>/dev/null | head -n 100; "
         "echo '== end'; true";
}

class GateWorkspaceIsolated : public ::testing::TestWithParam<bool> {
 protected:
  struct Box {
    EnvironmentHandle handle;
    std::string token;
    std::string canary;  // name in /workspace
    std::string inode;
    std::set<std::string> own_names;  // top-level names it created itself
    std::string tag;                  // its probe writes "intrusion-<tag>..." (into itself)
  };

  void SetUp() override {
    if (auto why = linuxJailUnavailable()) GTEST_SKIP() << *why;
    options_ = testOptions(state_.path());
    auto env = linux_jail::createLinuxEnvironment(options_);
    ASSERT_TRUE(env) << env.error().message();
    env_ = std::move(*env);
  }
  void TearDown() override {
    for (auto& h : live_) EXPECT_TRUE(env_->destroy(h)) << "destroy " << h.environment_id;
  }

  Result<EnvironmentHandle> provision(const std::string& tenant, const std::string& run) {
    auto spec = linuxSpec(options_, tenant);
    spec.run_id = run;
    auto h = env_->provision(spec);
    if (h) live_.push_back(*h);
    return h;
  }

  ExecutionResult exec(const EnvironmentHandle& h, const std::string& script,
                       const CancelToken* cancel = nullptr) {
    auto c = shell(script, 120);
    c.maximum_output_bytes = 16 << 20;
    auto r = env_->execute(h, c, cancel);
    EXPECT_TRUE(r) << r.error().message();
    return r ? *r : ExecutionResult{};
  }

  void plantLinks(Box& b) {
    auto r = exec(b.handle, plantLinksScript(state_.path()));
    ASSERT_EQ(r.exit_code, std::optional<int>(0)) << r.stderr_data;
    b.own_names.insert("links");
  }

  void plantCanary(Box& b) {
    b.token = newToken();
    b.canary = "canary-" + randomHex(8);
    auto r = exec(b.handle, "cd /workspace && printf '%s\\n' " + b.token + " > " + b.canary +
                                " && printf '%s\\n' " + b.token + " > /tmp/" + b.canary +
                                " && printf '%s\\n' " + b.token + " > /dev/shm/" + b.canary +
                                " && stat -c %i " + b.canary);
    ASSERT_EQ(r.exit_code, std::optional<int>(0)) << r.stderr_data;
    b.inode = r.stdout_data;
    while (!b.inode.empty() && (b.inode.back() == '\n' || b.inode.back() == ' '))
      b.inode.pop_back();
    ASSERT_FALSE(b.inode.empty());
    ASSERT_TRUE(std::all_of(b.inode.begin(), b.inode.end(), ::isdigit)) << b.inode;
    b.own_names.insert(b.canary);
  }

  // The target keeps a command running (cwd /workspace) while the prober
  // probes, so both sandboxes are live and the target has a process with
  // its workspace as cwd.
  void probeWhileTargetRuns(Box& target, Box& prober, const std::string& tag) {
    auto token = CancelToken::create();
    ASSERT_TRUE(token) << token.error().message();
    target.own_names.insert(".started");
    ExecutionResult target_result;
    std::thread running([&] {
      target_result =
          exec(target.handle, "cd /workspace && echo up > .started && exec sleep 300", &*token);
    });
    struct Join {
      std::thread& t;
      const CancelToken& c;
      ~Join() {
        c.cancel();
        if (t.joinable()) t.join();
      }
    } join{running, *token};

    // Wait for the target's command to be up (a condition, bounded).
    auto tws = env_->workspace(target.handle);
    ASSERT_TRUE(tws) << tws.error().message();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    bool started = false;
    while (std::chrono::steady_clock::now() < deadline) {
      if (auto r = (*tws)->read(".started"); r && *r == "up\n") {
        started = true;
        break;
      }
      std::this_thread::yield();
    }
    ASSERT_TRUE(started) << "the target's command did not start";

    auto r = exec(prober.handle, probeScript(target.inode, tag));
    if (::getenv("AIRLOCK_GATE_DUMP") != nullptr)  // for a reviewer
      std::cout << "---- probe " << tag << " stdout\n"
                << r.stdout_data << "---- stderr\n"
                << r.stderr_data << "----\n";
    EXPECT_NE(r.stdout_data.find("== end"), std::string::npos)
        << "probe did not finish: " << r.stderr_data.substr(0, 2000);
    EXPECT_FALSE(r.stdout_truncated);
    EXPECT_FALSE(r.stderr_truncated);
    EXPECT_EQ(r.stdout_data.find(target.token), std::string::npos)
        << "the prober saw the target's token (stdout)";
    EXPECT_EQ(r.stderr_data.find(target.token), std::string::npos)
        << "the prober saw the target's token (stderr)";
    // The probe is not vacuous: it saw its own canary (same shapes, own
    // workspace), so the same search would have printed the target's.
    if (!prober.token.empty()) {
      EXPECT_NE(r.stdout_data.find(prober.token), std::string::npos)
          << "the probe did not even find its own canary; the search proves nothing";
    }
    for (const auto& fc : r.files_changed)
      EXPECT_EQ(fc.path.find(target.canary), std::string::npos) << fc.path;

    // While the target still runs: its workspace has only its own names.
    expectOnlyOwnFiles(target, tag);

    token->cancel();
    running.join();
    EXPECT_EQ(target_result.killed_by, std::optional<KillReason>(KillReason::kCancelled));
    expectOnlyOwnFiles(target, tag);
  }

  // The target's workspace holds its own names only: what it created, plus
  // what its own probe wrote into itself through its own /proc/self paths
  // ("intrusion-<own tag>..."). Anything else, in particular
  // "intrusion-<prober tag>...", came from the other sandbox.
  void expectOnlyOwnFiles(const Box& b, const std::string& prober_tag) {
    auto ws = env_->workspace(b.handle);
    ASSERT_TRUE(ws) << ws.error().message();
    auto list = (*ws)->listdir(".");
    ASSERT_TRUE(list) << list.error().message();
    std::set<std::string> names;
    const std::string own_intrusion = "intrusion-" + b.tag;
    for (const auto& e : *list) {
      EXPECT_NE(e.name.rfind("intrusion-" + prober_tag, 0), 0u)
          << "the other sandbox wrote " << e.name << " into this workspace";
      if (e.name.rfind(own_intrusion, 0) != 0 && e.name != "svc-written") names.insert(e.name);
    }
    EXPECT_EQ(names, b.own_names);
    auto canary = (*ws)->read(b.canary);
    ASSERT_TRUE(canary) << canary.error().message();
    EXPECT_EQ(*canary, b.token + "\n");
    auto links = (*ws)->listdir("links");
    ASSERT_TRUE(links) << links.error().message();
    EXPECT_EQ(links->size(), 9u);
    for (const auto& e : *links) EXPECT_EQ(e.type, WorkspaceEntry::Type::kSymlink) << e.name;
  }

  void expectNoIntrusionByCommand(const Box& b, const std::string& other_tag) {
    auto r = exec(b.handle, "find /workspace /tmp /dev/shm /run -xdev -name 'intrusion-" +
                                other_tag + "*' 2>/dev/null; echo done");
    EXPECT_EQ(r.stdout_data, "done\n") << "files another sandbox wrote are visible here";
  }

  // The service side: the prober's WorkspaceHandle cannot reach the
  // target's canary by any relative path.
  void expectServiceSideIsolation(const Box& target, const Box& prober) {
    auto ws = env_->workspace(prober.handle);
    ASSERT_TRUE(ws) << ws.error().message();
    const std::string c = target.canary;
    const std::vector<std::string> paths = {
        c,
        "./" + c,
        "../" + c,
        "../workspace/" + c,
        "../../workspace/" + c,
        "links/proc1_ws/" + c,
        "links/proc1_cwd/" + c,
        "links/slash/workspace/" + c,
        "links/slash/tmp/" + c,
        "links/host_tmp/" + c,
        "links/up3/workspace/" + c,
        "links/state/" + c,
        "links/state_root/workspace/" + c,
        "links/run_airlock/" + c,
        "/workspace/" + c,
        "/tmp/" + c,
        "/proc/1/root/workspace/" + c,
    };
    for (const auto& p : paths) {
      auto r = (*ws)->read(p);
      EXPECT_FALSE(r) << "read " << p << " succeeded";
      if (r) {
        EXPECT_EQ(r->find(target.token), std::string::npos) << "read " << p;
        continue;
      }
      EXPECT_TRUE(r.error().code == ErrorCode::kNotFound ||
                  r.error().code == ErrorCode::kWorkspaceEscape)
          << p << ": " << r.error().message();
      EXPECT_EQ(r.error().message().find(target.token), std::string::npos);
    }
    for (const std::string dir : {".", "links/slash", "links/proc1_ws", "../", "links/state"}) {
      auto l = (*ws)->listdir(dir);
      if (!l) continue;  // refused: nothing to see
      for (const auto& e : *l) EXPECT_NE(e.name, c) << "listdir " << dir;
    }
    // A write by the prober's handle lands in the prober's workspace only.
    ASSERT_TRUE((*ws)->write("svc-written", prober.tag));
  }

  TempStateDir state_;
  linux_jail::LinuxEnvironmentOptions options_;
  std::unique_ptr<ExecutionEnvironment> env_;
  std::vector<EnvironmentHandle> live_;
};

TEST_P(GateWorkspaceIsolated, NeitherSandboxReachesTheOthersWorkspace) {
  const bool same_tenant = GetParam();
  Box b, a;
  a.tag = "a";
  b.tag = "b";
  // B first: it plants its symlinks before A exists.
  auto hb = provision("tenant-b", "run-b");
  ASSERT_TRUE(hb) << hb.error().message();
  b.handle = *hb;
  ASSERT_NO_FATAL_FAILURE(plantLinks(b));

  auto ha = provision(same_tenant ? "tenant-b" : "tenant-a", "run-a");
  ASSERT_TRUE(ha) << ha.error().message();
  a.handle = *ha;
  ASSERT_NE(a.handle.environment_id, b.handle.environment_id);
  ASSERT_NO_FATAL_FAILURE(plantLinks(a));
  ASSERT_NO_FATAL_FAILURE(plantCanary(a));
  ASSERT_NO_FATAL_FAILURE(plantCanary(b));
  ASSERT_NE(a.token, b.token);

  // B probes while A runs; then A probes while B runs.
  ASSERT_NO_FATAL_FAILURE(probeWhileTargetRuns(a, b, "b"));
  ASSERT_NO_FATAL_FAILURE(probeWhileTargetRuns(b, a, "a"));
  expectNoIntrusionByCommand(a, "b");
  expectNoIntrusionByCommand(b, "a");

  expectServiceSideIsolation(a, b);
  expectServiceSideIsolation(b, a);
  // The service-side writes did not cross either.
  for (const Box* x : {&a, &b}) {
    auto ws = env_->workspace(x->handle);
    ASSERT_TRUE(ws);
    auto got = (*ws)->read("svc-written");
    ASSERT_TRUE(got) << got.error().message();  // its own handle wrote it
    EXPECT_EQ(*got, x->tag) << "the other sandbox's service-side write landed here";
    auto canary = (*ws)->read(x->canary);
    ASSERT_TRUE(canary);
    EXPECT_EQ(*canary, x->token + "\n");
  }
  auto seen = exec(a.handle, "cat /workspace/* 2>/dev/null; cat /tmp/* /dev/shm/* 2>/dev/null");
  EXPECT_EQ(seen.stdout_data.find(b.token), std::string::npos);
  EXPECT_NE(seen.stdout_data.find(a.token), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Tenancy, GateWorkspaceIsolated, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "SameTenant" : "TwoTenants");
                         });

}  // namespace
}  // namespace airlock::testing
