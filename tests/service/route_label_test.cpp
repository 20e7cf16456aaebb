// The route label of metrics and request logs (http_server.h): every route
// maps to its pattern in the route table (routes.h), and anything else to
// one fixed label, so a client cannot create metric series by choosing ids,
// names or paths.
#include <gtest/gtest.h>

#include <regex>
#include <set>

#include "airlock/gateway/api/routes.h"
#include "airlock/service/http_server.h"

namespace airlock::gateway {
namespace {

TEST(RouteLabel, EveryRouteMapsToItsPattern) {
  for (const Route& route : routes()) {
    // Every {name} replaced by values a client might send, encoded or not.
    for (const char* value : {"0190abc", "secret%20name", "sandbox_run_command", "exec-7"}) {
      const std::string path =
          std::regex_replace(std::string(route.pattern), std::regex(R"(\{[a-z_]+\})"), value);
      EXPECT_EQ(routeLabel(path), route.pattern) << path;
      EXPECT_EQ(routeLabel(path + "/"), route.pattern) << "an empty segment is skipped";
    }
  }
  // A few spelled out, so that a table gone wrong cannot pass alone.
  const std::pair<const char*, const char*> cases[] = {
      {"/healthz", "/healthz"},
      {"/v1/environments/0190abc", "/v1/environments/{environment_id}"},
      {"/v1/environments/0190abc/executions/exec-7/cancel",
       "/v1/environments/{environment_id}/executions/{execution_id}/cancel"},
      {"/v1/runs/run-7/lease", "/v1/runs/{run_id}/lease"},
      {"/v1/artifacts/0190-artifact/content", "/v1/artifacts/{artifact_id}/content"},
      {"/v1/tools/sandbox_run_command", "/v1/tools/{name}"},
      {"/v1/schedule-fires/ack", "/v1/schedule-fires/ack"},
  };
  for (const auto& [path, label] : cases) EXPECT_EQ(routeLabel(path), label) << path;
}

TEST(RouteLabel, InventedPathsShareOneLabel) {
  std::set<std::string> labels;
  for (const char* path :
       {"/v1/random-2548", "/", "", "/etc/passwd", "/v1/environments/x/y/z/w",
        "/v1/artifacts/a/b/c", "/v2/environments", "/v1/schedule-fires/x", "/healthz/x",
        "/v1/environments/x/nothing", "/v1/runs/r/other", "/v1/images/x"})
    labels.insert(routeLabel(path));
  EXPECT_EQ(labels, std::set<std::string>{"other"});
}

}  // namespace
}  // namespace airlock::gateway
