// The contract suite against the fake adapter (fake_contract_adapter.h).
#include <memory>

#include "fake_contract_adapter.h"

namespace airlock::contract {
namespace {

AIRLOCK_INSTANTIATE_CONTRACT_SUITE(Fake, [] { return std::make_unique<FakeContractAdapter>(); });

}  // namespace
}  // namespace airlock::contract
