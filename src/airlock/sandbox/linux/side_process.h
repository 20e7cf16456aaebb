// Side processes of a live linux sandbox ("exec into the sandbox"): the
// mechanism behind ExecutionEnvironment::startSideProcess (execution_environment.h),
// used by the code-mode broker for proc.run and job.start (spec 001; docs/capabilities.md "Where
// effects run"). Internal to linux/.
//
// How one is started, from the multi-threaded service:
//  1. The service prepares everything (argv/envp arrays, the seccomp program,
//     pipes) and _Fork()s a helper. The helper allocates nothing, takes no
//     lock and logs nothing.
//  2. The service writes the helper's pid into the sandbox's cgroup(s)
//     (Cgroup::addCommandProcess: under the commands' memory limit), then
//     releases it over a pipe. Everything the helper forks inherits that
//     membership, so the sandbox's memory, pids and cpu limits apply.
//  3. The helper setns()es into every namespace of the sandbox's init at once
//     through init's pidfd (user, mount, pid, net, ipc, uts, cgroup), which
//     also moves its root and working directory to the sandbox's root.
//  4. It forks the effect process, which is the first process it creates in
//     the sandbox's pid namespace. The effect process does what init does for
//     a command (execSandboxed, sandboxed_exec.h): default signal dispositions,
//     setsid (a process group of its own, so the broker can kill it whole),
//     stdio from the pipes and nothing else open, core 0 and nofile <= 4096,
//     every capability dropped from the bounding set, setgroups/setresgid/
//     setresuid to the sandbox user (raw syscalls: glibc's setxid broadcast
//     would wait for threads the fork did not copy), the working directory
//     opened beneath /workspace (openat2 RESOLVE_BENEATH), no_new_privs, the
//     same seccomp filter, parent-death signal, then execve on the image PATH.
//  5. The helper stays outside the sandbox's pid namespace as the effect's
//     parent: it writes the effect's pid (as the service sees it) and later
//     its wait status to a status pipe, then exits. The effect is never
//     reparented to the sandbox's init, so init's command bookkeeping is
//     untouched, and the broker learns the exit status.
// With SideCommand::terminal, step 1 also opens a pseudo-terminal pair of
// that size (posix_openpt; the slave from the master with TIOCGPTPEER, so
// the sandbox needs no /dev/pts). The slave is the effect's stdin, stdout
// and stderr and, right after its setsid, its controlling terminal
// (TIOCSCTTY); the service keeps the master: pump reads the terminal's
// output from it as stdout (EIO once the slave's last holder closed it is
// end-of-file), writeStdin types into it, closeStdin types the end-of-file
// character, and resizeTerminal sets the size on it (TIOCSWINSZ: the
// foreground process group gets SIGWINCH). The seccomp filter still refuses
// TIOCSTI and TIOCLINUX, so the process cannot push bytes into its own
// terminal's input.
// A destroyed sandbox takes its side processes with it: they are in its pid
// namespace and its cgroup.
#pragma once

#include <linux/filter.h>
#include <sys/types.h>

#include <map>
#include <memory>
#include <string>

#include "airlock/core/error.h"
#include "airlock/port/execution_environment.h"

namespace airlock::host {
class Cgroup;
}  // namespace airlock::host

namespace airlock::linux_jail {

struct SideProcessTarget {
  int init_pidfd = -1;                  // pidfd of the sandbox's init
  host::Cgroup* cgroup = nullptr;       // the sandbox's cgroup
  const sock_fprog* seccomp = nullptr;  // the filter every command gets
  uid_t sandbox_uid = 1000;             // inside the user namespace
  gid_t sandbox_gid = 1000;
  std::map<std::string, std::string> environment;  // the sandbox's, before additions
};

// Starts `command` as described above. The working directory must already
// have passed the containment check on the service side; the effect process
// opens it again beneath /workspace as the sandbox user. Errors:
// ToolValidationError for a terminal size checkTerminalSize refuses;
// ExecutionUnavailable with the failing step and errno.
Result<std::unique_ptr<SideProcess>> startSideProcessIn(const SideProcessTarget& target,
                                                        const SideCommand& command);

// Removes a sandbox's capability directory and the files the broker put in
// it (the socket, the token file, the guest library; one level of
// subdirectories), never following a symlink. Best effort: a missing
// directory is fine.
void removeCapabilityDirectory(const std::string& path) noexcept;

}  // namespace airlock::linux_jail
