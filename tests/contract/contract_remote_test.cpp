// The contract suite through the wire: a RemoteNode (the gateway's side)
// calling a real HTTP server on 127.0.0.1 that serves an execution node's
// InternalApi over a LocalNode over the adapter. Every assertion of the
// suite, streaming and cancel included, holds across the internal API.
#include <memory>

#include "../execution/node_server.h"
#include "../sandbox/linux/linux_test_support.h"
#include "fake_contract_adapter.h"

namespace airlock::contract {
namespace {

Result<std::unique_ptr<ExecutionEnvironment>> behindTheWire(
    Result<std::unique_ptr<ExecutionEnvironment>> adapter) {
  if (!adapter) return tl::unexpected(adapter.error());
  auto server = airlock::testing::NodeServer::start(std::move(*adapter));
  if (!server) return tl::unexpected(server.error());
  return std::unique_ptr<ExecutionEnvironment>(
      std::make_unique<airlock::testing::RemoteStack>(std::move(*server)));
}

class RemoteFakeAdapter : public FakeContractAdapter {
 public:
  Result<std::unique_ptr<ExecutionEnvironment>> make() override {
    return behindTheWire(FakeContractAdapter::make());
  }
};

class RemoteLinuxAdapter : public ContractAdapter {
 public:
  Result<std::unique_ptr<ExecutionEnvironment>> make() override {
    return behindTheWire(
        linux_jail::createLinuxEnvironment(airlock::testing::testOptions(state_.path())));
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

AIRLOCK_INSTANTIATE_CONTRACT_SUITE(RemoteFake,
                                   [] { return std::make_unique<RemoteFakeAdapter>(); });
AIRLOCK_INSTANTIATE_CONTRACT_SUITE(RemoteLinux,
                                   [] { return std::make_unique<RemoteLinuxAdapter>(); });

}  // namespace airlock::contract
