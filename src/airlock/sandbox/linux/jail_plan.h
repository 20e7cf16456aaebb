// The sandbox's filesystem and namespace setup as an ordered list of named
// steps (setup reads like the security policy). The plan is
// built in the service (which may allocate) and executed by init between
// clone and its command loop (which must not allocate, lock or log).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "airlock/core/error.h"
#include "airlock/core/types.h"
#include "airlock/sandbox/sandbox_image.h"

namespace airlock::linux_jail {

struct SetupStep {
  enum class Kind {
    kMakeMountsPrivate,  // MS_REC|MS_PRIVATE on /
    kMountTmpfs,         // target, data (tmpfs options), flags
    kMkdir,              // target, mode
    kSymlink,            // source = link text, target = link path
    kBind,               // source -> target, MS_BIND|MS_REC
    kRemountBind,        // target, flags (MS_RDONLY etc. added to a bind)
    kMountProc,          // target
    kMountDevpts,        // target, data (devpts options), flags
    kWriteFile,          // target, data = contents, mode
    kTouch,              // target (empty file to bind a file onto)
    kPivotRoot,          // target = new root; old root detached
    kLoopbackUp,
    kSetHostname,  // data
  };
  Kind kind;
  std::string description;  // named in errors: "bind /usr read-only"
  std::string source;
  std::string target;
  std::string data;
  unsigned long flags = 0;
  mode_t mode = 0;
};

struct JailPlanInputs {
  std::string staging_root;  // empty host directory; mount point of the new root
  // The image, its entries bound read-only or linked in order
  // (sandbox_image.h); the generated /etc entries win over the image's.
  std::shared_ptr<const SandboxImage> image;
  // Host directory bound read-only at /run/airlock (code mode: the
  // capability socket and token file, execution_environment.h
  // openCapabilityChannel); empty: none.
  std::string capability_dir;
  ResourceLimits limits;
  uid_t sandbox_uid = 1000;  // inside the user namespace
  gid_t sandbox_gid = 1000;
};

// Builds the plan. Reads the host (statvfs flags of bind sources) but
// changes nothing. ExecutionUnavailable without an image.
Result<std::vector<SetupStep>> buildJailPlan(const JailPlanInputs& in);

// Runs one step; returns 0 or an errno. Async-signal-safe: no allocation.
int runSetupStep(const SetupStep& step) noexcept;

}  // namespace airlock::linux_jail
