// The `linux` mechanism: a shared-kernel jail. Development
// fallback; production refuses it (spec 000, "Development, production, and
// the refusal in between").
//
// Provision creates a cgroup (v2 or v1), then clones an init into new user,
// pid, mount, net, ipc, uts and cgroup namespaces. Init builds a fresh root
// from read-only binds of the image (with the /etc entries and the private
// devpts of sandbox_baseline.h), mounts a tmpfs workspace at /workspace
// (size= workspace_bytes, nr_inodes= inodes_max), pivots into it, and waits
// for commands on a control socket. A sandbox with egress
// (egress_route.h) also gets init's listener on 127.0.0.1:3128, whose
// connections go to the egress proxy, and the proxy variables. Commands run as uid 1000 inside the
// sandbox (an unprivileged host uid), with no capabilities, no_new_privs and
// a seccomp filter, supervised by the host's command supervisor
// (host/command_supervisor.h) over init's control socket. Destroy kills the
// pid namespace, removes the cgroup and drops the workspace. Requires root (or CAP_SYS_ADMIN +
// CAP_SETUID).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "airlock/core/error.h"
#include "airlock/core/limits_defaults.h"
#include "airlock/port/egress_route.h"
#include "airlock/port/execution_environment.h"
#include "airlock/sandbox/mechanism_options.h"

namespace airlock::linux_jail {

// The shared settings (image, caps, node name, egress route) are
// MechanismOptions'.
struct LinuxEnvironmentOptions : MechanismOptions {
  // Lock files of live sandboxes (crash recovery) live here.
  std::string state_dir = "/run/airlock";
};

// Creates the adapter: detects the cgroup version, computes the image digest
// (mechanism_options.h computeImageDigest),
// and destroys sandboxes left behind by a crashed process (their lock file is
// no longer held). ExecutionUnavailable when a required kernel facility is
// missing, with a message that says which.
Result<std::unique_ptr<ExecutionEnvironment>> createLinuxEnvironment(
    const LinuxEnvironmentOptions& options);

// "airlock-<FNV-1a of state_dir, 8 hex>-": the name prefix of every cgroup
// of the sandboxes a service with this state directory creates. Several
// services (or test processes) share one cgroup tree and each sweeps only
// its own; tests use it to look for leftovers of one service.
std::string cgroupNamePrefix(const std::string& state_dir);

}  // namespace airlock::linux_jail
