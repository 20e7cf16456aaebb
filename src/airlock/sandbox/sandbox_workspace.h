// What an adapter's workspace() hands out: a view of the sandbox's
// WorkspaceHandle that stops working when the sandbox is destroyed. The
// sandbox owns the real handle (and with it the workspace fd); the view holds
// only a weak reference, so nothing a caller keeps can hold a destroyed
// workspace alive. Every call, openExport() included, is forwarded (an export's
// reader, once opened, keeps its own file); a call
// after destroy is ExecutionRejected naming the environment.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "airlock/port/execution_environment.h"

namespace airlock {

class SandboxWorkspace final : public WorkspaceHandle {
 public:
  SandboxWorkspace(std::weak_ptr<WorkspaceHandle> inner, std::string environment_id)
      : inner_(std::move(inner)), id_(std::move(environment_id)) {}
  Result<std::string> read(const std::string& path) override {
    return with([&](WorkspaceHandle& w) { return w.read(path); });
  }
  Result<void> write(const std::string& path, std::string_view data) override {
    return with([&](WorkspaceHandle& w) { return w.write(path, data); });
  }
  Result<void> placeFile(const std::string& path, std::string_view data) override {
    return with([&](WorkspaceHandle& w) { return w.placeFile(path, data); });
  }
  Result<void> mkdir(const std::string& path) override {
    return with([&](WorkspaceHandle& w) { return w.mkdir(path); });
  }
  Result<std::vector<WorkspaceEntry>> listdir(const std::string& path) override {
    return with([&](WorkspaceHandle& w) { return w.listdir(path); });
  }
  Result<WorkspaceProvenance> provenance(const std::string& path) override {
    return with([&](WorkspaceHandle& w) { return w.provenance(path); });
  }
  Result<void> remove(const std::string& path, bool recursive) override {
    return with([&](WorkspaceHandle& w) { return w.remove(path, recursive); });
  }
  Result<void> rename(const std::string& from, const std::string& to, bool replace) override {
    return with([&](WorkspaceHandle& w) { return w.rename(from, to, replace); });
  }
  Result<WorkspaceStat> stat(const std::string& path) override {
    return with([&](WorkspaceHandle& w) { return w.stat(path); });
  }
  Result<WorkspaceFileStream> openExport(const std::string& path, std::int64_t max_bytes) override {
    return with([&](WorkspaceHandle& w) { return w.openExport(path, max_bytes); });
  }

 private:
  template <class F>
  auto with(F&& f) -> decltype(f(std::declval<WorkspaceHandle&>())) {
    auto live = inner_.lock();
    if (!live) return fail(ErrorCode::kExecutionRejected, "environment " + id_ + " was destroyed");
    return f(*live);
  }
  std::weak_ptr<WorkspaceHandle> inner_;
  std::string id_;
};

}  // namespace airlock
