// The one output loop of a side process (execution_environment.h,
// SideProcess): code mode's proc.run and its jobs both run their process
// through pumpSideProcess (spec 001, "cap/proc" and "cap/job").
//
// What it does, on the calling thread, until the process is over:
// * reads stdout and stderr as they are written and hands each chunk to
//   SidePumpHooks::output (no cap here: the caller keeps what it wants);
// * feeds SidePumpHooks::stdin_data, when given, without blocking, and
//   closes stdin after it (and once the process has exited);
// * takes the main process's wait status (SidePumpHooks::exited);
// * once the main process has exited, kills what is left of its process
//   group and drains the pipes for at most kSideDrain: a process that
//   escaped the group may hold them open, and is not waited for;
// * ends early when stop_fd is readable (kStopped) or at the deadline
//   (kDeadline), killing the process group first. With
//   continue_after_deadline the killed process's exit and the rest of its
//   output are still collected, and the outcome says kDeadline at the end.
//
// Ownership: the process and the hooks are borrowed for the call. The pump
// owns the pipe ends it closes (stdout/stderr at their end, stdin when it
// feeds it); a caller that writes stdin itself passes no stdin_data, and
// the pump never touches stdin. Errors: a failed poll ends the loop
// (kPollFailed), with the process group killed.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string_view>

#include "airlock/sandbox/execution_environment.h"

namespace airlock {

// How long the pipes are drained after the main process has exited.
inline constexpr auto kSideDrain = std::chrono::seconds(2);

struct SidePumpHooks {
  using Clock = std::chrono::steady_clock;
  // Fed to the process's stdin, then stdin is closed. nullopt: the pump
  // leaves stdin alone (the caller writes it, or there is none).
  std::optional<std::string_view> stdin_data;
  // Each chunk as it is read (is_stdout false: stderr). Required.
  std::function<void(bool is_stdout, std::string_view chunk)> output;
  // A stream's end: end-of-file, or cut when the drain ran out. Optional.
  std::function<void(bool is_stdout)> output_ended;
  // The main process's wait status, once it has exited. Optional.
  std::function<void(int wait_status)> exited;
  int stop_fd = -1;                           // readable: stop now; -1: none
  std::optional<Clock::time_point> deadline;  // none: no deadline
  bool continue_after_deadline = false;
};

enum class SidePumpEnd {
  kFinished,    // the process exited and its output is drained
  kStopped,     // stop_fd became readable
  kDeadline,    // the deadline passed
  kPollFailed,  // poll failed (the process group was killed)
};

struct SidePumpOutcome {
  SidePumpEnd end = SidePumpEnd::kFinished;
  std::optional<int> wait_status;  // the main process's, when it was seen to exit
};

SidePumpOutcome pumpSideProcess(SideProcess& process, const SidePumpHooks& hooks);

}  // namespace airlock
