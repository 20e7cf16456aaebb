// Gate "No host path crosses the port" (spec 000, hard gates;
// gate.sandbox.spec_has_no_host_path), the behavioural half: drive the
// linux adapter and copy-in through every result and error we can provoke
// and assert that nothing that reaches a caller (Error::message(), the JSON
// of every ExecutionResult and EnvironmentHandle) names a host path: not the
// state directory, not /run/airlock or /tmp/airlock-test-state, not /proc/
// or /sys/fs/cgroup, not a copy-in source's members beyond the caller's own
// argument (which may be echoed).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "../sandbox/linux/linux_test_support.h"
#include "airlock/core/json.h"
#include "airlock/workspace/local_workspace.h"

namespace airlock::testing {
namespace {

// A temporary copy-in source directory, removed with everything in it.
class TempSourceDir {
 public:
  TempSourceDir() {
    char tmpl[] = "/tmp/gate-copyin-src-XXXXXX";
    char* p = ::mkdtemp(tmpl);
    if (p != nullptr) path_ = p;
  }
  ~TempSourceDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct Seen {
  std::string what;  // the operation, for failure messages
  std::string text;  // what reached the caller
  std::string echo;  // the caller's own argument, which may appear
};

class GateSpecHasNoHostPath : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = linuxJailUnavailable()) GTEST_SKIP() << *why;
    ASSERT_FALSE(src_.path().empty());
    options_ = testOptions(state_.path());
    auto env = linux_jail::createLinuxEnvironment(options_);
    ASSERT_TRUE(env) << env.error().message();
    env_ = std::move(*env);
  }
  void TearDown() override {
    if (!env_) return;
    for (auto& h : live_) EXPECT_TRUE(env_->destroy(h));
  }

  template <class T>
  void expectError(const std::string& what, const Result<T>& r, const std::string& echo = "") {
    EXPECT_FALSE(r) << what << " unexpectedly succeeded";
    if (!r) seen_.push_back({what, r.error().message(), echo});
  }
  void record(const std::string& what, const ExecutionResult& r) {
    seen_.push_back({what, toJsonText(r), ""});
  }
  void record(const std::string& what, const EnvironmentHandle& h) {
    seen_.push_back({what, toJsonText(h), ""});
  }

  Result<EnvironmentHandle> provision(EnvironmentSpec spec) {
    auto h = env_->provision(spec);
    if (h) {
      live_.push_back(*h);
      record("provision", *h);
    }
    return h;
  }

  // Every forbidden fragment, checked over everything recorded.
  void checkSeen() {
    ASSERT_FALSE(seen_.empty());
    std::vector<std::string> forbidden = {
        state_.path(), "/run/airlock",   "/tmp/airlock-test-state",
        "/proc/",      "/sys/fs/cgroup", src_.path()};
    // The workspace's host view, where the adapter or its init keeps it.
    forbidden.push_back(state_.path() + "/root");
    const bool dump = ::getenv("AIRLOCK_GATE_DUMP") != nullptr;  // for a reviewer
    for (const auto& s : seen_) {
      if (dump) std::cout << s.what << ": " << s.text.substr(0, 400) << "\n";
      std::string text = s.text;
      if (!s.echo.empty()) {
        // The caller's own argument may be echoed; remove it, then nothing
        // else of the source tree may remain.
        for (std::size_t at; (at = text.find(s.echo)) != std::string::npos;)
          text.erase(at, s.echo.size());
      }
      for (const auto& f : forbidden)
        EXPECT_EQ(text.find(f), std::string::npos)
            << s.what << " carries host path fragment \"" << f << "\": " << s.text;
    }
  }

  TempStateDir state_;
  TempSourceDir src_;
  linux_jail::LinuxEnvironmentOptions options_;
  std::unique_ptr<ExecutionEnvironment> env_;
  std::vector<EnvironmentHandle> live_;
  std::vector<Seen> seen_;
};

TEST_F(GateSpecHasNoHostPath, NoResultOrErrorNamesAHostPath) {
  // --- provision refusals ----------------------------------------------
  {
    auto spec = linuxSpec(options_);
    spec.image_digest = "sha256:" + std::string(64, '0');
    expectError("provision with an unknown digest", provision(spec));
    spec.image_digest = "not-a-digest";
    expectError("provision with a malformed digest", provision(spec));
  }
  {
    auto spec = linuxSpec(options_);
    spec.limits.memory_bytes = options_.ceilings.memory_bytes + 1;
    expectError("provision with memory over the ceiling", provision(spec));
    spec = linuxSpec(options_);
    spec.limits.pids_max = options_.ceilings.pids_max + 1;
    expectError("provision with pids over the ceiling", provision(spec));
    spec = linuxSpec(options_);
    spec.limits.workspace_bytes = options_.ceilings.workspace_bytes + 1;
    expectError("provision with workspace bytes over the ceiling", provision(spec));
  }

  // --- a live sandbox ----------------------------------------------------
  auto h = provision(linuxSpec(options_));
  ASSERT_TRUE(h) << h.error().message();
  auto ws = env_->workspace(*h);
  ASSERT_TRUE(ws) << ws.error().message();

  {
    // A successful command with files_changed, and things to trip over.
    auto r = env_->execute(*h, shell("mkdir -p d/e && echo hi > d/e/f.txt && echo out && "
                                     "ln -s / rootlink && ln -s ../.. uplink && "
                                     "ln -s /tmp tmplink && echo data > plain.txt && "
                                     "echo err >&2"));
    ASSERT_TRUE(r) << r.error().message();
    ASSERT_EQ(r->exit_code, std::optional<int>(0)) << r->stderr_data;
    ASSERT_FALSE(r->files_changed.empty());
    record("successful execute", *r);
    for (const auto& fc : r->files_changed) EXPECT_NE(fc.path.front(), '/') << fc.path;
    // One that fails, and one the mechanism kills.
    auto f = env_->execute(*h, shell("cat /nonexistent-file; rm -f plain.txt; exit 3"));
    ASSERT_TRUE(f) << f.error().message();
    EXPECT_EQ(f->exit_code, std::optional<int>(3));
    record("failing execute", *f);
    auto t = env_->execute(*h, shell("yes", 60));
    ASSERT_TRUE(t);
    record("output-limited execute", *t);
    auto missing = env_->execute(*h, ExecutionCommand{{"/no/such/binary"}, ".", 10, {}, 4096});
    if (missing)
      record("execute of a missing binary", *missing);
    else
      expectError("execute of a missing binary", missing);
  }

  // --- bad working directories ------------------------------------------
  for (const std::string& wd : std::vector<std::string>{
           "../x", "a/../../b", "nonexistent", "/", "/workspace", "rootlink", "rootlink/etc",
           "uplink", "tmplink", "d/e/f.txt", std::string("a\0b", 3)}) {
    auto c = shell("pwd");
    c.working_directory = wd;
    expectError("execute with working_directory " + wd, env_->execute(*h, c));
  }
  {
    ExecutionCommand bad;
    bad.argv = {};
    bad.timeout_seconds = 10;
    bad.maximum_output_bytes = 10;
    expectError("execute with empty argv", env_->execute(*h, bad));
  }

  // --- workspace port: escaping, missing, wrong type --------------------
  for (const std::string& p : std::vector<std::string>{
           "../x", "a/../../b", "/etc/passwd", "missing", "d/missing/x", "rootlink",
           "rootlink/etc/passwd", "uplink/etc/passwd", "tmplink/x", "d", "", ".", "d/e/f.txt/x"}) {
    expectError("read " + p, (*ws)->read(p));
    // Writable or creatable names (a symlink at the name is replaced).
    if (p == "d" || p == "missing" || p == "d/missing/x" || p == "rootlink") continue;
    expectError("write " + p, (*ws)->write(p, "x"));
  }
  expectError("write onto a directory", (*ws)->write("d/e", "x"));
  expectError("write below a file", (*ws)->write("d/e/f.txt/g", "x"));
  expectError("mkdir ../x", (*ws)->mkdir("../x"));
  expectError("mkdir over a file", (*ws)->mkdir("d/e/f.txt"));
  expectError("mkdir rootlink/x", (*ws)->mkdir("rootlink/x"));
  expectError("listdir ../", (*ws)->listdir("../"));
  expectError("listdir rootlink", (*ws)->listdir("rootlink"));
  expectError("listdir missing", (*ws)->listdir("missing"));
  expectError("listdir of a file", (*ws)->listdir("d/e/f.txt"));
  expectError("provenance ../x", (*ws)->provenance("../x"));
  expectError("placeFile ../x", (*ws)->placeFile("../x", "x"));

  // --- copy-in refusals -------------------------------------------------
  {
    const std::string root = src_.path();
    std::filesystem::create_directories(root + "/tree/a");
    std::ofstream(root + "/tree/a/ok.txt") << "ok";
    ASSERT_EQ(::symlink(state_.path().c_str(), (root + "/tree/a/link").c_str()), 0);
    const std::string tree = root + "/tree";
    auto r = workspace::copyInDirectory(tree, **ws);
    expectError("copy-in of a tree with a symlink", r, tree);
    if (!r) {
      EXPECT_EQ(r.error().code, ErrorCode::kToolValidationError);
      EXPECT_NE(r.error().message().find("a/link"), std::string::npos) << r.error().message();
    }

    std::filesystem::create_directories(root + "/fifo/x");
    ASSERT_EQ(::mkfifo((root + "/fifo/x/pipe").c_str(), 0600), 0);
    expectError("copy-in of a tree with a FIFO", workspace::copyInDirectory(root + "/fifo", **ws),
                root + "/fifo");
    expectError("copy-in of a missing source", workspace::copyInDirectory(root + "/missing", **ws),
                root + "/missing");
    expectError("copy-in of a file source",
                workspace::copyInDirectory(root + "/tree/a/ok.txt", **ws), root + "/tree/a/ok.txt");
    // Relative caller argument: its absolute form must not appear.
    std::error_code ec;
    const auto old_cwd = std::filesystem::current_path(ec);
    ASSERT_FALSE(ec);
    std::filesystem::current_path(root, ec);
    ASSERT_FALSE(ec);
    auto rel = workspace::copyInDirectory("tree", **ws);
    std::filesystem::current_path(old_cwd, ec);
    ASSERT_FALSE(ec);
    expectError("copy-in of a relative tree with a symlink", rel, "tree");
    std::ofstream(root + "/not-an-archive.tar") << "this is not a tar file at all";
    expectError("copy-in of a non-archive",
                workspace::copyInArchive(root + "/not-an-archive.tar", **ws),
                root + "/not-an-archive.tar");
    // Nothing of the refused copies landed.
    expectError("read of a refused copy-in member", (*ws)->read("a/ok.txt"));
  }

  // --- foreign handle (tenant mismatch): escape suspected ---------------
  {
    auto other = provision(linuxSpec(options_));
    ASSERT_TRUE(other) << other.error().message();
    EnvironmentHandle forged = *other;
    forged.tenant_id = "tenant-forged";
    expectError("execute with a forged tenant", env_->execute(forged, shell("true")));
    expectError("execute after the forged attempt destroyed it",
                env_->execute(*other, shell("true")));
  }

  // --- destroyed handle --------------------------------------------------
  ASSERT_TRUE(env_->destroy(*h));
  expectError("execute on a destroyed handle", env_->execute(*h, shell("true")));
  expectError("workspace of a destroyed handle", env_->workspace(*h));
  expectError("read through a workspace held past destroy", (*ws)->read("plain.txt"));
  expectError("write through a workspace held past destroy", (*ws)->write("x", "y"));
  expectError("listdir through a workspace held past destroy", (*ws)->listdir("."));
  {
    EnvironmentHandle unknown = *h;
    unknown.environment_id = "00000000-0000-7000-8000-000000000000";
    expectError("execute on an unknown handle", env_->execute(unknown, shell("true")));
  }
  {
    const std::string clean = src_.path() + "/clean";
    std::filesystem::create_directories(clean);
    std::ofstream(clean + "/f.txt") << "f";
    expectError("copy-in through a workspace held past destroy",
                workspace::copyInDirectory(clean, **ws), clean);
  }

  // --- shutdown ----------------------------------------------------------
  env_->shutdown();
  expectError("provision after shutdown", provision(linuxSpec(options_)));

  checkSeen();
}

}  // namespace
}  // namespace airlock::testing
