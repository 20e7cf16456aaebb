// The route table (routes.h) against what is derived from it and what
// documents it: docs/openapi.yaml has exactly its (method, path, query
// parameters), the Python client has a method for each route it should
// cover, and the API answers every row's refusals the same way: 400 for a
// query parameter the route does not take (naming it), 405 with Allow for
// another method, 404 for an unknown path. A row added without its OpenAPI
// entry, or a client method, fails here.
#include "airlock/gateway/api/routes.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "airlock/execution/node.h"
#include "airlock/gateway/api/api.h"
#include "airlock/sandbox/fake/fake_environment.h"
#include "airlock/service/http_server.h"

namespace airlock::gateway {
namespace {

using service::HttpRequest;
using service::HttpResponse;
using service::Metrics;
using service::Settings;

using json = nlohmann::json;
constexpr const char* kToken = "0123456789abcdef0123456789";
constexpr const char* kInternalCredential = "internal-0123456789abcdef";

// Routes the Python client (sdk/python/airlock_client/client.py) does not
// call, each with the reason. Empty: it covers every route.
const std::map<std::pair<std::string, std::string>, std::string> kClientLacks = {
    {{"POST", "/internal/v1/leases/stale"}, "the execution node's call, not a client's"}};

std::string readSource(const std::string& relative) {
  std::ifstream in(std::string(AIRLOCK_SOURCE_DIR) + "/" + relative);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// (METHOD, pattern, the query parameters it takes, sorted).
using Operation = std::tuple<std::string, std::string, std::set<std::string>>;

std::set<Operation> tableOperations() {
  std::set<Operation> out;
  for (const Route& r : routes()) {
    std::set<std::string> query(r.queryParams().begin(), r.queryParams().end());
    out.emplace(std::string(r.method), std::string(r.pattern), std::move(query));
  }
  return out;
}

// A parameter object, through its "#/components/parameters/X" reference.
YAML::Node resolved(const YAML::Node& doc, YAML::Node node) {
  for (int depth = 0; depth < 8 && node["$ref"]; ++depth) {
    const std::string ref = node["$ref"].as<std::string>();
    const std::string prefix = "#/components/parameters/";
    if (ref.rfind(prefix, 0) != 0) return YAML::Node();
    node = doc["components"]["parameters"][ref.substr(prefix.size())];
  }
  return node;
}

struct Documented {
  std::set<Operation> operations;
  // (METHOD, path) -> its path parameters' names.
  std::map<std::pair<std::string, std::string>, std::set<std::string>> path_params;
};

Documented openApiOperations() {
  const YAML::Node doc = YAML::LoadFile(std::string(AIRLOCK_SOURCE_DIR) + "/docs/openapi.yaml");
  Documented out;
  for (const auto& path_item : doc["paths"]) {
    const std::string path = path_item.first.as<std::string>();
    const YAML::Node item = path_item.second;
    for (const char* method : {"get", "put", "post", "delete", "patch", "head", "options"}) {
      const YAML::Node op = item[method];
      if (!op) continue;
      std::string upper(method);
      for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      std::set<std::string> query, in_path;
      for (const YAML::Node& list : {item["parameters"], op["parameters"]}) {
        if (!list) continue;
        for (const auto& p : list) {
          const YAML::Node param = resolved(doc, p);
          if (!param) continue;
          const std::string where = param["in"].as<std::string>();
          if (where == "query") query.insert(param["name"].as<std::string>());
          if (where == "path") in_path.insert(param["name"].as<std::string>());
        }
      }
      out.operations.emplace(upper, path, std::move(query));
      out.path_params[{upper, path}] = std::move(in_path);
    }
  }
  return out;
}

std::string describe(const Operation& op) {
  std::string out = std::get<0>(op) + " " + std::get<1>(op) + " query: {";
  for (const auto& q : std::get<2>(op)) out += " " + q;
  return out + " }";
}

std::set<std::string> namedSegments(std::string_view pattern) {
  std::set<std::string> out;
  const std::string text(pattern);
  const std::regex named(R"(\{([^}]+)\})");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), named);
       it != std::sregex_iterator(); ++it)
    out.insert((*it)[1].str());
  return out;
}

TEST(Routes, TheOpenApiDocumentHasExactlyTheTablesRoutesAndQueryParameters) {
  const std::set<Operation> table = tableOperations();
  const Documented documented = openApiOperations();
  ASSERT_GE(documented.operations.size(), 20u) << "docs/openapi.yaml's paths were not found";
  for (const Operation& op : table)
    EXPECT_TRUE(documented.operations.count(op))
        << describe(op) << " is a route of routes.cpp without this entry in docs/openapi.yaml";
  for (const Operation& op : documented.operations)
    EXPECT_TRUE(table.count(op)) << describe(op)
                                 << " is in docs/openapi.yaml but no route of routes.cpp";
  for (const Route& r : routes()) {
    auto it = documented.path_params.find({std::string(r.method), std::string(r.pattern)});
    if (it != documented.path_params.end()) {
      EXPECT_EQ(it->second, namedSegments(r.pattern)) << r.method << " " << r.pattern;
    }
  }
}

// (METHOD, template) from the first line of each method's docstring:
// """GET /v1/environments/{environment_id}/files?path=P: ...
std::set<std::pair<std::string, std::string>> clientRoutes() {
  const std::string text = readSource("sdk/python/airlock_client/client.py");
  std::set<std::pair<std::string, std::string>> out;
  const std::regex doc(R"re("""(GET|PUT|POST|DELETE|PATCH) (/[A-Za-z0-9_/{}-]*))re");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), doc); it != std::sregex_iterator();
       ++it)
    out.emplace((*it)[1].str(), (*it)[2].str());
  return out;
}

TEST(Routes, ThePythonClientHasAMethodForEveryRoute) {
  const auto client = clientRoutes();
  ASSERT_GE(client.size(), 10u) << "client.py's method docstrings were not found";
  std::set<std::pair<std::string, std::string>> table;
  for (const Route& r : routes()) table.emplace(std::string(r.method), std::string(r.pattern));
  for (const auto& route : table) {
    if (kClientLacks.count(route)) {
      EXPECT_FALSE(client.count(route)) << route.second << " is in the client: drop its exemption";
      continue;
    }
    EXPECT_TRUE(client.count(route))
        << route.first << " " << route.second
        << " has no method in sdk/python/airlock_client/client.py (a docstring starting with it)";
  }
  for (const auto& route : client)
    EXPECT_TRUE(table.count(route))
        << route.first << " " << route.second << " in client.py is no route of routes.cpp";
}

// The rows say one consistent thing: methods and patterns are well formed,
// no two rows overlap, and each trait is on the routes it can apply to.
TEST(Routes, EveryRowIsWellFormedAndNoTwoOverlap) {
  std::set<std::pair<std::string_view, std::string_view>> seen;
  for (const Route& r : routes()) {
    SCOPED_TRACE(std::string(r.method) + " " + std::string(r.pattern));
    EXPECT_TRUE(r.method == "GET" || r.method == "PUT" || r.method == "POST" ||
                r.method == "DELETE");
    EXPECT_TRUE(seen.emplace(r.method, r.pattern).second) << "twice";
    EXPECT_TRUE(
        std::regex_match(std::string(r.pattern), std::regex(R"((/([a-z0-9-]+|\{[a-z_]+\}))+)")));
    EXPECT_TRUE(r.handler != nullptr);
    EXPECT_FALSE(r.help.empty());
    const bool query_tenant =
        r.tenant == TenantScope::kQuery || r.tenant == TenantScope::kQueryRequired;
    EXPECT_EQ(r.takes("tenant_id"), query_tenant) << "tenant_id in the query iff its scope says";
    const bool on_environment = namedSegments(r.pattern).count("environment_id") > 0;
    EXPECT_TRUE(!on_environment || r.tenant == TenantScope::kQuery);
    EXPECT_TRUE(!r.has(kStreams) || (r.takes("stream") && on_environment));
    EXPECT_TRUE(!r.has(kUnknownIdSucceeds) || on_environment);
    EXPECT_TRUE(!r.has(kEnvironmentInBody) || r.tenant == TenantScope::kBody);
    // The pattern is its own label, and the route its path's.
    EXPECT_EQ(routePattern(r.pattern), r.pattern);
    EXPECT_EQ(lookupRoute(r.method, r.pattern).route, &r);
  }
  for (const Route& a : routes())
    for (const Route& b : routes()) {
      if (a.pattern == b.pattern) continue;
      // Two patterns overlap when some path fits both: as many segments,
      // and no position where both are literal and differ.
      std::vector<std::string> sa, sb;
      std::stringstream pa{std::string(a.pattern)}, pb{std::string(b.pattern)};
      for (std::string s; std::getline(pa, s, '/');) sa.push_back(s);
      for (std::string s; std::getline(pb, s, '/');) sb.push_back(s);
      if (sa.size() != sb.size()) continue;
      bool differ = false;
      for (std::size_t k = 0; k < sa.size(); ++k)
        differ = differ || (sa[k] != sb[k] && sa[k].front() != '{' && sb[k].front() != '{');
      EXPECT_TRUE(differ) << a.pattern << " overlaps " << b.pattern;
    }
}

// A path fitting `pattern`: each {name} replaced by a value.
std::string instantiate(std::string_view pattern) {
  return std::regex_replace(std::string(pattern), std::regex(R"(\{[a-z_]+\})"), "x-1");
}

class RoutesApiTest : public ::testing::Test {
 protected:
  RoutesApiTest() {
    settings_.service_token = kToken;
    env_ = std::make_unique<fake::FakeEnvironment>(fake::FakeOptions{});
    node_ = std::make_unique<execution::LocalNode>(*env_);
    api_ = std::make_unique<Api>(settings_, *node_, ServiceImages::hostOnly(fake::kFakeImageDigest),
                                 metrics_);
    api_->attachInternalCredential(kInternalCredential);
  }
  // With the credential the target's route takes (the internal one on
  // kInternal routes, the service token elsewhere).
  HttpRequest request(std::string_view method, std::string target, std::string body = "") {
    const std::string_view path = std::string_view(target).substr(0, target.find('?'));
    const auto of_path = lookupRoute(method, path).of_path;
    const bool internal = !of_path.empty() && of_path.front()->has(kInternal);
    return HttpRequest{std::string(method), std::move(target),
                       std::string("Bearer ") + (internal ? kInternalCredential : kToken),
                       std::move(body)};
  }
  static json error(const HttpResponse& r) {
    const json j = json::parse(r.body, nullptr, /*allow_exceptions=*/false);
    return j.is_object() && j.contains("error") ? j["error"] : json();
  }

  Settings settings_;
  Metrics metrics_{"fake"};
  std::unique_ptr<fake::FakeEnvironment> env_;
  std::unique_ptr<execution::LocalNode> node_;
  std::unique_ptr<Api> api_;
};

TEST_F(RoutesApiTest, AStreamValueOtherThanOneIsRefusedNamingIt) {
  for (const Route& r : routes()) {
    if (!r.has(kStreams)) continue;
    SCOPED_TRACE(std::string(r.method) + " " + std::string(r.pattern));
    for (const char* value : {"true", "0", "yes", ""}) {
      const HttpResponse refused = api_->handle(
          request(r.method, instantiate(r.pattern) + "?stream=" + value, R"({"argv":["true"]})"));
      EXPECT_EQ(refused.status, 400) << value << ": " << refused.body;
      EXPECT_NE(error(refused)["message"].get<std::string>().find("stream query parameter"),
                std::string::npos)
          << refused.body;
    }
  }
}

TEST_F(RoutesApiTest, EveryRouteRefusesAQueryParameterItDoesNotTakeByName) {
  for (const Route& r : routes()) {
    SCOPED_TRACE(std::string(r.method) + " " + std::string(r.pattern));
    std::string takes;
    for (std::string_view p : r.queryParams())
      takes += (takes.empty() ? "" : ", ") + std::string(p);
    const HttpResponse refused =
        api_->handle(request(r.method, instantiate(r.pattern) + "?not_a_param=1", "{}"));
    EXPECT_EQ(refused.status, 400) << refused.body;
    EXPECT_EQ(error(refused)["code"], "bad_request") << refused.body;
    EXPECT_EQ(error(refused)["message"],
              "unknown query parameter \"not_a_param\"; this route takes" +
                  (takes.empty() ? std::string(" none") : ": " + takes));
    // Next to the parameters it does take, too.
    std::string known;
    for (std::string_view p : r.queryParams()) known += std::string(p) + "=v&";
    EXPECT_EQ(
        api_->handle(request(r.method, instantiate(r.pattern) + "?" + known + "tenant=t1")).status,
        400);
    if (r.has(kStreams)) {
      const HttpRequest streamed =
          request(r.method, instantiate(r.pattern) + "?stream=1&not_a_param=1", "{}");
      ASSERT_TRUE(api_->wantsStream(streamed));
      std::vector<std::string> lines;
      const HttpResponse answer = api_->handleStreaming(
          streamed, [&](std::string line) { lines.push_back(std::move(line)); }, nullptr);
      EXPECT_EQ(answer.status, 400) << answer.body;
      EXPECT_NE(answer.body.find("not_a_param"), std::string::npos) << answer.body;
      EXPECT_TRUE(lines.empty());
    }
  }
}

TEST_F(RoutesApiTest, AParameterNamedTwiceOrMalformedIsRefused) {
  auto twice = api_->handle(request("GET", "/v1/environments?tenant_id=t1&tenant_id=t2"));
  EXPECT_EQ(twice.status, 400) << twice.body;
  EXPECT_EQ(error(twice)["message"], "query parameter \"tenant_id\" is given twice");
  auto malformed = api_->handle(request("GET", "/v1/environments?tenant_id=%zz"));
  EXPECT_EQ(malformed.status, 400) << malformed.body;
  EXPECT_NE(malformed.body.find("tenant_id"), std::string::npos) << malformed.body;
}

TEST_F(RoutesApiTest, AnotherMethodOnAKnownPathIs405WithAllow) {
  std::map<std::string_view, std::set<std::string_view>> methods;
  for (const Route& r : routes()) methods[r.pattern].insert(r.method);
  for (const auto& [pattern, taken] : methods) {
    SCOPED_TRACE(std::string(pattern));
    for (std::string_view method : {"GET", "PUT", "POST", "DELETE", "PATCH"}) {
      if (taken.count(method)) continue;
      const HttpResponse r = api_->handle(request(method, instantiate(pattern)));
      EXPECT_EQ(r.status, 405) << method << ": " << r.body;
      EXPECT_EQ(error(r)["code"], "method_not_allowed");
      std::set<std::string_view> allow;
      for (const auto& [name, value] : r.headers) {
        if (name != "Allow") continue;
        std::string_view rest = value;
        while (!rest.empty()) {
          const std::size_t comma = rest.find(", ");
          allow.insert(rest.substr(0, comma));
          rest = comma == std::string_view::npos ? "" : rest.substr(comma + 2);
        }
      }
      EXPECT_EQ(allow, taken) << "the Allow header lists the path's methods";
    }
  }
}

TEST_F(RoutesApiTest, AnUnknownPathIs404AndNeedsTheTokenFirst) {
  for (const char* path : {"/v2/environments", "/v1/environments/x/nothing", "/", "/v1"}) {
    const HttpResponse r = api_->handle(request("GET", path));
    EXPECT_EQ(r.status, 404) << path;
    EXPECT_EQ(error(r)["code"], "not_found");
    EXPECT_EQ(api_->handle(HttpRequest{"GET", path, "", ""}).status, 401) << path;
  }
}

// What the server asks of a request comes from the rows' traits.
TEST_F(RoutesApiTest, TheServersQuestionsAreTheRowsTraits) {
  for (const Route& r : routes()) {
    SCOPED_TRACE(std::string(r.method) + " " + std::string(r.pattern));
    const HttpRequest plain = request(r.method, instantiate(r.pattern));
    EXPECT_EQ(api_->runsCommand(plain), r.has(kRunsCommand));
    EXPECT_EQ(api_->needsNoToken(plain), r.has(kNoAuthentication));
    EXPECT_FALSE(api_->wantsStream(plain));
    EXPECT_EQ(api_->wantsStream(request(r.method, instantiate(r.pattern) + "?stream=1")),
              r.has(kStreams));
    EXPECT_EQ(routeLabel(instantiate(r.pattern)), r.pattern);
  }
  EXPECT_FALSE(api_->runsCommand(request("PATCH", instantiate("/v1/environments/{e}/execute"))));
}

}  // namespace
}  // namespace airlock::gateway
