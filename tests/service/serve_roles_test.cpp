// `airlock serve --role execution|gateway` as processes: the execution role
// becomes airlock-node, whose memory maps no database client and whose
// environment and open files hold no database URI, tenant or API token or
// store path; the gateway's settings are refused on a node, by name, before
// anything is created; a gateway needs its nodes. The structural half (the
// binary's DT_NEEDED) is gate_node_links_no_database.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "serve_process.h"

namespace airlock::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kInternalToken = "internal-token-0123456789abcdef";
constexpr const char* kDatabaseUri = "postgresql://airlock:db-password-42@127.0.0.1:1/airlock";

std::string readAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A fresh directory holding the state directory, the settings file and the
// token file (0600) of one test.
class RoleDir {
 public:
  RoleDir() {
    char tmpl[] = "/tmp/airlock-roles-XXXXXX";
    root_ = ::mkdtemp(tmpl);
    fs::create_directories(state());
    std::ofstream(tokenFile()) << kInternalToken << "\n";
    ::chmod(tokenFile().c_str(), 0600);
  }
  ~RoleDir() { fs::remove_all(root_); }
  fs::path state() const { return root_ / "state"; }
  fs::path tokenFile() const { return root_ / "internal-token"; }
  fs::path settings(const std::string& yaml) const {
    const fs::path path = root_ / "settings.yaml";
    std::ofstream(path) << yaml;
    return path;
  }
  // The settings of an execution node on the fake mechanism.
  std::string nodeYaml() const {
    return "sandbox: fake\nnode_name: node-a\nlisten: \"127.0.0.1:0\"\nstate_dir: " +
           state().string() + "\ninternal_token_file: " + tokenFile().string() + "\n";
  }

 private:
  fs::path root_;
};

// Waits for a child that exits on its own (a refusal): its wait status.
int exitOf(ServeProcess& process) {
  auto status = process.signalAndWaitFor(0, std::chrono::seconds(30));
  EXPECT_TRUE(status.has_value()) << "still running: " << process.log();
  return status.value_or(-1);
}

std::vector<std::string> openFiles(pid_t pid) {
  std::vector<std::string> out;
  for (const auto& entry : fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
    std::error_code ec;
    out.push_back(fs::read_symlink(entry.path(), ec).string());
  }
  return out;
}

// The checks of a process that must hold none of the gateway's secrets.
void expectHoldsNoGatewaySecret(pid_t pid, const std::string& state_dir) {
  const std::string proc = "/proc/" + std::to_string(pid);
  const std::string maps = readAll(proc + "/maps");
  ASSERT_FALSE(maps.empty());
  EXPECT_THAT(maps, Not(HasSubstr("libpq")));
  EXPECT_THAT(maps, Not(HasSubstr("libsqlite")));
  std::string environ_text = readAll(proc + "/environ");
  std::replace(environ_text.begin(), environ_text.end(), '\0', '\n');
  EXPECT_THAT(environ_text, Not(HasSubstr("postgres")));
  EXPECT_THAT(environ_text, Not(HasSubstr("AIRLOCK_SCHEDULE_DATABASE")));
  EXPECT_THAT(environ_text, Not(HasSubstr("AIRLOCK_SERVICE_TOKEN")));
  EXPECT_THAT(environ_text, Not(HasSubstr("artifacts")));
  const auto files = openFiles(pid);
  ASSERT_FALSE(files.empty());
  for (const auto& file : files) {
    EXPECT_THAT(file, Not(HasSubstr(".db"))) << "an open database file";
    EXPECT_THAT(file, Not(HasSubstr("sqlite")));
    EXPECT_THAT(file, Not(HasSubstr(state_dir + "/artifacts"))) << "an open store file";
    EXPECT_THAT(file, Not(HasSubstr("internal-token"))) << "read once at start, then closed";
  }
  EXPECT_FALSE(fs::exists(state_dir + "/artifacts")) << "no artifact store was opened";
  EXPECT_FALSE(fs::exists(state_dir + "/service-token")) << "no public API token was made";
}

TEST(ServeRoles, ExecutionRoleIsAirlockNodeHoldingNoGatewaySecret) {
  RoleDir dir;
  ServeProcess node({"PATH=/usr/bin:/bin"}, AIRLOCK_BINARY,
                    {"--role", "execution", "--config", dir.settings(dir.nodeYaml()).string()});
  ASSERT_GT(node.port(), 0) << node.log();
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/" + std::to_string(node.pid()) + "/exe", ec);
  EXPECT_EQ(exe.filename(), "airlock-node") << exe;
  expectHoldsNoGatewaySecret(node.pid(), dir.state().string());
  // The host image's digest, for the gateway's host_image_digest.
  EXPECT_THAT(node.log(), HasSubstr("airlock: image host"));
  EXPECT_EQ(*node.signalAndWaitFor(SIGTERM, std::chrono::seconds(30)), 0) << node.log();
}

TEST(ServeRoles, TheChecksSeeWhatAServiceWithNoRoleHolds) {
  // The same process checks on today's `airlock serve`, which opens the
  // SQLite metadata: they find it (they can fail).
  RoleDir dir;
  ServeProcess both({"PATH=/usr/bin:/bin", "AIRLOCK_SANDBOX=fake", "AIRLOCK_LISTEN=127.0.0.1:0",
                     "AIRLOCK_STATE_DIR=" + dir.state().string()});
  ASSERT_GT(both.port(), 0) << both.log();
  const std::string maps = readAll("/proc/" + std::to_string(both.pid()) + "/maps");
  EXPECT_THAT(maps, HasSubstr("libsqlite"));
  EXPECT_TRUE(fs::exists(dir.state() / "artifacts"));
  EXPECT_EQ(*both.signalAndWaitFor(SIGTERM, std::chrono::seconds(30)), 0) << both.log();
}

TEST(ServeRoles, ExecutionRoleRefusesTheGatewaysSettingsByName) {
  struct Case {
    std::vector<std::string> env;
    std::string yaml;
    std::string key;
  };
  const std::vector<Case> cases = {
      {{std::string("AIRLOCK_SCHEDULE_DATABASE=") + kDatabaseUri}, "", "schedule_database"},
      {{}, "artifacts:\n  retention_days: 3\n", "artifacts"},
      {{"AIRLOCK_SERVICE_TOKEN=public-token-0123456789"}, "", "service_token"},
  };
  for (const auto& c : cases) {
    RoleDir dir;
    std::vector<std::string> env = c.env;
    env.push_back("PATH=/usr/bin:/bin");
    ServeProcess node(
        env, AIRLOCK_BINARY,
        {"--role", "execution", "--config", dir.settings(dir.nodeYaml() + c.yaml).string()});
    const int status = exitOf(node);
    ASSERT_TRUE(WIFEXITED(status)) << node.log();
    EXPECT_EQ(WEXITSTATUS(status), 125) << node.log();
    EXPECT_THAT(node.log(), HasSubstr("role=execution")) << c.key;
    EXPECT_THAT(node.log(), HasSubstr(c.key));
    EXPECT_THAT(node.log(), Not(HasSubstr("db-password-42"))) << "a URI is never logged";
    // Refused before anything was made.
    EXPECT_TRUE(fs::is_empty(dir.state())) << c.key;
  }
  // And without its credential.
  RoleDir dir;
  ServeProcess node({"PATH=/usr/bin:/bin"}, AIRLOCK_BINARY,
                    {"--role", "execution", "--config",
                     dir.settings("sandbox: fake\nnode_name: node-a\n").string()});
  EXPECT_EQ(WEXITSTATUS(exitOf(node)), 125);
  EXPECT_THAT(node.log(), HasSubstr("internal_token_file or AIRLOCK_INTERNAL_TOKEN"));
}

TEST(ServeRoles, GatewayRoleNeedsItsNodes) {
  RoleDir dir;
  ServeProcess none({"PATH=/usr/bin:/bin", std::string("AIRLOCK_INTERNAL_TOKEN=") + kInternalToken,
                     "AIRLOCK_STATE_DIR=" + dir.state().string()},
                    AIRLOCK_BINARY, {"--role", "gateway"});
  EXPECT_EQ(WEXITSTATUS(exitOf(none)), 125);
  EXPECT_THAT(none.log(), HasSubstr("requires execution_nodes"));
  // An unnamed node that does not answer: its name is unknown, refused.
  ServeProcess silent(
      {"PATH=/usr/bin:/bin", std::string("AIRLOCK_INTERNAL_TOKEN=") + kInternalToken,
       "AIRLOCK_STATE_DIR=" + dir.state().string(), "AIRLOCK_EXECUTION_NODES=http://127.0.0.1:1",
       "AIRLOCK_LISTEN=127.0.0.1:0"},
      AIRLOCK_BINARY,
      {"--role", "gateway", "--config",
       dir.settings("host_image_digest: "
                    "sha256:0000000000000000000000000000000000000000000000000000000000000001\n")
           .string()});
  EXPECT_EQ(WEXITSTATUS(exitOf(silent)), 125);
  EXPECT_THAT(silent.log(), HasSubstr("http://127.0.0.1:1"));
  EXPECT_THAT(silent.log(), HasSubstr("does not answer"));
  ServeProcess bad_role({"PATH=/usr/bin:/bin"}, AIRLOCK_BINARY, {"--role", "worker"});
  EXPECT_EQ(WEXITSTATUS(exitOf(bad_role)), 125);
  EXPECT_THAT(bad_role.log(), HasSubstr("--role \"worker\" is not one of gateway, execution"));
}

TEST(ServeRoles, ExecutionRoleWithoutAirlockNodeBesideItIsAClearError) {
  RoleDir dir;
  const fs::path lonely = dir.state().parent_path() / "bin";
  fs::create_directories(lonely);
  std::error_code ec;
  fs::create_hard_link(AIRLOCK_BINARY, lonely / "airlock", ec);
  if (ec) fs::copy_file(AIRLOCK_BINARY, lonely / "airlock");
  ServeProcess node({"PATH=/usr/bin:/bin"}, (lonely / "airlock").string(),
                    {"--role", "execution", "--config", dir.settings(dir.nodeYaml()).string()});
  EXPECT_EQ(WEXITSTATUS(exitOf(node)), 125);
  EXPECT_THAT(node.log(), HasSubstr("airlock-node, which is not beside this airlock"));
  EXPECT_THAT(node.log(), HasSubstr((lonely / "airlock-node").string()));
}

}  // namespace
}  // namespace airlock::testing
