// The contract suite against the gvisor mechanism (runsc, root). Skipped,
// with the reason printed, where runsc, root or the shim is missing.
#include <memory>

#include "../sandbox/oci/gvisor_test_support.h"
#include "contract_suite.h"

namespace airlock::contract {
namespace {

class GvisorAdapter : public ContractAdapter {
 public:
  Result<std::unique_ptr<ExecutionEnvironment>> make() override {
    return gvisor::createGvisorEnvironment(airlock::testing::gvisorOptions(state_.path()));
  }
  EnvironmentSpec spec() override {
    return airlock::testing::gvisorSpec(airlock::testing::gvisorOptions(state_.path()));
  }
  std::optional<std::string> skipReason() override {
    return airlock::testing::gvisorUnavailableHere();
  }

 private:
  airlock::testing::GvisorStateDir state_;
};

}  // namespace

AIRLOCK_INSTANTIATE_CONTRACT_SUITE(Gvisor, [] { return std::make_unique<GvisorAdapter>(); });

}  // namespace airlock::contract
