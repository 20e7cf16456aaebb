// Gate "production refuses the development sandboxes" (spec 000, hard gates;
// gate.sandbox.production_refuses_dev). Parameterized over the complement of
// {microvm, gvisor} in allMechanisms(), so a mechanism added later inherits
// the refusal: startup with deployment_mode=production fails, and so does
// auth_mode != dev, each with both settings and their values in the message.
// Production with auth_mode=dev is refused on every mechanism, gvisor and
// microvm included.
// Both the startup check and the `airlock serve` process are tested; a
// warning (a started service) fails the gate.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
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
  EXPECT_NE(r.error().context.find("deployment_mode=production"), std::string::npos)
      << r.error().context;
  EXPECT_NE(r.error().context.find("sandbox=" + std::string(mechanismName(GetParam()))),
            std::string::npos)
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
  EXPECT_NE(r.error().context.find("sandbox=" + std::string(mechanismName(GetParam()))),
            std::string::npos)
      << r.error().context;
}

// `airlock serve` with exactly `vars` in its environment (plus a port-0
// listen address and PATH), stderr captured. A serve that has not exited
// within 60 s (it started, a failure of the gate) is killed and reported
// with exited = false.
struct ServeRun {
  bool exited = false;
  int status = -1;  // the exit status when exited
  std::string err;
};

ServeRun runServe(std::vector<std::string> env) {
  ServeRun run;
  env.push_back("AIRLOCK_LISTEN=127.0.0.1:0");
  env.push_back("PATH=/usr/bin:/bin");
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  int err_pipe[2];
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) return run;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, err_pipe[1], STDERR_FILENO);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  std::string bin = AIRLOCK_BINARY, serve = "serve";
  char* argv[] = {bin.data(), serve.data(), nullptr};
  pid_t pid = -1;
  const int spawned = ::posix_spawn(&pid, bin.c_str(), &fa, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&fa);
  ::close(err_pipe[1]);
  if (spawned != 0) {
    ::close(err_pipe[0]);
    run.err = "posix_spawn failed";
    return run;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  bool eof = false;
  while (!eof && std::chrono::steady_clock::now() < deadline) {
    pollfd p{err_pipe[0], POLLIN, 0};
    if (::poll(&p, 1, 1000) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::read(err_pipe[0], buf, sizeof buf);
    if (n > 0)
      run.err.append(buf, static_cast<std::size_t>(n));
    else
      eof = true;
  }
  ::close(err_pipe[0]);
  if (!eof) ::kill(pid, SIGKILL);
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return run;
  run.exited = eof && WIFEXITED(status);
  if (run.exited) run.status = WEXITSTATUS(status);
  return run;
}

// The process: `airlock serve` with the settings in its environment exits
// with an error naming both settings, and never listens.
TEST_P(GateProductionRefusesDev, ServeExitsWithTheRefusal) {
  const std::string mech(mechanismName(GetParam()));
  for (const auto& vars : std::vector<std::vector<std::string>>{
           {"AIRLOCK_DEPLOYMENT_MODE=production", "AIRLOCK_SANDBOX=" + mech},
           {"AIRLOCK_AUTH_MODE=token", "AIRLOCK_SERVICE_TOKEN=0123456789abcdef0123",
            "AIRLOCK_SANDBOX=" + mech}}) {
    const ServeRun run = runServe(vars);
    ASSERT_TRUE(run.exited) << "serve did not exit: " << run.err;
    EXPECT_NE(run.status, 0) << "serve started: " << run.err;
    EXPECT_NE(run.err.find("refusing to start"), std::string::npos) << run.err;
    EXPECT_NE(run.err.find("sandbox=" + mech), std::string::npos) << run.err;
    const bool production = vars[0].find("production") != std::string::npos;
    EXPECT_NE(run.err.find(production ? "deployment_mode=production" : "auth_mode=token"),
              std::string::npos)
        << run.err;
  }
}

INSTANTIATE_TEST_SUITE_P(EveryDevelopmentMechanism, GateProductionRefusesDev,
                         ::testing::ValuesIn(developmentMechanisms()),
                         [](const ::testing::TestParamInfo<Mechanism>& info) {
                           return std::string(mechanismName(info.param));
                         });

// Production with dev authentication, on a mechanism production allows:
// the check and the `airlock serve` process refuse, naming both settings.
TEST(GateProductionRefusesDevAuth, ProductionWithDevAuthRefusesToStart) {
  for (Mechanism m : {Mechanism::kGvisor, Mechanism::kMicrovm}) {
    Settings s;
    s.sandbox = m;
    s.deployment_mode = DeploymentMode::kProduction;
    s.auth_mode = AuthMode::kDev;
    auto r = checkStartup(s);
    ASSERT_FALSE(r) << "production started with auth_mode=dev on " << mechanismName(m);
    EXPECT_EQ(r.error().code, ErrorCode::kConfigurationError);
    EXPECT_NE(r.error().context.find("deployment_mode=production"), std::string::npos)
        << r.error().context;
    EXPECT_NE(r.error().context.find("auth_mode=dev"), std::string::npos) << r.error().context;
  }
  const ServeRun run = runServe({"AIRLOCK_DEPLOYMENT_MODE=production", "AIRLOCK_SANDBOX=gvisor"});
  ASSERT_TRUE(run.exited) << "serve did not exit: " << run.err;
  EXPECT_NE(run.status, 0) << "serve started: " << run.err;
  EXPECT_NE(run.err.find("refusing to start"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("deployment_mode=production"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("auth_mode=dev"), std::string::npos) << run.err;
}

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
