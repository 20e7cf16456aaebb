#include "airlock/sandbox/host/workspace_scan.h"

#include <utility>

namespace airlock::host {

CommandWorkspaceScan::CommandWorkspaceScan(workspace::LocalWorkspaceHandle& handle,
                                           int workspace_fd, workspace::Snapshot& last,
                                           std::int64_t listing, std::int64_t hash_budget)
    : handle_(handle),
      workspace_fd_(workspace_fd),
      last_(last),
      listing_(listing),
      hash_budget_(hash_budget) {
  handle_.beginSandboxCommand();
  auto before = workspace::takeSnapshot(workspace_fd_);
  if (!before) return;
  for (auto& [path, entry] : *before) {
    auto it = last_.find(path);
    if (it == last_.end() || !it->second.sha256) continue;
    auto prev = it->second;
    prev.sha256.reset();
    if (prev == entry) entry.sha256 = it->second.sha256;
  }
  before_ = std::move(*before);
}

CommandWorkspaceScan::~CommandWorkspaceScan() {
  if (!finished_) handle_.recordSandboxChanges({}, false);
}

void CommandWorkspaceScan::finish(ExecutionResult& result, bool processes_gone) {
  finished_ = true;
  std::optional<workspace::Diff> diff;
  std::optional<workspace::Snapshot> after;
  if (processes_gone) {
    if (auto a = workspace::takeSnapshot(workspace_fd_)) after = std::move(*a);
    if (before_ && after) {
      auto d = workspace::diffSnapshots(*before_, *after, workspace_fd_, listing_, hash_budget_);
      if (d) diff = std::move(*d);
    }
  }
  if (diff) {
    result.files_changed = std::move(diff->changes);
    result.files_changed_truncated = diff->truncated;
    last_ = std::move(*after);
  } else {
    result.files_changed_truncated = true;
    last_.clear();
  }
  handle_.recordSandboxChanges(result.files_changed,
                               processes_gone && !result.files_changed_truncated);
}

}  // namespace airlock::host
