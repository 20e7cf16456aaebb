// Shared set-up for tests that run the real linux mechanism: a private state
// directory per test, a spec with the tier-2 environment, and a skip with the
// reason when this machine cannot run the jail (not root, no user
// namespaces).
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "../shell_command.h"
#include "airlock/core/environment_tiers.h"
#include "airlock/core/limits_defaults.h"
#include "airlock/sandbox/linux/linux_environment.h"

namespace airlock::testing {

inline std::optional<std::string> linuxJailUnavailable() {
  if (::geteuid() != 0) return "the linux mechanism needs root";
  if (::access("/proc/self/ns/user", F_OK) != 0) return "no user namespaces on this kernel";
  return std::nullopt;
}

// A temporary state directory, removed with everything in it.
class TempStateDir {
 public:
  TempStateDir() {
    char tmpl[] = "/tmp/airlock-test-state-XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempStateDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline linux_jail::LinuxEnvironmentOptions testOptions(const std::string& state_dir) {
  linux_jail::LinuxEnvironmentOptions o;
  o.state_dir = state_dir;
  return o;
}

inline EnvironmentSpec linuxSpec(const linux_jail::LinuxEnvironmentOptions& options,
                                 std::string tenant = "tenant-a") {
  EnvironmentSpec spec;
  spec.tenant_id = std::move(tenant);
  spec.run_id = "run-1";
  spec.lease_epoch = 1;
  spec.image_digest = airlock::computeImageDigest(options).value();
  spec.limits = defaultLimits();
  auto built = buildEnvironment(
      std::vector<std::string>{}, [](std::string_view) { return std::optional<std::string>{}; },
      ".", std::nullopt);
  spec.environment = built.variables;
  return spec;
}

// A fixture with one provisioned sandbox (skipped with the reason where the
// jail cannot run). run() executes with a watchdog: if execute has not
// returned after `limit`, the sandbox is destroyed (its init dies, which
// ends execute) and the test fails instead of hanging.
class SandboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = linuxJailUnavailable()) GTEST_SKIP() << *why;
    options_ = testOptions(state_.path());
    auto env = linux_jail::createLinuxEnvironment(options_);
    ASSERT_TRUE(env) << env.error().message();
    env_ = std::move(*env);
    auto h = env_->provision(linuxSpec(options_));
    ASSERT_TRUE(h) << h.error().message();
    handle_ = *h;
  }
  void TearDown() override {
    if (env_) {
      EXPECT_TRUE(env_->destroy(handle_));
    }
  }
  // Replaces the sandbox with one whose limits `tweak` changed.
  void reprovision(const std::function<void(ResourceLimits&)>& tweak) {
    ASSERT_TRUE(env_->destroy(handle_));
    auto spec = linuxSpec(options_);
    tweak(spec.limits);
    auto h = env_->provision(spec);
    ASSERT_TRUE(h) << h.error().message();
    handle_ = *h;
  }
  ExecutionResult run(const ExecutionCommand& c, const CancelToken* cancel = nullptr,
                      std::chrono::seconds limit = std::chrono::seconds(60)) {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    bool fired = false;
    std::thread watchdog([&] {
      std::unique_lock lk(mu);
      if (!cv.wait_for(lk, limit, [&] { return done; })) {
        fired = true;
        lk.unlock();
        (void)env_->destroy(handle_);
      }
    });
    auto r = env_->execute(handle_, c, cancel);
    {
      std::lock_guard lk(mu);
      done = true;
    }
    cv.notify_all();
    watchdog.join();
    EXPECT_FALSE(fired) << "execute did not return within " << limit.count()
                        << " s: something of the command outlived it";
    EXPECT_TRUE(r) << r.error().message();
    return r ? *r : ExecutionResult{};
  }

  TempStateDir state_;
  linux_jail::LinuxEnvironmentOptions options_;
  std::unique_ptr<ExecutionEnvironment> env_;
  EnvironmentHandle handle_;
};

}  // namespace airlock::testing
