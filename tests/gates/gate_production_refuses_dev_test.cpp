// Gate "production refuses the development sandboxes" (spec 000, hard gates;
// gate.sandbox.production_refuses_dev). Parameterized over the complement of
// {microvm, gvisor} in allMechanisms(), so a mechanism added later inherits
// the refusal: startup with deployment_mode=production fails, and so does
// auth_mode != dev, each with both settings and their values in the message.
// Both the startup check and the `airlock serve` process are tested; a
// warning (a started service) fails the gate.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "airlock/service/settings.h"

extern char** environ;

namespace airlock::service {
namespace {

std::vector<Mechanism> developmentMechanisms() {
  std::vector<Mechanism> out;
  for (Mechanism m : allMechanisms())
    if (m != Mechanism::kGvisor && m != Mechanism::kMicrovm) out.push_back(m);
  return out;
}

class GateProductionRefusesDev : public ::testing::TestWithParam<Mechanism> {};

TEST_P(GateProductionRefusesDev, ProductionModeRefusesToStart) {
  Settings s;
  s.sandbox = GetParam();
  s.deployment_mode = DeploymentMode::kProduction;
  auto r = checkStartup(s);
  ASSERT_FALSE(r) << "production started with sandbox=" << mechanismName(GetParam());
  EXPECT_EQ(r.error().code, ErrorCode::kConfigurationError);
  EXPECT_NE(r.error().context.find("deployment_mode=production"), std::string::npos) << r.error().context;
  EXPECT_NE(r.error().context.find("sandbox=" + std::string(mechanismName(GetParam()))), std::string::npos)
      << r.error().context;
}

TEST_P(GateProductionRefusesDev, NonDevAuthRefusesToStart) {
  Settings s;
  s.sandbox = GetParam();
  s.deployment_mode = DeploymentMode::kDevelopment;
  s.auth_mode = AuthMode::kToken;
  s.service_token = "0123456789abcdef0123";
  auto r = checkStartup(s);
  ASSERT_FALSE(r) << "auth_mode=token started with sandbox=" << mechanismName(GetParam());
  EXPECT_NE(r.error().context.find("auth_mode=token"), std::string::npos) << r.error().context;
  EXPECT_NE(r.error().context.find("sandbox=" + std::string(mechanismName(GetParam()))), std::string::npos)
      << r.error().context;
}

// The process: `airlock serve` with the settings in its environment exits
// with an error naming both settings, and never listens.
TEST_P(GateProductionRefusesDev, ServeExitsWithTheRefusal) {
  const std::string mech(mechanismName(GetParam()));
  for (const auto& vars : std::vector<std::vector<std::string>>{
           {"AIRLOCK_DEPLOYMENT_MODE=production", "AIRLOCK_SANDBOX=" + mech},
           {"AIRLOCK_AUTH_MODE=token", "AIRLOCK_SERVICE_TOKEN=0123456789abcdef0123", "AIRLOCK_SANDBOX=" + mech}}) {
    std::vector<std::string> env = vars;
    env.push_back("AIRLOCK_LISTEN=127.0.0.1:0");
    env.push_back("PATH=/usr/bin:/bin");
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    int err_pipe[2];
    ASSERT_EQ(::pipe2(err_pipe, O_CLOEXEC), 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, err_pipe[1], STDERR_FILENO);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    std::string bin = AIRLOCK_BINARY, serve = "serve";
    char* argv[] = {bin.data(), serve.data(), nullptr};
    pid_t pid = -1;
    ASSERT_EQ(::posix_spawn(&pid, bin.c_str(), &fa, nullptr, argv, envp.data()), 0);
    posix_spawn_file_actions_destroy(&fa);
    ::close(err_pipe[1]);
    std::string err;
    char buf[4096];
    for (ssize_t n; (n = ::read(err_pipe[0], buf, sizeof buf)) > 0;) err.append(buf, static_cast<std::size_t>(n));
    ::close(err_pipe[0]);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status)) << "serve did not exit: " << err;
    EXPECT_NE(WEXITSTATUS(status), 0) << "serve started: " << err;
    EXPECT_NE(err.find("refusing to start"), std::string::npos) << err;
    EXPECT_NE(err.find("sandbox=" + mech), std::string::npos) << err;
    const bool production = vars[0].find("PRODUCTION") != std::string::npos || vars[0].find("production") != std::string::npos;
    EXPECT_NE(err.find(production ? "deployment_mode=production" : "auth_mode=token"), std::string::npos) << err;
  }
}

INSTANTIATE_TEST_SUITE_P(EveryDevelopmentMechanism, GateProductionRefusesDev,
                         ::testing::ValuesIn(developmentMechanisms()),
                         [](const ::testing::TestParamInfo<Mechanism>& info) {
                           return std::string(mechanismName(info.param));
                         });

// The allowed mechanisms pass the check (the gate is not vacuous).
TEST(GateProductionRefusesDevAllowed, KernelIsolatingMechanismsStartInProduction) {
  for (Mechanism m : {Mechanism::kGvisor, Mechanism::kMicrovm}) {
    Settings s;
    s.sandbox = m;
    s.deployment_mode = DeploymentMode::kProduction;
    s.auth_mode = AuthMode::kToken;
    s.service_token = "0123456789abcdef0123";
    EXPECT_TRUE(checkStartup(s)) << mechanismName(m);
  }
}

}  // namespace
}  // namespace airlock::service
