// The route label of metrics and request logs (http_server.h): every route
// of api.h maps to its template, and anything else to one fixed label, so a
// client cannot create metric series by choosing ids, names or paths.
#include <gtest/gtest.h>

#include <set>

#include "airlock/service/http_server.h"

namespace airlock::service {
namespace {

TEST(RouteLabel, EveryRouteMapsToItsTemplate) {
  const std::pair<const char*, const char*> cases[] = {
      {"/healthz", "/healthz"},
      {"/metrics", "/metrics"},
      {"/v1/environments", "/v1/environments"},
      {"/v1/environments/0190abc", "/v1/environments/{id}"},
      {"/v1/environments/0190abc/execute", "/v1/environments/{id}/execute"},
      {"/v1/environments/0190abc/code", "/v1/environments/{id}/code"},
      {"/v1/environments/0190abc/schedules", "/v1/environments/{id}/schedules"},
      {"/v1/environments/0190abc/schedules/secret%20name",
       "/v1/environments/{id}/schedules/{name}"},
      {"/v1/environments/0190abc/executions/exec-7/cancel",
       "/v1/environments/{id}/executions/{execution_id}/cancel"},
      {"/v1/runs/run-7/lease", "/v1/runs/{id}/lease"},
      {"/v1/artifacts", "/v1/artifacts"},
      {"/v1/artifacts/0190-artifact", "/v1/artifacts/{id}"},
      {"/v1/artifacts/0190-artifact/content", "/v1/artifacts/{id}/content"},
      {"/v1/tools", "/v1/tools"},
      {"/v1/images", "/v1/images"},
      {"/v1/images/x", "other"},
      {"/v1/tools/sandbox.run_command", "/v1/tools/{name}"},
      {"/v1/schedule-fires", "/v1/schedule-fires"},
      {"/v1/schedule-fires/ack", "/v1/schedule-fires/ack"},
  };
  for (const auto& [path, label] : cases) EXPECT_EQ(routeLabel(path), label) << path;
}

TEST(RouteLabel, InventedPathsShareOneLabel) {
  std::set<std::string> labels;
  for (const char* path : {"/v1/random-2548", "/", "", "/etc/passwd", "/v1/environments/x/y/z/w",
                           "/v1/artifacts/a/b/c", "/v2/environments", "/v1/schedule-fires/x",
                           "/healthz/x", "/v1/environments/x/nothing", "/v1/runs/r/other"})
    labels.insert(routeLabel(path));
  EXPECT_EQ(labels, std::set<std::string>{"other"});
}

}  // namespace
}  // namespace airlock::service
