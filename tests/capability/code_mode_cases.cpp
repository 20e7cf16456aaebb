#include "code_mode_cases.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <tuple>

#include "airlock/execution/capabilities/execution_capabilities.h"
#include "airlock/sys/io.h"

namespace airlock::testing {

using capability::CodeRunOptions;
using capability::CodeRunResult;

CodeRunResult runCodeProgram(ExecutionEnvironment& env, const EnvironmentHandle& handle,
                             const std::string& program, std::int64_t timeout_seconds) {
  CodeRunOptions o;
  o.program = program;
  o.limits.timeout_seconds = timeout_seconds;
  o.limits.maximum_output_bytes = 1 << 20;
  o.execution_id = "test-exec";
  o.add_execution = execution::addExecutionCapabilities;
  auto r = capability::runCode(env, handle, o);
  EXPECT_TRUE(r) << (r ? "" : r.error().message());
  return r ? *r : CodeRunResult{};
}

nlohmann::json outcome(const CodeRunResult& r) {
  return capability::outcomeToJson(r.outcome);
}

std::string describe(const CodeRunResult& r) {
  return "exit " + std::to_string(r.execution.exit_code.value_or(-1)) + "\nstdout:\n" +
         r.execution.stdout_data + "\nstderr:\n" + r.execution.stderr_data +
         "\noutcome: " + capability::outcomeToJson(r.outcome).dump();
}

std::pair<std::string, int> drain(SideProcess& p) {
  std::string out;
  SidePumpHooks hooks;
  hooks.output = [&out](bool is_stdout, std::string_view chunk) {
    if (is_stdout) out.append(chunk);
  };
  hooks.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  const SidePumpOutcome pumped = p.pump(hooks);
  return {out, pumped.wait_status.value_or(-1)};
}

void expectSideProcessSeesWhatACommandSees(ExecutionEnvironment& env,
                                           const EnvironmentHandle& handle,
                                           const std::string& probe,
                                           const std::string& command_stdout, std::string& out) {
  SideCommand side;
  side.argv = {"sh", "-c", probe};
  auto p = env.startSideProcess(handle, side);
  ASSERT_TRUE(p) << p.error().message();
  int status = -1;
  std::tie(out, status) = drain(**p);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(out, command_stdout) << "a side process sees exactly what a command sees";
}

void expectSideProcessGetsStdinEnvAndWorkingDirectory(ExecutionEnvironment& env,
                                                      const EnvironmentHandle& handle,
                                                      SideCommand& side, int& status) {
  side.argv = {"sh", "-c", "pwd; echo $GREETING; cat"};
  side.working_directory = "sub";
  side.env_additions = {{"GREETING", "hello"}};
  side.with_stdin = true;
  auto p = env.startSideProcess(handle, side);
  ASSERT_TRUE(p) << p.error().message();
  ASSERT_EQ(
      (*p)->writeStdin("input\n", std::chrono::steady_clock::now() + std::chrono::seconds(30), -1),
      SideInputEnd::kWritten);
  (*p)->closeStdin();
  std::string out;
  std::tie(out, status) = drain(**p);
  EXPECT_EQ(out, "/workspace/sub\nhello\ninput\n");
}

void expectTheIssueExampleCompletes(ExecutionEnvironment& env, const EnvironmentHandle& handle) {
  auto ws = env.workspace(handle);
  ASSERT_TRUE(ws);
  ASSERT_TRUE((*ws)->write("input.txt", "alpha\nbeta\n"));
  auto r = runCodeProgram(env, handle, R"PY(
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

void expectKillingTheGuestMidProcRunKillsTheEffect(ExecutionEnvironment& env,
                                                   const EnvironmentHandle& handle) {
  // Only the broker can kill the effect processes: the command (the first
  // program) is still running, so nothing of the sandbox's own
  // end-of-command cleanup has happened.
  auto r = runCodeProgram(env, handle, R"PY(
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

void expectRefusedAtThe33rdSpawn(const CodeRunResult& r) {
  auto j = outcome(r);
  ASSERT_TRUE(j.contains("completed")) << describe(r);
  EXPECT_EQ(j["completed"]["refused_at"], 33);
  EXPECT_EQ(j["completed"]["code"], "spawn_ceiling_reached");
  EXPECT_EQ(j["completed"]["message"], "ceiling spawn=32 reached");
}

std::vector<std::string> entriesOf(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d))
      if (std::string(e->d_name) != "." && std::string(e->d_name) != "..")
        names.push_back(e->d_name);
    ::closedir(d);
  }
  return names;
}

std::string commandOutput(const std::string& command, int* status) {
  FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) return "";
  std::string out;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int st = ::pclose(p);
  if (status != nullptr) *status = st;
  return out;
}

void writeText(const std::string& path, const char* text) {
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs(text, f);
  std::fclose(f);
}

void runCodeWithTheCli(const std::string& airlock, const std::string& options,
                       const std::string& state_dir, const char* program, nlohmann::json& result,
                       std::string& out) {
  const std::string path = state_dir + "/prog.py";
  writeText(path, program);
  if (::testing::Test::HasFatalFailure()) return;
  int status = -1;
  out = commandOutput(
      airlock + " run " + options + "--state-dir " + state_dir + " --code " + path + " --json 2>&1",
      &status);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  result = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(result.is_discarded()) << out;
}

}  // namespace airlock::testing
