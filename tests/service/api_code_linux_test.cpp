// Code mode through the HTTP API (api.h: POST /v1/environments/{environment_id}/code,
// the schedule routes and the fire outbox) on the real linux mechanism, with
// the API's clock injected so that schedules fire without waiting.
#include <fcntl.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "airlock/artifacts/filesystem_store.h"
#include "airlock/artifacts/memory_repository.h"
#include "airlock/capability/schedule/schedule.h"
#include "airlock/execution/capabilities/execution_capabilities.h"
#include "airlock/execution/node.h"
#include "airlock/gateway/api/api.h"
#include "airlock/service/metrics.h"
#include "linux_test_support.h"

namespace airlock::testing {
namespace {

using json = nlohmann::json;
using gateway::Api;
using service::HttpRequest;
using service::HttpResponse;

constexpr const char* kToken = "api-code-test-token-0123456789";

class ApiCodeLinuxTest : public SandboxTest {
 protected:
  void SetUp() override {
    SandboxTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    settings_.service_token = kToken;
    now_ =
        std::chrono::time_point_cast<std::chrono::milliseconds>(std::chrono::system_clock::now());
    node_ = std::make_unique<execution::LocalNode>(
        *env_, [this] { return now_.load(); }, service::nodeEvents(metrics_));
    api_ = std::make_unique<Api>(
        settings_, *node_,
        gateway::ServiceImages::hostOnly(airlock::computeImageDigest(options_).value()), metrics_,
        [this] { return now_.load(); });
    auto store = capability::schedule::openSqliteScheduleStore(state_.path() + "/schedules.db");
    ASSERT_TRUE(store) << store.error().message();
    api_->attachSchedules(*store);
    api_->attachExecutionCapabilities(execution::addExecutionCapabilities);
    auto h = call("POST", "/v1/environments", R"({"tenant_id": "t1", "run_id": "r1"})");
    ASSERT_EQ(h.status, 201) << h.body;
    id_ = json::parse(h.body)["environment_id"];
    base_ = "/v1/environments/" + id_;
  }
  void TearDown() override {
    if (api_) api_->destroyAll();
    SandboxTest::TearDown();
  }
  HttpResponse call(const std::string& method, const std::string& target,
                    const std::string& body = "") {
    return api_->handle(HttpRequest{method, target, std::string("Bearer ") + kToken, body});
  }
  HttpResponse code(const std::string& program, json extra = json::object()) {
    extra["program"] = program;
    return call("POST", base_ + "/code", extra.dump());
  }

  service::Settings settings_;
  service::Metrics metrics_{"linux"};
  std::atomic<Timestamp> now_;
  std::unique_ptr<execution::LocalNode> node_;
  std::unique_ptr<Api> api_;
  std::string id_, base_;
};

TEST_F(ApiCodeLinuxTest, AProgramRunsAndItsOutcomeResultAndAuditComeBack) {
  ASSERT_EQ(call("PUT", base_ + "/files?path=in.txt", "seven").status, 204);
  auto r = code(R"(from airlock_cap import fs, proc, notes
def main():
    text = fs.read_text("in.txt")
    out = proc.stdout(["sh", "-c", "printf %s \"$0\" | wc -c", text])
    notes.put("length", int(out))
    return {"text": text, "length": notes.get("length")}
)");
  ASSERT_EQ(r.status, 200) << r.body;
  auto j = json::parse(r.body);
  EXPECT_EQ(j["outcome"], (json{{"completed", {{"text", "seven"}, {"length", 5}}}})) << r.body;
  EXPECT_EQ(j["result"]["exit_code"], 0) << r.body;
  // One audit line per call: fs.read, proc.run, notes.put, notes.get.
  ASSERT_EQ(j["audit"].size(), 4u) << r.body;
  std::vector<std::string> caps;
  for (const auto& line : j["audit"]) caps.push_back(line.value("cap", ""));
  EXPECT_EQ(caps, (std::vector<std::string>{"fs.read", "proc.run", "notes.put", "notes.get"}))
      << r.body;
  // The environment lives on and takes commands.
  EXPECT_EQ(call("POST", base_ + "/execute", R"({"argv": ["cat", "in.txt"]})").status, 200);
}

TEST_F(ApiCodeLinuxTest, CapabilitiesNarrowWhatTheProgramMayCall) {
  auto r = code(R"(from airlock_cap import proc, notes, CapError
def main():
    notes.put("k", 1)
    try:
        proc.run(["true"])
        return "proc.run was allowed"
    except CapError as e:
        return e.code
)",
                json{{"capabilities", {"notes.*"}}});
  ASSERT_EQ(r.status, 200) << r.body;
  auto j = json::parse(r.body);
  EXPECT_EQ(j["outcome"]["completed"], "denied") << r.body;
}

TEST_F(ApiCodeLinuxTest, BadRequestsNameTheirProblem) {
  auto missing = call("POST", base_ + "/code", R"({"timeout_seconds": 5})");
  EXPECT_EQ(missing.status, 400);
  EXPECT_NE(missing.body.find("program is required"), std::string::npos) << missing.body;
  for (const char* odd : {".", "..*", "fs..read", "fs.*.x", "*.*", "fs", "f*", "FS.*", "fs.r*"}) {
    auto refused = code("def main(): pass", json{{"capabilities", {odd}}});
    EXPECT_EQ(refused.status, 400) << odd << ": " << refused.body;
  }
  // Names are checked against what the service serves, with a suggestion.
  auto typo = code("def main(): pass", json{{"capabilities", {"fs.rea"}}});
  EXPECT_EQ(typo.status, 400) << typo.body;
  EXPECT_NE(typo.body.find("is not a capability (did you mean \\\"fs.read\\\"?)"),
            std::string::npos)
      << typo.body;
  auto module_typo = code("def main(): pass", json{{"capabilities", {"fss.*"}}});
  EXPECT_EQ(module_typo.status, 400) << module_typo.body;
  EXPECT_NE(module_typo.body.find("names no capability module (did you mean \\\"fs\\\"?)"),
            std::string::npos)
      << module_typo.body;
  for (const char* fine : {"fs.read", "fs.*", "strand.spawn", "mcp.*", "schedule.cron", "*"})
    EXPECT_EQ(code("def main():\n    return 1\n", json{{"capabilities", {fine}}}).status, 200)
        << fine;
  auto bad_cap = code("def main(): pass", json{{"capabilities", {"proc.run", "Proc Run"}}});
  EXPECT_EQ(bad_cap.status, 400);
  EXPECT_NE(bad_cap.body.find("\\\"Proc Run\\\" is not a capability name"), std::string::npos)
      << bad_cap.body;
  auto bad_timeout = code("def main(): pass", json{{"timeout_seconds", "soon"}});
  EXPECT_EQ(bad_timeout.status, 400);
  EXPECT_NE(bad_timeout.body.find("timeout_seconds"), std::string::npos) << bad_timeout.body;
  auto misspelt = code("def main(): pass", json{{"capabilites", {"proc.run"}}});
  EXPECT_EQ(misspelt.status, 400);
  EXPECT_NE(misspelt.body.find("did you mean \\\"capabilities\\\"?"), std::string::npos)
      << misspelt.body;
  auto bad_ack = call("POST", "/v1/schedule-fires/ack", R"({"thru": 3})");
  EXPECT_EQ(bad_ack.status, 400) << bad_ack.body;
  auto unknown = call("POST", "/v1/environments/nope/code", R"({"program": "def main(): pass"})");
  EXPECT_EQ(unknown.status, 404) << unknown.body;
  EXPECT_EQ(call("GET", base_ + "/code").status, 405);
}

// A second program while one runs is refused (409) and leaves the first,
// and its files, alone.
TEST_F(ApiCodeLinuxTest, OneProgramAtATimePerEnvironment) {
  HttpResponse first;
  std::thread runner([&] {
    first = code(R"(import os, time
from airlock_cap import notes
def main():
    open("started", "w").close()
    while not os.path.exists("go"):
        time.sleep(0.05)
    notes.put("done", True)
    return "first"
)");
  });
  // Whatever happens below, the first program is let go and joined.
  struct Release {
    std::function<void()> go;
    std::thread& th;
    ~Release() {
      go();
      if (th.joinable()) th.join();
    }
  } release{[this] { (void)call("PUT", base_ + "/files?path=go", ""); }, runner};
  HttpResponse seen;
  seen.status = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (seen.status != 200 && std::chrono::steady_clock::now() < until)
    seen = call("GET", base_ + "/files?path=started");
  ASSERT_EQ(seen.status, 200) << "the first program never started";
  auto second = code("def main():\n    return 'second'\n");
  EXPECT_EQ(second.status, 409) << second.body;
  EXPECT_NE(second.body.find("a program is running"), std::string::npos) << second.body;
  // A command, too, waits for the program to end.
  auto command = call("POST", base_ + "/execute", R"({"argv": ["true"]})");
  EXPECT_EQ(command.status, 409) << command.body;
  EXPECT_NE(command.body.find("a program is running"), std::string::npos) << command.body;
  ASSERT_EQ(call("PUT", base_ + "/files?path=go", "").status, 204);
  runner.join();
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(json::parse(first.body)["outcome"]["completed"], "first") << first.body;
  auto third = code("def main():\n    return 'third'\n");
  ASSERT_EQ(third.status, 200) << third.body;
  EXPECT_EQ(json::parse(third.body)["outcome"]["completed"], "third");
}

// schedule.after from a program: listed under the environment, moved to the
// outbox once the clock passes it (exactly once), read and acknowledged.
TEST_F(ApiCodeLinuxTest, ASchedulesFiresIntoTheOutboxOnceAndIsAcknowledged) {
  auto r = code(R"(from airlock_cap import schedule
def main():
    schedule.after("ping", 60, body="hello")
    return [s["name"] for s in schedule.list()]
)");
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(json::parse(r.body)["outcome"]["completed"], json::array({"ping"})) << r.body;
  auto listed = call("GET", base_ + "/schedules");
  ASSERT_EQ(listed.status, 200) << listed.body;
  auto schedules = json::parse(listed.body)["schedules"];
  ASSERT_EQ(schedules.size(), 1u) << listed.body;
  EXPECT_EQ(schedules[0]["name"], "ping");
  EXPECT_EQ(schedules[0]["timing"], "after");
  const std::int64_t due = schedules[0]["next_fire_s"];

  // Not yet due: nothing fires.
  auto fired = api_->fireSchedules();
  ASSERT_TRUE(fired) << fired.error().message();
  EXPECT_EQ(*fired, 0u);
  now_ = Timestamp(std::chrono::seconds(due + 1));
  fired = api_->fireSchedules();
  ASSERT_TRUE(fired) << fired.error().message();
  EXPECT_EQ(*fired, 1u);
  fired = api_->fireSchedules();
  ASSERT_TRUE(fired);
  EXPECT_EQ(*fired, 0u) << "a one-shot fired twice";

  auto outbox = call("GET", "/v1/schedule-fires?after=0");
  ASSERT_EQ(outbox.status, 200) << outbox.body;
  auto fires = json::parse(outbox.body)["fires"];
  ASSERT_EQ(fires.size(), 1u) << outbox.body;
  EXPECT_EQ(fires[0]["creator"], id_);
  EXPECT_EQ(fires[0]["name"], "ping");
  EXPECT_EQ(fires[0]["body"], "hello");
  EXPECT_EQ(fires[0]["occurrence_s"], due);
  EXPECT_EQ(fires[0]["fire_number"], 1);
  const std::int64_t seq = fires[0]["sequence"];
  EXPECT_EQ(
      json::parse(call("GET", "/v1/schedule-fires?after=" + std::to_string(seq)).body)["fires"]
          .size(),
      0u);
  EXPECT_EQ(call("GET", "/v1/schedule-fires?limit=0").status, 400);

  auto ack = call("POST", "/v1/schedule-fires/ack", json{{"through", seq}}.dump());
  ASSERT_EQ(ack.status, 200) << ack.body;
  EXPECT_EQ(json::parse(ack.body)["acknowledged"], 1);
  EXPECT_EQ(json::parse(call("GET", "/v1/schedule-fires").body)["fires"].size(), 0u);
  EXPECT_NE(metrics_.render().find("airlock_schedule_fires_total 1"), std::string::npos);

  // Cancelled by name; a second cancel is 404.
  EXPECT_EQ(call("DELETE", base_ + "/schedules/ping").status, 204);
  EXPECT_EQ(call("DELETE", base_ + "/schedules/ping").status, 404);
}

// A job's whole output becomes an artifact of the environment's tenant and
// run, readable through the artifact routes, with the digest of its bytes.
TEST_F(ApiCodeLinuxTest, AJobsWholeOutputIsSpilledIntoTheEnvironmentsArtifacts) {
  char tmpl[] = "/tmp/airlock-api-code-store-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  auto repository = std::make_shared<artifacts::MemoryArtifactRepository>();
  auto store = artifacts::FilesystemArtifactStore::create(
      sys::UniqueFd(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC)), repository);
  ASSERT_TRUE(store) << store.error().message();
  api_->attachArtifacts(gateway::ArtifactBackend{store->get(), repository.get(), {}, 8 << 20});

  // 200000 numbered lines: far more than the job's 64 KiB tail.
  auto r = code(R"(from airlock_cap import job
def main():
    j = job.start(["seq", "1", "200000"])
    state = job.wait(j)
    while state.pending:
        state = job.wait(j)
    s = state.spill.stdout
    return {"artifact_id": s.artifact_id, "sha256": s.sha256, "size": s.size_bytes, "stderr": state.spill.stderr.size_bytes}
)");
  ASSERT_EQ(r.status, 200) << r.body;
  auto value = json::parse(r.body)["outcome"]["completed"];
  ASSERT_TRUE(value.is_object()) << r.body;
  std::string expected;
  for (int i = 1; i <= 200000; ++i) expected += std::to_string(i) + "\n";
  EXPECT_EQ(value["size"], expected.size());
  EXPECT_EQ(value["stderr"], 0);
  const std::string id = value["artifact_id"];
  auto content = call("GET", "/v1/artifacts/" + id + "/content?tenant_id=t1");
  ASSERT_EQ(content.status, 200) << content.body.substr(0, 200);
  EXPECT_TRUE(content.body == expected) << "the stored bytes differ from the job's output";
  auto meta = json::parse(call("GET", "/v1/artifacts/" + id + "?tenant_id=t1").body);
  EXPECT_EQ(meta["sha256"], value["sha256"]);
  EXPECT_EQ(meta["run_id"], "r1");
  EXPECT_EQ(meta["trust"], "EXTERNAL_UNTRUSTED");
  EXPECT_EQ(call("GET", "/v1/artifacts/" + id + "?tenant_id=t2").status, 404)
      << "another tenant saw it";
  api_->destroyAll();
  std::filesystem::remove_all(dir);
}

// A program that makes more calls than the result keeps audit lines for:
// the first 10,000 are returned, the rest counted.
TEST_F(ApiCodeLinuxTest, AuditLinesPastTheCapAreCountedNotKept) {
  auto r = code(R"(import airlock_cap
def main():
    refused = 0
    for _ in range(10050):
        try:
            airlock_cap.call("zz.zz")
        except airlock_cap.CapError:
            refused += 1
    return refused
)");
  ASSERT_EQ(r.status, 200) << r.body.substr(0, 500);
  auto j = json::parse(r.body);
  EXPECT_EQ(j["outcome"]["completed"], 10050) << j["outcome"];
  EXPECT_EQ(j["audit"].size(), 10000u);
  EXPECT_EQ(j["audit_dropped"], 50);
}

// An outcome the answer cannot carry (a NaN, a map with integer keys) is
// sent as Errored saying why, and the interpreter's exit says so too.
TEST_F(ApiCodeLinuxTest, AnOutcomeThatCannotBeCarriedIsAnErrorNotANull) {
  for (const char* value : {"float('nan')", "[1.0, float('-inf')]", "{1: 2}"}) {
    auto r = code(std::string("def main():\n    return ") + value + "\n");
    ASSERT_EQ(r.status, 200) << r.body;
    auto j = json::parse(r.body);
    ASSERT_TRUE(j["outcome"].contains("errored")) << value << ": " << r.body;
    EXPECT_NE(j["outcome"]["errored"]["message"].get<std::string>().find("cannot be sent"),
              std::string::npos)
        << r.body;
    EXPECT_EQ(j["result"]["exit_code"], 1) << value;
  }
}

TEST_F(ApiCodeLinuxTest, WithoutAScheduleStoreTheRoutesSayUnavailable) {
  execution::LocalNode bare_node(*env_);
  Api bare(settings_, bare_node, gateway::ServiceImages::hostOnly("digest"), metrics_);
  auto r =
      bare.handle(HttpRequest{"GET", "/v1/schedule-fires", std::string("Bearer ") + kToken, ""});
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_NE(r.body.find("no schedule store"), std::string::npos) << r.body;
}

}  // namespace
}  // namespace airlock::testing
