// Code mode on the real gvisor mechanism (the production mechanism; the
// same essentials as code_mode_linux_test.cpp): the capability directory at
// /run/airlock and the broker's socket reached through runsc's
// --host-uds=open, side processes started by the shim's keepers and
// confined like commands, the issue's program end to end, killing the guest
// mid-proc.run kills the effect's process group, the 33rd spawn refused,
// nothing left after destroy, and `airlock run --mechanism gvisor --code`.
// Needs root and runsc (skipped with the reason otherwise).
#include <dirent.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

#include "airlock/capability/broker/code_run.h"
#include "airlock/sandbox/oci/oci_bundle.h"
#include "airlock/sys/io.h"
#include "code_mode_cases.h"
#include "gvisor_fixture.h"
#include "gvisor_test_support.h"

namespace airlock::testing {
namespace {

using capability::CodeRunResult;

class CodeModeGvisorTest : public GvisorFixture {
 protected:
  ExecutionResult run(const ExecutionCommand& c) {
    auto r = env_->execute(handle_, c);
    EXPECT_TRUE(r) << r.error().message();
    return r ? *r : ExecutionResult{};
  }
  CodeRunResult runProgram(const std::string& program, std::int64_t timeout_seconds = 120) {
    return runCodeProgram(*env_, handle_, program, timeout_seconds);
  }
};

TEST_F(CodeModeGvisorTest, SideProcessIsConfinedLikeACommand) {
  // Everything a command's confinement decides, printed the same way by a
  // command and by a side process: ids, capabilities, no_new_privs, rlimits
  // (RLIMIT_NPROC is pids_max plus the shim's spare), the open fds, the environment, the
  // directory and the host name.
  const std::string probe =
      "id -u; id -g; id -G; grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs):' "
      "/proc/self/status; "
      "ulimit -a; python3 -c 'import ctypes; print(\"nnp\", ctypes.CDLL(None).prctl(39, 0, 0, 0, "
      "0))'; "
      "echo /proc/self/fd/*; env | sort; pwd; hostname";
  auto command = run(shell(probe));
  ASSERT_EQ(command.exit_code, 0) << command.stderr_data;

  std::string out;
  expectSideProcessSeesWhatACommandSees(*env_, handle_, probe, command.stdout_data, out);
  if (HasFatalFailure()) return;
  EXPECT_EQ(out.rfind("1000\n1000\n1000\n", 0), 0u) << out;
  EXPECT_NE(out.find("CapEff:\t0000000000000000"), std::string::npos) << out;
  EXPECT_NE(out.find("CapBnd:\t0000000000000000"), std::string::npos) << out;
  EXPECT_NE(out.find("nnp 1\n"), std::string::npos) << "no_new_privs: " << out;
  EXPECT_NE(out.find("coredump(blocks)     0\n"), std::string::npos) << out;
  EXPECT_NE(out.find("process              " +
                     std::to_string(defaultLimits().pids_max + oci::kPidsRefusalSpare) + "\n"),
            std::string::npos)
      << "RLIMIT_NPROC is pids_max plus the shim's spare: " << out;
  EXPECT_NE(out.find("nofiles              4096\n"), std::string::npos) << out;
  EXPECT_NE(out.find("/proc/self/fd/0 /proc/self/fd/1 /proc/self/fd/2 /proc/self/fd/3\n"),
            std::string::npos)
      << "only stdio (and the glob's own directory fd) is open: " << out;
}

TEST_F(CodeModeGvisorTest, SideProcessGetsStdinEnvAndWorkingDirectory) {
  ASSERT_EQ(run(shell("mkdir -p sub")).exit_code, 0);
  SideCommand side;
  int status = -1;
  expectSideProcessGetsStdinEnvAndWorkingDirectory(*env_, handle_, side, status);
  if (HasFatalFailure()) return;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;

  // Without with_stdin, stdin is /dev/null: cat ends at once.
  SideCommand quiet;
  quiet.argv = {"sh", "-c", "cat; echo done $?"};
  auto q = env_->startSideProcess(handle_, quiet);
  ASSERT_TRUE(q) << q.error().message();
  EXPECT_FALSE((*q)->stdinOpen());
  EXPECT_EQ(drain(**q).first, "done 0\n");

  side.working_directory = "../etc";
  auto escaped = env_->startSideProcess(handle_, side);
  ASSERT_FALSE(escaped) << "the working directory stays in the workspace";
  EXPECT_EQ(escaped.error().code, ErrorCode::kToolValidationError);
  side.working_directory = "missing";
  EXPECT_FALSE(env_->startSideProcess(handle_, side));
}

TEST_F(CodeModeGvisorTest, KillGroupKillsTheEffectAndWhatItStartedInItsGroup) {
  SideCommand side;
  side.argv = {"sh", "-c", "sleep 1000 & echo $!; wait"};
  auto p = env_->startSideProcess(handle_, side);
  ASSERT_TRUE(p) << p.error().message();
  // The background sleeper's pid, as the sandbox sees it, read while the
  // effect runs: its output is pumped on a thread of its own.
  std::mutex mu;
  std::condition_variable changed;
  std::string seen;
  std::optional<int> status;
  std::thread pumping([&] {
    SidePumpHooks hooks;
    hooks.output = [&](bool is_stdout, std::string_view chunk) {
      std::lock_guard lk(mu);
      if (is_stdout) seen.append(chunk);
      changed.notify_all();
    };
    hooks.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    const SidePumpOutcome pumped = (*p)->pump(hooks);
    std::lock_guard lk(mu);
    status = pumped.wait_status.value_or(-1);
    changed.notify_all();
  });
  bool have_line = false;
  std::string line;
  {
    std::unique_lock lk(mu);
    have_line = changed.wait_for(lk, std::chrono::seconds(30),
                                 [&] { return seen.find('\n') != std::string::npos; });
    if (have_line) line = seen.substr(0, seen.find('\n') + 1);
  }
  const std::string pid = have_line ? line.substr(0, line.size() - 1) : "";
  if (pid.empty()) {
    (*p)->killGroup();
    pumping.join();
    FAIL() << "no pid within 30 s";
  }
  // Checked from other side processes: a command's end would kill every
  // process of the sandbox, the sleeper included, and prove nothing.
  auto check = [&](const std::string& script) {
    SideCommand c;
    c.argv = {"sh", "-c", script};
    auto q = env_->startSideProcess(handle_, c);
    EXPECT_TRUE(q) << q.error().message();
    return q ? drain(**q).second : -1;
  };
  EXPECT_EQ(check("test -e /proc/" + pid), 0) << "the sleeper runs before the kill";

  (*p)->killGroup();
  (*p)->killGroup();  // idempotent
  pumping.join();
  ASSERT_TRUE(status);
  ASSERT_TRUE(WIFSIGNALED(*status)) << *status;
  EXPECT_EQ(WTERMSIG(*status), SIGKILL);
  // The sleeper was in the effect's group: it is gone (polled, bounded:
  // pid 1 reaps it once it has been reparented).
  EXPECT_EQ(check("i=0; while [ -e /proc/" + pid +
                  " ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; "
                  "test ! -e /proc/" +
                  pid),
            0)
      << "the background process of the killed group is still there";
}

TEST_F(CodeModeGvisorTest, ProgramReadsRunsStartsAJobWritesANoteAndReturnsAnOutcome) {
  expectTheIssueExampleCompletes(*env_, handle_);
}

TEST_F(CodeModeGvisorTest, KillingTheGuestMidProcRunKillsTheEffectsProcessGroup) {
  // As on linux: only the broker's kill (the keeper's kill(-pgid)) can end
  // the effect processes while the program (the command) still runs.
  expectKillingTheGuestMidProcRunKillsTheEffect(*env_, handle_);
}

TEST_F(CodeModeGvisorTest, The33rdSpawnIsRefusedWithTheCeilingsName) {
  auto r = runProgram(R"PY(
import airlock_cap as cap

def main():
    outputs = set()
    for i in range(1, 40):
        try:
            outputs.add(cap.proc.stdout(["sh", "-c", "echo ok"]))
        except cap.SpawnCeilingReached as e:
            return {"refused_at": i, "code": e.code, "message": e.message, "outputs": sorted(outputs)}
    return {"refused_at": None}
)PY");
  expectRefusedAtThe33rdSpawn(r);
  if (HasFatalFailure()) return;
  EXPECT_EQ(outcome(r)["completed"]["outputs"], (nlohmann::json::array({"ok\n"})))
      << "all 32 admitted spawns ran";
}

TEST_F(CodeModeGvisorTest, KeepersDoNotCountAgainstTheProgramsProcessLimit) {
  // Eight jobs at once under pids_max 16: the program and its eight effects
  // are 9 processes of the sandbox user; with the eight keepers (uid 0) the
  // sandbox holds 17, which the shim would report as the PIDS limit if it
  // counted them.
  reprovision([](ResourceLimits& limits) { limits.pids_max = 16; });
  if (HasFatalFailure()) return;
  auto r = runProgram(R"PY(
import airlock_cap as cap

def main():
    jobs = [cap.job.start(["sh", "-c", "echo up; exec sleep 60"]) for _ in range(8)]
    ups = sum(1 for j in jobs if cap.job.wait(j, timeout_ms=20000).stdout == "up\n")
    running = sum(1 for e in cap.job.list() if e["state"] == "running")
    for j in jobs:
        cap.job.kill(j)
    return {"ups": ups, "running": running}
)PY");
  auto j = outcome(r);
  ASSERT_TRUE(j.contains("completed")) << describe(r);
  EXPECT_EQ(j["completed"]["ups"], 8);
  EXPECT_EQ(j["completed"]["running"], 8);
  EXPECT_FALSE(r.execution.killed_by.has_value()) << describe(r);
  EXPECT_EQ(r.execution.exit_code, 0);
}

TEST_F(CodeModeGvisorTest, TheCapabilityDirectoryIsReadOnlyAndTheTokenPrivate) {
  auto r = runProgram(R"PY(
import os, stat

def main():
    st = os.stat("/run/airlock/token")
    token = open("/run/airlock/token").read()
    attempts = {}
    for name, action in [("plant", lambda: open("/run/airlock/planted", "w")),
                         ("overwrite", lambda: open("/run/airlock/token", "w")),
                         ("chmod", lambda: os.chmod("/run/airlock/token", 0o600)),
                         ("unlink", lambda: os.unlink("/run/airlock/cap.sock")),
                         ("replace", lambda: os.rename("/run/airlock/token", "/run/airlock/t2"))]:
        try:
            action()
            attempts[name] = "done"
        except OSError as e:
            attempts[name] = "refused"
    return {"mode": stat.S_IMODE(st.st_mode), "uid": st.st_uid, "token_len": len(token),
            "attempts": attempts, "socket": stat.S_ISSOCK(os.stat("/run/airlock/cap.sock").st_mode)}
)PY");
  auto j = outcome(r);
  ASSERT_TRUE(j.contains("completed")) << describe(r);
  auto v = j["completed"];
  EXPECT_EQ(v["mode"], 0400);
  EXPECT_EQ(v["uid"], 1000) << "the token file belongs to the sandbox user";
  EXPECT_EQ(v["token_len"], 64) << "the sandbox user reads the token";
  EXPECT_EQ(v["socket"], true);
  for (const char* a : {"plant", "overwrite", "chmod", "unlink", "replace"})
    EXPECT_EQ(v["attempts"][a], "refused") << a;
  // On the host: the directory is the sandbox user's, and nothing was planted.
  const std::string cap_dir = state_.path() + "/sandboxes/" + handle_.environment_id + "/cap";
  struct stat st {};
  ASSERT_EQ(::stat(cap_dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 1000u);
  EXPECT_NE(::access((cap_dir + "/planted").c_str(), F_OK), 0);
}

TEST_F(CodeModeGvisorTest, DestroyEndsSideProcessesAndLeavesNothingBehind) {
  auto r = runProgram(
      "import airlock_cap as cap\ndef main():\n    return cap.proc.stdout(['echo', 'hi'])\n");
  ASSERT_EQ(outcome(r)["completed"], "hi\n") << describe(r);
  // A side process still running when the sandbox goes.
  SideCommand side;
  side.argv = {"sleep", "1000"};
  auto p = env_->startSideProcess(handle_, side);
  ASSERT_TRUE(p) << p.error().message();
  EXPECT_FALSE((*p)->exitStatus()) << "still running";
  const std::string dir = state_.path() + "/sandboxes/" + handle_.environment_id;
  ASSERT_EQ(::access((dir + "/cap/python/airlock_cap").c_str(), F_OK), 0)
      << "the guest library stays in the directory after the run";
  ASSERT_GT(processesNaming(state_.path()), 0);

  ASSERT_TRUE(env_->destroy(handle_));
  auto [out, status] = drain(**p);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  EXPECT_FALSE(env_->startSideProcess(handle_, side)) << "no side process in a destroyed sandbox";
  EXPECT_FALSE(env_->openCapabilityChannel(handle_));
  p->reset();
  env_.reset();  // waits for the teardown worker
  EXPECT_EQ(processesNaming(state_.path()), 0);
  EXPECT_FALSE(mountedUnder(state_.path()));
  EXPECT_NE(::access(dir.c_str(), F_OK), 0) << "the sandbox directory (and its cap/) is gone";
  EXPECT_TRUE(entriesOf(state_.path() + "/sandboxes").empty());
}

TEST_F(CodeModeGvisorTest, AnotherTenantCannotReachTheChannelOrStartProcesses) {
  EnvironmentHandle other = handle_;
  other.tenant_id = "tenant-b";
  SideCommand side;
  side.argv = {"true"};
  auto p = env_->startSideProcess(other, side);
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().code, ErrorCode::kExecutionRejected);
  auto d = env_->openCapabilityChannel(other);
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().code, ErrorCode::kExecutionRejected);
}

#ifdef AIRLOCK_BINARY
// `airlock run --mechanism gvisor --code FILE.py --json`.
TEST(CodeModeGvisorCliTest, RunCodeOnGvisorPrintsTheOutcomeAsJson) {
  if (auto why = gvisorUnavailableHere()) GTEST_SKIP() << *why;
  GvisorStateDir state;
  std::string out;
  nlohmann::json j;
  runCodeWithTheCli(
      AIRLOCK_BINARY, "--mechanism gvisor ", state.path(),
      "import airlock_cap as cap\n"
      "def main():\n"
      "    cap.fs.write('a.txt', 'x')\n"
      "    j = cap.job.start(['sh', '-c', 'cat a.txt; echo'])\n"
      "    st = cap.job.wait(j, timeout_ms=20000)\n"
      "    while st.pending:\n"
      "        st = cap.job.wait(j, timeout_ms=20000)\n"
      "    return {'cat': cap.proc.stdout(['cat', 'a.txt']), 'job_exit': st.exit_code, 'answer': "
      "42}\n",
      j, out);
  if (HasFatalFailure()) return;
  EXPECT_EQ(j["outcome"]["completed"]["answer"], 42) << out;
  EXPECT_EQ(j["outcome"]["completed"]["cat"], "x") << out;
  EXPECT_EQ(j["outcome"]["completed"]["job_exit"], 0) << out;
  EXPECT_EQ(j["exit_code"], 0);
  ASSERT_TRUE(j["capability_audit"].is_array());
  int spawns = 0;
  for (const auto& a : j["capability_audit"])
    if (a["cap"] == "proc.run" || a["cap"] == "job.start") ++spawns;
  EXPECT_EQ(spawns, 2) << out;
  // The CLI destroyed its sandbox: nothing of it is left.
  EXPECT_EQ(processesNaming(state.path()), 0);
  EXPECT_FALSE(mountedUnder(state.path()));
  EXPECT_TRUE(entriesOf(state.path() + "/gvisor/sandboxes").empty());
}
#endif

}  // namespace
}  // namespace airlock::testing
