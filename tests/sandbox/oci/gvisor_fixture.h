// A gtest fixture with one provisioned gvisor sandbox in a private state
// directory (skipped with the reason where runsc, root or the shim is
// missing); TearDown destroys it and expects no mount of it to remain.
// Derived fixtures add their own run().
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>

#include "gvisor_test_support.h"

namespace airlock::testing {

class GvisorFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = gvisorUnavailableHere()) GTEST_SKIP() << *why;
    options_ = gvisorOptions(state_.path());
    tweakOptions(options_);
    auto env = gvisor::createGvisorEnvironment(options_);
    ASSERT_TRUE(env) << env.error().message();
    env_ = std::move(*env);
    auto h = env_->provision(gvisorSpec(options_));
    ASSERT_TRUE(h) << h.error().message();
    handle_ = *h;
  }
  void TearDown() override {
    if (env_) {
      EXPECT_TRUE(env_->destroy(handle_));
      env_.reset();
      EXPECT_FALSE(mountedUnder(state_.path())) << "a mount of the sandbox remains";
    }
  }
  virtual void tweakOptions(gvisor::GvisorEnvironmentOptions&) {}
  // Destroys the sandbox and provisions another with `tweak`ed limits.
  void reprovision(const std::function<void(ResourceLimits&)>& tweak) {
    ASSERT_TRUE(env_->destroy(handle_));
    auto spec = gvisorSpec(options_);
    tweak(spec.limits);
    auto h = env_->provision(spec);
    ASSERT_TRUE(h) << h.error().message();
    handle_ = *h;
  }

  GvisorStateDir state_;
  gvisor::GvisorEnvironmentOptions options_;
  std::unique_ptr<ExecutionEnvironment> env_;
  EnvironmentHandle handle_;
};

}  // namespace airlock::testing
