// The `gvisor` mechanism (spec 000, "Development,
// production, and the refusal in between"): the production mechanism. Each
// sandbox is one gVisor sandbox started by `runsc` from a generated OCI
// bundle (oci_bundle.h); the host kernel sees only the gVisor sentry and
// gofer, never the command's syscalls.
//
// Lifecycle
// * provision: a cgroup of Airlock's own (the same driver as the linux
//   mechanism, named airlock-<state hash>-<id>), two host tmpfs mounts
//   (workspace: size= workspace_bytes, nr_inodes= inodes_max, owned by uid
//   1000; /tmp: the same limits), the bundle, and `runsc --root
//   <state>/sandboxes/<id>/runsc --platform=<platform> --network=none
//   --host-uds=open --ignore-cgroups run --detach` of container
//   airlock-gv-<id>, started from a child already moved into the cgroup so
//   the sentry, gofer and ptrace stubs are all in it. The container's
//   process is the shim's reaper. A private runsc --root per sandbox keeps
//   its state out of every other runsc user's.
// * provision returns once the shim (the container's pid 1, see
//   gvisor_shim.cpp) has connected to the sandbox's control socket
//   (<state>/sandboxes/<id>/ctl/sock, reached through runsc's
//   --host-uds=open). That connection is the sandbox's command channel.
// * execute: the request (argv, working directory, environment, process
//   limit) and the host's stdin/stdout/stderr pipe ends (SCM_RIGHTS) go to
//   the shim, which runs the command as uid 1000. The host's command
//   supervisor (host/command_supervisor.h, the same as linux's) drains and
//   streams output under the cap, feeds stdin and watches the limits; this
//   adapter supplies the shim channel and its limit sources. The command ends,
//   exactly as in the linux mechanism (docs/cli.md "When a command ends"),
//   when its main process has exited and stdout/stderr reached end-of-file,
//   or at a limit; then the host sends the stop byte and the shim kills
//   every remaining process of the command before it reports kDone.
//   `runsc exec` is not used: it costs a runsc process start per command
//   (measured in bench/), and it holds the command's stdio until the
//   process it started exits, which breaks the end-of-file rule for
//   commands that leave background processes; passing the pipes over the
//   control socket has neither problem.
// * destroy: SIGKILL to every process of the sandbox's cgroup (sentry,
//   gofer, stubs, runsc: the sandbox ends at once, before destroy returns)
//   and the workspace port is cut off; the rest of the teardown (reaping
//   runsc, waiting for the kernel to free the cgroup, unmounting both tmpfs,
//   removing the sandbox directory, where runsc's state for the container
//   lives, and the lock file) runs on one teardown worker thread, so the
//   caller does not wait the tens of milliseconds the kernel takes to free
//   the sentry. The adapter's destructor waits for every pending teardown;
//   a crash before it finishes leaves a lock file that the next start's
//   sweep finds. `runsc delete` is never run: in this runsc build it waits
//   about 1.7 s for a sandbox that is already dead, and there is nothing
//   left for it to do once the processes, mounts and state directory are
//   gone.
//   Crash recovery: a sandbox whose lock file is not held (its owner died)
//   is destroyed the same way when the adapter starts.
//
// Limits, and the signal each kill reason is read from (the thing that
// enforced the limit, never a guess from how the process died):
// * TIMEOUT / EXPIRED: the host's clock (the timeout rule, as linux).
// * MEMORY: the cgroup that holds the sandbox. It is created with
//   memory_bytes plus a fixed allowance for the sentry and gofer
//   (kSentryMemoryAllowance). On cgroup v1 the adapter sets
//   oom_kill_disable (at the limit the sandbox stalls instead of the host
//   OOM killer taking the sentry, which would end the whole sandbox) and
//   sets the limit per command (gvisor_memory.h): what the sandbox holds at
//   the command's start plus memory_bytes less kOomKillHeadroom, after
//   waiting for the memory of the previous command to be given back. At the
//   limit the v1 OOM eventfd fires (under_oom 1); the adapter reports
//   MEMORY, raises the limit by the headroom (still under memory_bytes for
//   the command) so the sentry can run the kill, and stops the command. The
//   result's peak_memory_bytes is the command's own (the cgroup's peak less
//   what the sandbox held at the start). An OOM kill counted by the
//   cgroup (v2, or a kill the v1 path could not prevent) is also MEMORY; if
//   it took the sentry, the sandbox is dead and later commands fail with
//   ExecutionUnavailable.
// * PIDS: gVisor itself enforces RLIMIT_NPROC (pids_max +
//   oci::kPidsRefusalSpare) on the sandbox user (a fork past it fails with
//   EAGAIN); the shim reports the command at pids_max (it counts /proc
//   before it reaps orphans, every 20 ms, every 1 ms from a quarter of the limit), before
//   any fork is refused, and the host treats the report as the PIDS kill.
//   The host cgroup's pids.max is only a backstop against the sandbox itself (16 * pids_max + 1024
//   host tasks: the ptrace platform uses a host thread per sandbox thread plus the sentry's tracer
//   and Go threads; a fork bomb at pids_max 32 was measured at about 240 host tasks); its events
//   counter also reads as PIDS, though reaching it can end the sandbox.
// * DISK: the host tmpfs mounts (workspace and /tmp) report no free block
//   or inode (fstatfs), as linux. /dev/shm is gVisor's memory-backed tmpfs
//   and counts against MEMORY.
// * OUTPUT_LIMIT: the host's pipe reader, at maximum_output_bytes.
// * CANCELLED / SERVICE_SHUTDOWN: the cancel token / shutdown().
//
// Egress (port/egress_route.h): only for a spec whose
// egress is enabled (egressEnabled), and only with options.egress_route set
// (otherwise such a spec is refused, ExecutionRejected). The adapter then
// creates <state>/sandboxes/<id>/egress (0700 root) holding a listening UNIX
// stream socket `sock`, binds the directory into the bundle at
// /.airlock/egress, starts the shim as `init egress`, hands the listener to
// egress_route->attachListener (the proxy accepts on it; the sandbox is
// named by the socket) and adds the proxy variables (addEgressProxyVariables)
// to the sandbox's environment. Inside, the shim listens on
// 127.0.0.1:kEgressRelayPort before it connects to the control socket, so
// before any command, and relays each connection to the egress socket
// through runsc's --host-uds=open (gvisor_shim.cpp). --network=none stays:
// gVisor's own loopback is the sandbox's only interface, and the egress
// socket its only way out. A sandbox without egress has no directory, no
// socket, no listener and no variables. destroy releases the attachment
// (closing the listener and every tunnel opened through it) before it
// returns; the directory goes with the sandbox directory.
//
// Code mode (spec 001; docs/capabilities.md; the port's
// openCapabilityChannel and startSideProcess):
// * The capability directory: <state>/sandboxes/<id>/cap, created at
//   provision (0755, owned by uid/gid 1000: no user namespace here, so the
//   broker's token file, 0400 and given the directory's owner, is readable by
//   the sandbox user inside and by no other), bound read-only at
//   /run/airlock. The broker's channel binds its socket there on the host; a program
//   connects to it through runsc's --host-uds=open (the gofer connects on
//   its behalf; bind mounts are revalidated, file-access-mounts=shared, so
//   files the broker creates after the start are seen). It goes with the
//   sandbox directory at destroy; the crash sweep removes it likewise.
// * Side processes go to the shim, not to `runsc exec`. At start the shim
//   connects a second channel, <state>/sandboxes/<id>/ctl/side
//   (shim_protocol.h); per side process the host sends the command-format
//   request with its stdout, stderr (and stdin) pipe ends, a status pipe and
//   a kill pipe. A thread of the shim (pid 1) forks a keeper per request,
//   which starts the effect exactly as a command (uid 1000, no capabilities,
//   no_new_privs, its own session, RLIMIT_NPROC = pids_max shared with the
//   command, working directory beneath /workspace, the sandbox's environment
//   with the additions), reports its pid and wait status on the status pipe
//   and SIGKILLs its process group when the host closes the kill pipe
//   (killGroup, the SideProcess's destructor, or the host's death). The
//   effect runs in the sandbox's cgroup (the sentry's), so the memory, cpu
//   and host pids limits apply. It dies with the sandbox (destroy kills the
//   sentry) and with its keeper (a parent-death signal), but not at the end
//   of a command: the shim's stop spares the keepers, their effects and what
//   stays in an effect's session (jobs outlive commands and programs).
//   Cost: one more process in the sandbox per side process (the keeper, a
//   fork of the static shim: on the ptrace platform, one more host stub
//   process), a few milliseconds to start (a fork inside gVisor and one
//   pipe round trip; no host process), and one idle thread in pid 1.
//   `runsc exec` was not chosen: a Go runsc process on the host for each
//   effect's whole life (36 ms median for `runsc exec /bin/true` alone,
//   docs/benchmarks.md; 32 of them at a full spawn ceiling), an exit status
//   mixed with runsc's own failures, no signal to a process group (runsc
//   kill reaches one pid or the whole container), capabilities and rlimits
//   from the container's process unless restated, and, as for commands,
//   stdio held until the process exits.
// * A side process on a terminal (SideCommand::terminal): the terminal is
//   the sandbox's own (/dev/ptmx of the bundle's devpts), since a gVisor
//   terminal's master lives in the sentry and cannot be handed to the host.
//   The request carries the size; the keeper opens the terminal, makes its
//   slave the effect's stdin, stdout, stderr and controlling terminal, and
//   relays between its master and the same stdio pipes, so the host's half
//   is the pipes' (PipedSideProcess): writeStdin types, closeStdin makes
//   the keeper type the end-of-file character once, stdout carries the
//   terminal's output and stderr ends at once. resizeTerminal writes a
//   resize record into the kill pipe (its end-of-file is still the kill,
//   which then reaches every process of the terminal's session: a shell's
//   jobs have groups of their own); the keeper sets the size and sends
//   SIGWINCH to the session's processes itself. The stdout pipe ends after
//   the effect has exited and nothing of its session is left. A process
//   without a terminal refuses resizeTerminal (ToolValidationError).
//
// Known differences from the linux mechanism, in this gVisor build
// (Debian runsc 0.0~20221219): statx with AT_NO_AUTOMOUNT fails with EINVAL,
// so coreutils `ls` and `stat` fail inside the sandbox; no seccomp filter is
// installed (the sentry is the syscall boundary); MEMORY comes at
// memory_bytes less kOomKillHeadroom of the command's own memory (linux:
// at memory_bytes), and a command that outruns its kill can pass
// memory_bytes by up to kOomKillSteps headrooms (gvisor_memory.h).
// Terminals: the end-of-file character typed on an empty line is dropped
// for a reader in canonical mode (`cat`, `sh -i`: closeStdin does not end
// them; a raw-mode reader such as Python's readline gets the byte and ends
// its input), and SIGWINCH on a resize reaches every process of the
// terminal's session rather than only its foreground group.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "airlock/core/error.h"
#include "airlock/core/limits_defaults.h"
#include "airlock/port/egress_route.h"
#include "airlock/port/execution_environment.h"
#include "airlock/sandbox/mechanism_options.h"

namespace airlock::gvisor {

// The sentry's and gofer's own memory, above memory_bytes (measured here:
// an idle sandbox holds about 14 MiB; with 100 MiB of command memory the
// cgroup holds about 119 MiB), so memory_bytes means about the command's
// memory, as in the linux mechanism.
inline constexpr std::int64_t kSentryMemoryAllowance = 24ll << 20;
// The command's limit sits this far under memory_bytes (v1); the room is
// given for the duration of a MEMORY kill, so the stalled sentry and the
// shim can run the kill (gvisor_memory.h). Measured here: with 8 MiB about
// one kill in a hundred outran the raise; with 16 MiB one in a hundred
// passed memory_bytes and none stalled the sandbox for good.
inline constexpr std::int64_t kOomKillHeadroom = 16ll << 20;

// The shared settings (image, caps, node name, egress route: attachListener
// connects to it) are MechanismOptions'.
struct GvisorEnvironmentOptions : MechanismOptions {
  // Lock files, bundles, runsc state and workspace mounts live here.
  std::string state_dir = "/run/airlock-gvisor";
  std::string runsc_path = "/usr/bin/runsc";
  // ptrace works everywhere; systrap (newer runsc) or kvm where allowed.
  std::string platform = "ptrace";
  // airlock-gvisor-shim; empty: next to the running executable, then the
  // build tree's copy.
  std::string shim_path;
};

// Why this machine cannot run the mechanism (not root, runsc or the shim
// missing), or nullopt. Cheap; starts nothing.
std::optional<std::string> gvisorUnavailable(const GvisorEnvironmentOptions& options);

// Runs /bin/true in a throwaway sandbox: the doctor's "is runsc usable"
// check. OK, or ExecutionUnavailable with runsc's message.
Result<void> probeGvisor(const GvisorEnvironmentOptions& options);

// Creates the adapter, prepares the shared rootfs and destroys sandboxes
// left by a crashed process. ExecutionUnavailable when unusable.
Result<std::unique_ptr<ExecutionEnvironment>> createGvisorEnvironment(
    const GvisorEnvironmentOptions& options);

// The image digest a spec must carry: computeImageDigest
// (mechanism_options.h), the linux mechanism's too for the same image
// directories, so one spec runs on both.
Result<std::string> gvisorImageDigest(const GvisorEnvironmentOptions& options);

// The shim path used when options.shim_path is empty.
std::string defaultShimPath();

}  // namespace airlock::gvisor
