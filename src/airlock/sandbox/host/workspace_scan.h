// The workspace bookkeeping around one command, for every mechanism whose
// workspace is a local directory (spec 000, "files_changed" of
// ExecutionResult; "Provenance, and why the handle answers it").
//
// Construction, before the command starts: the workspace handle is told a
// command begins (from then until finish(), tool writes are not recorded
// TOOL_WRITTEN), and the "before" snapshot is taken, carrying the known
// hashes of unchanged files forward from the previous command's snapshot. A
// workspace the walk cannot take (deeper than its bounds) does not stop the
// command: its result then has no listing and says so.
// finish(), once no process of the command is left: the "after" snapshot,
// the diff into files_changed (at most `listing` entries; at most
// `hash_budget` bytes hashed, twice the workspace's byte limit, so sparse
// files are not read) and the provenance record. A scan that is never
// finished (an error return) records "not sure": no TOOL_WRITTEN entry
// survives.
#pragma once

#include <cstdint>
#include <optional>

#include "airlock/core/types.h"
#include "airlock/workspace/local_workspace.h"
#include "airlock/workspace/snapshot.h"

namespace airlock::host {

class CommandWorkspaceScan {
 public:
  // `workspace_fd` (the workspace root, borrowed) and `last` (the previous
  // command's snapshot, updated by finish) must outlive the scan.
  CommandWorkspaceScan(workspace::LocalWorkspaceHandle& handle, int workspace_fd,
                       workspace::Snapshot& last, std::int64_t listing, std::int64_t hash_budget);
  ~CommandWorkspaceScan();
  CommandWorkspaceScan(const CommandWorkspaceScan&) = delete;
  CommandWorkspaceScan& operator=(const CommandWorkspaceScan&) = delete;

  // Fills result.files_changed and files_changed_truncated. processes_gone
  // false (the sandbox was lost: something may still write): no listing,
  // files_changed_truncated set, and the provenance record learns "not sure".
  void finish(ExecutionResult& result, bool processes_gone);

 private:
  workspace::LocalWorkspaceHandle& handle_;
  int workspace_fd_;
  workspace::Snapshot& last_;
  std::int64_t listing_;
  std::int64_t hash_budget_;
  std::optional<workspace::Snapshot> before_;
  bool finished_ = false;
};

}  // namespace airlock::host
