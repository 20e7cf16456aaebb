// The execution side of `airlock serve` (spec 000, "Where the boundary is"):
// the operator's egress policy and the proxy, the configured images resolved
// to digests, and the adapter of the configured mechanism. `airlock serve`
// with no role opens it beside the gateway in one process; the execution
// role (`airlock serve --role execution`) runs it in its own executable,
// airlock-node, which links no database client, artifact store or tenant
// key code and serves the node's internal API (node/internal_api.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "airlock/core/error.h"
#include "airlock/execution/adapters.h"
#include "airlock/port/execution_environment.h"
#include "airlock/service/metrics.h"
#include "airlock/service/settings.h"

namespace airlock::cli {

// One image the service runs: its name in POST /v1/environments, the
// reference as configured ("" for the host image) and its digest.
struct ServedImage {
  std::string name;
  std::string reference;
  std::string digest;
};

struct ServeExecution {
  EgressPolicy operator_egress;  // the egress_policy setting (deny when unset)
  // The images, the default first (the host image unless default_image
  // names another). Each is logged on stderr with its digest when opened.
  std::vector<ServedImage> images;
  execution::LocalExecution execution;
};

// The operator's egress policy (the egress_policy setting, validated by
// checkStartup), as the value a provision with "network": true gets; the
// default (deny everything) without the setting. The file's error otherwise.
Result<EgressPolicy> operatorEgress(const service::Settings& settings);

// Opens the execution side for `settings` (checked by checkStartup): loads
// the egress policy, resolves and holds every `images` entry (pulling what
// the image store lacks), starts the egress proxy when the policy allows
// something (refusals counted in `metrics`) and creates the adapter.
// Errors name the setting (egress_policy, images entry) or the mechanism.
Result<ServeExecution> openServeExecution(const service::Settings& settings,
                                          service::Metrics& metrics);

// The execution role: the adapter, a LocalNode over it and the internal API
// (authenticated with settings.internal_token) served on settings.listen;
// its reaper asks settings.gateways which leases are stale. Serves until
// SIGINT/SIGTERM. Returns the exit status (125 with one "airlock: ..." line
// on stderr when it cannot start). `settings` must have passed checkStartup
// with role execution.
int runExecutionNode(const service::Settings& settings);

// airlock-node's command line: [--config FILE] [--role execution]. Loads
// the settings (the file, then AIRLOCK_* variables), refuses any role but
// execution, runs the startup check and runExecutionNode.
int executionNodeMain(int argc, char** argv);

}  // namespace airlock::cli
