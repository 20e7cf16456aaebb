// Code mode on the real linux mechanism (issue 9 "Done when"): a Python
// program in the sandbox calls capabilities through the guest library and
// ends with one outcome; side processes are confined like commands; killing
// the guest mid-proc.run kills the effect's process group; deadlines and the
// spawn ceiling are enforced. Needs root (skipped with the reason otherwise).
#include <dirent.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <atomic>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "airlock/capability/broker/code_run.h"
#include "airlock/capability/broker/guest_files.h"
#include "airlock/sys/io.h"
#include "linux_test_support.h"

namespace airlock::testing {
namespace {

using capability::CodeRunOptions;
using capability::CodeRunResult;

class CodeModeLinuxTest : public SandboxTest {
 protected:
  CodeRunResult runProgram(const std::string& program, std::int64_t timeout_seconds = 120) {
    CodeRunOptions o;
    o.program = program;
    o.limits.timeout_seconds = timeout_seconds;
    o.limits.maximum_output_bytes = 1 << 20;
    o.execution_id = "test-exec";
    auto r = capability::runCode(*env_, handle_, o);
    EXPECT_TRUE(r) << (r ? "" : r.error().message());
    return r ? *r : CodeRunResult{};
  }
  nlohmann::json outcome(const CodeRunResult& r) {
    auto j = capability::outcomeToJson(r.outcome);
    return j;
  }
  std::string describe(const CodeRunResult& r) {
    return "exit " + std::to_string(r.execution.exit_code.value_or(-1)) + "\nstdout:\n" +
           r.execution.stdout_data + "\nstderr:\n" + r.execution.stderr_data + "\noutcome: " +
           capability::outcomeToJson(r.outcome).dump();
  }
};

// Reads a side process to its end (bounded), returning stdout and status.
std::pair<std::string, int> drain(SideProcess& p) {
  std::string out;
  std::optional<int> status;
  char buf[4096];
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  bool out_open = true;
  while ((out_open || !status) && std::chrono::steady_clock::now() < until) {
    pollfd fds[2];
    int n = 0;
    if (out_open) fds[n++] = {p.stdoutFd(), POLLIN, 0};
    if (!status) fds[n++] = {p.exitFd(), POLLIN, 0};
    if (::poll(fds, static_cast<nfds_t>(n), 1000) <= 0) continue;
    if (out_open && (fds[0].revents & (POLLIN | POLLHUP))) {
      ssize_t got = ::read(p.stdoutFd(), buf, sizeof buf);
      if (got > 0) out.append(buf, static_cast<std::size_t>(got));
      else if (got == 0) out_open = false;
    }
    if (!status) status = p.exitStatus();
  }
  return {out, status.value_or(-1)};
}

TEST_F(CodeModeLinuxTest, SideProcessIsConfinedLikeACommand) {
  const std::string probe =
      "id -u; id -g; grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status; cat /proc/self/cgroup; "
      "for ns in user mnt pid net ipc uts cgroup; do readlink /proc/self/ns/$ns; done; pwd; hostname";
  auto command = run(shell(probe));
  ASSERT_EQ(command.exit_code, 0) << command.stderr_data;

  SideCommand side;
  side.argv = {"sh", "-c", probe};
  auto p = env_->startSideProcess(handle_, side);
  ASSERT_TRUE(p) << p.error().message();
  auto [out, status] = drain(**p);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(out, command.stdout_data) << "a side process sees exactly what a command sees";
  EXPECT_NE(out.find("1000\n1000\n"), std::string::npos);
  EXPECT_NE(out.find("CapEff:\t0000000000000000"), std::string::npos);
  EXPECT_NE(out.find("NoNewPrivs:\t1"), std::string::npos);
  EXPECT_NE(out.find("Seccomp:\t2"), std::string::npos);
}

TEST_F(CodeModeLinuxTest, SideProcessGetsStdinEnvAndWorkingDirectory) {
  ASSERT_TRUE(run(shell("mkdir -p sub")).exit_code == 0);
  SideCommand side;
  side.argv = {"sh", "-c", "pwd; echo $GREETING; cat"};
  side.working_directory = "sub";
  side.env_additions = {{"GREETING", "hello"}};
  side.with_stdin = true;
  auto p = env_->startSideProcess(handle_, side);
  ASSERT_TRUE(p) << p.error().message();
  ASSERT_TRUE(sys::writeAll((*p)->stdinFd(), "input\n", 6));
  (*p)->closeStdin();
  auto [out, status] = drain(**p);
  EXPECT_EQ(out, "/workspace/sub\nhello\ninput\n");

  side.working_directory = "../etc";
  EXPECT_FALSE(env_->startSideProcess(handle_, side)) << "the working directory stays in the workspace";
}

TEST_F(CodeModeLinuxTest, ProgramReadsRunsStartsAJobWritesANoteAndReturnsAnOutcome) {
  auto ws = env_->workspace(handle_);
  ASSERT_TRUE(ws);
  ASSERT_TRUE((*ws)->write("input.txt", "alpha\nbeta\n"));
  auto r = runProgram(R"PY(
import airlock_cap as cap

def main():
    text = cap.fs.read_text("input.txt")
    proc = cap.proc.stdout(["sh", "-c", "echo from-proc; id -u"])
    j = cap.job.start(["sh", "-c", "echo first; read line; echo got-$line; echo to-stderr >&2"])
    first = cap.job.wait(j, timeout_ms=20000)
    cap.job.send_last(j, "ping\n")
    out, err, moves = first.stdout, "", 1
    while True:
        st = cap.job.wait(j, timeout_ms=20000)
        moves += 1
        out += st.stdout
        err += st.stderr
        if not st.pending:
            break
    cap.fs.write("written.txt", "by the program")
    cap.notes.put("summary", {"lines": len(text.splitlines())})
    return {"text": text, "proc": proc, "job_out": out, "job_err": err, "job_exit": st.exit_code,
            "first": first.stdout, "note": cap.notes.get("summary"), "notes": cap.notes.list(),
            "listing": sorted(e["name"] for e in cap.fs.list("."))}
)PY");
  auto j = outcome(r);
  ASSERT_TRUE(j.contains("completed")) << describe(r);
  auto v = j["completed"];
  EXPECT_EQ(v["text"], "alpha\nbeta\n");
  EXPECT_EQ(v["proc"], "from-proc\n1000\n");
  EXPECT_EQ(v["first"], "first\n") << "job.wait returned when the cursor moved";
  EXPECT_EQ(v["job_out"], "first\ngot-ping\n");
  EXPECT_EQ(v["job_err"], "to-stderr\n");
  EXPECT_EQ(v["job_exit"], 0);
  EXPECT_EQ(v["note"], (nlohmann::json{{"lines", 2}}));
  EXPECT_EQ(v["notes"], (nlohmann::json::array({"summary"})));
  EXPECT_EQ(v["listing"], (nlohmann::json::array({"input.txt", "written.txt"})));
  EXPECT_EQ(r.execution.exit_code, 0);
  auto written = (*ws)->read("written.txt");
  ASSERT_TRUE(written);
  EXPECT_EQ(*written, "by the program");
  // One audit line per call, each naming its capability.
  int proc_runs = 0;
  for (const auto& line : r.audit_lines) {
    auto a = nlohmann::json::parse(line);
    if (a["cap"] == "proc.run") ++proc_runs;
    EXPECT_TRUE(a["verdict"] == "ok") << line;
  }
  EXPECT_EQ(proc_runs, 1);
  EXPECT_GE(r.audit_lines.size(), 10u);
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
  // SIGKILLs the child and watches both effect processes disappear. Only the
  // broker can kill them: the command (the first program) is still running,
  // so nothing of the sandbox's own end-of-command cleanup has happened.
  auto r = runProgram(R"PY(
import os, signal, subprocess, sys, time

CHILD = '''
import airlock_cap as cap
cap.proc.run(["sh", "-c", "sleep 1000 & echo $! > bg.pid; echo $$ > effect.pid.tmp; mv effect.pid.tmp effect.pid; wait"],
             deadline_ms=600000)
'''

def alive(pid):
    return os.path.exists(f"/proc/{pid}")

def main():
    child = subprocess.Popen([sys.executable, "-c", CHILD], cwd="/workspace")
    deadline = time.monotonic() + 30
    while not os.path.exists("/workspace/effect.pid"):
        if time.monotonic() > deadline or child.poll() is not None:
            return {"error": "the effect never started", "child": child.poll()}
        time.sleep(0.02)
    effect = int(open("/workspace/effect.pid").read())
    bg = int(open("/workspace/bg.pid").read())
    before = alive(effect) and alive(bg)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    deadline = time.monotonic() + 30
    while (alive(effect) or alive(bg)) and time.monotonic() < deadline:
        time.sleep(0.02)
    return {"alive_before": before, "effect_gone": not alive(effect), "background_gone": not alive(bg)}
)PY");
  auto j = outcome(r);
  ASSERT_TRUE(j.contains("completed")) << describe(r);
  EXPECT_EQ(j["completed"]["alive_before"], true) << describe(r);
  EXPECT_EQ(j["completed"]["effect_gone"], true) << describe(r);
  EXPECT_EQ(j["completed"]["background_gone"], true) << describe(r);
  bool saw_disconnect = false;
  for (const auto& line : r.audit_lines) {
    auto a = nlohmann::json::parse(line);
    if (a["cap"] == "proc.run" && a["code"] == "disconnected") saw_disconnect = true;
  }
  EXPECT_TRUE(saw_disconnect) << "the audit records the call cancelled by the dropped connection";
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
  auto j = outcome(r);
  ASSERT_TRUE(j.contains("completed")) << describe(r);
  EXPECT_EQ(j["completed"]["refused_at"], 33);
  EXPECT_EQ(j["completed"]["code"], "spawn_ceiling_reached");
  EXPECT_EQ(j["completed"]["message"], "ceiling spawn=32 reached");
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

TEST_F(CodeModeLinuxTest, DestroyLeavesNoCapabilityDirectory) {
  auto r = runProgram("def main():\n    return 1\n");
  ASSERT_TRUE(outcome(r).contains("completed")) << describe(r);
  ASSERT_TRUE(env_->destroy(handle_));
  std::vector<std::string> left;
  if (DIR* d = ::opendir((state_.path() + "/cap").c_str())) {
    while (dirent* e = ::readdir(d))
      if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") left.push_back(e->d_name);
    ::closedir(d);
  }
  EXPECT_TRUE(left.empty()) << left.size() << " entries left, first: " << (left.empty() ? "" : left[0]);
  auto h = env_->provision(linuxSpec(options_));  // TearDown destroys this one
  ASSERT_TRUE(h);
  handle_ = *h;
}

// `airlock run --code FILE.py --json`: the structured outcome is in the
// result, beside the audit of every call.
TEST(CodeModeCliTest, RunCodePrintsTheOutcomeAsJson) {
  if (auto why = linuxJailUnavailable()) GTEST_SKIP() << *why;
  TempStateDir state;
  const std::string program = state.path() + "/prog.py";
  {
    FILE* f = std::fopen(program.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("import airlock_cap as cap\n"
               "def main():\n"
               "    cap.fs.write('a.txt', 'x')\n"
               "    return {'ls': cap.proc.stdout(['ls']), 'answer': 42}\n",
               f);
    std::fclose(f);
  }
  const std::string cmd = std::string(AIRLOCK_BINARY) + " run --state-dir " + state.path() + " --code " +
                          program + " --json 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = ::pclose(p);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  auto j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
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
  FILE* p = ::popen((std::string(AIRLOCK_BINARY) + " run " + args + " --json 2>&1").c_str(), "r");
  if (p == nullptr) return "";
  std::string out;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  ::pclose(p);
  return out;
}

void writeText(const std::string& path, const char* text) {
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs(text, f);
  std::fclose(f);
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
  EXPECT_EQ(j["outcome"]["completed"]["bad"].get<std::string>().rfind("interval_s: ", 0), 0u) << out;
  // The schedule is in the metadata database beside the artifacts.
  struct stat st {};
  EXPECT_EQ(::stat((state.path() + "/artifacts/metadata.db").c_str(), &st), 0);
  // With --network and a policy: the policy decides (a host off the list).
  const std::string policy = state.path() + "/egress.yaml";
  writeText(policy, "egress:\n  mode: allowlist\n  destinations:\n    - host: hooks.example.com\n      ports: [443]\n");
  out = runCli("--state-dir " + state.path() + " --network --egress-policy " + policy + " --code " + program);
  j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
  EXPECT_EQ(j["outcome"]["completed"]["net"], "HostNotAllowed host_not_allowed") << out;
}

}  // namespace
}  // namespace airlock::testing
