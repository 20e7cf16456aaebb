// The live sandboxes of one mechanism's adapter, and the one lookup every
// port method makes before it touches a sandbox (spec 000, "The three
// methods and what may fail").
//
// A sandbox is added once provision has finished it and taken out by
// destroy (before destroy kills it, so no new call finds it). The lookup
// answers, in this order:
//   - EnvironmentGone when the id names no live sandbox: "environment <id>
//     has expired" when it was destroyed at its expires_at (the last
//     ExpiredIds::kCapacity such ids are remembered), else "unknown or
//     destroyed environment <id>";
//   - when the handle is not the record's: HandleMatch::kTenant compares the
//     tenant (SandboxEscapeSuspected, "environment does not belong to this
//     tenant"); HandleMatch::kTenantRefused too, refusing with
//     ExecutionRejected (code mode's side processes and capability
//     channel); HandleMatch::kOwner the tenant, run and lease epoch
//     (SandboxEscapeSuspected, command_admission.h ownerMismatch; the caller
//     then destroys the sandbox).
//
// Thread-safe: one mutex guards the map and the expired ids, and is never
// held while a sandbox is used (annotated for clang's thread-safety
// analysis, core/thread_annotations.h).
//
// A sandbox's lifecycle (sandbox_lifecycle.h) is its record's own
// (SandboxRecord::life) under the lifecycle's own lock, not this one: the
// calls that move it (a command's channel reporting loss, a side process
// ending) hold the record, and a side process may outlive the adapter and
// its registry. Membership here and the lifecycle agree this way: a record
// is added ready (provision has moved it out of provisioning) and leaves
// through take, after which destroy moves it to destroying and, once the
// mechanism is done, destroyed.
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "airlock/core/error.h"
#include "airlock/core/thread_annotations.h"
#include "airlock/core/types.h"
#include "airlock/port/execution_environment.h"
#include "airlock/sandbox/host/command_admission.h"
#include "airlock/sandbox/host/sandbox_lifecycle.h"
#include "airlock/sandbox/host/wall_clock.h"

namespace airlock::host {

// Which fields of a handle must be the sandbox record's.
enum class HandleMatch {
  kTenant,         // workspace
  kTenantRefused,  // side processes, the capability channel
  kOwner,          // execute: tenant, run and lease epoch
};

// EnvironmentGone for an id no live sandbox has (messages above).
Error goneError(const std::string& environment_id, bool expired);
// "environment does not belong to this tenant": SandboxEscapeSuspected, or
// ExecutionRejected for HandleMatch::kTenantRefused.
Error foreignTenantError(HandleMatch match = HandleMatch::kTenant);

// The ids of sandboxes destroyed at their expires_at, oldest first, at most
// kCapacity (the oldest is then forgotten and reads as unknown). Not
// thread-safe: SandboxRegistry guards it.
class ExpiredIds {
 public:
  static constexpr std::size_t kCapacity = 4096;
  void add(const std::string& environment_id);
  bool contains(const std::string& environment_id) const;
  std::size_t size() const noexcept { return ids_.size(); }

 private:
  std::deque<std::string> ids_;
};

// `Sandbox` has a member `EnvironmentHandle handle` (the record provision
// returned). The registry shares ownership of each sandbox with the calls
// using it.
template <class Sandbox>
class SandboxRegistry {
 public:
  // Keyed by sandbox->handle.environment_id.
  void add(std::shared_ptr<Sandbox> sandbox) EXCLUDES(mu_) {
    MutexLock lk(mu_);
    const std::string id = sandbox->handle.environment_id;
    live_[id] = std::move(sandbox);
  }

  // Removes the sandbox and returns it; null when there is none (destroy is
  // idempotent).
  std::shared_ptr<Sandbox> take(const std::string& environment_id) EXCLUDES(mu_) {
    MutexLock lk(mu_);
    auto it = live_.find(environment_id);
    if (it == live_.end()) return nullptr;
    auto sandbox = std::move(it->second);
    live_.erase(it);
    return sandbox;
  }

  // Remembers that the sandbox was destroyed at its expires_at.
  void noteExpired(const std::string& environment_id) EXCLUDES(mu_) {
    MutexLock lk(mu_);
    expired_.add(environment_id);
  }

  // The lookup described above.
  Result<std::shared_ptr<Sandbox>> live(const EnvironmentHandle& handle,
                                        HandleMatch match = HandleMatch::kTenant) const
      EXCLUDES(mu_) {
    MutexLock lk(mu_);
    auto it = live_.find(handle.environment_id);
    if (it == live_.end())
      return tl::unexpected(
          goneError(handle.environment_id, expired_.contains(handle.environment_id)));
    const EnvironmentHandle& record = it->second->handle;
    if (match == HandleMatch::kOwner && !sameOwner(record, handle))
      return tl::unexpected(ownerMismatch(handle.environment_id));
    if (record.tenant_id != handle.tenant_id) return tl::unexpected(foreignTenantError(match));
    return it->second;
  }

  // Moves a live sandbox's expires_at to `expires_at` when that is later,
  // and returns its record as it now is. Errors: the lookup's
  // (HandleMatch::kTenantRefused), and EnvironmentGone "has expired" when
  // the record's expires_at is not after `now` (the reaper has not come by
  // yet). The record's expires_at is written under the registry's lock, so
  // it is read with expiresAt or record while the sandbox is live.
  Result<EnvironmentHandle> extend(const EnvironmentHandle& handle, Timestamp expires_at,
                                   Timestamp now) EXCLUDES(mu_) {
    MutexLock lk(mu_);
    auto it = live_.find(handle.environment_id);
    if (it == live_.end())
      return tl::unexpected(
          goneError(handle.environment_id, expired_.contains(handle.environment_id)));
    EnvironmentHandle& record = it->second->handle;
    if (record.tenant_id != handle.tenant_id)
      return tl::unexpected(foreignTenantError(HandleMatch::kTenantRefused));
    if (record.expires_at <= now) return tl::unexpected(goneError(handle.environment_id, true));
    if (expires_at > record.expires_at) record.expires_at = expires_at;
    return record;
  }
  Timestamp expiresAt(const Sandbox& sandbox) const EXCLUDES(mu_) {
    MutexLock lk(mu_);
    return sandbox.handle.expires_at;
  }
  EnvironmentHandle record(const Sandbox& sandbox) const EXCLUDES(mu_) {
    MutexLock lk(mu_);
    return sandbox.handle;
  }

  // The records of every live sandbox (the adapter's destructor destroys
  // them); the ids (the crash sweep leaves them alone).
  std::vector<EnvironmentHandle> handles() const EXCLUDES(mu_) {
    MutexLock lk(mu_);
    std::vector<EnvironmentHandle> out;
    for (const auto& [id, sandbox] : live_) out.push_back(sandbox->handle);
    return out;
  }
  std::vector<std::string> ids() const EXCLUDES(mu_) {
    MutexLock lk(mu_);
    std::vector<std::string> out;
    for (const auto& [id, sandbox] : live_) out.push_back(id);
    return out;
  }

 private:
  mutable Mutex mu_;
  std::map<std::string, std::shared_ptr<Sandbox>> live_ GUARDED_BY(mu_);
  ExpiredIds expired_ GUARDED_BY(mu_);
};

// Destroys a sandbox through `env` because it reached expires_at, and
// remembers that, so later calls say "expired" rather than "unknown".
template <class Sandbox>
void expireSandbox(ExecutionEnvironment& env, SandboxRegistry<Sandbox>& registry,
                   const EnvironmentHandle& record) {
  (void)env.destroy(record);
  registry.noteExpired(record.environment_id);
}

// What admitCommand hands the execute it admitted: the sandbox, its
// command activity (sandbox_lifecycle.h) and command lock (held), the
// effective timeout, the time left before expires_at and that expires_at.
template <class Sandbox>
struct AdmittedCommand {
  std::shared_ptr<Sandbox> sandbox;
  ActivityScope activity;
  std::unique_lock<std::mutex> exec;  // sandbox->command_mutex
  std::chrono::milliseconds timeout{0};
  std::chrono::milliseconds expires_in{0};
  std::string cwd;  // the working directory, from checkCommand
  Timestamp expires_at{};
};

// Steps 2 to 6 of command_admission.h for one execute of `env`, with `cwd`
// from checkCommand (step 1): the lookup (HandleMatch::kOwner; a mismatch
// destroys the sandbox through `env`), a command activity of the sandbox's
// lifecycle (EnvironmentBusy while a command runs; ExecutionUnavailable
// "the sandbox has died (<why>); destroy it and provision again" once it
// was lost), its command lock (asking the lifecycle again under it: a
// destroy may have begun), expires_at (past it the sandbox is expired,
// EnvironmentGone; `clock` says when it is), the working directory
// (`check_cwd(sandbox, cwd)`, checkWorkingDirectory for a workspace on a
// directory) and the timeout. `Sandbox` has `handle`,
// `std::shared_ptr<SandboxLife> life`, `std::mutex command_mutex` and
// `ResourceLimits limits`.
template <class Sandbox, class CheckCwd>
Result<AdmittedCommand<Sandbox>> admitCommand(
    ExecutionEnvironment& env, SandboxRegistry<Sandbox>& registry, const EnvironmentHandle& handle,
    const ExecutionCommand& command, const std::string& cwd, std::chrono::seconds service_hard_cap,
    const WallClock& clock, CheckCwd&& check_cwd) {
  auto sb = registry.live(handle, HandleMatch::kOwner);
  if (!sb) {
    if (sb.error().code == ErrorCode::kSandboxEscapeSuspected) (void)env.destroy(handle);
    return tl::unexpected(sb.error());
  }
  auto activity = beginActivity((*sb)->life, Activity::Kind::kCommand, command.execution_id);
  if (!activity) return tl::unexpected(activity.error());
  std::unique_lock exec((*sb)->command_mutex);
  if (auto usable = (*sb)->life->checkUsable(); !usable) return tl::unexpected(usable.error());
  const Timestamp expires_at = registry.expiresAt(**sb);
  const auto expires_in =
      std::chrono::duration_cast<std::chrono::milliseconds>(expires_at - wallNow(clock));
  if (expires_in.count() <= 0) {
    exec.unlock();
    expireSandbox(env, registry, registry.record(**sb));
    return tl::unexpected(expiredError(handle.environment_id));
  }
  if (auto r = check_cwd(**sb, cwd); !r) return tl::unexpected(r.error());
  auto timeout = commandTimeout(service_hard_cap, (*sb)->limits, command);
  if (!timeout) return tl::unexpected(timeout.error());
  return AdmittedCommand<Sandbox>{
      std::move(*sb), std::move(*activity), std::move(exec), *timeout, expires_in, cwd, expires_at};
}

// After an admitted command: a sandbox the command outlived (EXPIRED) is
// expired, its command lock released first, unless it was extended while
// the command ran (its expires_at is later than the one admitted under).
template <class Sandbox>
void afterCommand(ExecutionEnvironment& env, SandboxRegistry<Sandbox>& registry,
                  AdmittedCommand<Sandbox>& admitted, const ExecutionResult& result) {
  if (result.killed_by != KillReason::kExpired) return;
  const EnvironmentHandle record = registry.record(*admitted.sandbox);
  if (record.expires_at > admitted.expires_at) return;
  admitted.exec.unlock();
  expireSandbox(env, registry, record);
}

}  // namespace airlock::host
