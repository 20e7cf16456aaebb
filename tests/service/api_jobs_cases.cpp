#include "api_jobs_cases.h"

#include <fcntl.h>
#include <gtest/gtest.h>

#include <chrono>

#include "airlock/artifacts/filesystem_store.h"
#include "airlock/execution/capabilities/execution_capabilities.h"
#include "airlock/sys/sha256.h"
#include "airlock/sys/unique_fd.h"

namespace airlock::testing {

using json = nlohmann::json;
using service::HttpRequest;
using service::HttpResponse;

namespace {

constexpr const char* kToken = "api-jobs-test-token-0123456789";
using Clock = std::chrono::steady_clock;

std::string sha256Hex(const std::string& bytes) {
  sys::Sha256 h;
  h.update(bytes.data(), bytes.size());
  return h.finishHex();
}

// Checks that a spilled stream (`spill` is the job's, `stream` "stdout" or
// "stderr") is stored and that the artifact route returns exactly `read`,
// with the spill's size and digest those of `read`.
void expectTheSpillHolds(JobsApi& api, const json& spill, const char* stream,
                         const std::string& read) {
  ASSERT_TRUE(spill.is_object()) << spill.dump();
  const json& spilled = spill[stream];
  ASSERT_TRUE(spilled.is_object()) << stream << ": " << spill.dump();
  EXPECT_EQ(spilled["size_bytes"], read.size()) << stream;
  EXPECT_EQ(spilled["sha256"], sha256Hex(read)) << stream;
  EXPECT_EQ(spilled["truncated"], false) << stream;
  const std::string artifact = spilled["artifact_id"];
  auto content = api.call("GET", "/v1/artifacts/" + artifact + "/content?tenant_id=t1");
  ASSERT_EQ(content.status, 200) << stream << ": " << content.body.substr(0, 200);
  EXPECT_EQ(content.body, read) << stream << ": the stored bytes differ from what was polled";
}

}  // namespace

void JobsApi::open(ExecutionEnvironment& env, const std::string& image_digest,
                   const std::string& store_dir) {
  settings_.service_token = kToken;
  // Room to extend an environment past its 30 minutes.
  settings_.environment_hard_cap = std::chrono::hours(1);
  repository_ = std::make_shared<artifacts::MemoryArtifactRepository>();
  auto store = artifacts::FilesystemArtifactStore::create(
      sys::UniqueFd(::open(store_dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC)), repository_);
  ASSERT_TRUE(store) << store.error().message();
  store_ = std::move(*store);
  node_ = std::make_unique<execution::LocalNode>(env);
  api_ = std::make_unique<gateway::Api>(settings_, *node_,
                                        gateway::ServiceImages::hostOnly(image_digest), metrics_);
  api_->attachExecutionCapabilities(execution::addExecutionCapabilities);
  api_->attachArtifacts(gateway::ArtifactBackend{store_.get(), repository_.get(), {}, 64 << 20});
  auto h = call("POST", "/v1/environments", R"({"tenant_id": "t1", "run_id": "r1"})");
  ASSERT_EQ(h.status, 201) << h.body;
  id = json::parse(h.body)["environment_id"];
  base = "/v1/environments/" + id;
}

void JobsApi::close() {
  if (api_) api_->destroyAll();
}

HttpResponse JobsApi::call(const std::string& method, const std::string& target,
                           const std::string& body) {
  return api_->handle(HttpRequest{method, target, std::string("Bearer ") + kToken, body});
}

json JobsApi::program(const std::string& source) {
  auto r = call("POST", base + "/code", json{{"program", source}}.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  if (r.status != 200) return nullptr;
  auto outcome = json::parse(r.body)["outcome"];
  EXPECT_TRUE(outcome.contains("completed")) << r.body;
  return outcome.value("completed", json());
}

json JobsApi::startJob(const json& body) {
  auto r = call("POST", base + "/jobs", body.dump());
  EXPECT_EQ(r.status, 201) << r.body;
  return r.status == 201 ? json::parse(r.body) : json();
}

json JobsApi::poll(const std::string& job_id, std::uint64_t out_cursor, std::uint64_t err_cursor,
                   std::uint64_t wait_ms) {
  auto r = call("GET", base + "/jobs/" + job_id + "?stdout_cursor=" + std::to_string(out_cursor) +
                           "&stderr_cursor=" + std::to_string(err_cursor) +
                           "&wait_ms=" + std::to_string(wait_ms));
  EXPECT_EQ(r.status, 200) << r.body;
  return r.status == 200 ? json::parse(r.body) : json();
}

json JobsApi::pollUntilStdoutHas(const std::string& job_id, const std::string& text) {
  std::string out;
  std::uint64_t cursor = 0;
  json last;
  const auto until = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < until) {
    last = poll(job_id, cursor, 0, 5000);
    if (!last.is_object()) break;
    out += last["stdout"]["data"].get<std::string>();
    cursor = last["stdout"]["cursor"];
    if (out.find(text) != std::string::npos || !last["pending"].get<bool>()) break;
  }
  if (last.is_object()) last["stdout"]["data"] = out;
  return last;
}

json JobsApi::pollUntilSettled(const std::string& job_id) {
  json last;
  std::uint64_t out = 0, err = 0;
  const auto until = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < until) {
    last = poll(job_id, out, err, 5000);
    if (!last.is_object() || !last["pending"].get<bool>()) break;
    out = last["stdout"]["cursor"];
    err = last["stderr"]["cursor"];
  }
  return last;
}

void expectAJobOutlivesItsProgramAndEitherDoorDrivesIt(JobsApi& api) {
  // A program starts a job, waits for its first line and returns.
  auto started = api.program(R"(from airlock_cap import job
def main():
    j = job.start(["sh", "-c", "echo started; exec sleep 600"])
    st = job.wait(j, timeout_ms=20000)
    return {"job_id": j.job_id, "first": st.stdout, "state": st.state}
)");
  ASSERT_TRUE(started.is_object());
  EXPECT_EQ(started["first"], "started\n");
  EXPECT_EQ(started["state"], "running");
  const std::string job_id = started["job_id"];

  // The program has returned; the job runs on: the API lists it.
  auto listed = api.call("GET", api.base + "/jobs");
  ASSERT_EQ(listed.status, 200) << listed.body;
  auto jobs = json::parse(listed.body)["jobs"];
  ASSERT_EQ(jobs.size(), 1u) << listed.body;
  EXPECT_EQ(jobs[0]["job_id"], job_id);
  EXPECT_EQ(jobs[0]["state"], "running");
  EXPECT_EQ(jobs[0]["stdout_cursor"], 8);

  // A later program lists it and polls it from the start.
  auto later = api.program(
      "from airlock_cap import job, Job\ndef main():\n"
      "    st = job.poll(Job('" +
      job_id +
      "'))\n"
      "    return {'ids': [r['job_id'] for r in job.list()], 'out': "
      "st.stdout, 'state': st.state}\n");
  ASSERT_TRUE(later.is_object());
  EXPECT_EQ(later["ids"], json::array({job_id}));
  EXPECT_EQ(later["out"], "started\n");
  EXPECT_EQ(later["state"], "running");

  // The API kills it.
  EXPECT_EQ(api.call("POST", api.base + "/jobs/" + job_id + "/kill").status, 204);
  auto killed = api.pollUntilSettled(job_id);
  ASSERT_TRUE(killed.is_object());
  EXPECT_EQ(killed["state"], "killed") << killed.dump();
  EXPECT_EQ(killed["kill_reason"], "requested") << killed.dump();
  EXPECT_EQ(killed["exit_code"], nullptr);

  // The other way round: started over HTTP, fed and read by a program.
  auto cat = api.startJob({{"argv", {"sh", "-c", "read line; echo got-$line"}}});
  ASSERT_TRUE(cat.is_object());
  const std::string cat_id = cat["job_id"];
  // The default 30 minutes, clamped to the environment's expires_at (the
  // service's 30-minute cap from its provision).
  EXPECT_LE(cat["wall_ms"], 30 * 60 * 1000) << cat.dump();
  EXPECT_GT(cat["wall_ms"], 29 * 60 * 1000) << cat.dump();
  auto fed = api.program("from airlock_cap import job, Job\ndef main():\n    j = Job('" + cat_id +
                         "')\n    job.send_last(j.job_id, 'ping\\n')\n    st = job.wait(j)\n"
                         "    out = st.stdout\n    while st.pending:\n"
                         "        st = job.wait(j)\n        out += st.stdout\n"
                         "    return {'out': out, 'exit': st.exit_code}\n");
  ASSERT_TRUE(fed.is_object());
  EXPECT_EQ(fed["out"], "got-ping\n");
  EXPECT_EQ(fed["exit"], 0);
  auto after = api.poll(cat_id);
  EXPECT_EQ(after["state"], "exited");
  EXPECT_EQ(after["exit_code"], 0);
  // Its input is closed: more is refused, naming why.
  auto refused = api.call("POST", api.base + "/jobs/" + cat_id + "/input", R"({"data": "x"})");
  EXPECT_EQ(refused.status, 409) << refused.body;
  EXPECT_NE(refused.body.find("input is closed"), std::string::npos) << refused.body;
}

void expectAServerJobServesAClientAndIsKilled(JobsApi& api) {
  const std::string server =
      "import http.server, sys\n"
      "s = http.server.HTTPServer(('127.0.0.1', 8765), http.server.SimpleHTTPRequestHandler)\n"
      "print('listening', flush=True)\n"
      "s.serve_forever()\n";
  auto started = api.startJob({{"argv", {"python3", "-c", server}}});
  ASSERT_TRUE(started.is_object());
  const std::string job_id = started["job_id"];
  auto up = api.pollUntilStdoutHas(job_id, "listening\n");
  ASSERT_TRUE(up.is_object());
  ASSERT_EQ(up["stdout"]["data"], "listening\n") << up.dump();
  ASSERT_EQ(up["state"], "running") << up.dump();

  json client = {{"argv",
                  {"python3", "-c",
                   "import urllib.request\n"
                   "r = urllib.request.urlopen('http://127.0.0.1:8765/probe-path')\n"
                   "print(r.status)\n"}},
                 {"timeout_seconds", 30}};
  auto r = api.call("POST", api.base + "/execute", client.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  auto result = json::parse(r.body);
  // The server has no such file: 404 raises in urlopen; either way the
  // request reached it. A listing would be 200.
  EXPECT_NE(result["stderr"].get<std::string>().find("404"), std::string::npos) << result.dump();

  // The server logged the request line on its stderr.
  std::string err;
  std::uint64_t err_cursor = 0;
  const auto until = Clock::now() + std::chrono::seconds(30);
  while (err.find("GET /probe-path") == std::string::npos && Clock::now() < until) {
    auto p = api.poll(job_id, up["stdout"]["cursor"], err_cursor, 5000);
    ASSERT_TRUE(p.is_object());
    err += p["stderr"]["data"].get<std::string>();
    err_cursor = p["stderr"]["cursor"];
  }
  EXPECT_NE(err.find("\"GET /probe-path HTTP/1.1\" 404"), std::string::npos) << err;

  EXPECT_EQ(api.call("POST", api.base + "/jobs/" + job_id + "/kill").status, 204);
  auto done = api.pollUntilSettled(job_id);
  ASSERT_TRUE(done.is_object());
  EXPECT_EQ(done["state"], "killed");
  EXPECT_EQ(done["kill_reason"], "requested");
  EXPECT_FALSE(done["pending"].get<bool>());
  // The spill has the whole of both streams: what the polls read, and
  // nothing after it (the server wrote nothing more).
  EXPECT_EQ(done["stderr"]["cursor"], err_cursor) << done.dump();
  expectTheSpillHolds(api, done["spill"], "stdout", "listening\n");
  expectTheSpillHolds(api, done["spill"], "stderr", err);
}

void expectAProgramRunsAServerSessionThroughJobAndProc(JobsApi& api) {
  ASSERT_EQ(
      api.call("PUT", api.base + "/files?path=hello.txt", "hello from the workspace\n").status,
      204);
  // The session as an agent's program writes it: job.* for the server,
  // proc.run for the client, each wait bounded (job.wait returns when the
  // output moves, so the loops follow the server, not the clock).
  auto seen = api.program(R"PY(import time
from airlock_cap import job, proc

SERVER = (
    "import http.server\n"
    "s = http.server.HTTPServer(('127.0.0.1', 0), http.server.SimpleHTTPRequestHandler)\n"
    "print('listening on', s.server_port, flush=True)\n"
    "s.serve_forever()\n"
)
CLIENT = (
    "import sys, urllib.request\n"
    "r = urllib.request.urlopen('http://127.0.0.1:' + sys.argv[1] + '/hello.txt')\n"
    "print(r.status, r.read().decode(), end='')\n"
)

def follow(server, seen, text=None, stream="stdout"):
    # Waits on the server until `text` is in what was read of `stream`, or
    # until it is no longer pending, for at most 60 s.
    limit = time.monotonic() + 60
    while True:
        st = job.wait(server, timeout_ms=5000)
        seen["stdout"] += st.stdout
        seen["stderr"] += st.stderr
        seen["dropped"] += st.stdout_dropped + st.stderr_dropped
        if (text is not None and text in seen[stream]) or not st.pending:
            return st
        if time.monotonic() > limit:
            return st

def stored(stream):
    if isinstance(stream, str):
        return stream
    return {"artifact_id": stream.artifact_id, "sha256": stream.sha256,
            "size_bytes": stream.size_bytes, "truncated": stream.truncated}

def main():
    server = job.start(["python3", "-c", SERVER])
    seen = {"stdout": "", "stderr": "", "dropped": 0}
    st = follow(server, seen, "\n")
    listening = seen["stdout"]
    client = proc.run(["python3", "-c", CLIENT, listening.split()[-1]], timeout_ms=30000)
    follow(server, seen, "GET /hello.txt", "stderr")
    log = seen["stderr"]
    job.kill(server)
    st = follow(server, seen)
    return {
        "job_id": server.job_id,
        "listening": listening,
        "client": {"exit_code": client.exit_code, "stdout": client.stdout, "stderr": client.stderr},
        "log": log,
        "state": st.state, "kill_reason": st.kill_reason, "pending": st.pending,
        "stdout": seen["stdout"], "stderr": seen["stderr"], "dropped": seen["dropped"],
        "spill": None if st.spill is None else
                 {"stdout": stored(st.spill.stdout), "stderr": stored(st.spill.stderr)},
    }
)PY");
  ASSERT_TRUE(seen.is_object());
  const std::string listening = seen["listening"];
  ASSERT_EQ(listening.rfind("listening on ", 0), 0u) << seen.dump();
  EXPECT_EQ(listening.back(), '\n') << seen.dump();
  EXPECT_EQ(seen["client"]["exit_code"], 0) << seen.dump();
  EXPECT_EQ(seen["client"]["stdout"], "200 hello from the workspace\n") << seen.dump();
  EXPECT_NE(seen["log"].get<std::string>().find("\"GET /hello.txt HTTP/1.1\" 200"),
            std::string::npos)
      << seen.dump();
  EXPECT_EQ(seen["state"], "killed") << seen.dump();
  EXPECT_EQ(seen["kill_reason"], "requested") << seen.dump();
  EXPECT_EQ(seen["pending"], false) << seen.dump();
  EXPECT_EQ(seen["dropped"], 0) << seen.dump();
  // The server printed its one line and nothing else.
  EXPECT_EQ(seen["stdout"], listening) << seen.dump();
  // The artifacts hold what the program read, byte for byte.
  expectTheSpillHolds(api, seen["spill"], "stdout", seen["stdout"]);
  expectTheSpillHolds(api, seen["spill"], "stderr", seen["stderr"]);
  // The HTTP API sees the same job, settled the same way.
  auto after = api.poll(seen["job_id"]);
  EXPECT_EQ(after["state"], "killed") << after.dump();
  EXPECT_EQ(after["spill"]["stdout"]["artifact_id"], seen["spill"]["stdout"]["artifact_id"]);
}

void expectTheSpillHoldsTheWholeOutput(JobsApi& api) {
  std::string expected;
  for (int i = 1; i <= 100000; ++i) expected += std::to_string(i) + "\n";
  auto started = api.startJob({{"argv", {"seq", "1", "100000"}}});
  ASSERT_TRUE(started.is_object());
  const std::string job_id = started["job_id"];
  json done;
  const auto until = Clock::now() + std::chrono::seconds(60);
  do done = api.poll(job_id, 0, 0, 5000);
  while (done.is_object() && done["pending"].get<bool>() && Clock::now() < until);
  ASSERT_TRUE(done.is_object());
  ASSERT_FALSE(done["pending"].get<bool>()) << "the job did not settle";
  EXPECT_EQ(done["exit_code"], 0);
  // From cursor 0 the tail is the last 64 KiB, the rest counted as dropped.
  EXPECT_EQ(done["stdout"]["cursor"], expected.size());
  EXPECT_EQ(done["stdout"]["dropped"], expected.size() - kJobTailBytes);
  EXPECT_EQ(done["stdout"]["data"], expected.substr(expected.size() - kJobTailBytes));
  // The artifact has every byte.
  const auto& spill = done["spill"]["stdout"];
  ASSERT_TRUE(spill.is_object()) << done["spill"].dump();
  EXPECT_EQ(spill["size_bytes"], expected.size());
  EXPECT_EQ(spill["truncated"], false);
  EXPECT_EQ(spill["sha256"], sha256Hex(expected));
  const std::string artifact = spill["artifact_id"];
  auto content = api.call("GET", "/v1/artifacts/" + artifact + "/content?tenant_id=t1");
  ASSERT_EQ(content.status, 200) << content.body.substr(0, 200);
  EXPECT_TRUE(content.body == expected) << "the stored bytes differ from the job's output";
  EXPECT_EQ(api.call("GET", "/v1/artifacts/" + artifact + "?tenant_id=t2").status, 404);
}

void expectDestroyingTheEnvironmentMidJobLeavesNothing(
    JobsApi& api, const std::function<int(const std::string&)>& leftovers,
    const std::function<int(const std::string&)>& leftovers_once_torn_down) {
  auto started = api.startJob(
      {{"argv", {"sh", "-c", "sleep 987 & sleep 988 & echo up; wait"}}, {"wall_ms", 0}});
  ASSERT_TRUE(started.is_object());
  EXPECT_EQ(started["wall_ms"], 0) << started.dump();
  const std::string job_id = started["job_id"];
  auto up = api.pollUntilStdoutHas(job_id, "up\n");
  ASSERT_TRUE(up.is_object());
  ASSERT_EQ(up["state"], "running") << up.dump();
  EXPECT_GT(leftovers(api.id), 0) << "the count sees nothing of a live environment";

  EXPECT_EQ(api.call("DELETE", api.base).status, 204);
  EXPECT_EQ(api.call("GET", api.base + "/jobs").status, 404);
  EXPECT_EQ(api.call("GET", api.base + "/jobs/" + job_id).status, 404);
  EXPECT_EQ(leftovers_once_torn_down(api.id), 0)
      << "something of the environment outlived its destroy";
}

void expectAnExtensionMovesTheJobsDeadlines(JobsApi& api) {
  auto session = api.startJob({{"argv", {"sleep", "600"}}, {"wall_ms", 0}});
  ASSERT_TRUE(session.is_object());
  const std::string job_id = session["job_id"];
  const std::string before = api.poll(job_id)["deadline"];
  auto extended = api.call("POST", api.base + "/extend", R"({"seconds": 3000})");
  ASSERT_EQ(extended.status, 200) << extended.body;
  const std::string expires_at = json::parse(extended.body)["expires_at"];
  EXPECT_GT(expires_at, before);  // both ISO 8601 UTC, milliseconds: text order is time order
  // A job for the environment's life now ends at the new expiry ...
  EXPECT_EQ(api.poll(job_id)["deadline"], expires_at);
  // ... and a job started afterwards gets the wall the old expiry would
  // have cut to under 30 minutes.
  auto later = api.startJob({{"argv", {"true"}}, {"wall_ms", 45 * 60 * 1000}});
  ASSERT_TRUE(later.is_object());
  EXPECT_EQ(later["wall_ms"], 45 * 60 * 1000) << later.dump();
  EXPECT_EQ(api.call("POST", api.base + "/jobs/" + job_id + "/kill").status, 204);
  EXPECT_EQ(api.pollUntilSettled(job_id)["kill_reason"], "requested");
}

void expectAJobIsKilledAtItsDeadline(JobsApi& api) {
  auto started =
      api.startJob({{"argv", {"sh", "-c", "echo before; exec sleep 600"}}, {"wall_ms", 500}});
  ASSERT_TRUE(started.is_object());
  EXPECT_EQ(started["wall_ms"], 500);
  auto done = api.pollUntilSettled(started["job_id"]);
  ASSERT_TRUE(done.is_object());
  EXPECT_EQ(done["state"], "killed") << done.dump();
  EXPECT_EQ(done["kill_reason"], "deadline") << done.dump();
  EXPECT_EQ(done["signal"], 9) << done.dump();
  ASSERT_TRUE(done["spill"].is_object()) << done.dump();
  EXPECT_EQ(done["spill"]["stdout"]["size_bytes"], 7) << done.dump();
}

void expectTheToolsDriveTheSameJobs(JobsApi& api) {
  auto tool = [&](const std::string& name, const json& arguments) {
    auto r = api.call("POST", "/v1/tools/" + name,
                      json{{"environment_id", api.id}, {"arguments", arguments}}.dump());
    EXPECT_EQ(r.status, 200) << name << ": " << r.body;
    return r.status == 200 ? json::parse(r.body)["result"] : json();
  };
  auto started = api.startJob({{"argv", {"sh", "-c", "echo from-http; exec sleep 600"}}});
  ASSERT_TRUE(started.is_object());
  const std::string http_job = started["job_id"];
  auto listed = tool("job_list", json::object());
  ASSERT_TRUE(listed.is_object());
  ASSERT_EQ(listed["jobs"].size(), 1u) << listed.dump();
  EXPECT_EQ(listed["jobs"][0]["job_id"], http_job);
  auto polled = tool("job_poll", {{"job_id", http_job}, {"wait_ms", 10000}});
  ASSERT_TRUE(polled.is_object());
  EXPECT_EQ(polled["stdout"]["data"], "from-http\n") << polled.dump();

  auto mine =
      tool("job_start", {{"command", {"sh", "-c", "read x; echo $GREETING-$x; exec sleep 600"}},
                         {"env", {{"GREETING", "tool"}}}});
  ASSERT_TRUE(mine.is_object());
  const std::string tool_job = mine["job_id"];
  EXPECT_NE(tool_job, http_job);
  auto sent = tool("job_send", {{"job_id", tool_job}, {"data", "in\n"}, {"last", true}});
  EXPECT_EQ(sent["sent_bytes"], 3) << sent.dump();
  auto seen = api.pollUntilStdoutHas(tool_job, "tool-in\n");
  ASSERT_TRUE(seen.is_object());
  EXPECT_EQ(seen["stdout"]["data"], "tool-in\n");
  EXPECT_EQ(tool("job_kill", {{"job_id", tool_job}})["killing"], true);
  EXPECT_EQ(api.pollUntilSettled(tool_job)["state"], "killed");
  auto unknown =
      api.call("POST", "/v1/tools/job_poll",
               json{{"environment_id", api.id}, {"arguments", {{"job_id", "job-99"}}}}.dump());
  EXPECT_EQ(unknown.status, 404) << unknown.body;
  EXPECT_NE(unknown.body.find("job-99"), std::string::npos) << unknown.body;
  EXPECT_EQ(api.call("POST", api.base + "/jobs/" + http_job + "/kill").status, 204);
}

void expectAPtyJobIsATerminalThroughEveryDoor(JobsApi& api, bool eof_ends_a_line_reader) {
  auto tool = [&](const std::string& name, const json& arguments) {
    return api.call("POST", "/v1/tools/" + name,
                    json{{"environment_id", api.id}, {"arguments", arguments}}.dump());
  };
  auto send = [&](const std::string& job, const json& body) {
    return api.call("POST", api.base + "/jobs/" + job + "/input", body.dump()).status;
  };
  // Reads stdout from `cursor` until it holds `text` (at most 60 s, each
  // poll waiting up to 5 s for output): what was read, and the cursor past it.
  auto readUntil = [&](const std::string& job, std::uint64_t& cursor, const std::string& text) {
    std::string seen;
    const auto until = Clock::now() + std::chrono::seconds(60);
    while (Clock::now() < until && seen.find(text) == std::string::npos) {
      json p = api.poll(job, cursor, 0, 5000);
      if (!p.is_object()) break;
      seen += p["stdout"]["data"].get<std::string>();
      cursor = p["stdout"]["cursor"];
      if (!p["pending"].get<bool>()) break;
    }
    return seen;
  };

  auto started = api.startJob({{"argv", {"sh", "-i"}}, {"pty", {{"rows", 24}, {"columns", 80}}}});
  ASSERT_TRUE(started.is_object());
  const std::string shell = started["job_id"];
  std::uint64_t cursor = 0;

  // Typed input is run; the answer is on the terminal, so on stdout.
  ASSERT_EQ(send(shell, {{"data", "echo $((6 * 7))-answer; echo to-stderr >&2\n"}}), 204);
  std::string seen = readUntil(shell, cursor, "to-stderr\r\n");
  EXPECT_NE(seen.find("42-answer\r\n"), std::string::npos) << seen;
  EXPECT_NE(seen.find("echo $((6 * 7))-answer"), std::string::npos)
      << "echo of the input: " << seen;
  ASSERT_EQ(send(shell, {{"data", "for f in 0 1 2; do test -t $f && echo fd$f-is-a-tty; done\n"}}),
            204);
  seen = readUntil(shell, cursor, "fd2-is-a-tty");
  EXPECT_NE(seen.find("fd0-is-a-tty"), std::string::npos) << seen;
  EXPECT_NE(seen.find("fd1-is-a-tty"), std::string::npos) << seen;
  EXPECT_NE(seen.find("fd2-is-a-tty"), std::string::npos) << seen;

  // The size as started, then as each door sets it.
  ASSERT_EQ(send(shell, {{"data", "stty size\n"}}), 204);
  EXPECT_NE(readUntil(shell, cursor, "24 80\r\n").find("24 80\r\n"), std::string::npos);
  auto resized =
      api.call("POST", api.base + "/jobs/" + shell + "/resize", R"({"rows": 30, "columns": 100})");
  EXPECT_EQ(resized.status, 204) << resized.body;
  ASSERT_EQ(send(shell, {{"data", "stty size\n"}}), 204);
  EXPECT_NE(readUntil(shell, cursor, "30 100\r\n").find("30 100\r\n"), std::string::npos);
  EXPECT_EQ(api.poll(shell)["pty"], json({{"rows", 30}, {"columns", 100}}));

  auto by_tool = tool("job_resize", {{"job_id", shell}, {"rows", 33}, {"columns", 111}});
  EXPECT_EQ(by_tool.status, 200) << by_tool.body;
  ASSERT_EQ(send(shell, {{"data", "stty size\n"}}), 204);
  EXPECT_NE(readUntil(shell, cursor, "33 111\r\n").find("33 111\r\n"), std::string::npos);

  auto by_program = api.program(
      "from airlock_cap import job\ndef main():\n"
      "    refusals = []\n"
      "    for rows, columns in ((0, 120), (35, 1001)):\n"
      "        try:\n"
      "            job.resize('" +
      shell +
      "', rows, columns)\n"
      "        except Exception as e:\n"
      "            refusals.append(type(e).__name__ + ': ' + str(e))\n"
      "    job.resize('" +
      shell + "', 35, 120)\n    return refusals\n");
  ASSERT_TRUE(by_program.is_array()) << by_program.dump();
  ASSERT_EQ(by_program.size(), 2u) << by_program.dump();
  EXPECT_NE(by_program[0].get<std::string>().find("args.rows"), std::string::npos)
      << by_program.dump();
  EXPECT_NE(by_program[1].get<std::string>().find("args.columns"), std::string::npos)
      << by_program.dump();
  ASSERT_EQ(send(shell, {{"data", "stty size\n"}}), 204);
  EXPECT_NE(readUntil(shell, cursor, "35 120\r\n").find("35 120\r\n"), std::string::npos);
  auto listed = api.call("GET", api.base + "/jobs");
  ASSERT_EQ(listed.status, 200);
  EXPECT_EQ(json::parse(listed.body)["jobs"][0]["pty"], json({{"rows", 35}, {"columns", 120}}));

  // ^D at the prompt ends the shell (or `exit`, where the terminal drops
  // it); its terminal had one output.
  if (!eof_ends_a_line_reader) ASSERT_EQ(send(shell, {{"data", "exit\n"}}), 204);
  ASSERT_EQ(send(shell, {{"last", true}}), 204);
  auto ended = api.pollUntilSettled(shell);
  EXPECT_EQ(ended["state"], "exited") << ended.dump();
  EXPECT_EQ(ended["stderr"]["cursor"], 0) << ended.dump();
  auto late =
      api.call("POST", api.base + "/jobs/" + shell + "/resize", R"({"rows": 10, "columns": 10})");
  EXPECT_EQ(late.status, 409) << late.body;
  EXPECT_NE(late.body.find("the job has ended"), std::string::npos) << late.body;

  // A program's PTY job: `cat` echoes what is typed, prints it again, and
  // ends at the ^D of send_last.
  const std::string reader = eof_ends_a_line_reader ? R"(["cat"])" : R"(["head", "-n", "1"])";
  auto cat = api.program(R"(from airlock_cap import job
def main():
    j = job.start()" + reader +
                         R"(, pty={"rows": 5, "columns": 20})
    job.send(j, "typed\n")
    seen = ""
    while seen.count("typed\r\n") < 2:
        seen += job.wait(j, timeout_ms=20000).stdout
    if )" + std::string(eof_ends_a_line_reader ? "True" : "False") +
                         R"(:
        job.send_last(j)
    st = job.wait(j, timeout_ms=20000)
    while st.state == "running":
        st = job.wait(j, timeout_ms=20000)
    return {"seen": seen, "state": st.state, "exit_code": st.exit_code}
)");
  ASSERT_TRUE(cat.is_object());
  EXPECT_EQ(cat["seen"], "typed\r\ntyped\r\n");
  EXPECT_EQ(cat["state"], "exited");
  EXPECT_EQ(cat["exit_code"], 0);

  // A job on pipes has no terminal to resize; bad sizes name their key.
  auto piped = api.startJob({{"argv", {"sleep", "600"}}});
  ASSERT_TRUE(piped.is_object());
  const std::string piped_job = piped["job_id"];
  EXPECT_EQ(api.poll(piped_job)["pty"], nullptr);
  auto no_terminal = api.call("POST", api.base + "/jobs/" + piped_job + "/resize",
                              R"({"rows": 24, "columns": 80})");
  EXPECT_EQ(no_terminal.status, 400) << no_terminal.body;
  EXPECT_NE(no_terminal.body.find("was not started with a terminal"), std::string::npos)
      << no_terminal.body;
  for (const auto& [body, words] : std::vector<std::pair<const char*, const char*>>{
           {R"({"argv": ["sh"], "pty": {"rows": 0, "columns": 80}})", "pty.rows must be"},
           {R"({"argv": ["sh"], "pty": {"rows": 24, "columns": 1001}})", "pty.columns must be"},
           {R"({"argv": ["sh"], "pty": {"rows": 24}})", "pty.columns is required"},
           {R"({"argv": ["sh"], "pty": {"rows": 24, "colums": 80}})",
            R"(did you mean \"columns\")"},
           {R"({"argv": ["sh"], "pty": [24, 80]})", "pty must be an object"}}) {
    auto r = api.call("POST", api.base + "/jobs", body);
    EXPECT_EQ(r.status, 400) << body << ": " << r.body;
    EXPECT_NE(r.body.find(words), std::string::npos) << body << ": " << r.body;
  }
  auto bad_resize = api.call("POST", api.base + "/jobs/" + piped_job + "/resize",
                             R"({"rows": 24, "columns": 0})");
  EXPECT_EQ(bad_resize.status, 400);
  EXPECT_NE(bad_resize.body.find("columns"), std::string::npos) << bad_resize.body;
  auto unknown_key = api.call("POST", api.base + "/jobs/" + piped_job + "/resize",
                              R"({"rows": 24, "columns": 80, "cols": 80})");
  EXPECT_EQ(unknown_key.status, 400);
  EXPECT_NE(unknown_key.body.find("cols"), std::string::npos) << unknown_key.body;
  EXPECT_EQ(
      api.call("POST", api.base + "/jobs/job-99/resize", R"({"rows": 24, "columns": 80})").status,
      404);
  EXPECT_EQ(api.call("POST", api.base + "/jobs/" + piped_job + "/kill").status, 204);
}

void expectJobRoutesAreTheTenantsOwnAndCheckTheirInput(JobsApi& api) {
  auto started = api.startJob({{"argv", {"sleep", "600"}}});
  ASSERT_TRUE(started.is_object());
  const std::string job = api.base + "/jobs/" + std::string(started["job_id"]);
  // Another tenant: every route 404, and the job untouched.
  EXPECT_EQ(api.call("GET", api.base + "/jobs?tenant_id=t2").status, 404);
  EXPECT_EQ(api.call("POST", api.base + "/jobs?tenant_id=t2", R"({"argv": ["true"]})").status, 404);
  EXPECT_EQ(api.call("GET", job + "?tenant_id=t2").status, 404);
  EXPECT_EQ(api.call("POST", job + "/input?tenant_id=t2", R"({"data": "x"})").status, 404);
  EXPECT_EQ(api.call("POST", job + "/kill?tenant_id=t2").status, 404);
  EXPECT_EQ(api.poll(started["job_id"])["state"], "running");
  EXPECT_EQ(api.call("GET", job + "?tenant_id=t1").status, 200);
  // The tenant's own call works; unknown ids are 404 naming them.
  auto unknown = api.call("GET", api.base + "/jobs/job-99");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_NE(unknown.body.find("job-99"), std::string::npos) << unknown.body;
  // Bad input names its problem.
  auto bad = api.call("POST", api.base + "/jobs", R"({"argv": []})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("argv"), std::string::npos) << bad.body;
  bad = api.call("POST", api.base + "/jobs", R"({"argv": ["true"], "wall_ms": -1})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("wall_ms"), std::string::npos) << bad.body;
  // The same rules and words as execute's env: a credential never enters.
  bad = api.call("POST", api.base + "/jobs", R"({"argv": ["true"], "env": {"GITHUB_TOKEN": "x"}})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("GITHUB_TOKEN"), std::string::npos) << bad.body;
  EXPECT_NE(bad.body.find("credential"), std::string::npos) << bad.body;
  bad = api.call("POST", api.base + "/jobs", R"({"argv": ["true"], "stdin": "x"})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("stdin"), std::string::npos) << bad.body;
  bad = api.call("GET", job + "?wait_ms=60001");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("wait_ms"), std::string::npos) << bad.body;
  EXPECT_EQ(api.call("POST", job + "/kill").status, 204);
  // job.start_for_session: no wall of its own; its deadline is the
  // environment's expires_at.
  auto session = api.program(
      "from airlock_cap import job\ndef main():\n"
      "    j = job.start_for_session(['sleep', '600'])\n"
      "    return {'wall': j.wall_ms, 'deadline': j.deadline_ms}\n");
  ASSERT_TRUE(session.is_object());
  EXPECT_EQ(session["wall"], 0);
  EXPECT_GT(session["deadline"].get<std::int64_t>(), 0);
}

}  // namespace airlock::testing
