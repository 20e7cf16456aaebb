// The sandbox's init: pid 1 of the sandbox's pid namespace. It is a clone of
// the service process that never execs the host binary (red-team case B13). It
// builds the root from the jail plan, reports ready with the workspace fd,
// then runs one command at a time on request: fork, drop to the sandbox uid
// with no capabilities, no_new_privs and the seccomp filter, exec. When the
// command exits, init kills and reaps every other process in the namespace
// but the side processes (side_process.h: code mode's effects and jobs, and
// what stays in their sessions) before reporting, so nothing a command
// started outlives it (red-team cases B39, B43).
// A sandbox with egress also has init's loopback listener, whose accepted
// connections init hands to the service unread (see egress_fd).
//
// Everything init touches is prepared by the service before clone; init
// itself never allocates, locks or logs.
#pragma once

#include <linux/filter.h>
#include <sys/types.h>

#include <cstddef>
#include <vector>

#include "airlock/sandbox/linux/jail_plan.h"

namespace airlock::linux_jail {

struct InitContext {
  const std::vector<SetupStep>* plan = nullptr;
  int control_fd = -1;  // init's end of the control socketpair
  // Init's end of the egress handoff socketpair (SOCK_SEQPACKET), or -1 for
  // a sandbox without egress. With it, init listens on
  // 127.0.0.1:kEgressRelayPort inside the sandbox and passes every accepted
  // connection through it (one fd per packet) to the egress proxy
  // (port/egress_route.h). Without it there is no listener.
  int egress_fd = -1;
  // Cgroup::openCommandEntry() of the sandbox: every command writes "0" to
  // it before exec, so commands run under the memory limit and init does
  // not (MemoryLayout::kCommandsApart). -1: commands stay where init is.
  int command_cgroup_fd = -1;
  const sock_fprog* seccomp = nullptr;  // applied to every command
  uid_t sandbox_uid = 1000;
  gid_t sandbox_gid = 1000;
  // Preallocated by the service: receive buffer for kRun, and pointer slots.
  char* recv_buffer = nullptr;
  std::size_t recv_buffer_size = 0;
  char** arg_slots = nullptr;  // kMaxArgs + 1 entries
  char** env_slots = nullptr;  // kMaxArgs + 1 entries
  // The service's argv and environ areas (from /proc/self/stat), which
  // /proc/1/cmdline and /proc/1/environ would show; init wipes them.
  char* arg_start = nullptr;
  char* arg_end = nullptr;
  char* env_start = nullptr;
  char* env_end = nullptr;
};

// Reads the argv/environ area addresses of this process into ctx.
void locateInheritedStrings(InitContext& ctx);

// Entry point in the cloned child. Never returns.
[[noreturn]] void runInit(const InitContext& ctx) noexcept;

}  // namespace airlock::linux_jail
