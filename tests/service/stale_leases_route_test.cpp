// The gateway's internal route for the reaper's question,
// POST /internal/v1/leases/stale (api.h, port/stale_lease_wire.h), through
// Api::handle on the fake mechanism. What each test measures:
//   - without an internal credential the route is absent, answered exactly
//     as an unknown path;
//   - with one, it takes that credential alone: no token, the operator's
//     token or a wrong one is 401, and the credential opens no other route;
//   - renewals through PUT /v1/runs/{run_id}/lease decide the answer;
//   - every malformed body is a 400 whose message names the problem (the
//     lease's index and field), and the bound is 10000 leases;
//   - with an SQLite lease book, an Api built anew on the same file (a
//     restarted gateway) answers the same.
#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "airlock/execution/node.h"
#include "airlock/gateway/api/api.h"
#include "airlock/port/stale_lease_wire.h"
#include "airlock/sandbox/fake/fake_environment.h"
#include "test_tree.h"

namespace airlock::gateway {
namespace {

using json = nlohmann::json;
using service::HttpRequest;
using service::HttpResponse;

constexpr const char* kToken = "operator-0123456789abcdef";
constexpr const char* kCredential = "internal-0123456789abcdef";
constexpr const char* kRoute = "/internal/v1/leases/stale";

std::string envId(int n) {
  return "node-a.0190a1b2-c3d4-7e5f-8a9b-" + std::to_string(100000000000 + n);
}

json leaseJson(const std::string& run, std::int64_t epoch, int n) {
  return {
      {"tenant_id", "t1"}, {"run_id", run}, {"lease_epoch", epoch}, {"environment_id", envId(n)}};
}

class StaleLeasesRouteTest : public ::testing::Test {
 protected:
  StaleLeasesRouteTest() {
    settings_.service_token = kToken;
    api_ = makeApi();
  }
  std::unique_ptr<Api> makeApi() {
    return std::make_unique<Api>(settings_, node_, ServiceImages::hostOnly(fake::kFakeImageDigest),
                                 metrics_);
  }
  static HttpResponse ask(Api& api, const std::string& body, const std::string& token) {
    return api.handle(HttpRequest{"POST", kRoute, token.empty() ? "" : "Bearer " + token, body});
  }
  HttpResponse ask(const std::string& body, const std::string& token = kCredential) {
    return ask(*api_, body, token);
  }
  void renew(Api& api, const std::string& run, std::int64_t epoch) {
    const HttpResponse r =
        api.handle(HttpRequest{"PUT", "/v1/runs/" + run + "/lease", std::string("Bearer ") + kToken,
                               json{{"tenant_id", "t1"}, {"lease_epoch", epoch}}.dump()});
    ASSERT_EQ(r.status, 200) << r.body;
  }
  static json error(const HttpResponse& r) {
    const json j = json::parse(r.body, nullptr, false);
    return j.is_object() && j.contains("error") ? j["error"] : json();
  }
  std::string refusal(const json& body) {
    const HttpResponse r = ask(body.dump());
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_EQ(error(r)["code"], "tool_validation_error") << r.body;
    return error(r)["message"].is_string() ? error(r)["message"].get<std::string>() : r.body;
  }

  service::Settings settings_;
  service::Metrics metrics_{"fake"};
  fake::FakeEnvironment env_{fake::FakeOptions{}};
  execution::LocalNode node_{env_};
  std::unique_ptr<Api> api_;
};

TEST_F(StaleLeasesRouteTest, WithoutACredentialTheRouteIsAbsentAsAnUnknownPath) {
  const std::string body = json{{"leases", json::array()}}.dump();
  const HttpResponse with_token = ask(body, kToken);
  const HttpResponse unknown = api_->handle(
      HttpRequest{"POST", "/internal/v1/nothing", std::string("Bearer ") + kToken, ""});
  EXPECT_EQ(with_token.status, 404) << with_token.body;
  EXPECT_EQ(with_token.body, unknown.body);
  EXPECT_EQ(ask(body, "").status, 401);
  EXPECT_EQ(ask(body, kCredential).status, 401) << "no credential is the internal one yet";
}

TEST_F(StaleLeasesRouteTest, ItTakesTheInternalCredentialAlone) {
  api_->attachInternalCredential(kCredential);
  const std::string body = json{{"leases", json::array()}}.dump();
  for (const std::string token : {"", kToken, "internal-0123456789abcdeX"}) {
    const HttpResponse r = ask(body, token);
    EXPECT_EQ(r.status, 401) << token << ": " << r.body;
    EXPECT_EQ(error(r)["code"], "unauthorized");
  }
  const HttpResponse ok = ask(body);
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(json::parse(ok.body), (json{{"stale", json::array()}}));
  // The credential opens nothing else.
  EXPECT_EQ(
      api_->handle(HttpRequest{"GET", "/v1/environments", std::string("Bearer ") + kCredential, ""})
          .status,
      401);
  EXPECT_EQ(
      api_->handle(HttpRequest{"GET", "/v1/environments", std::string("Bearer ") + kToken, ""})
          .status,
      200);
}

TEST_F(StaleLeasesRouteTest, TheRenewedEpochsDecideTheAnswer) {
  api_->attachInternalCredential(kCredential);
  renew(*api_, "r1", 5);
  renew(*api_, "r2", 1);
  const json question = {{"leases",
                          {leaseJson("r1", 4, 1), leaseJson("r1", 5, 2), leaseJson("r2", 0, 3),
                           leaseJson("r3", 0, 4)}}};
  const HttpResponse r = ask(question.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body), (json{{"stale", {envId(1), envId(3)}}}));
}

TEST_F(StaleLeasesRouteTest, AMalformedQuestionIsA400NamingTheProblem) {
  api_->attachInternalCredential(kCredential);
  const HttpResponse not_json = ask("{\"leases\": [");
  EXPECT_EQ(not_json.status, 400) << not_json.body;
  EXPECT_EQ(refusal(json::array()), "the request body must be a JSON object");
  EXPECT_EQ(refusal(json::object()),
            "leases must be an array of {tenant_id, run_id, lease_epoch, environment_id}");
  EXPECT_EQ(refusal({{"leases", 1}}),
            "leases must be an array of {tenant_id, run_id, lease_epoch, environment_id}");
  EXPECT_EQ(refusal({{"leases", json::array()}, {"extra", 1}}),
            "unknown key \"extra\" (the body takes leases)");
  json bad_run = leaseJson("r 1", 1, 3);
  EXPECT_EQ(refusal({{"leases", {leaseJson("r1", 1, 1), leaseJson("r1", 1, 2), bad_run}}}),
            "leases[2].run_id must be 1-128 bytes of A-Z a-z 0-9 . _ : -");
  json long_tenant = leaseJson("r1", 1, 1);
  long_tenant["tenant_id"] = std::string(129, 't');
  EXPECT_EQ(refusal({{"leases", {long_tenant}}}),
            "leases[0].tenant_id must be 1-128 bytes of A-Z a-z 0-9 . _ : -");
  json bad_env = leaseJson("r1", 1, 1);
  bad_env["environment_id"] = "../../etc";
  EXPECT_EQ(refusal({{"leases", {bad_env}}}),
            "leases[0].environment_id must be an environment id (<node>.<uuid> or <uuid>)");
  for (const json& epoch : {json(-1), json(1.5), json("3"), json(nullptr),
                            json(std::numeric_limits<std::uint64_t>::max())}) {
    json bad_epoch = leaseJson("r1", 1, 1);
    bad_epoch["lease_epoch"] = epoch;
    EXPECT_EQ(refusal({{"leases", {bad_epoch}}}),
              "leases[0].lease_epoch must be a whole number from 0 to 2^63-1")
        << epoch.dump();
  }
  json missing = leaseJson("r1", 1, 1);
  missing.erase("lease_epoch");
  EXPECT_EQ(refusal({{"leases", {missing}}}),
            "leases[0].lease_epoch must be a whole number from 0 to 2^63-1");
  json extra = leaseJson("r1", 1, 1);
  extra["image"] = "x";
  EXPECT_EQ(refusal({{"leases", {extra}}}),
            "leases[0] has the unknown key \"image\" (it takes tenant_id, run_id, lease_epoch, "
            "environment_id)");
  EXPECT_EQ(refusal({{"leases", {"r1"}}}),
            "leases[0] must be an object {tenant_id, run_id, lease_epoch, environment_id}");
}

TEST_F(StaleLeasesRouteTest, AQuestionHoldsAtMostTenThousandLeases) {
  api_->attachInternalCredential(kCredential);
  renew(*api_, "r1", 2);
  json leases = json::array();
  for (int i = 0; i < static_cast<int>(kMaxStaleLeaseQuestion); ++i)
    leases.push_back(leaseJson("r1", i == 0 ? 1 : 2, i));
  const HttpResponse full = ask(json{{"leases", leases}}.dump());
  ASSERT_EQ(full.status, 200) << full.body.substr(0, 200);
  EXPECT_EQ(json::parse(full.body), (json{{"stale", {envId(0)}}}));
  leases.push_back(leaseJson("r1", 1, 10000));
  EXPECT_EQ(refusal({{"leases", leases}}), "at most 10000 leases per question; got 10001");
}

TEST_F(StaleLeasesRouteTest, ARestartedGatewayOnTheSameDatabaseAnswersTheSame) {
  workspace::testing::TempDir dir;
  const std::string path = dir.path() + "/metadata.db";
  {
    auto book = openSqliteLeaseBook(path);
    ASSERT_TRUE(book.has_value()) << book.error().message();
    api_->attachLeases(std::move(*book));
    renew(*api_, "r1", 7);
  }
  api_.reset();  // the gateway stops
  auto restarted = makeApi();
  auto book = openSqliteLeaseBook(path);
  ASSERT_TRUE(book.has_value()) << book.error().message();
  restarted->attachLeases(std::move(*book));
  restarted->attachInternalCredential(kCredential);
  const HttpResponse r =
      ask(*restarted, json{{"leases", {leaseJson("r1", 6, 1), leaseJson("r1", 7, 2)}}}.dump(),
          kCredential);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body), (json{{"stale", {envId(1)}}}));
  EXPECT_EQ(restarted->leases().current("t1", "r1").value(), 7);
}

}  // namespace
}  // namespace airlock::gateway
