// What an execution node runs: the choice of ExecutionEnvironment adapter
// (one per mechanism) and the composition around it, the egress proxy its
// sandboxes reach and the images they run (spec 000, "Where the boundary
// is": the execution service holds the adapter). The front ends (`airlock run`, `airlock serve`,
// `airlock mcp`) open it; the service and the gateway see the port alone, and nothing here includes
// the gateway, the service or the cli.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "airlock/core/error.h"
#include "airlock/core/limits_defaults.h"
#include "airlock/core/mechanism.h"
#include "airlock/execution/egress_runtime.h"
#include "airlock/execution/held_images.h"
#include "airlock/images/image_store.h"
#include "airlock/port/egress_route.h"
#include "airlock/port/execution_environment.h"

namespace airlock::execution {

struct Adapter {
  std::unique_ptr<ExecutionEnvironment> env;
  std::string image_digest;  // the digest an EnvironmentSpec must carry
};

struct AdapterOptions {
  std::string state_dir =
      "/run/airlock";  // linux: locks and crash recovery; gvisor: <state_dir>/gvisor
  // Where sandboxes with egress send their connections (execution/egress_runtime.h);
  // null: such a sandbox is refused.
  std::shared_ptr<EgressRoute> egress_route;
  // The highest limits a sandbox may have (serve: the limits.ceilings
  // settings); the mechanism refuses a spec above them.
  LimitCeilings ceilings = defaultCeilings();
  // The execution node's name, carried by every environment id (serve: the
  // node_name setting); "": ids are bare UUIDv7s.
  std::string node_name;
  // A new environment's lifetime (its expires_at is created_at plus this;
  // serve: environment_lifetime), the longest a provision may take (serve:
  // start_budget) and the files_changed listing bound (serve:
  // files_changed_listing). Defaults: spec 000's limits table.
  std::chrono::seconds environment_lifetime{kDefaultEnvironmentLifetimeSeconds};
  std::chrono::seconds start_budget{kDefaultStartBudgetSeconds};
  std::int64_t files_changed_listing = kDefaultFilesChangedListing;
  // Images the mechanism runs besides the host's (execution/held_images.h
  // holdImages); their roots must stay in place while the adapter lives.
  // The fake mechanism runs none.
  std::vector<SandboxImage> images;
};

// The permission to build a development-only mechanism (linux, fake: see
// core/mechanism.h). A front end that may run one names it: `airlock run`,
// `airlock mcp`, and `airlock serve` in deployment_mode development. No
// production path constructs one, so none can pick such a mechanism by
// accident.
struct DevelopmentMechanismsAllowed {
  explicit DevelopmentMechanismsAllowed() = default;
};

// Builds the adapter of `mechanism`. ExecutionRejected for a
// development-only mechanism without the permission; ExecutionUnavailable
// naming the mechanism when it is not built into this binary or cannot
// start here.
Result<Adapter> createAdapter(Mechanism mechanism, const AdapterOptions& options,
                              std::optional<DevelopmentMechanismsAllowed> development);

// One process's execution side, the composition every front end shares:
// the egress proxy (running only when `egress` allows something) and the
// adapter whose sandboxes reach it. Members are destroyed in reverse order,
// so the proxy outlives every sandbox attached to it.
struct LocalExecution {
  EgressRuntime egress;
  HeldImages images;  // held until every sandbox of the adapter is gone
  Adapter adapter;
};

struct LocalExecutionOptions {
  AdapterOptions adapter;  // its egress_route is set here
  // The policy that decides whether the proxy runs: the sandbox's own
  // (`airlock run`) or the operator's (`airlock serve`).
  EgressPolicy egress;
  // The proxy's decision log ("": standard error). `airlock run` names
  // --egress-log, which is created even when no proxy runs.
  std::string egress_log;
  bool touch_egress_log = false;
  RefusalObserver on_refusal;  // every refusal's reason code; may be empty
  // The stored images the adapter runs besides the host's, by digest
  // (resolveImage gives them), from `image_store`; may be empty.
  std::shared_ptr<images::ImageStore> image_store;
  std::vector<std::string> image_digests;
};

// The proxy (when the policy enables egress), the images (holdImages), then
// the adapter (createAdapter).
// Errors: those of startEgressRuntime and touchEgressLog, their context
// starting "--egress-log: " when a log was named; then createAdapter's.
Result<LocalExecution> openLocalExecution(Mechanism mechanism, LocalExecutionOptions options,
                                          std::optional<DevelopmentMechanismsAllowed> development);

}  // namespace airlock::execution
