// Tenant isolation over every route of the API (routes.h, "Tenants"): a
// call naming tenant B never lists, reads, changes or renews tenant A's
// objects, and the same call naming A does reach them (so the refusal is the
// tenant's, not a broken route). Table-driven: one row per route and
// method, and the rows must cover every route of the route table, so a new
// route without a row fails here. Runs on the fake mechanism, a fresh
// service per row.
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/artifacts/filesystem_store.h"
#include "airlock/artifacts/memory_repository.h"
#include "airlock/capability/schedule/schedule.h"
#include "airlock/execution/node.h"
#include "airlock/gateway/api/api.h"
#include "airlock/gateway/api/routes.h"
#include "airlock/sandbox/fake/fake_environment.h"
#include "airlock/service/http_server.h"
#include "airlock/service/tenant_keys.h"

namespace airlock::gateway {
namespace {

using service::HttpRequest;
using service::HttpResponse;
using service::Metrics;
using service::Settings;

using json = nlohmann::json;
constexpr const char* kToken = "0123456789abcdef0123456789";
// Tenant keys (service/tenant_keys.h) of the two tenants.
constexpr const char* kKeyA =
    "alk_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
constexpr const char* kKeyB =
    "alk_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

// A tar (libarchive's writer, in memory) holding one directory, "d".
std::string oneDirectoryTar() {
  std::string out(16 << 10, '\0');
  std::size_t used = 0;
  struct archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  archive_write_open_memory(a, out.data(), out.size(), &used);
  struct archive_entry* e = archive_entry_new();
  archive_entry_set_pathname(e, "d");
  archive_entry_set_filetype(e, AE_IFDIR);
  archive_entry_set_perm(e, 0755);
  archive_write_header(a, e);
  archive_entry_free(e);
  archive_write_close(a);
  archive_write_free(a);
  out.resize(used);
  return out;
}
constexpr const char* kRun = "shared-run";  // both tenants' runs have this id
constexpr std::int64_t kLeaseA = 5;

// One service with two tenants' objects: A's environment (a file, an
// artifact, a schedule, a lease at kLeaseA) and B's environment of the same
// run id (epoch 0).
struct World {
  World() {
    char tmpl[] = "/tmp/airlock-tenancy-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp");
    dir = tmpl;
    settings.service_token = kToken;
    fake::FakeOptions options;
    options.clock = [this] { return now; };
    env = std::make_unique<fake::FakeEnvironment>(options);
    env->setFallback(fake::basicCommands);
    node = std::make_unique<execution::LocalNode>(
        *env, [this] { return now; }, nodeEvents(metrics));
    api = std::make_unique<Api>(settings, *node, ServiceImages::hostOnly(fake::kFakeImageDigest),
                                metrics, [this] { return now; });
    repository = std::make_shared<artifacts::MemoryArtifactRepository>();
    std::filesystem::create_directory(dir + "/artifacts");
    auto created = artifacts::FilesystemArtifactStore::create(
        sys::UniqueFd(::open((dir + "/artifacts").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC)),
        repository);
    if (!created) throw std::runtime_error(created.error().message());
    store = std::move(*created);
    api->attachArtifacts(ArtifactBackend{store.get(), repository.get(), {}, 1 << 20});
    auto schedules = capability::schedule::openSqliteScheduleStore(dir + "/schedules.db");
    if (!schedules) throw std::runtime_error(schedules.error().message());
    schedule_store = *schedules;
    api->attachSchedules(schedule_store);
    auto keys = service::TenantKeys::parse(service::tenantKeyLine("tenant-a", kKeyA) + "\n" +
                                               service::tenantKeyLine("tenant-b", kKeyB) + "\n",
                                           "test keys");
    if (!keys) throw std::runtime_error(keys.error().message());
    api->attachTenantKeys(std::move(*keys));

    a_env = provision("tenant-a", kLeaseA);
    b_env = provision("tenant-b", 0);
    expect(call("PUT", "/v1/runs/" + std::string(kRun) + "/lease",
                json{{"tenant_id", "tenant-a"}, {"lease_epoch", kLeaseA}}.dump()),
           200);
    expect(call("PUT", "/v1/environments/" + a_env + "/files?path=secret.txt", "a's secret"), 204);
    auto exported =
        call("POST", "/v1/environments/" + a_env + "/artifacts", R"({"path": "secret.txt"})");
    expect(exported, 201);
    a_artifact = json::parse(exported.body).value("artifact_id", "");
    capability::schedule::ScheduleRequest request;
    request.name = "nightly";
    request.kind = capability::schedule::TimingKind::kAfter;
    request.after_s = 3600;
    auto planned = capability::schedule::planSchedule(
        request, a_env,
        std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count(), {});
    if (!planned) throw std::runtime_error("planSchedule failed");
    if (auto r = schedule_store->create(*planned, 64); !r)
      throw std::runtime_error(r.error().message());
    const artifacts::RunNote note{"plan", R"({"text": "a's secret"})", a_env, now,
                                  now + std::chrono::hours(1)};
    if (auto r = repository->putNote("tenant-a", kRun, note); !r)
      throw std::runtime_error(r.error().message());
  }
  ~World() { std::filesystem::remove_all(dir); }

  HttpResponse call(std::string method, std::string target, std::string body = "") {
    return api->handle(HttpRequest{std::move(method), std::move(target),
                                   std::string("Bearer ") + kToken, std::move(body)});
  }
  std::string provision(const std::string& tenant, std::int64_t epoch) {
    auto r = call("POST", "/v1/environments",
                  json{{"tenant_id", tenant}, {"run_id", kRun}, {"lease_epoch", epoch}}.dump());
    expect(r, 201);
    return json::parse(r.body).value("environment_id", "");
  }
  static void expect(const HttpResponse& r, int status) {
    if (r.status != status)
      throw std::runtime_error("setup call answered " + std::to_string(r.status) + ": " + r.body);
  }

  // Everything of tenant A a call could change or a reaper pass could
  // destroy, read the operator's way (no tenant named).
  std::string stateOfA() {
    std::ostringstream out;
    out << "env " << call("GET", "/v1/environments/" + a_env).body << "\n";
    out << "file " << call("GET", "/v1/environments/" + a_env + "/files?path=secret.txt").body
        << "\n";
    out << "list " << call("GET", "/v1/environments/" + a_env + "/list?path=.").body << "\n";
    out << "provenance "
        << call("GET", "/v1/environments/" + a_env + "/provenance?path=secret.txt").body << "\n";
    out << "artifact " << call("GET", "/v1/artifacts/" + a_artifact + "?tenant_id=tenant-a").body
        << "\n";
    out << "content "
        << call("GET", "/v1/artifacts/" + a_artifact + "/content?tenant_id=tenant-a").body << "\n";
    out << "bytes " << repository->tenantBytes(*artifacts::TenantId::parse("tenant-a")).value_or(-1)
        << "\n";
    out << "schedules " << call("GET", "/v1/environments/" + a_env + "/schedules").body << "\n";
    out << "notes "
        << call("GET", "/v1/runs/" + std::string(kRun) + "/notes?tenant_id=tenant-a").body << "\n";
    const auto lease = api->leases().current("tenant-a", kRun).value();
    out << "lease " << (lease ? std::to_string(*lease) : "none") << "\n";
    return out.str();
  }

  std::string dir;
  Timestamp now =
      std::chrono::time_point_cast<std::chrono::milliseconds>(std::chrono::system_clock::now());
  Settings settings;
  Metrics metrics{"fake"};
  std::unique_ptr<fake::FakeEnvironment> env;
  std::unique_ptr<execution::LocalNode> node;
  std::unique_ptr<Api> api;
  std::shared_ptr<artifacts::MemoryArtifactRepository> repository;
  std::unique_ptr<artifacts::FilesystemArtifactStore> store;
  std::shared_ptr<capability::schedule::ScheduleStore> schedule_store;
  std::string a_env, b_env, a_artifact;
};

// A call as tenant `tenant` makes it (it names the tenant the way its route
// takes one), aimed at A's objects.
struct Call {
  std::string method, target, body;
  bool stream = false;
};
using MakeCall = std::function<Call(const World&, const std::string& tenant)>;

struct Row {
  std::string label;   // routeLabel() of the target
  std::string method;  // as in routes.h
  MakeCall make;
  int b_status;        // tenant B's answer
  std::string b_code;  // its error code, empty for a success
  // Tenant A's own call: checks it reached A's objects (the refusal above
  // is the tenant's). Runs after B's call, on the same world.
  std::function<void(World&, const HttpResponse&)> a_reaches;
  // Tenant B's key naming tenant A: 0 when answered as B's own call above
  // (an unknown id of the route's one object), else the status (403 where
  // the route names no one object).
  int foreign_status = 0;
};

// The tenant_id query parameter naming `tenant`; nothing for "" (a tenant
// key's call may leave its tenant out).
std::string q(const std::string& tenant) {
  return tenant.empty() ? "" : "tenant_id=" + tenant;
}
// `body` with "tenant_id": `tenant`; as it is for "".
json withTenant(json body, const std::string& tenant) {
  if (!tenant.empty()) body["tenant_id"] = tenant;
  return body;
}
std::string envPath(const World& w, const std::string& op = "") {
  return "/v1/environments/" + w.a_env + (op.empty() ? "" : "/" + op);
}

void expectStatus(const HttpResponse& r, int status) {
  EXPECT_EQ(r.status, status) << r.body;
}

std::vector<Row> rows() {
  const std::string run = kRun;
  std::vector<Row> t;
  t.push_back({"/healthz", "GET",
               [](const World&, const std::string&) {
                 return Call{"GET", "/healthz"};
               },
               200, "", [](World&, const HttpResponse& r) { expectStatus(r, 200); }});
  t.push_back({"/metrics", "GET",
               [](const World&, const std::string& tenant) {
                 return Call{"GET", "/metrics?" + q(tenant)};
               },
               400, "bad_request",
               [](World& w, const HttpResponse& r) {
                 expectStatus(r, 400);  // the operator's route, for no tenant
                 EXPECT_EQ(w.call("GET", "/metrics").status, 200);
               }});
  // Provisioning tenant B's run of A's run id is B's own lease (epoch 0 is
  // current there); A's epoch-0 provision is stale.
  t.push_back({"/v1/environments", "POST",
               [run](const World&, const std::string& tenant) {
                 return Call{"POST", "/v1/environments",
                             withTenant(json{{"run_id", run}, {"lease_epoch", 0}}, tenant).dump()};
               },
               201, "", [](World&, const HttpResponse& r) { expectStatus(r, 409); }});
  t.push_back({"/v1/environments", "GET",
               [](const World&, const std::string& tenant) {
                 return Call{"GET", "/v1/environments?" + q(tenant)};
               },
               200, "",
               [](World& w, const HttpResponse& r) {
                 ASSERT_EQ(r.status, 200) << r.body;
                 const auto listed = json::parse(r.body)["environments"];
                 ASSERT_EQ(listed.size(), 1u) << r.body;
                 EXPECT_EQ(listed[0]["environment_id"], w.a_env);
               }});
  t.push_back({"/v1/environments/{environment_id}", "GET",
               [](const World& w, const std::string& tenant) {
                 return Call{"GET", envPath(w) + "?" + q(tenant)};
               },
               404, "not_found",
               [](World&, const HttpResponse& r) {
                 ASSERT_EQ(r.status, 200) << r.body;
                 EXPECT_EQ(json::parse(r.body)["tenant_id"], "tenant-a");
               }});
  // Destroy answers another tenant's environment as an unknown id: 204,
  // and nothing is destroyed.
  t.push_back({"/v1/environments/{environment_id}", "DELETE",
               [](const World& w, const std::string& tenant) {
                 return Call{"DELETE", envPath(w) + "?" + q(tenant)};
               },
               204, "",
               [](World& w, const HttpResponse& r) {
                 expectStatus(r, 204);
                 EXPECT_EQ(w.call("GET", envPath(w)).status, 404) << "A's own destroy destroys";
               }});
  t.push_back({"/v1/environments/{environment_id}/extend", "POST",
               [](const World& w, const std::string& tenant) {
                 return Call{"POST", envPath(w, "extend") + "?" + q(tenant), R"({"seconds": 60})"};
               },
               404, "not_found",
               [](World&, const HttpResponse& r) {
                 ASSERT_EQ(r.status, 200) << r.body;
                 EXPECT_EQ(json::parse(r.body)["tenant_id"], "tenant-a");
               }});
  for (bool stream : {false, true})
    t.push_back({"/v1/environments/{environment_id}/execute", "POST",
                 [stream](const World& w, const std::string& tenant) {
                   return Call{
                       "POST",
                       envPath(w, "execute") + "?" + (stream ? "stream=1&" : "") + q(tenant),
                       R"({"argv": ["echo", "ran"]})", stream};
                 },
                 404, "not_found", [](World&, const HttpResponse& r) { expectStatus(r, 200); }});
  t.push_back({"/v1/environments/{environment_id}/files", "GET",
               [](const World& w, const std::string& tenant) {
                 return Call{"GET", envPath(w, "files") + "?path=secret.txt&" + q(tenant)};
               },
               404, "not_found",
               [](World&, const HttpResponse& r) {
                 ASSERT_EQ(r.status, 200) << r.body;
                 EXPECT_EQ(r.body, "a's secret");
               }});
  t.push_back(
      {"/v1/environments/{environment_id}/files", "PUT",
       [](const World& w, const std::string& tenant) {
         return Call{"PUT", envPath(w, "files") + "?path=secret.txt&" + q(tenant), "overwritten"};
       },
       404, "not_found",
       [](World& w, const HttpResponse& r) {
         expectStatus(r, 204);
         EXPECT_EQ(w.call("GET", envPath(w, "files") + "?path=secret.txt").body, "overwritten");
       }});
  t.push_back({"/v1/environments/{environment_id}/list", "GET",
               [](const World& w, const std::string& tenant) {
                 return Call{"GET", envPath(w, "list") + "?path=.&" + q(tenant)};
               },
               404, "not_found",
               [](World&, const HttpResponse& r) {
                 ASSERT_EQ(r.status, 200) << r.body;
                 EXPECT_NE(r.body.find("secret.txt"), std::string::npos) << r.body;
               }});
  t.push_back({"/v1/environments/{environment_id}/provenance", "GET",
               [](const World& w, const std::string& tenant) {
                 return Call{"GET", envPath(w, "provenance") + "?path=secret.txt&" + q(tenant)};
               },
               404, "not_found", [](World&, const HttpResponse& r) { expectStatus(r, 200); }});
  t.push_back({"/v1/environments/{environment_id}/files", "DELETE",
               [](const World& w, const std::string& tenant) {
                 return Call{"DELETE", envPath(w, "files") + "?path=secret.txt&" + q(tenant)};
               },
               404, "not_found",
               [](World& w, const HttpResponse& r) {
                 expectStatus(r, 204);
                 EXPECT_EQ(w.call("GET", envPath(w, "files") + "?path=secret.txt").status, 404);
               }});
  t.push_back({"/v1/environments/{environment_id}/files/rename", "POST",
               [](const World& w, const std::string& tenant) {
                 return Call{"POST", envPath(w, "files/rename") + "?" + q(tenant),
                             R"({"from": "secret.txt", "to": "moved.txt"})"};
               },
               404, "not_found",
               [](World& w, const HttpResponse& r) {
                 expectStatus(r, 204);
                 EXPECT_EQ(w.call("GET", envPath(w, "files") + "?path=moved.txt").body,
                           "a's secret");
               }});
  t.push_back({"/v1/environments/{environment_id}/stat", "GET",
               [](const World& w, const std::string& tenant) {
                 return Call{"GET", envPath(w, "stat") + "?path=secret.txt&" + q(tenant)};
               },
               404, "not_found",
               [](World&, const HttpResponse& r) {
                 ASSERT_EQ(r.status, 200) << r.body;
                 EXPECT_EQ(json::parse(r.body)["size_bytes"], 10);
               }});
  t.push_back(
      {"/v1/environments/{environment_id}/directories", "POST",
       [](const World& w, const std::string& tenant) {
         return Call{"POST", envPath(w, "directories") + "?" + q(tenant), R"({"path": "made"})"};
       },
       404, "not_found",
       [](World& w, const HttpResponse& r) {
         expectStatus(r, 204);
         EXPECT_EQ(w.call("GET", envPath(w, "stat") + "?path=made").status, 200);
       }});
  t.push_back({"/v1/environments/{environment_id}/archive", "GET",
               [](const World& w, const std::string& tenant) {
                 return Call{"GET", envPath(w, "archive") + "?path=.&" + q(tenant)};
               },
               404, "not_found",
               [](World&, const HttpResponse& r) {
                 ASSERT_EQ(r.status, 200) << r.body;
                 EXPECT_NE(r.body_source, nullptr);
               }});
  t.push_back(
      {"/v1/environments/{environment_id}/archive", "PUT",
       [](const World& w, const std::string& tenant) {
         return Call{"PUT", envPath(w, "archive") + "?path=up&" + q(tenant), oneDirectoryTar()};
       },
       404, "not_found",
       [](World& w, const HttpResponse& r) {
         expectStatus(r, 204);
         EXPECT_EQ(w.call("GET", envPath(w, "stat") + "?path=up%2Fd").status, 200);
       }});
  t.push_back({"/v1/environments/{environment_id}/artifacts", "POST",
               [](const World& w, const std::string& tenant) {
                 return Call{"POST", envPath(w, "artifacts") + "?" + q(tenant),
                             R"({"path": "secret.txt"})"};
               },
               404, "not_found",
               [](World&, const HttpResponse& r) {
                 ASSERT_EQ(r.status, 201) << r.body;
                 EXPECT_EQ(json::parse(r.body)["tenant_id"], "tenant-a");
               }});
  // The fake mechanism runs no interpreter: A's own program gets past the
  // tenant check and fails later, never as an unknown environment.
  t.push_back(
      {"/v1/environments/{environment_id}/code", "POST",
       [](const World& w, const std::string& tenant) {
         return Call{"POST", envPath(w, "code") + "?" + q(tenant),
                     R"({"program": "def main():\n    return 1\n"})"};
       },
       404, "not_found",
       [](World&, const HttpResponse& r) {
         EXPECT_FALSE(r.status == 404 && r.body.find("no live environment") != std::string::npos)
             << r.body;
       }});
  // The owner's cancel reaches the environment (no such command runs);
  // another tenant's is an unknown environment.
  t.push_back(
      {"/v1/environments/{environment_id}/executions/{execution_id}/cancel", "POST",
       [](const World& w, const std::string& tenant) {
         return Call{"POST", envPath(w, "executions/none-running/cancel") + "?" + q(tenant)};
       },
       404, "not_found",
       [](World&, const HttpResponse& r) {
         ASSERT_EQ(r.status, 404) << r.body;
         EXPECT_NE(r.body.find("no command with execution_id"), std::string::npos) << r.body;
       }});
  // Jobs: the fake mechanism starts no side processes, so A's own start
  // gets past the tenant check and is refused as unavailable; A's own
  // listing is empty and A's job routes name the unknown job.
  t.push_back({"/v1/environments/{environment_id}/jobs", "POST",
               [](const World& w, const std::string& tenant) {
                 return Call{"POST", envPath(w, "jobs") + "?" + q(tenant), R"({"argv": ["true"]})"};
               },
               404, "not_found", [](World&, const HttpResponse& r) { expectStatus(r, 503); }});
  t.push_back({"/v1/environments/{environment_id}/jobs", "GET",
               [](const World& w, const std::string& tenant) {
                 return Call{"GET", envPath(w, "jobs") + "?" + q(tenant)};
               },
               404, "not_found",
               [](World&, const HttpResponse& r) {
                 ASSERT_EQ(r.status, 200) << r.body;
                 EXPECT_EQ(json::parse(r.body)["jobs"], json::array());
               }});
  for (const char* op : {"", "/input", "/kill", "/resize"}) {
    const std::string method = *op == '\0' ? "GET" : "POST";
    const std::string body = *op == '\0'                         ? ""
                             : std::string_view(op) == "/resize" ? R"({"rows": 24, "columns": 80})"
                                                                 : "{}";
    t.push_back(
        {std::string("/v1/environments/{environment_id}/jobs/{job_id}") + op, method,
         [op, method, body](const World& w, const std::string& tenant) {
           return Call{method, envPath(w, std::string("jobs/job-1") + op) + "?" + q(tenant), body};
         },
         404, "not_found",
         [](World&, const HttpResponse& r) {
           ASSERT_EQ(r.status, 404) << r.body;
           EXPECT_NE(r.body.find("no job is named"), std::string::npos) << r.body;
         }});
  }
  t.push_back({"/v1/environments/{environment_id}/schedules", "GET",
               [](const World& w, const std::string& tenant) {
                 return Call{"GET", envPath(w, "schedules") + "?" + q(tenant)};
               },
               404, "not_found",
               [](World&, const HttpResponse& r) {
                 ASSERT_EQ(r.status, 200) << r.body;
                 EXPECT_NE(r.body.find("nightly"), std::string::npos) << r.body;
               }});
  t.push_back({"/v1/environments/{environment_id}/schedules/{name}", "DELETE",
               [](const World& w, const std::string& tenant) {
                 return Call{"DELETE", envPath(w, "schedules/nightly") + "?" + q(tenant)};
               },
               404, "not_found", [](World&, const HttpResponse& r) { expectStatus(r, 204); }});
  // Tenant B's lease of its run of the same id: B's own, A's untouched (and
  // A's environment is not reaped). A's renewal makes A's stale.
  t.push_back({"/v1/runs/{run_id}/lease", "PUT",
               [run](const World&, const std::string& tenant) {
                 return Call{"PUT", "/v1/runs/" + run + "/lease",
                             withTenant(json{{"lease_epoch", kLeaseA + 4}}, tenant).dump()};
               },
               200, "",
               [](World& w, const HttpResponse& r) {
                 expectStatus(r, 200);
                 EXPECT_EQ(w.api->reap(), 1) << "A's environment is stale now";
                 EXPECT_EQ(w.call("GET", envPath(w)).status, 404);
               }});
  // The reaper's question is the execution nodes', not a tenant's: absent
  // without the internal credential (these calls carry the service token).
  // With it, a lease names its tenant's run: A's is stale at epoch 0, B's
  // run of the same id is not.
  t.push_back({"/internal/v1/leases/stale", "POST",
               [run](const World& w, const std::string& tenant) {
                 return Call{"POST", "/internal/v1/leases/stale",
                             json{{"leases",
                                   {{{"tenant_id", tenant},
                                     {"run_id", run},
                                     {"lease_epoch", 0},
                                     {"environment_id", w.a_env}}}}}
                                 .dump()};
               },
               404, "not_found",
               [run](World& w, const HttpResponse& r) {
                 expectStatus(r, 404);
                 w.api->attachInternalCredential("internal-credential-0123456789");
                 for (const std::string tenant : {"tenant-a", "tenant-b"}) {
                   const HttpResponse answer = w.api->handle(HttpRequest{
                       "POST", "/internal/v1/leases/stale", "Bearer internal-credential-0123456789",
                       json{{"leases",
                             {{{"tenant_id", tenant},
                               {"run_id", run},
                               {"lease_epoch", 0},
                               {"environment_id", w.a_env}}}}}
                           .dump()});
                   ASSERT_EQ(answer.status, 200) << answer.body;
                   EXPECT_EQ(json::parse(answer.body)["stale"],
                             tenant == "tenant-a" ? json::array({w.a_env}) : json::array());
                 }
               }});
  // B's run of the same id is B's own, with no notes: an empty list, and
  // A's note is not found.
  t.push_back({"/v1/runs/{run_id}/notes", "GET",
               [run](const World&, const std::string& tenant) {
                 return Call{"GET", "/v1/runs/" + run + "/notes?" + q(tenant)};
               },
               200, "",
               [](World&, const HttpResponse& r) {
                 ASSERT_EQ(r.status, 200) << r.body;
                 const json notes = json::parse(r.body)["notes"];
                 ASSERT_EQ(notes.size(), 1u) << r.body;
                 EXPECT_EQ(notes[0]["key"], "plan");
               }});
  // B's run of the same id has no artifacts: an empty list; A's lists the
  // artifact A exported.
  t.push_back({"/v1/runs/{run_id}/artifacts", "GET",
               [run](const World&, const std::string& tenant) {
                 return Call{"GET", "/v1/runs/" + run + "/artifacts?" + q(tenant)};
               },
               200, "",
               [](World& w, const HttpResponse& r) {
                 ASSERT_EQ(r.status, 200) << r.body;
                 const json listed = json::parse(r.body)["artifacts"];
                 ASSERT_EQ(listed.size(), 1u) << r.body;
                 EXPECT_EQ(listed[0]["artifact_id"], w.a_artifact);
               }});
  t.push_back({"/v1/runs/{run_id}/notes/{key}", "GET",
               [run](const World&, const std::string& tenant) {
                 return Call{"GET", "/v1/runs/" + run + "/notes/plan?" + q(tenant)};
               },
               404, "not_found",
               [](World&, const HttpResponse& r) {
                 ASSERT_EQ(r.status, 200) << r.body;
                 EXPECT_EQ(json::parse(r.body)["value"]["text"], "a's secret");
               }});
  t.push_back({"/v1/artifacts", "POST",
               [run](const World&, const std::string& tenant) {
                 return Call{"POST",
                             "/v1/artifacts?" + q(tenant) + "&run_id=" + run + "&filename=up.txt",
                             "bytes"};
               },
               201, "",
               [](World&, const HttpResponse& r) {
                 ASSERT_EQ(r.status, 201) << r.body;
                 EXPECT_EQ(json::parse(r.body)["tenant_id"], "tenant-a");
               }});
  t.push_back({"/v1/artifacts/{artifact_id}", "GET",
               [](const World& w, const std::string& tenant) {
                 return Call{"GET", "/v1/artifacts/" + w.a_artifact + "?" + q(tenant)};
               },
               404, "not_found", [](World&, const HttpResponse& r) { expectStatus(r, 200); }});
  t.push_back({"/v1/artifacts/{artifact_id}", "DELETE",
               [](const World& w, const std::string& tenant) {
                 return Call{"DELETE", "/v1/artifacts/" + w.a_artifact + "?" + q(tenant)};
               },
               404, "not_found", [](World&, const HttpResponse& r) { expectStatus(r, 204); }});
  t.push_back({"/v1/artifacts/{artifact_id}/content", "GET",
               [](const World& w, const std::string& tenant) {
                 return Call{"GET", "/v1/artifacts/" + w.a_artifact + "/content?" + q(tenant)};
               },
               404, "not_found",
               [](World&, const HttpResponse& r) {
                 ASSERT_EQ(r.status, 200) << r.body;
                 EXPECT_EQ(r.body, "a's secret");
               }});
  // Nor does the image list.
  t.push_back({"/v1/images", "GET",
               [](const World&, const std::string&) {
                 return Call{"GET", "/v1/images"};
               },
               200, "", [](World&, const HttpResponse& r) { expectStatus(r, 200); }});
  // The tool list holds no tenant's state.
  t.push_back({"/v1/tools", "GET",
               [](const World&, const std::string&) {
                 return Call{"GET", "/v1/tools"};
               },
               200, "", [](World&, const HttpResponse& r) { expectStatus(r, 200); }});
  t.push_back({"/v1/tools/{name}", "POST",
               [](const World& w, const std::string& tenant) {
                 return Call{"POST", "/v1/tools/workspace_read_text",
                             withTenant(json{{"environment_id", w.a_env},
                                             {"arguments", {{"path", "secret.txt"}}}},
                                        tenant)
                                 .dump()};
               },
               404, "not_found",
               [](World&, const HttpResponse& r) {
                 ASSERT_EQ(r.status, 200) << r.body;
                 EXPECT_NE(r.body.find("a's secret"), std::string::npos) << r.body;
               }});
  // The fire outbox is the operator's: it spans tenants, so a call naming
  // one is refused rather than shown (or acknowledging) every tenant's.
  t.push_back({"/v1/schedule-fires", "GET",
               [](const World&, const std::string& tenant) {
                 return Call{"GET", "/v1/schedule-fires?" + q(tenant)};
               },
               400, "bad_request",
               [](World& w, const HttpResponse& r) {
                 expectStatus(r, 400);
                 EXPECT_EQ(w.call("GET", "/v1/schedule-fires").status, 200);
               }});
  t.push_back(
      {"/v1/schedule-fires/ack", "POST",
       [](const World&, const std::string& tenant) {
         return Call{"POST", "/v1/schedule-fires/ack",
                     withTenant(json{{"through", 1000}}, tenant).dump()};
       },
       400, "bad_request",
       [](World& w, const HttpResponse& r) {
         expectStatus(r, 400);
         // Named in the query instead of the body: refused too.
         EXPECT_EQ(
             w.call("POST", "/v1/schedule-fires/ack?tenant_id=tenant-b", R"({"through": 1000})")
                 .status,
             400);
         EXPECT_EQ(w.call("POST", "/v1/schedule-fires/ack", R"({"through": 0})").status, 200);
       }});
  // Routes of no one object (listings, provision, upload, lease): a tenant
  // key naming another tenant is 403 there.
  for (Row& row : t)
    if (row.label == "/v1/environments" || row.label == "/v1/artifacts" ||
        row.label == "/v1/runs/{run_id}/lease" || row.label == "/v1/runs/{run_id}/notes" ||
        row.label == "/v1/runs/{run_id}/artifacts")
      row.foreign_status = 403;
  return t;
}

HttpResponse run(World& w, const Call& c, std::vector<std::string>* lines,
                 const std::string& credential = kToken) {
  HttpRequest request{c.method, c.target, "Bearer " + credential, c.body};
  if (!c.stream) return w.api->handle(request);
  EXPECT_TRUE(w.api->wantsStream(request)) << c.target;
  return w.api->handleStreaming(
      request, [&](std::string line) { lines->push_back(std::move(line)); }, nullptr);
}

TEST(TenantIsolation, NoCallNamingOneTenantChangesOrRevealsAnothers) {
  for (const Row& row : rows()) {
    SCOPED_TRACE(row.method + " " + row.label);
    World w;
    const Call as_b = row.make(w, "tenant-b");
    EXPECT_EQ(routeLabel(as_b.target.substr(0, as_b.target.find('?'))), row.label) << as_b.target;
    const std::string before = w.stateOfA();
    std::vector<std::string> lines;
    const HttpResponse b = run(w, as_b, &lines);
    EXPECT_EQ(b.status, row.b_status) << b.body;
    if (!row.b_code.empty()) {
      const json answer = json::parse(b.body, nullptr, /*allow_exceptions=*/false);
      EXPECT_EQ(answer.is_object() ? answer["error"]["code"] : json(), row.b_code) << b.body;
    }
    EXPECT_TRUE(lines.empty()) << "a refused stream emits nothing";
    // Nothing of A's is in B's answer, but for what B's call itself named.
    for (const std::string& secret :
         {w.a_env, w.a_artifact, std::string("a's secret"), std::string("nightly")})
      if (as_b.target.find(secret) == std::string::npos &&
          as_b.body.find(secret) == std::string::npos) {
        EXPECT_EQ(b.body.find(secret), std::string::npos) << secret << " in " << b.body;
      }
    // And nothing of A's changed, not even after a reaper pass.
    w.api->reap();
    EXPECT_EQ(w.stateOfA(), before);
    EXPECT_EQ(w.call("GET", "/v1/environments/" + w.b_env).status,
              row.label == "/v1/runs/{run_id}/lease" ? 404 : 200)
        << "B's own lease renewal makes B's epoch-0 environment stale, nothing else touches it";

    // The same call naming tenant A reaches A's objects.
    std::vector<std::string> own_lines;
    const HttpResponse a = run(w, row.make(w, "tenant-a"), &own_lines);
    row.a_reaches(w, a);
  }
}

const Route& routeOf(const Row& row) {
  for (const Route& route : routes())
    if (route.method == row.method && route.pattern == row.label) return route;
  throw std::runtime_error("no route " + row.method + " " + row.label);
}

// Nothing of A's is in `answer`, but for what `call` itself named.
void expectNothingOfA(const World& w, const Call& call, const HttpResponse& answer) {
  for (const std::string& secret :
       {w.a_env, w.a_artifact, std::string("a's secret"), std::string("nightly")})
    if (call.target.find(secret) == std::string::npos &&
        call.body.find(secret) == std::string::npos) {
      EXPECT_EQ(answer.body.find(secret), std::string::npos) << secret << " in " << answer.body;
    }
}

std::string errorCode(const HttpResponse& r) {
  const json answer = json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  if (!answer.is_object() || !answer.contains("error") || !answer.at("error").is_object())
    return "";
  return answer.at("error").value("code", std::string());
}

// Every route with tenant B's KEY on tenant A's objects: with no tenant
// named the call is B's own (as the operator's call naming B is, above);
// naming A it is answered exactly as an unknown id of the route's object
// (the same body the operator's call naming B gets), or 403 on a route of
// no one object (the same body whatever tenant is named); an operator route
// is 403. Nothing of A's changes or shows. The same call with A's key
// reaches A's objects, so the refusal is the tenant's.
TEST(TenantIsolation, NoCallWithOneTenantsKeyChangesOrRevealsAnothers) {
  for (const Row& row : rows()) {
    SCOPED_TRACE(row.method + " " + row.label);
    const bool operator_route = routeOf(row).tenant == TenantScope::kOperator;
    World w;
    const std::string before = w.stateOfA();

    // B's key, no tenant named.
    const Call own = row.make(w, "");
    std::vector<std::string> lines;
    const HttpResponse b = run(w, own, &lines, kKeyB);
    EXPECT_EQ(b.status, operator_route ? 403 : row.b_status) << b.body;
    if (operator_route) {
      EXPECT_EQ(errorCode(b), "forbidden") << b.body;
    } else if (!row.b_code.empty()) {
      EXPECT_EQ(errorCode(b), row.b_code) << b.body;
    }
    EXPECT_TRUE(lines.empty()) << "a refused stream emits nothing";
    expectNothingOfA(w, own, b);

    // B's key naming A.
    const Call naming_a = row.make(w, "tenant-a");
    const HttpResponse foreign = run(w, naming_a, &lines, kKeyB);
    const int expected = operator_route       ? 403
                         : row.foreign_status ? row.foreign_status
                                              : row.b_status;
    EXPECT_EQ(foreign.status, expected) << foreign.body;
    EXPECT_TRUE(lines.empty()) << "a refused stream emits nothing";
    expectNothingOfA(w, naming_a, foreign);
    if (expected == 403) {
      EXPECT_EQ(errorCode(foreign), "forbidden") << foreign.body;
      // Whether the named tenant exists is not told.
      EXPECT_EQ(run(w, row.make(w, "tenant-nobody"), &lines, kKeyB).body, foreign.body);
    } else if (!row.b_code.empty()) {
      // The operator naming B on A's object gets the unknown-id answer.
      EXPECT_EQ(run(w, row.make(w, "tenant-b"), &lines).body, foreign.body);
    }

    w.api->reap();
    EXPECT_EQ(w.stateOfA(), before);
    EXPECT_EQ(w.call("GET", "/v1/environments/" + w.b_env).status,
              row.label == "/v1/runs/{run_id}/lease" ? 404 : 200)
        << "B's own lease renewal makes B's epoch-0 environment stale, nothing else touches it";

    // A's key, no tenant named, reaches A's objects.
    std::vector<std::string> own_lines;
    const HttpResponse a = run(w, row.make(w, ""), &own_lines, kKeyA);
    if (operator_route) {
      EXPECT_EQ(a.status, 403) << "no tenant key calls an operator route: " << a.body;
      const HttpResponse by_operator = run(w, row.make(w, ""), &own_lines);
      EXPECT_EQ(by_operator.status, 200) << by_operator.body;
    } else {
      row.a_reaches(w, a);
    }
  }
}

// A tenant key, apart from the table: an unknown key gets the wrong token's
// 401; a key naming its own tenant is the same call as naming none; a
// listing shows the key's tenant only while the service token still sees
// every tenant; a key's provision is its tenant's.
TEST(TenantIsolation, AKeyActsForItsOwnTenantOnly) {
  World w;
  EXPECT_TRUE(w.api->authorized(
      HttpRequest{"GET", "/v1/environments", std::string("Bearer ") + kKeyA, ""}));
  const std::string unknown_key = std::string(kKeyA).substr(0, 66) + "ab";
  EXPECT_FALSE(
      w.api->authorized(HttpRequest{"GET", "/v1/environments", "Bearer " + unknown_key, ""}));
  const HttpResponse refused = run(w, Call{"GET", "/v1/environments"}, nullptr, unknown_key);
  EXPECT_EQ(refused.status, 401) << refused.body;
  EXPECT_EQ(refused.body,
            run(w, Call{"GET", "/v1/environments"}, nullptr, "not-a-credential").body);

  for (const std::string target : {"/v1/environments", "/v1/environments?tenant_id=tenant-a"}) {
    const HttpResponse listed = run(w, Call{"GET", target}, nullptr, kKeyA);
    ASSERT_EQ(listed.status, 200) << listed.body;
    const json environments = json::parse(listed.body)["environments"];
    ASSERT_EQ(environments.size(), 1u) << listed.body;
    EXPECT_EQ(environments[0]["environment_id"], w.a_env);
  }
  const HttpResponse all = w.call("GET", "/v1/environments");
  ASSERT_EQ(all.status, 200);
  EXPECT_EQ(json::parse(all.body)["environments"].size(), 2u) << "the operator sees both";

  const HttpResponse made = run(
      w, Call{"POST", "/v1/environments", R"({"run_id": "r2", "lease_epoch": 0})"}, nullptr, kKeyB);
  ASSERT_EQ(made.status, 201) << made.body;
  EXPECT_EQ(json::parse(made.body)["tenant_id"], "tenant-b");
  // A malformed tenant_id is 400 for a key as for the token.
  const HttpResponse malformed =
      run(w, Call{"GET", "/v1/environments/" + w.a_env + "?tenant_id=a%2Fb"}, nullptr, kKeyB);
  EXPECT_EQ(malformed.status, 400) << malformed.body;
  EXPECT_EQ(malformed.body.find(w.a_env), std::string::npos) << malformed.body;
}

TEST(TenantIsolation, TheRowsCoverEveryRoute) {
  std::set<std::pair<std::string, std::string>> covered;  // (method, label)
  for (const Row& row : rows()) covered.emplace(row.method, row.label);
  std::set<std::pair<std::string, std::string>> table;
  for (const Route& route : routes())
    table.emplace(std::string(route.method), std::string(route.pattern));
  for (const auto& [method, pattern] : table)
    EXPECT_TRUE(covered.count({method, pattern})) << method << " " << pattern << " has no row";
  for (const auto& [method, label] : covered)
    EXPECT_TRUE(table.count({method, label})) << method << " " << label << " is no route";
}

// The ways a tenant named in the wrong place used to be ignored, and the
// call answered for another tenant or for all of them: each is refused now,
// before anything acts.
TEST(TenantIsolation, ATenantNamedWhereTheRouteTakesNoneIsRefused) {
  World w;
  const std::string before = w.stateOfA();
  // The lease's tenant is its body's: a query naming another is refused,
  // not weighed against the body (A's lease is not bumped, A's environment
  // not reaped).
  for (const std::string query : {"tenant_id=tenant-b", "tenant_id=tenant-a"}) {
    const HttpResponse lease =
        w.call("PUT", "/v1/runs/" + std::string(kRun) + "/lease?" + query,
               json{{"tenant_id", "tenant-a"}, {"lease_epoch", kLeaseA + 10}}.dump());
    EXPECT_EQ(lease.status, 400) << lease.body;
    EXPECT_NE(lease.body.find("JSON body"), std::string::npos) << lease.body;
  }
  w.api->reap();
  EXPECT_EQ(w.stateOfA(), before);
  // A tool call's tenant is its body's too: a query tenant_id does not let
  // the body name another tenant's environment.
  const HttpResponse tool =
      w.call("POST", "/v1/tools/workspace_list?tenant_id=tenant-b",
             json{{"environment_id", w.a_env}, {"arguments", {{"path", "."}}}}.dump());
  EXPECT_EQ(tool.status, 400) << tool.body;
  EXPECT_EQ(tool.body.find("secret.txt"), std::string::npos) << tool.body;
  // A misspelt tenant parameter is not the operator's all-tenant view.
  for (const char* target : {"/v1/environments?tenant=tenant-b", "/v1/environments?tenantid=x"}) {
    const HttpResponse listed = w.call("GET", target);
    EXPECT_EQ(listed.status, 400) << listed.body;
    EXPECT_NE(listed.body.find("this route takes: tenant_id"), std::string::npos) << listed.body;
    EXPECT_EQ(listed.body.find(w.a_env), std::string::npos) << listed.body;
  }
  // Nor is a malformed or repeated one.
  for (const char* query : {"tenant_id=%zz", "tenant_id=tenant-b&tenant_id=tenant-a"}) {
    const HttpResponse read =
        w.call("GET", "/v1/environments/" + w.a_env + "/files?path=secret.txt&" + query);
    EXPECT_EQ(read.status, 400) << read.body;
    EXPECT_EQ(read.body.find("a's secret"), std::string::npos) << read.body;
  }
  EXPECT_EQ(w.stateOfA(), before);
}

}  // namespace
}  // namespace airlock::gateway
