// A gateway in front of an execution node, as two processes on loopback
// ports (the fake mechanism): provision, execute, write and read a file and
// destroy through the gateway's public API land on the node (the id names
// it, the node counts it); the node serves nothing without the service
// credential; a node killed under the gateway makes its environment answer
// execution_unavailable (retriable).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "serve_process.h"

namespace airlock::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr const char* kInternalToken = "split-internal-token-0123456789";
constexpr const char* kPublicToken = "split-public-token-0123456789";

class Split : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/airlock-split-XXXXXX";
    root_ = ::mkdtemp(tmpl);
    fs::create_directories(root_ / "node");
    fs::create_directories(root_ / "gateway");
    std::ofstream(root_ / "token") << kInternalToken << "\n";
    ::chmod((root_ / "token").c_str(), 0600);
    const fs::path node_yaml = root_ / "node.yaml";
    std::ofstream(node_yaml) << "sandbox: fake\nnode_name: node-a\nlisten: \"127.0.0.1:0\"\n"
                             << "state_dir: " << (root_ / "node").string() << "\n"
                             << "internal_token_file: " << (root_ / "token").string() << "\n";
    node_ = std::make_unique<ServeProcess>(
        std::vector<std::string>{"PATH=/usr/bin:/bin"}, AIRLOCK_BINARY,
        std::vector<std::string>{"--role", "execution", "--config", node_yaml});
    ASSERT_GT(node_->port(), 0) << node_->log();
    // The gateway names the host image by the digest the node logged.
    std::smatch digest;
    const std::string log = node_->log();
    ASSERT_TRUE(
        std::regex_search(log, digest, std::regex("image host .* is (sha256:[0-9a-f]{64})")))
        << log;
    const fs::path gateway_yaml = root_ / "gateway.yaml";
    std::ofstream(gateway_yaml) << "listen: \"127.0.0.1:0\"\n"
                                << "state_dir: " << (root_ / "gateway").string() << "\n"
                                << "execution_nodes:\n  - {name: node-a, url: \"http://127.0.0.1:"
                                << node_->port() << "\"}\n"
                                << "host_image_digest: " << digest[1].str() << "\n";
    gateway_ = std::make_unique<ServeProcess>(
        std::vector<std::string>{"PATH=/usr/bin:/bin",
                                 std::string("AIRLOCK_SERVICE_TOKEN=") + kPublicToken,
                                 "AIRLOCK_INTERNAL_TOKEN_FILE=" + (root_ / "token").string()},
        AIRLOCK_BINARY, std::vector<std::string>{"--role", "gateway", "--config", gateway_yaml});
    ASSERT_GT(gateway_->port(), 0) << gateway_->log();
  }
  void TearDown() override {
    gateway_.reset();
    node_.reset();
    fs::remove_all(root_);
  }
  // The node's own count of live environments (its internal API).
  int nodeLive() {
    auto status = node_->request("GET", "/internal/v1/node", "", kInternalToken);
    EXPECT_EQ(status.status, 200) << status.body;
    return status.json().value("live", -1);
  }

  fs::path root_;
  std::unique_ptr<ServeProcess> node_;
  std::unique_ptr<ServeProcess> gateway_;
};

TEST_F(Split, ProvisionExecuteDestroyThroughTheGatewayLandOnTheNode) {
  auto created = gateway_->request("POST", "/v1/environments",
                                   R"({"tenant_id": "t1", "run_id": "r1"})", kPublicToken);
  ASSERT_EQ(created.status, 201) << created.body << gateway_->log();
  const std::string id = created.json().value("environment_id", "");
  EXPECT_THAT(id, StartsWith("node-a.")) << "the id names the node that holds it";
  EXPECT_EQ(nodeLive(), 1);
  EXPECT_FALSE(fs::exists(root_ / "node" / "artifacts")) << "the node opened no store";

  auto executed = gateway_->request("POST", "/v1/environments/" + id + "/execute",
                                    R"({"argv": ["echo", "through the gateway"]})", kPublicToken);
  ASSERT_EQ(executed.status, 200) << executed.body;
  EXPECT_EQ(executed.json().value("stdout", ""), "through the gateway\n");
  EXPECT_EQ(executed.json().value("exit_code", -1), 0);

  auto listed = gateway_->request("GET", "/v1/environments?tenant_id=t1", "", kPublicToken);
  ASSERT_EQ(listed.status, 200) << listed.body;
  EXPECT_THAT(listed.body, HasSubstr(id));

  auto destroyed = gateway_->request("DELETE", "/v1/environments/" + id, "", kPublicToken);
  EXPECT_EQ(destroyed.status, 204) << destroyed.body;
  EXPECT_EQ(nodeLive(), 0);
  auto gone = gateway_->request("POST", "/v1/environments/" + id + "/execute",
                                R"({"argv": ["true"]})", kPublicToken);
  EXPECT_EQ(gone.status, 404) << gone.body;
}

TEST_F(Split, TheNodeServesNothingWithoutTheServiceCredential) {
  EXPECT_EQ(node_->request("GET", "/internal/v1/node").status, 401);
  EXPECT_EQ(node_->request("GET", "/internal/v1/node", "", kPublicToken).status, 401)
      << "the public API's token is not the service credential";
  EXPECT_EQ(node_->request("POST", "/internal/v1/environments", "{}").status, 401);
  EXPECT_EQ(nodeLive(), 0);
}

TEST_F(Split, ANodeKilledUnderTheGatewayIsExecutionUnavailable) {
  auto created = gateway_->request("POST", "/v1/environments",
                                   R"({"tenant_id": "t1", "run_id": "r1"})", kPublicToken);
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string id = created.json().value("environment_id", "");
  const int status = node_->signalAndWait(SIGKILL);
  ASSERT_TRUE(WIFSIGNALED(status));
  auto executed = gateway_->request("POST", "/v1/environments/" + id + "/execute",
                                    R"({"argv": ["echo", "x"]})", kPublicToken);
  EXPECT_EQ(executed.status, 503) << executed.body;
  EXPECT_THAT(executed.body, HasSubstr("execution_unavailable"));
  // Placement finds no node to put a new environment on.
  auto refused = gateway_->request("POST", "/v1/environments",
                                   R"({"tenant_id": "t1", "run_id": "r2"})", kPublicToken);
  EXPECT_EQ(refused.status, 503) << refused.body;
}

}  // namespace
}  // namespace airlock::testing
