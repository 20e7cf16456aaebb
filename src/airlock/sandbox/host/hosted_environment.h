// The part of an ExecutionEnvironment adapter that is the same for every
// mechanism whose sandboxes run on this host: the record of a live sandbox,
// the checks and bookkeeping of provision (spec 000, "The three methods and
// what may fail"), the service's shutdown signal, and the port methods that
// only look a sandbox up (execute's non-streaming form, workspace, the
// capability channel). A mechanism derives its adapter from
// HostedEnvironment<its record> and its record from SandboxRecord, and
// writes only provision, executeStreaming, destroy and side processes.
#pragma once

#include <fcntl.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "airlock/core/command_validation.h"
#include "airlock/core/error.h"
#include "airlock/core/limits_defaults.h"
#include "airlock/core/thread_annotations.h"
#include "airlock/core/types.h"
#include "airlock/port/capability_channel.h"
#include "airlock/port/execution_environment.h"
#include "airlock/sandbox/host/cgroup.h"
#include "airlock/sandbox/host/command_admission.h"
#include "airlock/sandbox/host/command_supervisor.h"
#include "airlock/sandbox/host/sandbox_lifecycle.h"
#include "airlock/sandbox/host/sandbox_registry.h"
#include "airlock/sandbox/host/sandbox_state.h"
#include "airlock/sandbox/host/wall_clock.h"
#include "airlock/sandbox/host/workspace_scan.h"
#include "airlock/sandbox/sandbox_image.h"
#include "airlock/sandbox/sandbox_workspace.h"
#include "airlock/sys/unique_fd.h"
#include "airlock/workspace/local_workspace.h"
#include "airlock/workspace/snapshot.h"

namespace airlock::host {

// What every mechanism keeps of one live sandbox.
struct SandboxRecord {
  EnvironmentHandle handle;
  ResourceLimits limits;
  // The spec's, with the image's Env and the egress proxy's (initRecord).
  std::map<std::string, std::string> environment;
  std::shared_ptr<const SandboxImage> image;  // the one spec.image_digest names
  std::string cgroup_name;                    // cgroup prefix + environment id
  std::unique_ptr<Cgroup> cgroup;
  SandboxStateFile state;  // held for the sandbox's life; removed last
  std::shared_ptr<workspace::LocalWorkspaceHandle> workspace;  // holds the provenance record
  workspace::Snapshot last_snapshot;
  sys::UniqueFd workspace_fd;  // the workspace root
  sys::UniqueFd tmp_fd;        // /tmp, watched for DISK
  // The sandbox's life (sandbox_lifecycle.h): whether it may take a
  // command or a side process, what it runs, why it was lost. Every port
  // method asks it; a mechanism reports loss through life->markLost(why).
  const std::shared_ptr<SandboxLife> life = std::make_shared<SandboxLife>();
  // The channel commands go through, to the sandbox's first process (linux:
  // init's control socket; gvisor: the shim's connection). Open from setUp
  // to teardown; a command uses it under command_mutex.
  sys::UniqueFd control;
  // Code mode: the host directory seen read-only at /run/airlock.
  std::string capability_dir;
  // Set by destroy before it kills: the running command's kill reason.
  std::optional<EndRequest> end_request;
  // Held by the admitted command from admission to its end; destroy takes
  // it after the kill and before teardown, so nothing a command uses (the
  // control channel, the workspace scan's fds) is closed under it. Not the
  // busy rule: one command at a time is the lifecycle's.
  std::mutex command_mutex;
  // The running command's execution id and the cancel that ends it, while
  // a command with an id runs (ExecutionEnvironment::cancel).
  Mutex running_mutex;
  std::string running_execution_id GUARDED_BY(running_mutex);
  const CancelToken* running_cancel GUARDED_BY(running_mutex) = nullptr;
  // Orders side-process starts against teardown closing what they use
  // (linux: init's pidfd and the cgroup; gvisor: the side channel).
  std::mutex side_mutex;
};

// A side process that is one of its sandbox's activities until it is
// destroyed (sandbox_lifecycle.h): `process`, forwarded, holding `activity`.
std::unique_ptr<SideProcess> trackSideProcess(std::unique_ptr<SideProcess> process,
                                              ActivityScope activity);

// "The service is shutting down": a flag, and an eventfd that becomes
// readable at the same moment, which every supervised command polls.
class ServiceShutdown {
 public:
  Result<void> init();  // ExecutionUnavailable when no eventfd can be made
  void raise() noexcept;
  bool raised() const noexcept { return raised_.load(); }
  int fd() const noexcept { return event_.get(); }

 private:
  std::atomic<bool> raised_{false};
  sys::UniqueFd event_;
};

// ExecutionUnavailable: the service is shutting down.
Error shuttingDownError();

// cancel's validation and answer for a sandbox's running command (the
// record's running_execution_id and running_cancel): fires the cancel when
// `execution_id` names the running command, else NotFound.
Result<void> cancelRunning(SandboxRecord& record, std::string_view execution_id);

// Names a sandbox's running command for cancel(), from construction to
// destruction; no-op for a command without an execution id.
class RunningCommand {
 public:
  RunningCommand(SandboxRecord& record, const std::string& execution_id, const CancelToken* cancel);
  ~RunningCommand();
  RunningCommand(const RunningCommand&) = delete;
  RunningCommand& operator=(const RunningCommand&) = delete;

 private:
  SandboxRecord* record_;
};

// What provision's checks found: the spec's image and whether the sandbox
// gets egress.
struct ProvisionChecks {
  std::shared_ptr<const SandboxImage> image;
  bool egress = false;
};

// Provision's checks before anything exists: the service is not shutting
// down (ExecutionUnavailable); the spec's image digest is one of `images`,
// its limits are within `ceilings`, and egress is asked only of a service
// with an egress proxy (ExecutionRejected).
Result<ProvisionChecks> checkProvision(
    const EnvironmentSpec& spec, const std::vector<std::shared_ptr<const SandboxImage>>& images,
    const LimitCeilings& ceilings, bool has_egress_route, const ServiceShutdown& shutdown);

// A new sandbox's record: a fresh environment id naming `node_name`
// (newEnvironmentId), created at `clock`'s now, expiring `service_hard_cap`
// later; the
// spec's limits; its image, and the spec's environment with the image's Env
// (addImageEnvironment) and, when `egress`, the egress proxy variables;
// cgroup `cgroup_prefix` + id; its end request. ExecutionUnavailable when
// the end request cannot be made.
Result<void> initRecord(SandboxRecord& record, const EnvironmentSpec& spec,
                        const ProvisionChecks& checks, std::chrono::seconds service_hard_cap,
                        const std::string& cgroup_prefix, const std::string& node_name,
                        const WallClock& clock = {});

// "<tag><FNV-1a of state_dir, 8 hex>-": the name prefix of the cgroups of a
// service with this state directory (each sweeps only its own).
std::string cgroupPrefixFor(const std::string& tag, const std::string& state_dir);

// mkdir -p `path`, then chmod it to `mode` (each created parent gets
// `mode` too). ExecutionUnavailable naming the directory.
Result<void> makeDirectories(const std::string& path, mode_t mode);

// Runs `undo` at scope exit unless dismissed: provision's "everything so far
// is torn down on any failure".
template <class F>
class UndoUnlessDismissed {
 public:
  explicit UndoUnlessDismissed(F undo) : undo_(std::move(undo)) {}
  UndoUnlessDismissed(const UndoUnlessDismissed&) = delete;
  UndoUnlessDismissed& operator=(const UndoUnlessDismissed&) = delete;
  ~UndoUnlessDismissed() {
    if (armed_) undo_();
  }
  void dismiss() noexcept { armed_ = false; }

 private:
  F undo_;
  bool armed_ = true;
};

// The adapter base. A mechanism supplies setUp and teardown (provision is
// here), destroyTaken (destroy is here), launchSideProcess, and for execute
// runCommand (usually one superviseAdmitted with its channel and limit
// sources; superviseNamed for a mechanism without a cgroup or a workspace
// directory, the fake); its record's lifecycle (SandboxRecord::life) says whether a
// command or side process can be taken, and the mechanism's channel reports
// loss to it (life->markLost).
template <class Sandbox>
class HostedEnvironment : public ExecutionEnvironment {
 public:
  // checkProvision, the record (initRecord), then setUp; whatever setUp
  // made is torn down when it fails. The sandbox is live once setUp
  // returns.
  Result<EnvironmentHandle> provision(const EnvironmentSpec& spec) final {
    auto checks =
        checkProvision(spec, policy_.images, policy_.ceilings, policy_.has_egress_route, shutdown_);
    if (!checks) return tl::unexpected(checks.error());
    auto sb = std::make_shared<Sandbox>();
    if (auto r = initRecord(*sb, spec, *checks, policy_.service_hard_cap, policy_.cgroup_prefix,
                            policy_.node_name, policy_.clock);
        !r)
      return tl::unexpected(r.error());
    UndoUnlessDismissed undo([&] {
      sb->life->destroying();
      teardown(*sb);
      sb->life->destroyed();
    });
    if (auto r = setUp(*sb, spec, checks->egress); !r) return tl::unexpected(r.error());
    if (auto r = sb->life->setUp(); !r) return tl::unexpected(r.error());
    undo.dismiss();
    sandboxes_.add(sb);
    return sb->handle;
  }
  // Every check of command_admission.h, then runCommand.
  Result<ExecutionResult> executeStreaming(const EnvironmentHandle& handle,
                                           const ExecutionCommand& command,
                                           const CancelToken* cancel,
                                           const OutputSink& sink) final {
    auto admitted = admitExecute(handle, command);
    if (!admitted) return tl::unexpected(admitted.error());
    return runCommand(CommandRun{*admitted, command, cancel, sink});
  }
  Result<ExecutionResult> execute(const EnvironmentHandle& handle, const ExecutionCommand& command,
                                  const CancelToken* cancel = nullptr) final {
    return executeStreaming(handle, command, cancel, {});
  }
  // The registry's lookup (another tenant's handle refused), then the
  // running command's cancel when the id is its.
  Result<void> cancel(const EnvironmentHandle& handle, std::string_view execution_id) final {
    if (auto valid = checkExecutionIdToCancel(execution_id); !valid) return valid;
    auto sb = sandboxes_.live(handle, HandleMatch::kTenantRefused);
    if (!sb) return tl::unexpected(sb.error());
    return cancelRunning(**sb, execution_id);
  }
  Result<std::shared_ptr<WorkspaceHandle>> workspace(const EnvironmentHandle& handle) final {
    auto sb = sandboxes_.live(handle);
    if (!sb) return tl::unexpected(sb.error());
    return std::shared_ptr<WorkspaceHandle>(
        std::make_shared<SandboxWorkspace>((*sb)->workspace, handle.environment_id));
  }
  // The registry's lookup (another tenant's handle refused), the sandbox
  // usable (its lifecycle), then the in-process channel over the record's
  // capability directory (ExecutionUnavailable, "this mechanism has no
  // capability channel", for a record without one).
  Result<std::unique_ptr<CapabilityChannel>> openCapabilityChannel(
      const EnvironmentHandle& handle) final {
    auto sb = sandboxes_.live(handle, HandleMatch::kTenantRefused);
    if (!sb) return tl::unexpected(sb.error());
    if (auto usable = (*sb)->life->checkUsable(); !usable) return tl::unexpected(usable.error());
    if ((*sb)->capability_dir.empty()) return ExecutionEnvironment::openCapabilityChannel(handle);
    sys::UniqueFd fd(
        ::open((*sb)->capability_dir.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd.valid())
      return failErrno(ErrorCode::kExecutionUnavailable, "open the capability directory", errno);
    return openDirectoryCapabilityChannel(std::move(fd));
  }
  // The sandbox leaves the registry and its running command is told why it
  // ends (beginDestroy), then the mechanism's destroyTaken, after which its
  // lifecycle is destroyed. Idempotent: a handle with no live sandbox is Ok.
  Result<void> destroy(const EnvironmentHandle& handle) final {
    auto sb = beginDestroy(handle);
    if (!sb) return {};
    const std::shared_ptr<SandboxLife> life = sb->life;
    destroyTaken(std::move(sb));
    life->destroyed();
    return {};
  }
  // The registry's extend at the policy's clock (sandbox_registry.h).
  Result<EnvironmentHandle> extend(const EnvironmentHandle& handle, Timestamp expires_at) final {
    return sandboxes_.extend(handle, expires_at, wallNow(policy_.clock));
  }
  // Not while shutting down; the registry's lookup (another tenant's
  // handle refused); a side activity of the sandbox's lifecycle (refused
  // when it is lost); then the mechanism's launchSideProcess. The process
  // is one of the sandbox's activities until it is destroyed.
  Result<std::unique_ptr<SideProcess>> startSideProcess(const EnvironmentHandle& handle,
                                                        const SideCommand& command) final {
    if (shutdown_.raised()) return tl::unexpected(shuttingDownError());
    auto sb = sandboxes_.live(handle, HandleMatch::kTenantRefused);
    if (!sb) return tl::unexpected(sb.error());
    auto activity = beginActivity((*sb)->life, Activity::Kind::kSide);
    if (!activity) return tl::unexpected(activity.error());
    auto process = launchSideProcess(*sb, command);
    if (!process) return tl::unexpected(process.error());
    return trackSideProcess(std::move(*process), std::move(*activity));
  }
  void shutdown() noexcept final { shutdown_.raise(); }
  // Before the first call: the shutdown signal's eventfd.
  Result<void> initHost() { return shutdown_.init(); }

 protected:
  // What provision checks and names a new sandbox by.
  struct HostPolicy {
    std::chrono::seconds service_hard_cap;
    // The images this service runs; a spec names one by its digest.
    std::vector<std::shared_ptr<const SandboxImage>> images;
    LimitCeilings ceilings;
    bool has_egress_route = false;  // egress may be asked for
    std::string cgroup_prefix;      // cgroup names: prefix + environment id
    std::string node_name;          // named by every environment id; "": none
    // created_at, expires_at and the expiry checks (wall_clock.h); empty:
    // the system clock.
    WallClock clock = {};
  };
  explicit HostedEnvironment(HostPolicy policy) : policy_(std::move(policy)) {}

  // One execute, admitted, for the mechanism's runCommand.
  struct CommandRun {
    AdmittedCommand<Sandbox>& admitted;
    const ExecutionCommand& command;
    const CancelToken* cancel;
    const OutputSink& sink;
  };

  // The mechanism's part of provision: everything of the sandbox beyond
  // its record (state file, cgroup, mounts, the sandbox's first process).
  virtual Result<void> setUp(Sandbox& sandbox, const EnvironmentSpec& spec, bool egress) = 0;
  // Undoes whatever setUp or a later call made of the sandbox, in any
  // state (called for a failed provision and by destroy).
  virtual void teardown(Sandbox& sandbox) = 0;
  // The mechanism's part of an execute, once admitted.
  virtual Result<ExecutionResult> runCommand(const CommandRun& run) = 0;
  // The mechanism's part of destroy, for a sandbox already out of the
  // registry: kill it first (a command running in another thread then ends
  // with the reason beginDestroy set), then tear it down.
  virtual void destroyTaken(std::shared_ptr<Sandbox> sandbox) = 0;
  // The mechanism's part of startSideProcess, for a live sandbox of the
  // caller's tenant. Under side_mutex it asks the lifecycle again
  // (life->checkUsable): a destroy may have begun since the start was let
  // in.
  virtual Result<std::unique_ptr<SideProcess>> launchSideProcess(
      const std::shared_ptr<Sandbox>& sandbox, const SideCommand& command) = 0;

  // Admission's working-directory check (command_admission.h step 5):
  // `cwd` a directory beneath the record's workspace_fd. A mechanism whose
  // workspace is not a directory checks it its own way.
  virtual Result<void> checkWorkingDirectory(Sandbox& sandbox, const std::string& cwd) {
    return host::checkWorkingDirectory(sandbox.workspace_fd.get(), cwd);
  }

  // Destroys every live sandbox (the adapter's destructor).
  void destroyAll() {
    for (const auto& h : sandboxes_.handles()) (void)destroy(h);
  }
  // destroy's first step: the sandbox leaves the registry (null when there
  // was none: destroy is idempotent), its lifecycle becomes destroying and
  // its running command is told why it ends.
  std::shared_ptr<Sandbox> beginDestroy(const EnvironmentHandle& handle) {
    auto sb = sandboxes_.take(handle.environment_id);
    if (!sb) return sb;
    sb->life->destroying();
    sb->end_request->request(
        destroyKillReason(shutdown_.raised(), sb->handle.expires_at, wallNow(policy_.clock)));
    return sb;
  }

  // Every check of an execute before its command runs (command_admission.h,
  // in order): the command, the service not shutting down, then
  // admitCommand (sandbox_registry.h).
  Result<AdmittedCommand<Sandbox>> admitExecute(const EnvironmentHandle& handle,
                                                const ExecutionCommand& command) {
    auto cwd = checkCommand(command);
    if (!cwd) return tl::unexpected(cwd.error());
    if (shutdown_.raised()) return tl::unexpected(shuttingDownError());
    return admitCommand(
        *this, sandboxes_, handle, command, *cwd, policy_.service_hard_cap, policy_.clock,
        [this](Sandbox& sb, const std::string& dir) { return checkWorkingDirectory(sb, dir); });
  }

  // What a mechanism's command runs under besides its channel.
  struct CommandLimits {
    std::vector<int> disk_fds;           // DISK: the sandbox's writable filesystems
    std::vector<LimitSource*> sources;   // the mechanism's own enforcers, after the cgroup's
    std::int64_t files_changed_listing;  // the result's listing bound
    // Runs once the command is over, before the workspace scan finishes.
    std::function<void(const ExecutionResult&)> after_supervision;
    // Enforcers consulted before the cgroup's: the first peak a source
    // reports is the result's peak_memory_bytes.
    std::vector<LimitSource*> sources_first = {};
  };

  // An admitted command through `channel` (command_supervisor.h), under the
  // sandbox's cgroup (MEMORY, PIDS), `limits.sources` and DISK, inside the
  // workspace scan (workspace_scan.h). A channel lost during it has the
  // sandbox's cgroup killed, so nothing of the command writes after this; a
  // command the sandbox's expires_at ended expires the sandbox.
  Result<ExecutionResult> superviseAdmitted(const CommandRun& run, CommandChannel& channel,
                                            CommandLimits limits) {
    AdmittedCommand<Sandbox>& admitted = run.admitted;
    Sandbox& sb = *admitted.sandbox;
    CommandWorkspaceScan scan(*sb.workspace, sb.workspace_fd.get(), sb.last_snapshot,
                              limits.files_changed_listing, 2 * sb.limits.workspace_bytes);
    CgroupLimits cgroup_limits(*sb.cgroup);
    FilesystemFullLimit disk(std::move(limits.disk_fds));
    std::vector<LimitSource*> sources = limits.sources_first;
    sources.push_back(&cgroup_limits);
    sources.insert(sources.end(), limits.sources.begin(), limits.sources.end());
    sources.push_back(&disk);
    auto result = superviseNamed(run, channel, sources);
    if (channel.lost() && sb.cgroup) (void)sb.cgroup->killAll();
    if (!result) return result;
    if (limits.after_supervision) limits.after_supervision(*result);
    scan.finish(*result, !channel.lost());
    afterCommand(*this, sandboxes_, admitted, *result);
    return result;
  }

  // An admitted command through `channel` under `sources`
  // (superviseCommand, on `clock`; null: the steady clock), with the
  // admitted timeout and expiry, the caller's cancel, the service's shutdown
  // and the sandbox's end request. The command is named for cancel() by its
  // execution id while the supervisor runs it, and only then (not during a
  // workspace scan after it). Result and errors: superviseCommand's; the
  // caller adds files_changed and calls afterCommand.
  Result<ExecutionResult> superviseNamed(const CommandRun& run, CommandChannel& channel,
                                         std::span<LimitSource* const> sources,
                                         SupervisionClock* clock = nullptr) {
    Sandbox& sb = *run.admitted.sandbox;
    std::optional<CancelToken> by_id;  // cancel(handle, execution_id)
    if (!run.command.execution_id.empty()) {
      auto token = CancelToken::create();
      if (!token) return tl::unexpected(token.error());
      by_id.emplace(std::move(*token));
    }
    const RunningCommand running(sb, run.command.execution_id, by_id ? &*by_id : nullptr);
    SupervisionInputs inputs{&run.command,
                             run.admitted.timeout,
                             run.admitted.expires_in,
                             sb.limits.pids_max,
                             run.cancel,
                             shutdown_.fd(),
                             &*sb.end_request,
                             &run.sink,
                             by_id ? &*by_id : nullptr};
    inputs.clock = clock;
    // An extension while the command runs lets it run on to the new
    // expires_at (its own timeout still applies).
    inputs.expiry_moved = [this, &sb, admitted = run.admitted.expires_at] {
      return std::chrono::duration_cast<std::chrono::milliseconds>(sandboxes_.expiresAt(sb) -
                                                                   admitted);
    };
    return superviseCommand(channel, sources, inputs);
  }

  const HostPolicy policy_;
  SandboxRegistry<Sandbox> sandboxes_;
  ServiceShutdown shutdown_;
};

}  // namespace airlock::host
