// Messages between the execution service and a sandbox's init over one
// SOCK_SEQPACKET socketpair (one message per packet). Internal to linux/.
//
// Each message type says what it carries and when it is sent.
#pragma once

#include <cstdint>

namespace airlock::linux_jail {

enum class MessageType : std::uint32_t {
  // Service -> init, from 1.
  // After the uid/gid maps and cgroup membership are in place.
  kGo = 1,
  // Header + payload "cwd\0argv0\0...envp0\0..." and SCM_RIGHTS [stdin read
  // end (only if has_stdin), stdout write, stderr write].
  kRun,
  // End the command: kill every process in the sandbox except init and the
  // side processes (code mode's effects and what stays in their sessions:
  // jobs outlive commands), found through the namespace's /proc and killed
  // again until a pass finds none (a fork cannot slip past the last pass),
  // reap them, answer kExited. Sent at a limit, a timeout or a
  // cancel, and in the normal case once the main process has exited and
  // stdout and stderr have reached end-of-file (every holder closed them).
  kEnd,

  // Init -> service, from 10.
  // Setup done; SCM_RIGHTS [/workspace, /tmp, /dev/shm directory fds] (the
  // service watches them fill up: DISK).
  kReady = 10,
  // Step index + errno; init exits.
  kSetupFailed,
  // The answer to kEnd, once every process of the command is gone: the main
  // process's wait status (reaped in the kill if it was still running) and
  // the CPU of everything the command ran.
  kExited,
  // The command could not be started (status = errno: fork refused at the
  // pids limit, or a malformed request).
  kRunFailed,
  // The wait status of the command's main process; the processes it started
  // keep running until the service sends kEnd.
  kMainExited,
};
// The values on the wire: kGo..kEnd are 1..3, kReady..kMainExited 10..14
// (each enumerator after the first of its direction counts up by one).
static_assert(static_cast<std::uint32_t>(MessageType::kEnd) == 3 &&
              static_cast<std::uint32_t>(MessageType::kMainExited) == 14);

struct MessageHeader {
  MessageType type;
  std::uint32_t argc = 0;
  std::uint32_t envc = 0;
  std::uint32_t has_stdin = 0;
  std::uint32_t payload_bytes = 0;
  std::int32_t status = 0;  // kExited: wait status; kSetupFailed: errno
  std::int32_t step = 0;    // kSetupFailed: index into the setup plan
  std::int32_t reserved = 0;
  std::int64_t cpu_usec = 0;  // kExited: user+system CPU of everything the command ran
};

// Largest kRun payload (argv is capped at 64 KiB by validation; environment
// values at the rest).
inline constexpr std::uint32_t kMaxRunPayload = 192 * 1024;
inline constexpr std::uint32_t kMaxArgs = 4096;

}  // namespace airlock::linux_jail
