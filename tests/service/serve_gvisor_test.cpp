// `airlock serve` with deployment_mode=production and
// sandbox=gvisor starts and runs a command end to end over HTTP (and with
// sandbox=linux it refuses: gate_production_refuses_dev). Skipped, with the
// reason, only where runsc is absent.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../sandbox/linux/linux_test_support.h"
#include "serve_process.h"

namespace airlock::testing {
namespace {

constexpr const char* kToken = "serve-gvisor-token-0123456789abcdef";

TEST(ServeGvisor, ProductionModeOnGvisorRunsACommandEndToEnd) {
  if (::geteuid() != 0) GTEST_SKIP() << "the gvisor mechanism needs root";
  if (::access("/usr/bin/runsc", X_OK) != 0 && ::access("/usr/sbin/runsc", X_OK) != 0)
    GTEST_SKIP() << "runsc is not installed (Debian package runsc)";
  TempStateDir state;
  ServeProcess serve({"AIRLOCK_DEPLOYMENT_MODE=production", "AIRLOCK_AUTH_MODE=token",
                      "AIRLOCK_SANDBOX=gvisor", std::string("AIRLOCK_SERVICE_TOKEN=") + kToken,
                      "AIRLOCK_STATE_DIR=" + state.path(), "AIRLOCK_LISTEN=127.0.0.1:0",
                      "PATH=/usr/sbin:/usr/bin:/sbin:/bin"});
  ASSERT_GT(serve.port(), 0) << serve.log();
  auto h =
      serve.request("POST", "/v1/environments", R"({"tenant_id": "t1", "run_id": "r1"})", kToken);
  ASSERT_EQ(h.status, 201) << h.body;
  const std::string id = h.json()["environment_id"];
  auto r =
      serve.request("POST", "/v1/environments/" + id + "/execute",
                    R"J({"argv": ["python3", "-c", "print(1)"], "timeout_seconds": 60})J", kToken);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["exit_code"], 0) << r.body;
  EXPECT_EQ(r.json()["stdout"], "1\n") << r.body;
  EXPECT_EQ(serve.request("DELETE", "/v1/environments/" + id, "", kToken).status, 204);
  const int status = serve.signalAndWait(SIGTERM);
  ASSERT_TRUE(WIFEXITED(status)) << serve.log();
  EXPECT_EQ(WEXITSTATUS(status), 0) << serve.log();
}

}  // namespace
}  // namespace airlock::testing
