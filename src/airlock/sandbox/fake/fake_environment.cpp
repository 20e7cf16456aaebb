#include "airlock/sandbox/fake/fake_environment.h"

#include <poll.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <utility>

#include "airlock/core/command_validation.h"
#include "airlock/sandbox/host/hosted_environment.h"
#include "airlock/sys/io.h"
#include "airlock/sys/sha256.h"

namespace airlock::fake {
namespace {

using std::chrono::milliseconds;

using sys::sha256Hex;

// "" for a top-level name.
std::string parentOf(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

std::string baseName(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The workspace of one sandbox: regular files by normalized relative path,
// and the directories ("" is the root and is implicit).
struct FakeWorkspace {
  std::map<std::string, std::string> files;
  std::set<std::string> dirs;

  std::int64_t totalBytes() const {
    std::int64_t total = 0;
    for (const auto& [path, bytes] : files) total += static_cast<std::int64_t>(bytes.size());
    return total;
  }
  // Root included, as tmpfs counts it.
  std::int64_t inodes() const { return static_cast<std::int64_t>(files.size() + dirs.size()) + 1; }
  bool isDir(const std::string& path) const { return path.empty() || dirs.count(path) > 0; }
};

// The host layer's record (handle, limits, lifecycle, running command, end
// request; sandbox/host/hosted_environment.h), with the workspace kept in
// memory instead of a directory. The record's directory fields stay empty.
struct Sandbox : host::SandboxRecord {
  FakeWorkspace files;
  // Provenance record beside the workspace (same rules as the local
  // workspace): write -> TOOL_WRITTEN, created or modified by a command ->
  // SANDBOX_WRITTEN, deleted -> dropped, anything else UNKNOWN.
  std::map<std::string, WorkspaceProvenance> provenance;
};

// Directories that must be created so that `path` can exist (outermost
// first), or an error when an ancestor is a regular file.
Result<std::vector<std::string>> missingAncestors(const FakeWorkspace& ws,
                                                  const std::string& path) {
  std::vector<std::string> missing;
  for (std::string dir = parentOf(path); !dir.empty(); dir = parentOf(dir)) {
    if (ws.files.count(dir)) {
      return fail(ErrorCode::kToolValidationError, "not a directory: " + dir);
    }
    if (!ws.dirs.count(dir)) missing.push_back(dir);
  }
  std::reverse(missing.begin(), missing.end());
  return missing;
}

// Creates or replaces the file at a normalized path, with its parents,
// within the sandbox's workspace limits. ExecutionRejected "workspace full"
// when it does not fit; nothing is changed then.
Result<void> putFile(Sandbox& sb, const std::string& path, std::string_view data) {
  FakeWorkspace& ws = sb.files;
  if (path.empty() || ws.dirs.count(path)) {
    return fail(ErrorCode::kToolValidationError, "is a directory: " + (path.empty() ? "." : path));
  }
  auto missing = missingAncestors(ws, path);
  if (!missing) return tl::unexpected(missing.error());
  auto existing = ws.files.find(path);
  std::int64_t old_size = existing == ws.files.end() ? 0 : existing->second.size();
  std::int64_t new_bytes = ws.totalBytes() - old_size + static_cast<std::int64_t>(data.size());
  std::int64_t new_inodes = ws.inodes() + static_cast<std::int64_t>(missing->size()) +
                            (existing == ws.files.end() ? 1 : 0);
  if (new_bytes > sb.limits.workspace_bytes || new_inodes > sb.limits.inodes_max) {
    return fail(ErrorCode::kExecutionRejected, "workspace full writing " + path);
  }
  for (auto& dir : *missing) ws.dirs.insert(std::move(dir));
  ws.files[path] = std::string(data);
  return {};
}

struct DiffResult {
  std::vector<FileChange> changes;
  bool truncated = false;
};

DiffResult diffFiles(const std::map<std::string, std::string>& before,
                     const std::map<std::string, std::string>& after, std::int64_t max_listing) {
  DiffResult out;
  auto add = [&](FileChange change) {
    if (static_cast<std::int64_t>(out.changes.size()) >= max_listing) {
      out.truncated = true;
      return;
    }
    out.changes.push_back(std::move(change));
  };
  // Both maps are ordered by path, so one merge walk yields a sorted listing.
  auto b = before.begin();
  auto a = after.begin();
  while (b != before.end() || a != after.end()) {
    if (a == after.end() || (b != before.end() && b->first < a->first)) {
      add(FileChange{b->first, ChangeKind::kDeleted, 0, std::nullopt});
      ++b;
    } else if (b == before.end() || a->first < b->first) {
      add(FileChange{a->first, ChangeKind::kCreated, static_cast<std::int64_t>(a->second.size()),
                     sha256Hex(a->second)});
      ++a;
    } else {
      if (a->second != b->second) {
        add(FileChange{a->first, ChangeKind::kModified, static_cast<std::int64_t>(a->second.size()),
                       sha256Hex(a->second)});
      }
      ++a;
      ++b;
    }
  }
  return out;
}

}  // namespace

struct FakeEnvironment::State {
  FakeOptions options;
  // The one image the fake runs (kFakeImageDigest), for the host layer's
  // provision checks.
  std::vector<std::shared_ptr<const SandboxImage>> images = {
      std::make_shared<const SandboxImage>(SandboxImage{kFakeImageDigest, {}, {}})};
  host::ServiceShutdown shutdown;
  mutable std::mutex mu;
  std::map<std::vector<std::string>, ScriptedBehaviour> scripts;
  ScriptFallback fallback;
  std::vector<ExecutionCommand> history;
  // The host layer's lookups (sandbox_registry.h): unknown, expired,
  // another tenant's or another owner's handle.
  host::SandboxRegistry<Sandbox> sandboxes;

  Timestamp now() const { return host::wallNow(options.clock); }

  // For a workspace handle taken before: a destroyed sandbox is
  // ExecutionRejected there (the WorkspaceHandle port's "handle gone", as
  // SandboxWorkspace says it). Caller holds mu.
  Result<std::shared_ptr<Sandbox>> liveForWorkspace(const EnvironmentHandle& handle) const {
    auto sb = sandboxes.live(handle);
    if (!sb)
      return fail(ErrorCode::kExecutionRejected,
                  "environment " + handle.environment_id + " was destroyed");
    return sb;
  }

  // The host layer's destroy (hosted_environment.h beginDestroy): out of
  // the registry, its command told why it ends, its lifecycle destroyed.
  // Destroyed means gone: the record and the workspace bytes go with the
  // last reference. Caller holds mu.
  void destroyLocked(const std::string& environment_id) {
    auto sb = sandboxes.take(environment_id);
    if (!sb) return;
    sb->life->destroying();
    sb->end_request->request(
        host::destroyKillReason(shutdown.raised(), sb->handle.expires_at, now()));
    sb->life->destroyed();
  }
  // destroyLocked at the sandbox's expires_at: later calls say "expired".
  void expireLocked(const std::string& environment_id) {
    destroyLocked(environment_id);
    sandboxes.noteExpired(environment_id);
  }
};

namespace {

class FakeWorkspaceHandle : public WorkspaceHandle {
 public:
  FakeWorkspaceHandle(std::shared_ptr<FakeEnvironment::State> state, EnvironmentHandle handle)
      : state_(std::move(state)), handle_(std::move(handle)) {}

  Result<std::string> read(const std::string& path) override {
    auto rel = checkRelativePath(path);
    if (!rel) return tl::unexpected(rel.error());
    std::lock_guard lock(state_->mu);
    auto sb = state_->liveForWorkspace(handle_);
    if (!sb) return tl::unexpected(sb.error());
    const FakeWorkspace& ws = (*sb)->files;
    if (ws.isDir(*rel)) return fail(ErrorCode::kToolValidationError, "is a directory: " + path);
    auto it = ws.files.find(*rel);
    if (it == ws.files.end()) return fail(ErrorCode::kNotFound, "no such file: " + path);
    return it->second;
  }

  Result<void> write(const std::string& path, std::string_view data) override {
    return writeFile(path, data, /*tool_written=*/true);
  }

  Result<void> placeFile(const std::string& path, std::string_view data) override {
    return writeFile(path, data, /*tool_written=*/false);
  }

  Result<void> writeFile(const std::string& path, std::string_view data, bool tool_written) {
    auto rel = checkRelativePath(path);
    if (!rel) return tl::unexpected(rel.error());
    std::lock_guard lock(state_->mu);
    auto sb = state_->liveForWorkspace(handle_);
    if (!sb) return tl::unexpected(sb.error());
    auto put = putFile(**sb, *rel, data);
    if (!put) return put;
    if (tool_written) {
      (*sb)->provenance[*rel] = WorkspaceProvenance::kToolWritten;
    } else {
      (*sb)->provenance.erase(*rel);
    }
    return put;
  }

  Result<WorkspaceProvenance> provenance(const std::string& path) override {
    auto rel = checkRelativePath(path);
    if (!rel) return tl::unexpected(rel.error());
    std::lock_guard lock(state_->mu);
    auto sb = state_->liveForWorkspace(handle_);
    if (!sb) return tl::unexpected(sb.error());
    auto it = (*sb)->provenance.find(*rel);
    return it == (*sb)->provenance.end() ? WorkspaceProvenance::kUnknown : it->second;
  }

  Result<void> mkdir(const std::string& path) override {
    auto rel = checkRelativePath(path);
    if (!rel) return tl::unexpected(rel.error());
    std::lock_guard lock(state_->mu);
    auto sb = state_->liveForWorkspace(handle_);
    if (!sb) return tl::unexpected(sb.error());
    Sandbox& box = **sb;
    FakeWorkspace& ws = box.files;
    if (ws.isDir(*rel)) return {};
    if (ws.files.count(*rel)) return fail(ErrorCode::kToolValidationError, "is a file: " + path);
    auto missing = missingAncestors(ws, *rel);
    if (!missing) return tl::unexpected(missing.error());
    if (ws.inodes() + static_cast<std::int64_t>(missing->size()) + 1 > box.limits.inodes_max) {
      return fail(ErrorCode::kExecutionRejected, "workspace full creating " + path);
    }
    for (auto& dir : *missing) ws.dirs.insert(std::move(dir));
    ws.dirs.insert(*rel);
    return {};
  }

  Result<std::vector<WorkspaceEntry>> listdir(const std::string& path) override {
    auto rel = checkRelativePath(path);
    if (!rel) return tl::unexpected(rel.error());
    std::lock_guard lock(state_->mu);
    auto sb = state_->liveForWorkspace(handle_);
    if (!sb) return tl::unexpected(sb.error());
    const FakeWorkspace& ws = (*sb)->files;
    if (ws.files.count(*rel))
      return fail(ErrorCode::kToolValidationError, "not a directory: " + path);
    if (!ws.isDir(*rel)) return fail(ErrorCode::kNotFound, "no such directory: " + path);
    std::vector<WorkspaceEntry> entries;
    for (const auto& dir : ws.dirs) {
      if (parentOf(dir) == *rel) {
        entries.push_back({baseName(dir), WorkspaceEntry::Type::kDirectory, 0});
      }
    }
    for (const auto& [file, bytes] : ws.files) {
      if (parentOf(file) == *rel) {
        entries.push_back(
            {baseName(file), WorkspaceEntry::Type::kFile, static_cast<std::int64_t>(bytes.size())});
      }
    }
    std::sort(entries.begin(), entries.end(),
              [](const WorkspaceEntry& x, const WorkspaceEntry& y) { return x.name < y.name; });
    return entries;
  }

 private:
  std::shared_ptr<FakeEnvironment::State> state_;
  EnvironmentHandle handle_;
};

}  // namespace

std::optional<ScriptedBehaviour> basicCommands(const ExecutionCommand& command) {
  const auto& argv = command.argv;
  if (argv.empty()) return std::nullopt;
  const std::string name = baseName(argv[0]);
  ScriptedBehaviour b;
  if (name == "true" && argv.size() == 1) return b;
  if (name == "false" && argv.size() == 1) {
    b.exit_code = 1;
    return b;
  }
  if (name == "echo") {
    for (std::size_t i = 1; i < argv.size(); ++i) {
      if (i > 1) b.stdout_data += ' ';
      b.stdout_data += argv[i];
    }
    b.stdout_data += '\n';
    return b;
  }
  if (name == "cat" && argv.size() == 1) {
    b.echo_stdin_to_stdout = true;
    return b;
  }
  if (name == "sleep" && argv.size() == 2) {
    std::int64_t seconds = 0;
    const std::string& text = argv[1];
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), seconds);
    if (ec != std::errc() || end != text.data() + text.size() || seconds < 0 ||
        seconds > 1'000'000) {
      b.stderr_data = "sleep: invalid time interval '" + text + "'\n";
      b.exit_code = 1;
      return b;
    }
    b.runs_for = std::chrono::seconds(seconds);
    return b;
  }
  return std::nullopt;
}

FakeEnvironment::FakeEnvironment(FakeOptions options) : state_(std::make_shared<State>()) {
  state_->options = std::move(options);
  // Without its eventfd the flag still works; a command that runs until
  // cancelled then learns of a shutdown at its next poll instead of at once.
  (void)state_->shutdown.init();
}

FakeEnvironment::~FakeEnvironment() = default;

void FakeEnvironment::script(std::vector<std::string> argv, ScriptedBehaviour behaviour) {
  std::lock_guard lock(state_->mu);
  state_->scripts[std::move(argv)] = std::move(behaviour);
}

void FakeEnvironment::setFallback(ScriptFallback fallback) {
  std::lock_guard lock(state_->mu);
  state_->fallback = std::move(fallback);
}

std::vector<ExecutionCommand> FakeEnvironment::history() const {
  std::lock_guard lock(state_->mu);
  return state_->history;
}

std::size_t FakeEnvironment::liveCount() const {
  std::lock_guard lock(state_->mu);
  return state_->sandboxes.ids().size();
}

void FakeEnvironment::shutdown() noexcept {
  state_->shutdown.raise();
}

Result<EnvironmentHandle> FakeEnvironment::provision(const EnvironmentSpec& spec) {
  // The fake runs nothing, so a spec asking for egress gets it trivially.
  auto checks = host::checkProvision(spec, state_->images, state_->options.ceilings,
                                     /*has_egress_route=*/true, state_->shutdown);
  if (!checks) return tl::unexpected(checks.error());
  if (spec.tenant_id.empty()) return fail(ErrorCode::kExecutionRejected, "tenant_id is empty");
  if (spec.run_id.empty()) return fail(ErrorCode::kExecutionRejected, "run_id is empty");
  std::lock_guard lock(state_->mu);
  auto sb = std::make_shared<Sandbox>();
  if (auto r = host::initRecord(*sb, spec, *checks, state_->options.service_hard_cap, "",
                                state_->options.node_name, state_->options.clock);
      !r)
    return tl::unexpected(r.error());
  if (auto ready = sb->life->setUp(); !ready) return tl::unexpected(ready.error());
  EnvironmentHandle handle = sb->handle;
  state_->sandboxes.add(std::move(sb));
  return handle;
}

namespace {

// What one command will do, decided (and checked) before anything happens.
struct FakeRun {
  ScriptedBehaviour behaviour;
  std::vector<std::pair<std::string, std::string>> writes;  // normalized path -> bytes
  std::vector<std::string> deletes;
  milliseconds timeout{0};
  milliseconds life{0};  // until expires_at
};

// Output: stdout then stderr against one shared cap, each kept part passed
// to the sink. False when the cap was crossed (the command is killed).
bool emitOutput(const FakeRun& run, const ExecutionCommand& command,
                const ExecutionEnvironment::OutputSink& sink, ExecutionResult& result) {
  using Stream = ExecutionEnvironment::OutputStream;
  std::int64_t room = command.maximum_output_bytes;
  auto emit = [&](const std::string& produced, Stream which, std::string& kept, bool& truncated) {
    const auto size = static_cast<std::int64_t>(produced.size());
    kept = produced.substr(0, static_cast<std::size_t>(std::min(size, room)));
    if (sink && !kept.empty()) sink(which, kept);
    if (size <= room) {
      room -= size;
      return true;
    }
    room = 0;
    truncated = true;
    return false;
  };
  const std::string produced_stdout =
      (run.behaviour.echo_stdin_to_stdout ? command.stdin_data.value_or("") : std::string()) +
      run.behaviour.stdout_data;
  return emit(produced_stdout, Stream::kStdout, result.stdout_data, result.stdout_truncated) &&
         emit(run.behaviour.stderr_data, Stream::kStderr, result.stderr_data,
              result.stderr_truncated);
}

// The simulated run time against the timeout and the sandbox's life.
// True when the sandbox expired under the command.
bool simulateRun(const FakeRun& run, ExecutionResult& result) {
  const milliseconds limit = std::min(run.timeout, run.life);
  if (run.behaviour.runs_for <= limit) {
    result.exit_code = run.behaviour.exit_code;
    result.duration_ms = run.behaviour.runs_for.count();
    return false;
  }
  result.duration_ms = limit.count();
  if (run.timeout <= run.life) {
    result.killed_by = KillReason::kTimeout;
    result.timed_out = true;
    return false;
  }
  result.killed_by = KillReason::kExpired;
  return true;
}

// The working directory `cwd` (from host::checkCommand) against the
// in-memory workspace, as host::checkWorkingDirectory checks a real one;
// the host layer's timeout; then the script.
Result<FakeRun> planRun(FakeEnvironment::State& st, Sandbox& sb, const ExecutionCommand& command,
                        const std::string& cwd) {
  FakeRun run;
  if (!sb.files.isDir(cwd)) {
    return fail(ErrorCode::kToolValidationError,
                "working_directory \"" + cwd + "\" is not a directory inside the workspace");
  }
  auto timeout = host::commandTimeout(st.options.service_hard_cap, sb.limits, command);
  if (!timeout) return tl::unexpected(timeout.error());
  run.timeout = *timeout;
  run.life = sb.handle.expires_at - st.now();
  st.history.push_back(command);
  if (auto it = st.scripts.find(command.argv); it != st.scripts.end()) {
    run.behaviour = it->second;
  } else if (auto b = st.fallback ? st.fallback(command) : std::nullopt) {
    run.behaviour = std::move(*b);
  } else {
    run.behaviour.stderr_data = "airlock-fake: " + command.argv[0] + ": command not found\n";
    run.behaviour.exit_code = 127;
  }
  // Scripted paths are the script author's, not the sandbox's: one that
  // fails containment is an error before anything happens.
  for (const auto& [path, bytes] : run.behaviour.writes) {
    auto rel = checkRelativePath(path);
    if (!rel) return tl::unexpected(rel.error());
    run.writes.emplace_back(std::move(*rel), bytes);
  }
  for (const auto& path : run.behaviour.deletes) {
    auto rel = checkRelativePath(path);
    if (!rel) return tl::unexpected(rel.error());
    run.deletes.push_back(std::move(*rel));
  }
  return run;
}

Result<void> applyEffects(const FakeEnvironment::State& st, Sandbox& sb, const FakeRun& run,
                          ExecutionResult& result) {
  const auto before = sb.files.files;
  Result<void> outcome;
  for (const auto& [path, bytes] : run.writes) {
    auto put = putFile(sb, path, bytes);
    if (put) continue;
    if (put.error().code != ErrorCode::kExecutionRejected) {
      outcome = put;
    } else {
      result.killed_by = KillReason::kDisk;  // a full workspace stops the command
    }
    break;
  }
  if (outcome && !result.killed_by)
    for (const auto& path : run.deletes) sb.files.files.erase(path);
  // The record learns every change, not only the listed (possibly
  // truncated) ones: the fake sees its whole workspace.
  for (const auto& change :
       diffFiles(before, sb.files.files, std::numeric_limits<std::int64_t>::max()).changes) {
    if (change.change == ChangeKind::kDeleted) {
      sb.provenance.erase(change.path);
    } else {
      sb.provenance[change.path] = WorkspaceProvenance::kSandboxWritten;
    }
  }
  if (!outcome) return outcome;
  DiffResult diff = diffFiles(before, sb.files.files, st.options.files_changed_listing);
  result.files_changed = std::move(diff.changes);
  result.files_changed_truncated = diff.truncated;
  return {};
}

// Why a command that runs until cancelled ends now, if it does: the service
// stopping, a destroy (the reason the host layer's destroy gave), a cancel
// (its token, or cancel() by its execution id), else its timeout or the
// sandbox's expiry once `deadline` passed.
std::optional<KillReason> endOf(const FakeEnvironment::State& st, const Sandbox& sb,
                                const FakeRun& run, const CancelToken* cancel,
                                const std::optional<CancelToken>& by_id,
                                std::chrono::steady_clock::time_point deadline) {
  if (st.shutdown.raised()) return KillReason::kServiceShutdown;
  if (auto destroyed = sb.end_request->reason()) return destroyed;
  if ((cancel != nullptr && cancel->cancelled()) || (by_id && by_id->cancelled()))
    return KillReason::kCancelled;
  if (std::chrono::steady_clock::now() >= deadline)
    return run.timeout <= run.life ? KillReason::kTimeout : KillReason::kExpired;
  return std::nullopt;
}

// A command that runs until cancelled: the lock is released while it runs
// (the sandbox is busy, and cancel() finds it by its execution id: the host
// layer's RunningCommand) until endOf says why it ends, in real time. A
// command that outlived the sandbox's expires_at expires it.
Result<void> runUntilEnded(FakeEnvironment::State& st, std::unique_lock<std::mutex>& lock,
                           Sandbox& sb, const ExecutionCommand& command, const FakeRun& run,
                           const CancelToken* cancel, ExecutionResult& result) {
  std::optional<CancelToken> by_id;
  if (!command.execution_id.empty()) {
    auto token = CancelToken::create();
    if (!token) return tl::unexpected(token.error());
    by_id.emplace(std::move(*token));
  }
  const auto started = std::chrono::steady_clock::now();
  const auto deadline = started + std::min(run.timeout, run.life);
  std::optional<KillReason> why;
  {
    const host::RunningCommand running(sb, command.execution_id, by_id ? &*by_id : nullptr);
    lock.unlock();
    while (!(why = endOf(st, sb, run, cancel, by_id, deadline))) {
      pollfd fds[] = {{cancel != nullptr ? cancel->pollFd() : -1, POLLIN, 0},
                      {by_id ? by_id->pollFd() : -1, POLLIN, 0},
                      {sb.end_request->pollFd(), POLLIN, 0},
                      {st.shutdown.fd(), POLLIN, 0}};
      const auto left =
          std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
      (void)sys::pollSome(fds, 4, static_cast<int>(std::clamp<std::int64_t>(left.count(), 0, 100)));
    }
    lock.lock();
  }
  result.killed_by = why;
  result.timed_out = why == KillReason::kTimeout;
  result.duration_ms =
      std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - started).count();
  if (why == KillReason::kExpired && !sb.end_request->reason())
    st.expireLocked(sb.handle.environment_id);
  return {};
}

// The host layer's admission (command_admission.h) up to the working
// directory: the handle (another owner's destroys the sandbox), one command
// at a time (the lifecycle's activity), the sandbox not past expires_at.
// Caller holds st.mu.
Result<std::pair<std::shared_ptr<Sandbox>, host::ActivityScope>> admit(
    FakeEnvironment::State& st, const EnvironmentHandle& handle, const ExecutionCommand& command) {
  auto found = st.sandboxes.live(handle, host::HandleMatch::kOwner);
  if (!found) {
    if (found.error().code == ErrorCode::kSandboxEscapeSuspected)
      st.destroyLocked(handle.environment_id);
    return tl::unexpected(found.error());
  }
  auto activity =
      host::beginActivity((*found)->life, host::Activity::Kind::kCommand, command.execution_id);
  if (!activity) return tl::unexpected(activity.error());  // EnvironmentBusy while one runs
  if (st.now() >= (*found)->handle.expires_at) {
    st.expireLocked(handle.environment_id);
    return tl::unexpected(host::expiredError(handle.environment_id));
  }
  return std::make_pair(std::move(*found), std::move(*activity));
}

}  // namespace

Result<ExecutionResult> FakeEnvironment::executeStreaming(const EnvironmentHandle& handle,
                                                          const ExecutionCommand& command,
                                                          const CancelToken* cancel,
                                                          const OutputSink& sink) {
  auto cwd = host::checkCommand(command);
  if (!cwd) return tl::unexpected(cwd.error());
  if (state_->shutdown.raised()) return tl::unexpected(host::shuttingDownError());
  std::unique_lock lock(state_->mu);
  auto admitted = admit(*state_, handle, command);
  if (!admitted) return tl::unexpected(admitted.error());
  Sandbox& sb = *admitted->first;
  auto run = planRun(*state_, sb, command, *cwd);
  if (!run) return tl::unexpected(run.error());

  ExecutionResult result;
  if (cancel != nullptr && cancel->cancelled()) {
    result.killed_by = KillReason::kCancelled;
    return result;
  }
  if (!emitOutput(*run, command, sink, result)) {
    result.killed_by = KillReason::kOutputLimit;
    run->writes.clear();  // nothing after the cap happens
    run->deletes.clear();
  }
  if (auto r = applyEffects(*state_, sb, *run, result); !r) return tl::unexpected(r.error());
  if (result.killed_by) return result;
  if (run->behaviour.runs_until_cancelled) {
    if (auto r = runUntilEnded(*state_, lock, sb, command, *run, cancel, result); !r)
      return tl::unexpected(r.error());
  } else if (simulateRun(*run, result)) {
    state_->expireLocked(handle.environment_id);
  }
  return result;
}

Result<void> FakeEnvironment::cancel(const EnvironmentHandle& handle,
                                     std::string_view execution_id) {
  if (auto valid = checkExecutionIdToCancel(execution_id); !valid) return valid;
  std::lock_guard lock(state_->mu);
  auto sb = state_->sandboxes.live(handle, host::HandleMatch::kTenantRefused);
  if (!sb) return tl::unexpected(sb.error());
  return host::cancelRunning(**sb, execution_id);
}

Result<void> FakeEnvironment::destroy(const EnvironmentHandle& handle) {
  std::lock_guard lock(state_->mu);
  state_->destroyLocked(handle.environment_id);
  return {};
}

Result<std::shared_ptr<WorkspaceHandle>> FakeEnvironment::workspace(
    const EnvironmentHandle& handle) {
  std::lock_guard lock(state_->mu);
  auto sb = state_->sandboxes.live(handle);
  if (!sb) return tl::unexpected(sb.error());
  return std::shared_ptr<WorkspaceHandle>(
      std::make_shared<FakeWorkspaceHandle>(state_, (*sb)->handle));
}

}  // namespace airlock::fake
