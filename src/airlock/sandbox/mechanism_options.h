// What every hosted mechanism (linux, gvisor) is configured with beyond its
// own runtime: the image it binds, the service's caps and ceilings, the node
// name its environment ids carry, and the egress route. A mechanism's
// options struct derives from it and adds its state directory and runtime
// settings (linux/linux_environment.h, oci/gvisor_environment.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "airlock/core/limits_defaults.h"
#include "airlock/core/types.h"
#include "airlock/port/egress_route.h"
#include "airlock/sandbox/sandbox_baseline.h"
#include "airlock/sandbox/sandbox_image.h"

namespace airlock {

struct MechanismOptions {
  // The image: host directories bound read-only at the same path inside.
  std::vector<std::string> image_dirs = {"/usr"};
  // Host /etc entries that are part of the image (not secrets), bound
  // read-only when present: the loader cache, Debian's alternatives, netbase's
  // tables and the CA store (sandbox_baseline.h).
  std::vector<std::string> image_etc = defaultImageEtc();
  // Images besides the host's (sandbox_image.h unpackedImage), each named by
  // its digest. Their roots must stay in place for the mechanism's life (the
  // image store holds them: images/image_store.h ImageStore::use).
  std::vector<SandboxImage> images;
  // A new environment's lifetime: its expires_at is created_at plus this,
  // whatever its spec asks (ExecutionEnvironment::extend may move it later).
  // Also the service's cap in every command's timeout rule.
  std::chrono::seconds service_hard_cap{kDefaultEnvironmentLifetimeSeconds};
  // Longest a provision may take to bring a sandbox up.
  std::chrono::seconds start_budget{kDefaultStartBudgetSeconds};
  // The largest limits a spec or command may ask for (checkLimits).
  LimitCeilings ceilings = defaultCeilings();
  // The execution node's name, carried by every environment id
  // (core/ids.h newEnvironmentId); "": ids are bare UUIDv7s.
  std::string node_name;
  // At most this many paths in an ExecutionResult's files_changed.
  std::int64_t files_changed_listing = kDefaultFilesChangedListing;
  // Where the connections of sandboxes with egress go (the egress proxy).
  // Null: a spec with egress enabled is refused (ExecutionRejected); a spec
  // whose egress is deny, or allowlist with no destination, gets no network
  // either way.
  std::shared_ptr<EgressRoute> egress_route;
  // The wall clock of created_at, expires_at and the expiry checks
  // (host/wall_clock.h); empty: the system clock. Run time inside a
  // command is the steady clock's whatever this says.
  std::function<Timestamp()> clock;
};

// The digest the host image of a mechanism built with `options` is named by
// (sandbox_image.h computeHostImageDigest of its image_dirs and image_etc):
// the same for every hosted mechanism, so one spec runs on each.
Result<std::string> computeImageDigest(const MechanismOptions& options);

// The images a mechanism built with `options` runs: the host image, named
// `host_digest` (the mechanism's own digest of it, or the error computing
// it), then options.images (sandbox_image.h mechanismImages).
Result<std::vector<std::shared_ptr<const SandboxImage>>> mechanismImages(
    Result<std::string> host_digest, const MechanismOptions& options);

}  // namespace airlock
