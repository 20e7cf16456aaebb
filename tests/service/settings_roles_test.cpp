// The role settings of `airlock serve` (gateway and execution node): their
// keys and environment variables, the service credential's file, and the
// startup check that keeps the gateway's secrets off an execution node.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "airlock/service/settings.h"

namespace airlock::service {
namespace {

using ::testing::HasSubstr;

EnvLookup envOf(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](std::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

Settings parsed(std::string_view yaml) {
  auto s = parseSettings(yaml, "settings.yaml");
  EXPECT_TRUE(s.has_value()) << s.error().message();
  return s.value_or(Settings{});
}

std::string parseError(std::string_view yaml) {
  auto s = parseSettings(yaml, "settings.yaml");
  EXPECT_FALSE(s.has_value()) << yaml;
  return s ? "" : s.error().message();
}

std::string startupError(const Settings& s) {
  auto r = checkStartup(s);
  EXPECT_FALSE(r.has_value());
  if (r) return "";
  EXPECT_EQ(r.error().code, ErrorCode::kConfigurationError);
  return r.error().message();
}

constexpr const char* kToken = "0123456789abcdef-internal";
constexpr const char* kDigest =
    "sha256:0000000000000000000000000000000000000000000000000000000000000001";

Settings node() {
  Settings s = parsed("role: execution\nnode_name: node-a\nsandbox: fake\n");
  s.internal_token = kToken;
  return s;
}

Settings gatewayWith(std::string_view extra) {
  Settings s = parsed(std::string("role: gateway\nexecution_nodes: [\"http://127.0.0.1:7001\"]\n") +
                      std::string(extra));
  s.internal_token = kToken;
  return s;
}

TEST(RoleSettings, NoRoleIsBothSidesAndTheDefault) {
  Settings s = parsed("");
  EXPECT_EQ(s.role, ServiceRole::kBoth);
  EXPECT_TRUE(checkStartup(s));
  EXPECT_TRUE(gatewayOnlySettingsIn(s).empty());
}

TEST(RoleSettings, ParsesEveryRoleKey) {
  Settings g = parsed(R"(
role: gateway
execution_nodes:
  - http://127.0.0.1:7001/
  - {name: node-b, url: "http://[::1]:7002"}
  - http://exec-3.airlock.svc:7003
host_image_digest: )" +
                      std::string(kDigest) + "\n");
  EXPECT_EQ(g.role, ServiceRole::kGateway);
  ASSERT_EQ(g.execution_nodes.size(), 3U);
  EXPECT_EQ(g.execution_nodes[0], (ExecutionNodeSetting{"", "http://127.0.0.1:7001"}));
  EXPECT_EQ(g.execution_nodes[1], (ExecutionNodeSetting{"node-b", "http://[::1]:7002"}));
  EXPECT_EQ(g.execution_nodes[2].url, "http://exec-3.airlock.svc:7003");
  EXPECT_EQ(g.host_image_digest, kDigest);

  Settings e = parsed(R"(
role: execution
node_name: node-a
node_capacity: 12
gateways: ["http://127.0.0.1:8420", "http://10.0.0.2:8420"]
internal_token_file: /etc/airlock/internal-token
)");
  EXPECT_EQ(e.role, ServiceRole::kExecution);
  EXPECT_EQ(e.node_capacity, 12);
  EXPECT_EQ(e.gateways,
            (std::vector<std::string>{"http://127.0.0.1:8420", "http://10.0.0.2:8420"}));
  EXPECT_EQ(e.internal_token_file, "/etc/airlock/internal-token");
}

TEST(RoleSettings, EnvironmentVariablesSetTheRoleKeys) {
  auto s = applyEnvironment(
      Settings{},
      envOf({
          {"AIRLOCK_ROLE", "gateway"},
          {"AIRLOCK_INTERNAL_TOKEN", kToken},
          {"AIRLOCK_EXECUTION_NODES", "node-a=http://127.0.0.1:7001, http://127.0.0.1:7002"},
          {"AIRLOCK_GATEWAYS", "http://127.0.0.1:8420"},
          {"AIRLOCK_NODE_CAPACITY", "3"},
      }));
  ASSERT_TRUE(s) << s.error().message();
  EXPECT_EQ(s->role, ServiceRole::kGateway);
  EXPECT_EQ(s->internal_token, kToken);
  ASSERT_EQ(s->execution_nodes.size(), 2U);
  EXPECT_EQ(s->execution_nodes[0], (ExecutionNodeSetting{"node-a", "http://127.0.0.1:7001"}));
  EXPECT_EQ(s->execution_nodes[1], (ExecutionNodeSetting{"", "http://127.0.0.1:7002"}));
  EXPECT_EQ(s->gateways, std::vector<std::string>{"http://127.0.0.1:8420"});
  EXPECT_EQ(s->node_capacity, 3);
  auto bad = applyEnvironment(Settings{}, envOf({{"AIRLOCK_ROLE", "worker"}}));
  ASSERT_FALSE(bad);
  EXPECT_THAT(bad.error().message(), HasSubstr("AIRLOCK_ROLE"));
  EXPECT_THAT(bad.error().message(),
              HasSubstr("\"worker\" is not one of both, gateway, execution"));
}

TEST(RoleSettings, BadValuesNameTheKey) {
  EXPECT_THAT(parseError("role: worker\n"), HasSubstr("role \"worker\" is not one of"));
  EXPECT_THAT(parseError("execution_nodes: http://127.0.0.1:1\n"),
              HasSubstr("execution_nodes must be a list"));
  EXPECT_THAT(parseError("execution_nodes: [\"https://127.0.0.1:1\"]\n"),
              HasSubstr("starting with http://"));
  EXPECT_THAT(parseError("execution_nodes: [\"http://127.0.0.1:1/api\"]\n"),
              HasSubstr("must have no path"));
  EXPECT_THAT(parseError("execution_nodes: [\"http://127.0.0.1:99999\"]\n"),
              HasSubstr("no valid port"));
  EXPECT_THAT(parseError("execution_nodes: [\"http://a:1\", \"http://a:1/\"]\n"),
              HasSubstr("is there twice"));
  EXPECT_THAT(parseError("execution_nodes: [{name: Bad, url: \"http://a:1\"}]\n"),
              HasSubstr("execution_nodes name \"Bad\""));
  EXPECT_THAT(parseError("execution_nodes: [{url: \"http://a:1\", port: 2}]\n"),
              HasSubstr("execution_nodes.port"));
  EXPECT_THAT(parseError("gateways: [\"ftp://a\"]\n"), HasSubstr("gateways entry \"ftp://a\""));
  EXPECT_THAT(parseError("node_capacity: -1\n"), HasSubstr("node_capacity"));
  EXPECT_THAT(parseError("host_image_digest: latest\n"), HasSubstr("host_image_digest"));
  EXPECT_THAT(parseError("internal_token_file: relative/path\n"),
              HasSubstr("internal_token_file \"relative/path\" must be an absolute path"));
  // The secret itself is never read from the shared settings file.
  const std::string in_file = parseError(std::string("internal_token: ") + kToken + "\n");
  EXPECT_THAT(in_file, HasSubstr("internal_token is not read from the settings file"));
  EXPECT_THAT(in_file, ::testing::Not(HasSubstr(kToken)));
  auto short_token = applyEnvironment(Settings{}, envOf({{"AIRLOCK_INTERNAL_TOKEN", "short"}}));
  ASSERT_FALSE(short_token);
  EXPECT_THAT(short_token.error().message(), HasSubstr("internal_token must be at least 16"));
}

TEST(RoleSettings, ExecutionNodeRefusesTheGatewaysSettings) {
  EXPECT_TRUE(checkStartup(node())) << checkStartup(node()).error().message();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"schedule_database: postgresql://u:secret@127.0.0.1/airlock\n", "schedule_database"},
      {"artifacts:\n  retention_days: 7\n", "artifacts"},
      {"service_token: 0123456789abcdef0123\n", "service_token"},
      {"execution_nodes: [\"http://127.0.0.1:1\"]\n", "execution_nodes"},
  };
  for (const auto& [yaml, key] : cases) {
    Settings s = parsed("role: execution\nnode_name: node-a\nsandbox: fake\n" + yaml);
    s.internal_token = kToken;
    const std::string why = startupError(s);
    EXPECT_THAT(why, HasSubstr("role=execution")) << yaml;
    EXPECT_THAT(why, HasSubstr(key)) << yaml;
    EXPECT_THAT(why, ::testing::Not(HasSubstr("secret"))) << "a URI is never repeated";
    EXPECT_EQ(gatewayOnlySettingsIn(s), std::vector<std::string>{key});
  }
  Settings unnamed = node();
  unnamed.node_name.clear();
  EXPECT_THAT(startupError(unnamed), HasSubstr("requires node_name"));
  Settings no_credential = node();
  no_credential.internal_token.clear();
  EXPECT_THAT(startupError(no_credential), HasSubstr("internal_token_file or AIRLOCK_INTERNAL"));
  // Production: token auth with no public service token (its callers
  // present the internal credential).
  Settings production = parsed(
      "role: execution\nnode_name: node-a\nsandbox: gvisor\ndeployment_mode: production\n"
      "auth_mode: token\n");
  production.internal_token = kToken;
  EXPECT_TRUE(checkStartup(production)) << checkStartup(production).error().message();
}

TEST(RoleSettings, GatewayNeedsNodesACredentialAndTheHostImage) {
  Settings ok = gatewayWith(std::string("host_image_digest: ") + kDigest + "\n");
  EXPECT_TRUE(checkStartup(ok)) << checkStartup(ok).error().message();
  Settings no_nodes = parsed("role: gateway\n");
  no_nodes.internal_token = kToken;
  EXPECT_THAT(startupError(no_nodes), HasSubstr("requires execution_nodes"));
  Settings no_credential = ok;
  no_credential.internal_token.clear();
  EXPECT_THAT(startupError(no_credential), HasSubstr("internal_token_file or AIRLOCK_INTERNAL"));
  EXPECT_THAT(startupError(gatewayWith("")), HasSubstr("requires host_image_digest"));
  EXPECT_THAT(startupError(gatewayWith(std::string("host_image_digest: ") + kDigest +
                                       "\nimages: [\"docker.io/library/alpine:3\"]\n")),
              HasSubstr("must name a digest"));
  EXPECT_THAT(startupError(gatewayWith(std::string("host_image_digest: ") + kDigest +
                                       "\nnode_capacity: 4\n")),
              HasSubstr("node_capacity"));
  // No role: the split's keys mean nothing and are refused.
  EXPECT_THAT(startupError(parsed("gateways: [\"http://127.0.0.1:1\"]\n")),
              HasSubstr("need role gateway or execution"));
}

class TokenFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("airlock-token-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& text, mode_t mode) {
    const auto path = dir_ / "token";
    std::ofstream(path) << text;
    EXPECT_EQ(::chmod(path.c_str(), mode), 0);
    return path.string();
  }
  std::filesystem::path dir_;
};

TEST_F(TokenFile, IsReadWhenOwnerOnly) {
  Settings s;
  s.internal_token_file = write(std::string(kToken) + "\n", 0600);
  ASSERT_TRUE(loadInternalToken(s));
  EXPECT_EQ(s.internal_token, kToken);
  // The environment may give the same token, never another.
  Settings same;
  same.internal_token_file = s.internal_token_file;
  same.internal_token = kToken;
  EXPECT_TRUE(loadInternalToken(same));
  Settings other = same;
  other.internal_token = "another-token-of-16-chars";
  auto r = loadInternalToken(other);
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message(), HasSubstr("different tokens"));
  EXPECT_THAT(r.error().message(), ::testing::Not(HasSubstr(kToken)));
}

TEST_F(TokenFile, RefusesAFileOthersCanReadOrABadToken) {
  Settings s;
  s.internal_token_file = write(kToken, 0644);
  auto open_to_all = loadInternalToken(s);
  ASSERT_FALSE(open_to_all);
  EXPECT_THAT(open_to_all.error().message(), HasSubstr("readable by others"));
  EXPECT_THAT(open_to_all.error().message(), HasSubstr("644"));
  EXPECT_TRUE(s.internal_token.empty());
  s.internal_token_file = write("short\n", 0600);
  auto too_short = loadInternalToken(s);
  ASSERT_FALSE(too_short);
  EXPECT_THAT(too_short.error().message(), HasSubstr("must hold one token"));
  s.internal_token_file = (dir_ / "missing").string();
  auto missing = loadInternalToken(s);
  ASSERT_FALSE(missing);
  EXPECT_THAT(missing.error().message(), HasSubstr("cannot be opened"));
  s.internal_token_file = dir_.string();
  auto directory = loadInternalToken(s);
  ASSERT_FALSE(directory);
  EXPECT_THAT(directory.error().message(), HasSubstr("internal_token_file"));
}

TEST_F(TokenFile, LoadSettingsReadsItFromAnyFileOrVariable) {
  const std::string token_path = write(std::string(kToken) + "\n", 0600);
  const auto settings_path = dir_ / "settings.yaml";
  std::ofstream(settings_path) << "role: execution\nnode_name: node-a\ninternal_token_file: "
                               << token_path << "\n";
  auto s = loadSettings(settings_path.string(), envOf({}));
  ASSERT_TRUE(s) << s.error().message();
  EXPECT_EQ(s->internal_token, kToken);
  auto via_env = loadSettings(std::nullopt, envOf({{"AIRLOCK_INTERNAL_TOKEN_FILE", token_path}}));
  ASSERT_TRUE(via_env) << via_env.error().message();
  EXPECT_EQ(via_env->internal_token, kToken);
}

}  // namespace
}  // namespace airlock::service
