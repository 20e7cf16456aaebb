// The contract suite's adapter for the fake mechanism. The fake runs
// nothing, so each scenario's argv is scripted to do what the scenario
// says. Shared by the fake's own instantiation and by the remote one (the
// fake behind an execution node's internal API).
#pragma once

#include <memory>

#include "contract_suite.h"

namespace airlock::contract {

class FakeContractAdapter : public ContractAdapter {
 public:
  // A scripted fake::FakeEnvironment.
  Result<std::unique_ptr<ExecutionEnvironment>> make() override;
  EnvironmentSpec spec() override;
};

}  // namespace airlock::contract
