#include "airlock/sandbox/host/hosted_environment.h"

#include <sys/eventfd.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>

#include "airlock/core/environment_tiers.h"
#include "airlock/core/ids.h"
#include "airlock/port/egress_route.h"
#include "airlock/sys/io.h"

namespace airlock::host {

Result<void> ServiceShutdown::init() {
  event_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!event_.valid()) return failErrno(ErrorCode::kExecutionUnavailable, "eventfd", errno);
  return {};
}

void ServiceShutdown::raise() noexcept {
  raised_.store(true);
  std::uint64_t one = 1;
  (void)sys::writeAll(event_.get(), &one, sizeof one);
}

Error shuttingDownError() {
  return Error{ErrorCode::kExecutionUnavailable, 0, "the execution service is shutting down"};
}

Result<void> cancelRunning(SandboxRecord& record, std::string_view execution_id) {
  MutexLock lk(record.running_mutex);
  if (record.running_cancel == nullptr || record.running_execution_id != execution_id)
    return fail(ErrorCode::kNotFound,
                "no command with execution_id \"" + std::string(execution_id) +
                    "\" is running in environment " + record.handle.environment_id);
  record.running_cancel->cancel();
  return {};
}

RunningCommand::RunningCommand(SandboxRecord& record, const std::string& execution_id,
                               const CancelToken* cancel)
    : record_(cancel != nullptr ? &record : nullptr) {
  if (record_ == nullptr) return;
  MutexLock lk(record.running_mutex);
  record.running_execution_id = execution_id;
  record.running_cancel = cancel;
}

RunningCommand::~RunningCommand() {
  if (record_ == nullptr) return;
  MutexLock lk(record_->running_mutex);
  record_->running_execution_id.clear();
  record_->running_cancel = nullptr;
}

namespace {

class TrackedSideProcess final : public SideProcess {
 public:
  TrackedSideProcess(std::unique_ptr<SideProcess> process, ActivityScope activity)
      : activity_(std::move(activity)), process_(std::move(process)) {}
  SidePumpOutcome pump(const SidePumpHooks& hooks) override { return process_->pump(hooks); }
  SideInputEnd writeStdin(std::string_view bytes, Clock::time_point deadline,
                          int stop_fd) override {
    return process_->writeStdin(bytes, deadline, stop_fd);
  }
  void closeStdin() noexcept override { process_->closeStdin(); }
  bool stdinOpen() const noexcept override { return process_->stdinOpen(); }
  std::optional<int> exitStatus() override { return process_->exitStatus(); }
  void killGroup() noexcept override { process_->killGroup(); }
  Result<void> resizeTerminal(const TerminalSize& size) override {
    return process_->resizeTerminal(size);
  }

 private:
  ActivityScope activity_;
  std::unique_ptr<SideProcess> process_;  // destroyed (killed, reaped) before the activity ends
};

}  // namespace

std::unique_ptr<SideProcess> trackSideProcess(std::unique_ptr<SideProcess> process,
                                              ActivityScope activity) {
  return std::make_unique<TrackedSideProcess>(std::move(process), std::move(activity));
}

Result<ProvisionChecks> checkProvision(
    const EnvironmentSpec& spec, const std::vector<std::shared_ptr<const SandboxImage>>& images,
    const LimitCeilings& ceilings, bool has_egress_route, const ServiceShutdown& shutdown) {
  if (shutdown.raised()) return tl::unexpected(shuttingDownError());
  ProvisionChecks checks;
  std::string known;
  for (const auto& image : images) {
    if (image->digest == spec.image_digest) checks.image = image;
    known += (known.empty() ? "" : ", ") + image->digest;
  }
  if (!checks.image)
    return fail(ErrorCode::kExecutionRejected,
                "unknown image digest " + spec.image_digest + " (this service runs " + known + ")");
  if (auto r = checkLimits(spec.limits, ceilings); !r) return tl::unexpected(r.error());
  checks.egress = egressEnabled(spec.egress);
  if (checks.egress && !has_egress_route)
    return fail(ErrorCode::kExecutionRejected,
                "egress was requested, but this execution service has no egress proxy");
  return checks;
}

Result<void> initRecord(SandboxRecord& record, const EnvironmentSpec& spec,
                        const ProvisionChecks& checks, std::chrono::seconds service_hard_cap,
                        const std::string& cgroup_prefix, const std::string& node_name,
                        const WallClock& clock) {
  const Timestamp created = wallNow(clock);
  record.handle = EnvironmentHandle{newEnvironmentId(node_name, created),
                                    spec.tenant_id,
                                    spec.run_id,
                                    spec.lease_epoch,
                                    created,
                                    created + service_hard_cap};
  record.cgroup_name = cgroup_prefix + record.handle.environment_id;
  record.limits = spec.limits;
  record.image = checks.image;
  record.environment = spec.environment;
  addImageEnvironment(record.environment, checks.image->env);
  if (checks.egress) addEgressProxyVariables(record.environment);
  auto end_request = EndRequest::create();
  if (!end_request) return tl::unexpected(end_request.error());
  record.end_request = std::move(*end_request);
  return {};
}

std::string cgroupPrefixFor(const std::string& tag, const std::string& state_dir) {
  std::uint32_t h = 2166136261u;  // FNV-1a
  for (unsigned char c : state_dir) h = (h ^ c) * 16777619u;
  char buf[16];
  (void)std::snprintf(buf, sizeof buf, "%08x", h);  // eight hex digits: always fits
  return tag + buf + "-";
}

Result<void> makeDirectories(const std::string& path, mode_t mode) {
  for (std::size_t i = 1; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      const std::string cur = path.substr(0, i);
      if (::mkdir(cur.c_str(), mode) != 0 && errno != EEXIST)
        return failErrno(ErrorCode::kExecutionUnavailable, "mkdir " + cur, errno);
    }
  }
  if (::chmod(path.c_str(), mode) != 0)
    return failErrno(ErrorCode::kExecutionUnavailable, "chmod " + path, errno);
  return {};
}

}  // namespace airlock::host
