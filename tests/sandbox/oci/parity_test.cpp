// Parity of the linux and gvisor mechanisms: one table of
// commands, each run on both; the results must agree field by field (exit
// code, kill reason, timed_out, truncation, files changed, stdout), so a
// divergence is a failing test rather than a surprise in production.
//
// The table holds every case of gate_limits_enforced (spin loop, allocator,
// both fork bombs, disk and file-count fillers, output flood), so
// Parity.Gvisor is that gate on gvisor. Three suites over the same table:
//   Parity.Linux/<case>   linux against the table's expectation
//   Parity.Gvisor/<case>  gvisor against the table's expectation
//   Parity.Equal/<case>   both, compared with each other field by field
// Each skips with the reason where its mechanism cannot run.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "../linux/linux_test_support.h"
#include "gvisor_test_support.h"

namespace airlock::testing {
namespace {

struct Case {
  const char* name;
  std::function<void(ResourceLimits&)> limits;
  std::string script;
  std::int64_t timeout_seconds = 30;
  std::int64_t max_output = 1 << 20;
  std::optional<std::string> stdin_data;
  std::string working_directory = ".";
  bool cancelled = false;
  // Seeded into the workspace before the command (path, content).
  std::vector<std::pair<std::string, std::string>> seed;
  // Expectation (both mechanisms).
  std::optional<int> exit_code;
  std::optional<KillReason> killed_by;
  std::string stdout_data;
  bool stdout_is_prefix = false;                          // stdout must start with stdout_data
  std::vector<std::pair<std::string, ChangeKind>> files;  // files_changed, by path
  // Bytes of this stream were dropped at the output cap (and only then).
  bool stdout_truncated = false;
  bool stderr_truncated = false;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name;
}

void noLimits(ResourceLimits&) {}

const std::vector<Case>& table() {
  static const std::vector<Case> cases = [] {
    std::vector<Case> t;
    auto add = [&](Case c) { t.push_back(std::move(c)); };
    add({.name = "ExitCode",
         .limits = noLimits,
         .script = "echo out; echo err >&2; exit 3",
         .exit_code = 3,
         .stdout_data = "out\n"});
    add({.name = "Stdin",
         .limits = noLimits,
         .script = "cat; echo done",
         .stdin_data = std::string("line one\nline two\n"),
         .exit_code = 0,
         .stdout_data = "line one\nline two\ndone\n"});
    add({.name = "Identity",
         .limits = noLimits,
         .script = "id -u; id -g; echo \"$HOME $PWD\"; grep CapEff /proc/self/status",
         .exit_code = 0,
         .stdout_data = "1000\n1000\n/workspace /workspace\nCapEff:\t0000000000000000\n"});
    add({.name = "WorkingDirectory",
         .limits = noLimits,
         .script = "pwd; cat here.txt",
         .working_directory = "sub",
         .seed = {{"sub/here.txt", "in sub\n"}},
         .exit_code = 0,
         .stdout_data = "/workspace/sub\nin sub\n"});
    add({.name = "FilesChanged",
         .limits = noLimits,
         .script = "printf 'hi\\n' > out.txt && printf 'changed\\n' > keep.txt && rm gone.txt && "
                   "mkdir -p d && : > d/empty",
         .seed = {{"keep.txt", "keep\n"}, {"gone.txt", "gone\n"}},
         .exit_code = 0,
         .stdout_data = "",
         .files = {{"d/empty", ChangeKind::kCreated},
                   {"gone.txt", ChangeKind::kDeleted},
                   {"keep.txt", ChangeKind::kModified},
                   {"out.txt", ChangeKind::kCreated}}});
    add({.name = "BackgroundOutputIsKept",
         .limits = noLimits,
         .script = "(sleep 1; echo late) & echo early",
         .exit_code = 0,
         .stdout_data = "early\nlate\n"});
    add({.name = "BackgroundProcessIsKilled",
         .limits = noLimits,
         .script = "sleep 300 >/dev/null 2>&1 </dev/null & echo started",
         .exit_code = 0,
         .stdout_data = "started\n"});
    add({.name = "Signalled",
         .limits = noLimits,
         .script = "kill -TERM $$",
         .exit_code = 143,
         .stdout_data = ""});
    add({.name = "UnknownProgram",
         .limits = noLimits,
         .script = "exec no-such-program-anywhere",
         .exit_code = 127,
         .stdout_data = ""});
    add({.name = "ReadOnlyImage",
         .limits = noLimits,
         .script = "touch /usr/x 2>/dev/null || echo refused",
         .exit_code = 0,
         .stdout_data = "refused\n"});
    add({.name = "Timeout",
         .limits = noLimits,
         .script = "echo partial; sleep 60",
         .timeout_seconds = 1,
         .killed_by = KillReason::kTimeout,
         .stdout_data = "partial\n"});
    add({.name = "SpinLoop",
         .limits = noLimits,
         .script = "echo partial; while :; do :; done",
         .timeout_seconds = 2,
         .killed_by = KillReason::kTimeout,
         .stdout_data = "partial\n"});
    add({.name = "Cancelled",
         .limits = noLimits,
         .script = "sleep 60",
         .cancelled = true,
         .killed_by = KillReason::kCancelled,
         .stdout_data = ""});
    add({.name = "OutputLimit",
         .limits = noLimits,
         .script = "yes",
         .max_output = 4096,
         .killed_by = KillReason::kOutputLimit,
         .stdout_data =
             [] {
               std::string s;
               while (s.size() < 4096) s += "y\n";
               return s.substr(0, 4096);
             }(),
         .stdout_truncated = true});
    // The cap crossed by stderr alone: the empty stdout is not truncated.
    add({.name = "OutputLimitOnStderr",
         .limits = noLimits,
         .script = "yes >&2",
         .max_output = 4096,
         .killed_by = KillReason::kOutputLimit,
         .stdout_data = "",
         .stderr_truncated = true});
    add({.name = "Memory",
         .limits = [](ResourceLimits& l) { l.memory_bytes = 64 << 20; },
         .script = "echo partial; exec python3 -c 'b = bytearray(256 << 20); b[::4096] = b\"x\" * "
                   "len(b[::4096])'",
         .killed_by = KillReason::kMemory,
         .stdout_data = "partial\n"});
    add({.name = "ForkBomb",
         .limits = [](ResourceLimits& l) { l.pids_max = 32; },
         .script = "echo partial; f(){ f | f & }; f",
         .killed_by = KillReason::kPids,
         .stdout_data = "partial\n",
         .stdout_is_prefix = true});
    add({.name = "ForkBombBash",
         .limits = [](ResourceLimits& l) { l.pids_max = 32; },
         .script = "echo partial; bash -c ':(){ :|:& };:'",
         .killed_by = KillReason::kPids,
         .stdout_data = "partial\n",
         .stdout_is_prefix = true});
    add({.name = "DiskFiller",
         .limits = [](ResourceLimits& l) { l.workspace_bytes = 8 << 20; },
         .script = "echo partial; yes > filler; sleep 30",
         .killed_by = KillReason::kDisk,
         .stdout_data = "partial\n",
         .files = {{"filler", ChangeKind::kCreated}}});
    add({.name = "InodeFiller",
         .limits = [](ResourceLimits& l) { l.inodes_max = 200; },
         .script = "i=0; while touch f$i 2>/dev/null; do i=$((i+1)); done; sleep 30",
         .killed_by = KillReason::kDisk,
         .stdout_data = ""});
    return t;
  }();
  return cases;
}

// One mechanism, behind the port: creates the adapter and a spec.
struct Mechanism {
  virtual ~Mechanism() = default;
  virtual std::optional<std::string> unavailable() = 0;
  virtual Result<std::unique_ptr<ExecutionEnvironment>> make() = 0;
  virtual EnvironmentSpec spec() = 0;
};

struct LinuxMechanism : Mechanism {
  TempStateDir state;
  std::optional<std::string> unavailable() override { return linuxJailUnavailable(); }
  Result<std::unique_ptr<ExecutionEnvironment>> make() override {
    return linux_jail::createLinuxEnvironment(testOptions(state.path()));
  }
  EnvironmentSpec spec() override { return linuxSpec(testOptions(state.path())); }
};

struct GvisorMechanism : Mechanism {
  GvisorStateDir state;
  std::optional<std::string> unavailable() override { return gvisorUnavailableHere(); }
  Result<std::unique_ptr<ExecutionEnvironment>> make() override {
    return gvisor::createGvisorEnvironment(gvisorOptions(state.path()));
  }
  EnvironmentSpec spec() override { return gvisorSpec(gvisorOptions(state.path())); }
};

// Runs one case on a fresh sandbox of `m`; the result, or a failure.
std::optional<ExecutionResult> runCase(Mechanism& m, const Case& c) {
  auto env = m.make();
  EXPECT_TRUE(env) << env.error().message();
  if (!env) return std::nullopt;
  auto spec = m.spec();
  c.limits(spec.limits);
  auto h = (*env)->provision(spec);
  EXPECT_TRUE(h) << h.error().message();
  if (!h) return std::nullopt;
  auto ws = (*env)->workspace(*h);
  EXPECT_TRUE(ws);
  for (const auto& [path, content] : c.seed) EXPECT_TRUE((*ws)->write(path, content)) << path;
  ExecutionCommand cmd;
  cmd.argv = {"sh", "-c", c.script};
  cmd.timeout_seconds = c.timeout_seconds;
  cmd.maximum_output_bytes = c.max_output;
  cmd.stdin_data = c.stdin_data;
  cmd.working_directory = c.working_directory;
  std::optional<CancelToken> token;
  if (c.cancelled) {
    auto t = CancelToken::create();
    EXPECT_TRUE(t);
    if (t) {
      t->cancel();
      token.emplace(std::move(*t));
    }
  }
  auto r = (*env)->execute(*h, cmd, token ? &*token : nullptr);
  EXPECT_TRUE((*env)->destroy(*h));
  EXPECT_TRUE(r) << r.error().message();
  if (!r) return std::nullopt;
  return *r;
}

void expectMatchesTable(const ExecutionResult& r, const Case& c) {
  EXPECT_EQ(r.exit_code, c.exit_code) << "stderr: " << r.stderr_data.substr(0, 300);
  EXPECT_EQ(r.killed_by, c.killed_by) << "stderr: " << r.stderr_data.substr(0, 300);
  EXPECT_EQ(r.timed_out, c.killed_by == KillReason::kTimeout);
  EXPECT_EQ(r.stdout_truncated, c.stdout_truncated);
  EXPECT_EQ(r.stderr_truncated, c.stderr_truncated);
  if (c.stdout_is_prefix)
    EXPECT_EQ(r.stdout_data.rfind(c.stdout_data, 0), 0u) << r.stdout_data.substr(0, 200);
  else
    EXPECT_EQ(r.stdout_data, c.stdout_data);
  if (std::string(c.name) != "InodeFiller") {
    std::vector<std::pair<std::string, ChangeKind>> files;
    for (const auto& f : r.files_changed) files.emplace_back(f.path, f.change);
    EXPECT_EQ(files, c.files);
  }
}

class Parity : public ::testing::TestWithParam<Case> {};

TEST_P(Parity, Linux) {
  LinuxMechanism m;
  if (auto why = m.unavailable()) GTEST_SKIP() << *why;
  auto r = runCase(m, GetParam());
  ASSERT_TRUE(r.has_value());
  expectMatchesTable(*r, GetParam());
}

TEST_P(Parity, Gvisor) {
  GvisorMechanism m;
  if (auto why = m.unavailable()) GTEST_SKIP() << *why;
  auto r = runCase(m, GetParam());
  ASSERT_TRUE(r.has_value());
  expectMatchesTable(*r, GetParam());
}

TEST_P(Parity, Equal) {
  LinuxMechanism l;
  GvisorMechanism g;
  if (auto why = l.unavailable()) GTEST_SKIP() << "linux: " << *why;
  if (auto why = g.unavailable()) GTEST_SKIP() << "gvisor: " << *why;
  const Case& c = GetParam();
  auto a = runCase(l, c);
  auto b = runCase(g, c);
  ASSERT_TRUE(a.has_value() && b.has_value());
  EXPECT_EQ(a->exit_code, b->exit_code);
  EXPECT_EQ(a->killed_by, b->killed_by);
  EXPECT_EQ(a->timed_out, b->timed_out);
  EXPECT_EQ(a->stdout_truncated, b->stdout_truncated);
  EXPECT_EQ(a->stderr_truncated, b->stderr_truncated);
  EXPECT_EQ(a->files_changed_truncated, b->files_changed_truncated);
  EXPECT_EQ(a->files_changed, b->files_changed);
  if (c.stdout_is_prefix) {
    // A fork bomb's output depends on scheduling; both start with the table's.
    EXPECT_EQ(a->stdout_data.rfind(c.stdout_data, 0), 0u);
    EXPECT_EQ(b->stdout_data.rfind(c.stdout_data, 0), 0u);
  } else {
    EXPECT_EQ(a->stdout_data, b->stdout_data);
  }
}

INSTANTIATE_TEST_SUITE_P(Table, Parity, ::testing::ValuesIn(table()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace airlock::testing
