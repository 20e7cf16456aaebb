// Code mode on the real linux mechanism: a Python
// program in the sandbox calls capabilities through the guest library and
// ends with one outcome; side processes are confined like commands; killing
// the guest mid-proc.run kills the effect's process group; deadlines and the
// spawn ceiling are enforced. Needs root (skipped with the reason otherwise).
#include <dirent.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <sstream>

#include "airlock/artifacts/memory_repository.h"
#include "airlock/capability/broker/code_run.h"
#include "airlock/capability/broker/guest_files.h"
#include "airlock/execution/capabilities/execution_capabilities.h"
#include "airlock/sys/io.h"
#include "code_mode_cases.h"
#include "linux_test_support.h"

namespace airlock::testing {
namespace {

using capability::CodeRunResult;

class CodeModeLinuxTest : public SandboxTest {
 protected:
  CodeRunResult runProgram(const std::string& program, std::int64_t timeout_seconds = 120) {
    return runCodeProgram(*env_, handle_, program, timeout_seconds);
  }
};

TEST_F(CodeModeLinuxTest, SideProcessIsConfinedLikeACommand) {
  const std::string probe =
      "id -u; id -g; grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status; cat "
      "/proc/self/cgroup; "
      "for ns in user mnt pid net ipc uts cgroup; do readlink /proc/self/ns/$ns; done; pwd; "
      "hostname";
  auto command = run(shell(probe));
  ASSERT_EQ(command.exit_code, 0) << command.stderr_data;

  std::string out;
  expectSideProcessSeesWhatACommandSees(*env_, handle_, probe, command.stdout_data, out);
  if (HasFatalFailure()) return;
  EXPECT_NE(out.find("1000\n1000\n"), std::string::npos);
  EXPECT_NE(out.find("CapEff:\t0000000000000000"), std::string::npos);
  EXPECT_NE(out.find("NoNewPrivs:\t1"), std::string::npos);
  EXPECT_NE(out.find("Seccomp:\t2"), std::string::npos);
}

TEST_F(CodeModeLinuxTest, SideProcessGetsStdinEnvAndWorkingDirectory) {
  ASSERT_TRUE(run(shell("mkdir -p sub")).exit_code == 0);
  SideCommand side;
  int status = -1;
  expectSideProcessGetsStdinEnvAndWorkingDirectory(*env_, handle_, side, status);
  if (HasFatalFailure()) return;

  side.working_directory = "../etc";
  EXPECT_FALSE(env_->startSideProcess(handle_, side))
      << "the working directory stays in the workspace";
}

TEST_F(CodeModeLinuxTest, ProgramReadsRunsStartsAJobWritesANoteAndReturnsAnOutcome) {
  expectTheIssueExampleCompletes(*env_, handle_);
}

// Durable notes (spec 001, "Durable code-mode notes"): a second program of
// the same run reads what the first put, through notes.* and through
// fs.read("note://KEY"); note:// is read-only; another run sees none of them.
TEST_F(CodeModeLinuxTest, ASecondProgramOfTheRunReadsTheFirstsNotes) {
  artifacts::MemoryArtifactRepository repository;
  auto run = [&](const std::string& run_id, const std::string& program) {
    capability::CodeRunOptions o;
    o.program = program;
    o.limits.timeout_seconds = 120;
    o.limits.maximum_output_bytes = 1 << 20;
    o.execution_id = "test-exec";
    o.add_execution = execution::addExecutionCapabilities;
    o.notes = gateway::NoteServices{
        &repository, handle_.tenant_id, run_id, handle_.environment_id, std::chrono::hours(1), {}};
    auto r = capability::runCode(*env_, handle_, o);
    EXPECT_TRUE(r) << (r ? "" : r.error().message());
    return r ? outcome(*r) : nlohmann::json();
  };
  auto first = run(handle_.run_id, R"PY(
import airlock_cap as cap

def main():
    cap.notes.put("plan", {"step": 1, "items": [1, 2.5, "x", None, True]})
    cap.notes.put("plan/next", "compile")
    return cap.notes.list()
)PY");
  ASSERT_TRUE(first.contains("completed")) << first.dump();
  EXPECT_EQ(first["completed"], (nlohmann::json::array({"plan", "plan/next"})));

  auto second = run(handle_.run_id, R"PY(
import json
import airlock_cap as cap

def main():
    out = {"plan": cap.notes.get("plan"), "keys": cap.notes.list("plan/"),
           "via_fs": json.loads(cap.fs.read("note://plan/next"))}
    for name, attempt in (("write", lambda: cap.fs.write("note://plan", "x")),
                          ("list", lambda: cap.fs.list("note://")),
                          ("missing", lambda: cap.fs.read("note://nope"))):
        try:
            attempt()
            out[name] = "allowed"
        except cap.CapError as e:
            out[name] = e.code
    cap.notes.put("plan", {"step": 2})
    return out
)PY");
  ASSERT_TRUE(second.contains("completed")) << second.dump();
  const auto& v = second["completed"];
  EXPECT_EQ(v["plan"], (nlohmann::json{{"step", 1}, {"items", {1, 2.5, "x", nullptr, true}}}));
  EXPECT_EQ(v["keys"], (nlohmann::json::array({"plan/next"})));
  EXPECT_EQ(v["via_fs"], "compile");
  EXPECT_EQ(v["write"], "read_only");
  EXPECT_EQ(v["list"], "read_only");
  EXPECT_EQ(v["missing"], "not_found");
  auto stored = repository.findNote(handle_.tenant_id, handle_.run_id, "plan");
  ASSERT_TRUE(stored && *stored);
  EXPECT_EQ((*stored)->value_json, R"({"step":2})") << "the second program's put replaced it";
  EXPECT_EQ((*stored)->written_by, handle_.environment_id);

  auto other = run("another-run", R"PY(
import airlock_cap as cap

def main():
    return cap.notes.list()
)PY");
  ASSERT_TRUE(other.contains("completed")) << other.dump();
  EXPECT_EQ(other["completed"], nlohmann::json::array()) << "another run's blackboard is empty";
}

TEST_F(CodeModeLinuxTest, AnExceptionIsAnErroredOutcome) {
  auto r = runProgram("def main():\n    raise ValueError('boom')\n");
  auto j = outcome(r);
  ASSERT_TRUE(j.contains("errored")) << describe(r);
  EXPECT_EQ(j["errored"]["message"], "ValueError: boom");
  EXPECT_EQ(j["errored"]["details"]["type"], "ValueError");
  EXPECT_EQ(r.execution.exit_code, 1);
}

TEST_F(CodeModeLinuxTest, KillingTheGuestMidProcRunKillsTheEffectsProcessGroup) {
  // The program starts a second program (a child python with the same
  // channel settings) that calls proc.run on a shell which backgrounds a
  // sleeper and waits; once both pids are on disk, the first program
  // SIGKILLs the child and watches both effect processes disappear.
  expectKillingTheGuestMidProcRunKillsTheEffect(*env_, handle_);
}

TEST_F(CodeModeLinuxTest, ACallPastItsDeadlineIsRefusedAndItsEffectKilled) {
  auto r = runProgram(R"PY(
import os, time
import airlock_cap as cap

def main():
    started = time.monotonic()
    try:
        cap.proc.run(["sh", "-c", "echo $$ > slow.pid; exec sleep 100"], deadline_ms=700)
        return {"error": "no refusal"}
    except cap.DeadlineExceeded as e:
        code = e.code
    pid = int(open("/workspace/slow.pid").read())
    deadline = time.monotonic() + 20
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.02)
    return {"code": code, "effect_gone": not os.path.exists(f"/proc/{pid}"),
            "seconds": time.monotonic() - started}
)PY");
  auto j = outcome(r);
  ASSERT_TRUE(j.contains("completed")) << describe(r);
  EXPECT_EQ(j["completed"]["code"], "deadline_exceeded");
  EXPECT_EQ(j["completed"]["effect_gone"], true);
  EXPECT_LT(j["completed"]["seconds"].get<double>(), 30.0);
}

TEST_F(CodeModeLinuxTest, The33rdSpawnIsRefusedWithTheCeilingsName) {
  auto r = runProgram(R"PY(
import airlock_cap as cap

def main():
    for i in range(1, 40):
        try:
            cap.proc.run(["true"])
        except cap.SpawnCeilingReached as e:
            return {"refused_at": i, "code": e.code, "message": e.message}
    return {"refused_at": None}
)PY");
  expectRefusedAtThe33rdSpawn(r);
}

TEST_F(CodeModeLinuxTest, ProcStdoutReducesAFailureToOneErrorString) {
  auto r = runProgram(R"PY(
import airlock_cap as cap

def main():
    try:
        cap.proc.stdout(["sh", "-c", "echo " + "x" * 300 + " >&2; exit 3", "a" * 200])
    except cap.ProcFailed as e:
        return e.message
)PY");
  auto j = outcome(r);
  ASSERT_TRUE(j.contains("completed")) << describe(r);
  const std::string m = j["completed"];
  EXPECT_NE(m.find("exited with 3"), std::string::npos) << m;
  EXPECT_NE(m.find("xxx"), std::string::npos) << m;
  EXPECT_LE(m.size(), 160u + 20u + 400u) << m;
}

TEST_F(CodeModeLinuxTest, TheCapCommandReachesTheChannelFromAShell) {
  auto r = runProgram(R"PY(
import json, subprocess

def main():
    # A shell finds `cap` on PATH (the program's PATH starts with /run/airlock/bin).
    ok = subprocess.run(["sh", "-c", """cap call proc.run '{"argv": ["echo", "via-cap"]}'"""],
                        capture_output=True, text=True)
    bad = subprocess.run(["/run/airlock/bin/cap", "call", "nope.nope"], capture_output=True, text=True)
    return {"ok": json.loads(ok.stdout)["stdout"], "rc": ok.returncode,
            "bad_rc": bad.returncode, "bad": json.loads(bad.stderr)["error"]["code"]}
)PY");
  auto j = outcome(r);
  ASSERT_TRUE(j.contains("completed")) << describe(r);
  EXPECT_EQ(j["completed"]["ok"], "via-cap\n");
  EXPECT_EQ(j["completed"]["rc"], 0);
  EXPECT_EQ(j["completed"]["bad_rc"], 1);
  EXPECT_EQ(j["completed"]["bad"], "denied");
}

TEST_F(CodeModeLinuxTest, TheCapabilityDirectoryIsReadOnlyAndTheTokenPrivate) {
  auto r = runProgram(R"PY(
import os, stat

def main():
    st = os.stat("/run/airlock/token")
    try:
        open("/run/airlock/planted", "w")
        writable = True
    except OSError:
        writable = False
    return {"mode": stat.S_IMODE(st.st_mode), "uid": st.st_uid, "writable": writable}
)PY");
  auto j = outcome(r);
  ASSERT_TRUE(j.contains("completed")) << describe(r);
  EXPECT_EQ(j["completed"]["mode"], 0400);
  EXPECT_EQ(j["completed"]["uid"], 1000) << "the token file belongs to the sandbox user";
  EXPECT_EQ(j["completed"]["writable"], false);
}

// The port's channel (openCapabilityChannel) reaches this sandbox's
// /run/airlock, for the sandbox's tenant only and only while it lives.
TEST_F(CodeModeLinuxTest, TheChannelWritesWhatTheSandboxSeesAndOnlyForItsTenant) {
  EnvironmentHandle other = handle_;
  other.tenant_id = "tenant-b";
  auto refused = env_->openCapabilityChannel(other);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kExecutionRejected);

  auto channel = env_->openCapabilityChannel(handle_);
  ASSERT_TRUE(channel) << channel.error().message();
  ASSERT_TRUE((*channel)->writeFile("probe/seen.txt", "through the channel", 0400,
                                    CapabilityFileOwner::kSandboxUser));
  auto seen =
      run(shell("cat /run/airlock/probe/seen.txt; stat -c ' %u %a' /run/airlock/probe/seen.txt"));
  ASSERT_EQ(seen.exit_code, 0) << seen.stderr_data;
  EXPECT_EQ(seen.stdout_data, "through the channel 1000 400\n");
  ASSERT_TRUE((*channel)->removeFile("probe/seen.txt"));
  EXPECT_NE(run(shell("test -e /run/airlock/probe/seen.txt")).exit_code, 0);

  ASSERT_TRUE(env_->destroy(handle_));
  EXPECT_FALSE(env_->openCapabilityChannel(handle_)) << "no channel of a destroyed sandbox";
  auto h = env_->provision(linuxSpec(options_));  // TearDown destroys this one
  ASSERT_TRUE(h);
  handle_ = *h;
}

TEST_F(CodeModeLinuxTest, DestroyLeavesNoCapabilityDirectory) {
  auto r = runProgram("def main():\n    return 1\n");
  ASSERT_TRUE(outcome(r).contains("completed")) << describe(r);
  ASSERT_TRUE(env_->destroy(handle_));
  const std::vector<std::string> left = entriesOf(state_.path() + "/cap");
  EXPECT_TRUE(left.empty()) << left.size()
                            << " entries left, first: " << (left.empty() ? "" : left[0]);
  auto h = env_->provision(linuxSpec(options_));  // TearDown destroys this one
  ASSERT_TRUE(h);
  handle_ = *h;
}

// `airlock run --code FILE.py --json`: the structured outcome is in the
// result, beside the audit of every call.
TEST(CodeModeCliTest, RunCodePrintsTheOutcomeAsJson) {
  if (auto why = linuxJailUnavailable()) GTEST_SKIP() << *why;
  TempStateDir state;
  std::string out;
  nlohmann::json j;
  runCodeWithTheCli(AIRLOCK_BINARY, "", state.path(),
                    "import airlock_cap as cap\n"
                    "def main():\n"
                    "    cap.fs.write('a.txt', 'x')\n"
                    "    return {'ls': cap.proc.stdout(['ls']), 'answer': 42}\n",
                    j, out);
  if (HasFatalFailure()) return;
  EXPECT_EQ(j["outcome"]["completed"]["answer"], 42) << out;
  EXPECT_EQ(j["outcome"]["completed"]["ls"], "a.txt\n") << out;
  EXPECT_EQ(j["exit_code"], 0);
  ASSERT_TRUE(j["capability_audit"].is_array());
  EXPECT_EQ(j["capability_audit"].size(), 2u);
  EXPECT_EQ(j["capability_audit"][1]["cap"], "proc.run");
}

// `airlock run --code` wires net.fetch to the sandbox's own egress policy
// and schedule.* to the metadata database under --state-dir. No request
// leaves the machine: every URL here is refused before any lookup.
std::string runCli(const std::string& args) {
  return commandOutput(std::string(AIRLOCK_BINARY) + " run " + args + " --json 2>&1");
}

TEST(CodeModeCliTest, NetFollowsTheSandboxEgressPolicyAndSchedulesAreDurable) {
  if (auto why = linuxJailUnavailable()) GTEST_SKIP() << *why;
  TempStateDir state;
  const std::string program = state.path() + "/prog.py";
  writeText(program,
            "import airlock_cap as cap\n"
            "def main():\n"
            "    try:\n"
            "        cap.net.fetch('https://other.example.com/')\n"
            "        net = 'fetched'\n"
            "    except cap.CapError as e:\n"
            "        net = type(e).__name__ + ' ' + e.code\n"
            "    created = cap.schedule.after('ping', 60, body='hi')\n"
            "    try:\n"
            "        cap.schedule.every('fast', 5)\n"
            "        bad = 'created'\n"
            "    except cap.InvalidSchedule as e:\n"
            "        bad = e.message\n"
            "    return {'net': net, 'when': created['when'], 'bad': bad,\n"
            "            'listed': [s['name'] for s in cap.schedule.list()]}\n");
  // Without --network: the deny policy refuses every URL by its reason.
  auto out = runCli("--state-dir " + state.path() + " --code " + program);
  auto j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
  EXPECT_EQ(j["outcome"]["completed"]["net"], "ModeDeny mode_deny") << out;
  EXPECT_EQ(j["outcome"]["completed"]["listed"], nlohmann::json::array({"ping"})) << out;
  EXPECT_EQ(j["outcome"]["completed"]["bad"].get<std::string>().rfind("interval_s: ", 0), 0u)
      << out;
  // The schedule is in the metadata database beside the artifacts.
  struct stat st {};
  EXPECT_EQ(::stat((state.path() + "/artifacts/metadata.db").c_str(), &st), 0);
  // With --network and a policy: the policy decides (a host off the list).
  const std::string policy = state.path() + "/egress.yaml";
  writeText(policy,
            "egress:\n  mode: allowlist\n  destinations:\n    - host: hooks.example.com\n      "
            "ports: [443]\n");
  out = runCli("--state-dir " + state.path() + " --network --egress-policy " + policy + " --code " +
               program);
  j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
  EXPECT_EQ(j["outcome"]["completed"]["net"], "HostNotAllowed host_not_allowed") << out;
}

}  // namespace
}  // namespace airlock::testing
