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
#include "airlock/core/ids.h"
#include "airlock/core/timeout_rule.h"
#include "airlock/sandbox/host/sandbox_lifecycle.h"
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

Timestamp systemNow() {
  return std::chrono::time_point_cast<milliseconds>(std::chrono::system_clock::now());
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

struct Sandbox {
  EnvironmentHandle handle;
  ResourceLimits limits;
  FakeWorkspace workspace;
  // Provenance record beside the workspace (same rules as the local
  // workspace): write -> TOOL_WRITTEN, created or modified by a command ->
  // SANDBOX_WRITTEN, deleted -> dropped, anything else UNKNOWN.
  std::map<std::string, WorkspaceProvenance> provenance;
  // The host layer's lifecycle (sandbox/host/sandbox_lifecycle.h): ready
  // once provisioned; a command is its activity while it runs (the busy
  // rule, and the execution id cancel() names). Guarded by the adapter's
  // mutex; a destroyed sandbox is erased with it.
  host::SandboxLifecycle life;
  bool cancel_requested = false;  // cancel() named the running command
};

// The sandbox's running command with `execution_id`, if one runs.
bool runsCommand(const Sandbox& sb, std::string_view execution_id) {
  for (const auto& activity : sb.life.activities())
    if (activity.kind == host::Activity::Kind::kCommand && activity.execution_id == execution_id)
      return true;
  return false;
}

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
  FakeWorkspace& ws = sb.workspace;
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
  mutable std::mutex mu;
  std::map<std::vector<std::string>, ScriptedBehaviour> scripts;
  ScriptFallback fallback;
  std::vector<ExecutionCommand> history;
  std::map<std::string, Sandbox> sandboxes;  // by environment_id

  Timestamp now() const { return options.clock ? options.clock() : systemNow(); }

  // The live sandbox named by handle's id, or ExecutionRejected. Caller holds mu.
  Result<Sandbox*> live(const EnvironmentHandle& handle) {
    auto it = sandboxes.find(handle.environment_id);
    if (it == sandboxes.end()) {
      return fail(ErrorCode::kEnvironmentGone, "unknown or destroyed environment");
    }
    return &it->second;
  }

  // live(), for a workspace handle taken before: a destroyed sandbox is
  // ExecutionRejected there (the WorkspaceHandle port's "handle gone").
  Result<Sandbox*> liveForWorkspace(const EnvironmentHandle& handle) {
    auto sb = live(handle);
    if (!sb) return fail(ErrorCode::kExecutionRejected, "environment was destroyed");
    return sb;
  }

  // The owner check of execute and workspace: a handle whose tenant, run or
  // epoch differs from the record is an invariant violation, and the sandbox
  // is destroyed before the error is returned.
  Result<Sandbox*> owned(const EnvironmentHandle& handle) {
    auto sb = live(handle);
    if (!sb) return sb;
    const EnvironmentHandle& record = (*sb)->handle;
    if (record.tenant_id != handle.tenant_id || record.run_id != handle.run_id ||
        record.lease_epoch != handle.lease_epoch) {
      destroyLocked(handle.environment_id);
      return fail(ErrorCode::kSandboxEscapeSuspected,
                  "handle does not match the sandbox's tenant, run or lease epoch; "
                  "sandbox destroyed");
    }
    return sb;
  }

  // Destroyed means gone: the record and the workspace bytes are erased.
  void destroyLocked(const std::string& environment_id) { sandboxes.erase(environment_id); }
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
    const FakeWorkspace& ws = (*sb)->workspace;
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
    FakeWorkspace& ws = box.workspace;
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
    const FakeWorkspace& ws = (*sb)->workspace;
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
  return state_->sandboxes.size();
}

Result<EnvironmentHandle> FakeEnvironment::provision(const EnvironmentSpec& spec) {
  if (shutting_down_.load())
    return fail(ErrorCode::kExecutionUnavailable, "the execution service is shutting down");
  if (spec.image_digest != kFakeImageDigest) {
    return fail(ErrorCode::kExecutionRejected, "unknown image digest: " + spec.image_digest);
  }
  if (spec.tenant_id.empty()) return fail(ErrorCode::kExecutionRejected, "tenant_id is empty");
  if (spec.run_id.empty()) return fail(ErrorCode::kExecutionRejected, "run_id is empty");
  std::lock_guard lock(state_->mu);
  if (auto ok = checkLimits(spec.limits, state_->options.ceilings); !ok) {
    return tl::unexpected(ok.error());
  }
  Sandbox sb;
  const Timestamp now = state_->now();
  sb.handle.environment_id = newEnvironmentId(state_->options.node_name, now);
  sb.handle.tenant_id = spec.tenant_id;
  sb.handle.run_id = spec.run_id;
  sb.handle.lease_epoch = spec.lease_epoch;
  sb.handle.created_at = now;
  sb.handle.expires_at =
      now + std::chrono::duration_cast<milliseconds>(state_->options.service_hard_cap);
  sb.limits = spec.limits;
  if (auto ready = sb.life.transition(host::SandboxLifecycle::SetUp{}); !ready)
    return tl::unexpected(ready.error());
  EnvironmentHandle handle = sb.handle;
  state_->sandboxes.emplace(handle.environment_id, std::move(sb));
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

Result<FakeRun> planRun(FakeEnvironment::State& st, Sandbox& sb, const ExecutionCommand& command) {
  FakeRun run;
  auto workdir = checkRelativePath(command.working_directory);
  if (!workdir) return tl::unexpected(workdir.error());
  if (!sb.workspace.isDir(*workdir)) {
    return fail(ErrorCode::kToolValidationError,
                "working_directory does not exist in the workspace: " + command.working_directory);
  }
  // The port receives a command timeout already clamped to the tool's
  // declared timeout, so at this layer the declared timeout is the hard cap.
  auto timeout = effectiveTimeout(TimeoutInputs{
      .service_hard_cap = st.options.service_hard_cap,
      .spec_wall_clock = std::chrono::seconds(sb.limits.wall_clock_seconds),
      .remaining_run_budget = std::nullopt,
      .command_timeout = std::chrono::seconds(command.timeout_seconds),
      .tool_declared_timeout = st.options.service_hard_cap,
  });
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
  const auto before = sb.workspace.files;
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
    for (const auto& path : run.deletes) sb.workspace.files.erase(path);
  // The record learns every change, not only the listed (possibly
  // truncated) ones: the fake sees its whole workspace.
  for (const auto& change :
       diffFiles(before, sb.workspace.files, std::numeric_limits<std::int64_t>::max()).changes) {
    if (change.change == ChangeKind::kDeleted) {
      sb.provenance.erase(change.path);
    } else {
      sb.provenance[change.path] = WorkspaceProvenance::kSandboxWritten;
    }
  }
  if (!outcome) return outcome;
  DiffResult diff = diffFiles(before, sb.workspace.files, st.options.files_changed_listing);
  result.files_changed = std::move(diff.changes);
  result.files_changed_truncated = diff.truncated;
  return {};
}

// A command that runs until cancelled: the lock is released while it runs
// (the sandbox is busy), and it ends at the cancel token, its timeout or
// expiry in real time, a destroy (CANCELLED) or shutdown (SERVICE_SHUTDOWN).
void runUntilEnded(FakeEnvironment::State& st, const std::atomic<bool>& shutting_down,
                   std::unique_lock<std::mutex>& lock, const std::string& id, const FakeRun& run,
                   const CancelToken* cancel, ExecutionResult& result) {
  const auto started = std::chrono::steady_clock::now();
  const auto deadline = started + std::min(run.timeout, run.life);
  for (;;) {
    lock.unlock();
    pollfd p{cancel != nullptr ? cancel->pollFd() : -1, POLLIN, 0};
    (void)sys::pollSome(&p, 1, 20);
    lock.lock();
    const auto now = std::chrono::steady_clock::now();
    auto it = st.sandboxes.find(id);
    std::optional<KillReason> why;
    if (shutting_down.load())
      why = KillReason::kServiceShutdown;
    else if (it == st.sandboxes.end())
      why = KillReason::kCancelled;
    else if ((cancel != nullptr && cancel->cancelled()) || it->second.cancel_requested)
      why = KillReason::kCancelled;
    else if (now >= deadline)
      why = run.timeout <= run.life ? KillReason::kTimeout : KillReason::kExpired;
    if (!why) continue;
    if (it != st.sandboxes.end()) it->second.cancel_requested = false;
    result.killed_by = why;
    result.timed_out = why == KillReason::kTimeout;
    result.duration_ms = std::chrono::duration_cast<milliseconds>(now - started).count();
    if (why == KillReason::kExpired) st.destroyLocked(id);
    return;
  }
}

// A command's activity of its sandbox's lifecycle, ended when the command
// returns (under the adapter's lock) unless the sandbox was destroyed
// under it.
class CommandActivity {
 public:
  CommandActivity(FakeEnvironment::State& st, std::string id, std::uint64_t token)
      : st_(st), id_(std::move(id)), token_(token) {}
  CommandActivity(const CommandActivity&) = delete;
  CommandActivity& operator=(const CommandActivity&) = delete;
  ~CommandActivity() {
    if (auto it = st_.sandboxes.find(id_); it != st_.sandboxes.end())
      (void)it->second.life.transition(host::SandboxLifecycle::End{token_});
  }

 private:
  FakeEnvironment::State& st_;
  std::string id_;
  std::uint64_t token_;
};

}  // namespace

Result<ExecutionResult> FakeEnvironment::executeStreaming(const EnvironmentHandle& handle,
                                                          const ExecutionCommand& command,
                                                          const CancelToken* cancel,
                                                          const OutputSink& sink) {
  if (shutting_down_.load())
    return fail(ErrorCode::kExecutionUnavailable, "the execution service is shutting down");
  if (auto valid = validateCommand(command); !valid) return tl::unexpected(valid.error());
  std::unique_lock lock(state_->mu);
  auto found = state_->owned(handle);
  if (!found) return tl::unexpected(found.error());
  Sandbox& sb = **found;
  auto token = sb.life.transition(
      host::SandboxLifecycle::Begin{host::Activity::Kind::kCommand, command.execution_id});
  if (!token) return tl::unexpected(token.error());  // EnvironmentBusy while one runs
  const CommandActivity activity(*state_, handle.environment_id, *token);
  if (state_->now() >= sb.handle.expires_at) {
    state_->destroyLocked(handle.environment_id);
    return fail(ErrorCode::kEnvironmentGone, "environment expired");
  }
  auto run = planRun(*state_, sb, command);
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
    runUntilEnded(*state_, shutting_down_, lock, handle.environment_id, *run, cancel, result);
  } else if (simulateRun(*run, result)) {
    state_->destroyLocked(handle.environment_id);
  }
  return result;
}

Result<void> FakeEnvironment::cancel(const EnvironmentHandle& handle,
                                     std::string_view execution_id) {
  if (auto valid = checkExecutionIdToCancel(execution_id); !valid) return valid;
  std::lock_guard lock(state_->mu);
  auto found = state_->live(handle);
  if (!found) return tl::unexpected(found.error());
  Sandbox& sb = **found;
  if (sb.handle.tenant_id != handle.tenant_id)
    return fail(ErrorCode::kExecutionRejected, "environment does not belong to this tenant");
  if (!runsCommand(sb, execution_id))
    return fail(ErrorCode::kNotFound,
                "no command with execution_id \"" + std::string(execution_id) + "\" is running");
  sb.cancel_requested = true;
  return {};
}

Result<void> FakeEnvironment::destroy(const EnvironmentHandle& handle) {
  std::lock_guard lock(state_->mu);
  state_->destroyLocked(handle.environment_id);
  return {};
}

Result<std::shared_ptr<WorkspaceHandle>> FakeEnvironment::workspace(
    const EnvironmentHandle& handle) {
  std::lock_guard lock(state_->mu);
  auto sb = state_->owned(handle);
  if (!sb) return tl::unexpected(sb.error());
  return std::shared_ptr<WorkspaceHandle>(
      std::make_shared<FakeWorkspaceHandle>(state_, (*sb)->handle));
}

}  // namespace airlock::fake
