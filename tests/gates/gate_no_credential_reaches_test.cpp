// Gate "no credential reaches a sandbox" (spec 000, hard gates). `airlock
// serve` runs with its environment full of realistic credentials (cloud
// keys, a database URL, provider API keys, its own bearer token). A command
// dumps its environment and reads every file it can reach; none of the
// values, no tier-0 name and nothing matching common secret patterns comes
// back.
//
// Every canary carries the marker "c4n4ry" so the command can search for it
// without being told any value. What it reads: every process's environ and
// cmdline, and every regular file outside /proc, /sys and /dev except the
// image under /usr (bound read-only from the host image, it holds nothing the
// service put there; /usr/local is read).
#include <gtest/gtest.h>

#include <regex>

#include "../sandbox/linux/linux_test_support.h"
#include "../service/serve_process.h"
#include "airlock/core/environment_tiers.h"

namespace airlock::testing {
namespace {

constexpr const char* kToken = "c4n4ry-bearer-token-1f0e9d8c7b6a5f4e";

const std::vector<std::pair<std::string, std::string>> kCredentials = {
    {"AWS_ACCESS_KEY_ID", "AKIAC4N4RYc4n4ry7Q2X"},
    {"AWS_SECRET_ACCESS_KEY", "c4n4ry/wJalrXUtnFEMI/K7MDENG/bPxRfiCY1234"},
    {"AWS_SESSION_TOKEN", "c4n4ryFwoGZXIvYXdzEJr//////////wEaDKm"},
    {"DATABASE_URL", "postgres://app:c4n4ry-db-pass@db.internal:5432/prod"},
    {"OPENAI_API_KEY", "sk-proj-c4n4ry0123456789abcdefABCDEF"},
    {"ANTHROPIC_API_KEY", "sk-ant-api03-c4n4ry0123456789abcdef"},
    {"GITHUB_TOKEN", "ghp_c4n4ry0123456789abcdefABCDEFghij"},
    {"SLACK_BOT_TOKEN", "xoxb-c4n4ry-0123456789-abcdef"},
    {"GOOGLE_APPLICATION_CREDENTIALS", "/secrets/c4n4ry-gcp.json"},
    {"STRIPE_SECRET_KEY", "sk_live_c4n4ry0123456789abcdef"},
};

constexpr const char* kScan = R"PY(
import os
marker = b"c4n4ry"
hits, files = [], 0
def scan(path):
    global files
    try:
        with open(path, "rb") as f:
            data = f.read(1 << 20)
    except OSError:
        return
    files += 1
    if marker in data.lower():
        hits.append(path)
me = str(os.getpid())
for pid in os.listdir("/proc"):
    if pid.isdigit() and pid != me:
        for leaf in ("environ", "cmdline"):
            scan("/proc/%s/%s" % (pid, leaf))
for top in os.listdir("/"):
    if top in ("proc", "sys", "dev"):
        continue
    roots = ["/usr/local"] if top == "usr" else ["/" + top]
    for root in roots:
        if os.path.isfile(root) and not os.path.islink(root):
            scan(root)
        for d, dirs, names in os.walk(root, followlinks=False):
            for n in names:
                p = os.path.join(d, n)
                if os.path.isfile(p) and not os.path.islink(p):
                    scan(p)
print("ENV-BEGIN")
for k, v in sorted(os.environ.items()):
    print(k + "=" + v)
print("ENV-END")
print("files", files)
for h in hits:
    print("hit", h)
)PY";

TEST(GateNoCredentialReaches, NoCredentialOfTheServiceReachesACommand) {
  if (auto why = linuxJailUnavailable()) GTEST_SKIP() << *why;
  TempStateDir state;
  std::vector<std::string> env = {"AIRLOCK_STATE_DIR=" + state.path(), "AIRLOCK_LISTEN=127.0.0.1:0",
                                  std::string("AIRLOCK_SERVICE_TOKEN=") + kToken,
                                  "PATH=/usr/bin:/bin", "HOME=/root"};
  for (const auto& [k, v] : kCredentials) env.push_back(k + "=" + v);
  ServeProcess serve(env);
  ASSERT_GT(serve.port(), 0) << serve.log();
  auto h = serve.request(
      "POST", "/v1/environments",
      R"({"tenant_id": "t1", "run_id": "r1", "environment": {"MY_SETTING": "visible"}})", kToken);
  ASSERT_EQ(h.status, 201) << h.body;
  const std::string id = h.json()["environment_id"];
  nlohmann::json cmd = {{"argv", {"python3", "-c", kScan}}, {"maximum_output_bytes", 1 << 20}};
  auto r = serve.request("POST", "/v1/environments/" + id + "/execute", cmd.dump(), kToken);
  ASSERT_EQ(r.status, 200) << r.body;
  auto result = r.json();
  ASSERT_EQ(result["exit_code"], 0) << result.dump();
  const std::string out = result["stdout"].get<std::string>() + result["stderr"].get<std::string>();

  // The scan ran (not vacuous), and the channel for legitimate values works.
  const auto files_at = out.find("files ");
  ASSERT_NE(files_at, std::string::npos) << out;
  EXPECT_GT(std::stol(out.substr(files_at + 6)), 100) << out.substr(files_at, 40);
  EXPECT_NE(out.find("MY_SETTING=visible"), std::string::npos);

  EXPECT_EQ(out.find("hit "), std::string::npos) << "a file holds a canary:\n"
                                                 << out.substr(out.find("hit "), 400);
  for (const auto& [k, v] : kCredentials) {
    EXPECT_EQ(out.find(v), std::string::npos) << k << "'s value reached the sandbox";
    EXPECT_EQ(out.find(k + "="), std::string::npos) << k << " reached the sandbox";
  }
  EXPECT_EQ(out.find(kToken), std::string::npos)
      << "the service's bearer token reached the sandbox";
  // No tier-0 name and nothing shaped like a secret in the environment.
  const std::string env_dump =
      out.substr(out.find("ENV-BEGIN"), out.find("ENV-END") - out.find("ENV-BEGIN"));
  for (std::size_t start = 0, nl; (nl = env_dump.find('\n', start)) != std::string::npos;
       start = nl + 1) {
    const std::string line = env_dump.substr(start, nl - start);
    const auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    EXPECT_FALSE(isTier0Name(line.substr(0, eq))) << line;
  }
  const std::regex secret_shapes(
      R"((AKIA[0-9A-Z]{12,})|(sk-[A-Za-z0-9_-]{16,})|(ghp_[A-Za-z0-9]{20,})|(xox[bp]-)|(://[^/\s:]+:[^@\s]+@))");
  EXPECT_FALSE(std::regex_search(env_dump, secret_shapes)) << env_dump;
  EXPECT_EQ(serve.request("DELETE", "/v1/environments/" + id, "", kToken).status, 204);
  EXPECT_EQ(serve.log().find("c4n4ry"), std::string::npos) << "a credential was logged:\n"
                                                           << serve.log();
}

}  // namespace
}  // namespace airlock::testing
