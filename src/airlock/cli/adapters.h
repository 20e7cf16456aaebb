// The composition root's choice of ExecutionEnvironment adapter, shared by
// `airlock run`, `airlock serve` and `airlock mcp`. Only the cli links the
// adapters; the service and the gateway see the port alone.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "airlock/core/error.h"
#include "airlock/sandbox/egress_route.h"
#include "airlock/sandbox/execution_environment.h"

namespace airlock::cli {

struct Adapter {
  std::unique_ptr<ExecutionEnvironment> env;
  std::string image_digest;  // the digest an EnvironmentSpec must carry
};

struct AdapterOptions {
  std::string state_dir =
      "/run/airlock";  // linux: locks and crash recovery; gvisor: <state_dir>/gvisor
  // Where sandboxes with egress send their connections (cli/egress_runtime.h);
  // null: such a sandbox is refused.
  std::shared_ptr<EgressRoute> egress_route;
};

// "linux" or "fake" (and the mechanisms built in later). ExecutionUnavailable
// naming the mechanism when it cannot start here; ConfigurationError for a
// name that is not a mechanism.
Result<Adapter> createAdapter(std::string_view mechanism, const AdapterOptions& options = {});

}  // namespace airlock::cli
