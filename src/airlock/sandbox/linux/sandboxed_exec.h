// The steps every process the sandbox user runs takes between fork and exec:
// a command started by the sandbox's init (init_process.cpp) and a side
// process started by the service for code mode (side_process.cpp). One
// function, so the two can never drift apart (red-team cases B12,
// B17). Internal to linux/.
//
// In order: every signal to its default action and none blocked; a session
// and process group of its own (setsid; fail closed); with a cgroup entry
// fd, the move under the commands' memory limit (fail closed); stdio from the given
// fds and nothing else open; with controlling_terminal, stdin made the new
// session's controlling terminal (TIOCSCTTY; fail closed); oom_score_adj 0, or 1000 with
// first_for_oom_killer (init is not, whether or not the service could
// protect it); core dumps off and nofile <= 4096; every capability dropped from
// the bounding set, then setgroups/setresgid/setresuid to the sandbox user
// (raw syscalls: glibc's setxid broadcast would wait for threads that a fork
// of the multi-threaded service does not have); optionally the parent-death
// signal again (a credential change clears it); the working directory opened
// beneath /workspace as the sandbox user (openat2 RESOLVE_BENEATH |
// RESOLVE_NO_MAGICLINKS); no_new_privs; the seccomp filter (required: a
// null filter fails closed); execve, with a bare argv[0] looked up on the
// image PATH only (never the workspace).
//
// Async-signal-safe: no allocation, no lock, no logging but one line on fd 2
// when the working directory or the exec fails. Exit codes: 125 for a failed
// step, 127 for a name that is not found, 126 for any other exec failure.
#pragma once

#include <linux/filter.h>
#include <sys/types.h>

#include <cstddef>

namespace airlock::linux_jail {

struct SandboxedExec {
  char** argv = nullptr;  // argv[0] absolute or a bare name
  char** envp = nullptr;
  const char* cwd = "";  // relative to /workspace; "" is /workspace
  int stdin_fd = -1;     // -1: /dev/null
  int stdout_fd = -1;
  int stderr_fd = -1;
  const sock_fprog* seccomp = nullptr;
  uid_t uid = 1000;  // inside the user namespace
  gid_t gid = 1000;
  bool die_with_parent = false;  // set PR_SET_PDEATHSIG SIGKILL after the uid change
  // oom_score_adj 1000 instead of 0: the process, never the init that
  // started it, is what the OOM killer takes at the sandbox's memory limit.
  // For commands started by the sandbox's init (see execSandboxed).
  bool first_for_oom_killer = false;
  // Cgroup::openCommandEntry() of the sandbox, or -1: "0" is written to it
  // so the process runs under the commands' memory limit and not beside it
  // with init. A failed write ends the process (125) instead of running it
  // outside the limit. Closed before exec.
  int cgroup_entry_fd = -1;
  // stdin_fd is a pseudo-terminal's slave side: after setsid it becomes
  // the session's controlling terminal (a side process started with
  // SideCommand::terminal), so job control, SIGWINCH and SIGHUP reach the
  // process as at a console. A failure ends the process (125).
  bool controlling_terminal = false;
};

[[noreturn]] void execSandboxed(const SandboxedExec& e) noexcept;

// Raw credential syscalls, for the callers' own earlier steps.
long rawSetresuid(uid_t uid) noexcept;
long rawSetresgid(gid_t gid) noexcept;
long rawSetgroupsEmpty() noexcept;

// Every signal to SIG_DFL and an empty signal mask.
void resetSignalDispositions() noexcept;

// strlen and a whole-string write(2), safe after fork.
std::size_t cstrlen(const char* s) noexcept;
void writeStr(int fd, const char* s) noexcept;

}  // namespace airlock::linux_jail
