// The OCI bundle of a gVisor sandbox: the runtime-spec
// config.json that `runsc run` starts, and the read-only root directory it
// names. Pure functions of their inputs (no syscalls) except
// prepareRootfs(), so the JSON is unit-tested byte for byte.
//
// What the sandbox sees (the same shape as the linux mechanism's root,
// sandbox/linux/jail_plan.h):
//   /                 the image's rootfs directory (one per image, shared
//                     by its sandboxes), read-only: empty mount points, the
//                     image's symbolic links (the usr-merge /bin -> usr/bin
//                     ...), and the generated /etc entries of
//                     sandbox_baseline.h (passwd, group, hosts, hostname,
//                     nsswitch.conf, localtime, timezone)
//   /usr ...          the image's directories and files (sandbox_image.h),
//                     host paths bound read-only, /etc's entries among them
//   /workspace        the sandbox's workspace: a host tmpfs the adapter
//                     mounted (size= workspace_bytes, nr_inodes=
//                     inodes_max), read-write
//   /tmp              a second host tmpfs with the same limits
//   /proc, /dev, /dev/shm   gVisor's own (sentry-internal) filesystems
//   /dev/pts          a devpts (kDevptsOptions; this runsc keeps each slave
//                     0600 and owned by its opener's group whatever the
//                     options say), /dev/ptmx its multiplexer (runsc's link)
//   /.airlock/shim    the in-sandbox supervisor binary, read-only
//   /.airlock/ctl     the control directory (mode 0700, root): the host's
//                     listening UNIX sockets the shim connects to (`sock`,
//                     the command channel; `side`, the side-process channel)
//   /run/airlock      the capability directory (code mode; execution_environment.h
//                     kCapabilityDirInSandbox), read-only: a per-sandbox host
//                     directory owned by uid 1000 where the broker puts its
//                     socket, token file and guest library; present whenever
//                     capability_dir is given (the adapter always gives it)
//   /.airlock/egress  only for a sandbox with egress (port/egress_route.h):
//                     the egress directory (mode 0700, root), holding the
//                     host's listening socket that the shim's relay connects
//                     to once per connection accepted on 127.0.0.1:3128
// The container's process is `/.airlock/shim init` (`/.airlock/shim init
// egress` for a sandbox with egress) as uid 0 with only
// CAP_KILL, CAP_SETUID, CAP_SETGID and CAP_SETPCAP, no_new_privs: pid 1,
// which runs each command as uid 1000 (gvisor_shim.cpp).
// Namespaces: pid, network (empty: runsc --network=none), ipc, uts, mount.
// linux.resources carries the limits for the record; runsc is started with
// --ignore-cgroups and the adapter's own cgroup enforces them.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "airlock/core/error.h"
#include "airlock/core/types.h"
#include "airlock/sandbox/sandbox_image.h"

namespace airlock::oci {

inline constexpr const char* kShimPathInSandbox = "/.airlock/shim";
inline constexpr const char* kControlDirInSandbox = "/.airlock/ctl";
inline constexpr const char* kControlSocketName = "sock";
inline constexpr const char* kSideSocketName = "side";
inline constexpr const char* kEgressDirInSandbox = "/.airlock/egress";
inline constexpr const char* kEgressSocketName = "sock";
inline constexpr std::uint32_t kSandboxUid = 1000;
inline constexpr std::uint32_t kSandboxGid = 1000;
// RLIMIT_NOFILE of every process in the sandbox (as the linux mechanism).
inline constexpr std::uint64_t kNofileLimit = 4096;
// RLIMIT_NPROC of a command or side process is its pids limit plus this:
// the shim reports PIDS (and the command is killed) when it counts the
// limit, and a fork bomb must cross that count on its way to the kernel's
// refusal rather than hover at the refusal between two of the shim's samples.
// Once a fork is refused the bomb shrinks, so the count must not be able to
// climb from the limit to the refusal and fall back between two samples
// (then the command ends with no kill reason, the shell printing "Cannot
// fork"). The shim counts before it reaps (gvisor_shim.cpp), so only
// processes reaped by their own parents can leave unseen; the spare is the
// margin for those, and for the shim's samples arriving late on a loaded
// machine. Measured on a 2-core machine with the dash and bash fork bombs
// at pids_max 32: spare 8, about 1 run in 25 ended so; spare 32, 1 in 30 to
// 1 in 70; spare 96, 1 in 600; spare 96 with the shim sampling every
// millisecond from a quarter of the limit, none in 400. A command is killed
// at the limit, so it holds the spare only for the moment between the
// shim's count and the kill.
inline constexpr long kPidsRefusalSpare = 96;

struct BundleInputs {
  std::string rootfs_dir;  // absolute host path of the image's rootfs (prepareRootfs)
  std::shared_ptr<const SandboxImage> image;  // its directories and files are bound read-only
  std::string workspace_dir;                  // host tmpfs mount point -> /workspace
  std::string tmp_dir;                        // host tmpfs mount point -> /tmp
  std::string shim_path;                      // host path of airlock-gvisor-shim
  std::string control_dir;                    // host control directory -> /.airlock/ctl
  std::string egress_dir;      // host egress directory -> /.airlock/egress; empty: none
  std::string capability_dir;  // host capability dir -> /run/airlock (ro); empty: none
  ResourceLimits limits;
};

// The config.json document. ExecutionRejected when a path is not absolute
// or contains "..", or a limit is not positive.
Result<nlohmann::json> makeConfig(const BundleInputs& in);

// Creates (idempotently) the rootfs directory of `image` at `dir`: mount
// points for everything above, the image's symbolic links, and the
// generated /etc files. ExecutionUnavailable on a failed syscall.
Result<void> prepareRootfs(const std::string& dir, const SandboxImage& image);

}  // namespace airlock::oci
