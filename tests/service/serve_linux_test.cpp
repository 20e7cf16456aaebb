// `airlock serve` on the linux mechanism, over HTTP: behaviour that only a
// real adapter shows (the fake runs every command at once).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>


#include "../sandbox/linux/linux_test_support.h"
#include "serve_process.h"

namespace airlock::testing {
namespace {

constexpr const char* kToken = "serve-linux-token-0123456789abcdef";

// A second execute while one runs is refused (409), and leaves the sandbox,
// its running command and its files alone; a client that gives up waiting
// for a non-streamed execute does not take the environment with it either.
TEST(ServeLinux, ABusyOrAbandonedExecuteLeavesTheEnvironmentAlive) {
  if (auto why = linuxJailUnavailable()) GTEST_SKIP() << *why;
  TempStateDir state;
  ServeProcess serve({"AIRLOCK_STATE_DIR=" + state.path(), "AIRLOCK_LISTEN=127.0.0.1:0",
                      std::string("AIRLOCK_SERVICE_TOKEN=") + kToken, "PATH=/usr/bin:/bin"});
  ASSERT_GT(serve.port(), 0) << serve.log();
  auto h = serve.request("POST", "/v1/environments", R"({"tenant_id": "t1", "run_id": "r1"})", kToken);
  ASSERT_EQ(h.status, 201) << h.body;
  const std::string id = h.json()["environment_id"];
  const std::string base = "/v1/environments/" + id;
  ASSERT_EQ(serve.request("PUT", base + "/files?path=keep.txt", "kept", kToken).status, 204);

  // A client that gives up at once (a 1 s client timeout) on a command
  // that says it started, then waits for a file this test writes.
  auto abandoned = serve.request(
      "POST", base + "/execute",
      R"({"argv": ["sh", "-c", "touch started; while [ ! -e go ]; do sleep 0.05; done"], "timeout_seconds": 60})",
      kToken, 1);
  EXPECT_EQ(abandoned.status, 0) << abandoned.body;
  HttpReply seen;
  for (int i = 0; i < 2000 && seen.status != 200; ++i)
    seen = serve.request("GET", base + "/files?path=started", "", kToken);
  ASSERT_EQ(seen.status, 200) << "the command never started";

  // Still running: a second execute is refused, and changes nothing.
  auto busy = serve.request("POST", base + "/execute", R"({"argv": ["true"]})", kToken);
  EXPECT_EQ(busy.status, 409) << busy.body;
  EXPECT_NE(busy.body.find("another command is running"), std::string::npos) << busy.body;
  EXPECT_EQ(serve.request("GET", base + "/files?path=keep.txt", "", kToken).body, "kept");
  EXPECT_EQ(serve.request("GET", base, "", kToken).status, 200) << "the environment was destroyed";

  // Let the abandoned command end; the environment takes the next one.
  ASSERT_EQ(serve.request("PUT", base + "/files?path=go", "", kToken).status, 204);
  HttpReply next;
  for (int i = 0; i < 2000; ++i) {
    next = serve.request("POST", base + "/execute", R"({"argv": ["cat", "keep.txt"]})", kToken);
    if (next.status != 409) break;
  }
  ASSERT_EQ(next.status, 200) << next.body;
  EXPECT_EQ(next.json()["stdout"], "kept") << next.body;
  EXPECT_EQ(serve.request("DELETE", base, "", kToken).status, 204);
  const int status = serve.signalAndWait(SIGTERM);
  ASSERT_TRUE(WIFEXITED(status)) << serve.log();
}

}  // namespace
}  // namespace airlock::testing
