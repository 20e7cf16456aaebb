// The contract suite against the linux mechanism (real kernel, root).
#include <memory>

#include "../sandbox/linux/linux_test_support.h"
#include "contract_suite.h"

namespace airlock::contract {
namespace {

class LinuxAdapter : public ContractAdapter {
 public:
  Result<std::unique_ptr<ExecutionEnvironment>> make() override {
    return linux_jail::createLinuxEnvironment(airlock::testing::testOptions(state_.path()));
  }
  EnvironmentSpec spec() override {
    return airlock::testing::linuxSpec(airlock::testing::testOptions(state_.path()));
  }
  std::optional<std::string> skipReason() override {
    return airlock::testing::linuxJailUnavailable();
  }

 private:
  airlock::testing::TempStateDir state_;
};

}  // namespace

AIRLOCK_INSTANTIATE_CONTRACT_SUITE(Linux, [] { return std::make_unique<LinuxAdapter>(); });

}  // namespace airlock::contract
