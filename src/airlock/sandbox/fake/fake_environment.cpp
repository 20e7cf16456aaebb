#include "airlock/sandbox/fake/fake_environment.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <utility>

#include "airlock/core/command_validation.h"
#include "airlock/core/encoding.h"
#include "airlock/sandbox/fake/scripted_channel.h"
#include "airlock/sys/sha256.h"
#include "airlock/workspace/local_workspace.h"

namespace airlock::fake {
namespace {

using sys::sha256Hex;

// A workspace path quoted for a message, as the local workspace quotes it.
std::string q(std::string_view path) {
  return quoteForMessage(path, 512);
}

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
  // Last change of each file and directory ("" the root), nanoseconds since
  // the epoch, for stat.
  std::map<std::string, std::int64_t> mtimes;

  void touch(const std::string& path) {
    mtimes[path] = std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  }
  // Whether a directory holds anything.
  bool hasEntries(const std::string& dir) const {
    const std::string below = dir + "/";
    auto file = files.lower_bound(below);
    auto sub = dirs.lower_bound(below);
    return (file != files.end() && file->first.compare(0, below.size(), below) == 0) ||
           (sub != dirs.end() && sub->compare(0, below.size(), below) == 0);
  }

  std::int64_t totalBytes() const {
    std::int64_t total = 0;
    for (const auto& [path, bytes] : files) total += static_cast<std::int64_t>(bytes.size());
    return total;
  }
  // Root included, as tmpfs counts it.
  std::int64_t inodes() const { return static_cast<std::int64_t>(files.size() + dirs.size()) + 1; }
  bool isDir(const std::string& path) const { return path.empty() || dirs.count(path) > 0; }
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
Result<void> putFile(FakeWorkspace& ws, const ResourceLimits& limits, const std::string& path,
                     std::string_view data) {
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
  if (new_bytes > limits.workspace_bytes || new_inodes > limits.inodes_max) {
    return fail(ErrorCode::kExecutionRejected, "workspace full writing " + path);
  }
  for (auto& dir : *missing) {
    ws.touch(dir);
    ws.dirs.insert(std::move(dir));
  }
  ws.files[path] = std::string(data);
  ws.touch(path);
  ws.touch(parentOf(path));
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

// The workspace of a fake sandbox, in memory, under its own mutex. A
// scripted command writes it through ScriptedWorkspace; the record's provenance is
// kept here (the fake sees every change, so beginSandboxCommand and
// recordSandboxChanges have nothing to add).
class MemoryWorkspace final : public workspace::LocalWorkspaceHandle, public ScriptedWorkspace {
 public:
  explicit MemoryWorkspace(const ResourceLimits& limits) : limits_(limits) { ws_.touch(""); }

  Result<std::string> read(const std::string& path) override {
    auto rel = checkRelativePath(path);
    if (!rel) return tl::unexpected(rel.error());
    std::lock_guard lock(mu_);
    if (ws_.isDir(*rel)) return fail(ErrorCode::kToolValidationError, "is a directory: " + path);
    auto it = ws_.files.find(*rel);
    if (it == ws_.files.end()) return fail(ErrorCode::kNotFound, "no such file: " + path);
    return it->second;
  }
  Result<void> write(const std::string& path, std::string_view data) override {
    return writeFile(path, data, /*tool_written=*/true);
  }
  Result<void> placeFile(const std::string& path, std::string_view data) override {
    return writeFile(path, data, /*tool_written=*/false);
  }
  Result<WorkspaceProvenance> provenance(const std::string& path) override {
    auto rel = checkRelativePath(path);
    if (!rel) return tl::unexpected(rel.error());
    std::lock_guard lock(mu_);
    auto it = provenance_.find(*rel);
    return it == provenance_.end() ? WorkspaceProvenance::kUnknown : it->second;
  }
  Result<void> mkdir(const std::string& path) override {
    auto rel = checkRelativePath(path);
    if (!rel) return tl::unexpected(rel.error());
    std::lock_guard lock(mu_);
    if (ws_.isDir(*rel)) return {};
    if (ws_.files.count(*rel)) return fail(ErrorCode::kToolValidationError, "is a file: " + path);
    auto missing = missingAncestors(ws_, *rel);
    if (!missing) return tl::unexpected(missing.error());
    if (ws_.inodes() + static_cast<std::int64_t>(missing->size()) + 1 > limits_.inodes_max)
      return fail(ErrorCode::kExecutionRejected, "workspace full creating " + path);
    for (auto& dir : *missing) {
      ws_.touch(dir);
      ws_.dirs.insert(std::move(dir));
    }
    ws_.dirs.insert(*rel);
    ws_.touch(*rel);
    ws_.touch(parentOf(*rel));
    return {};
  }
  Result<std::vector<WorkspaceEntry>> listdir(const std::string& path) override {
    auto rel = checkRelativePath(path);
    if (!rel) return tl::unexpected(rel.error());
    std::lock_guard lock(mu_);
    if (ws_.files.count(*rel))
      return fail(ErrorCode::kToolValidationError, "not a directory: " + path);
    if (!ws_.isDir(*rel)) return fail(ErrorCode::kNotFound, "no such directory: " + path);
    std::vector<WorkspaceEntry> entries;
    for (const auto& dir : ws_.dirs)
      if (parentOf(dir) == *rel)
        entries.push_back({baseName(dir), WorkspaceEntry::Type::kDirectory, 0});
    for (const auto& [file, bytes] : ws_.files)
      if (parentOf(file) == *rel)
        entries.push_back(
            {baseName(file), WorkspaceEntry::Type::kFile, static_cast<std::int64_t>(bytes.size())});
    std::sort(entries.begin(), entries.end(),
              [](const WorkspaceEntry& x, const WorkspaceEntry& y) { return x.name < y.name; });
    return entries;
  }
  Result<void> remove(const std::string& path, bool recursive) override {
    auto rel = checkRelativePath(path);
    if (!rel) return tl::unexpected(rel.error());
    if (rel->empty()) {
      return fail(ErrorCode::kToolValidationError, "remove: the workspace root is never removed");
    }
    std::lock_guard lock(mu_);
    if (ws_.files.erase(*rel) == 0) {
      if (!ws_.dirs.count(*rel))
        return fail(ErrorCode::kNotFound, "remove: " + q(path) + " does not exist");
      if (ws_.hasEntries(*rel) && !recursive) {
        return fail(ErrorCode::kExecutionRejected,
                    "remove: " + q(path) +
                        " is a directory that is not empty; set recursive to remove it with "
                        "everything below it");
      }
      eraseBelow(*rel);
      ws_.dirs.erase(*rel);
    }
    ws_.mtimes.erase(*rel);
    ws_.touch(parentOf(*rel));
    dropProvenance(*rel);
    return {};
  }

  Result<void> rename(const std::string& from, const std::string& to, bool replace) override {
    auto from_rel = checkRelativePath(from);
    if (!from_rel) return tl::unexpected(from_rel.error());
    auto to_rel = checkRelativePath(to);
    if (!to_rel) return tl::unexpected(to_rel.error());
    std::lock_guard lock(mu_);
    auto ok = checkRename(*from_rel, *to_rel, replace);
    if (!ok) return ok;
    if (*from_rel == *to_rel) return {};
    ws_.files.erase(*to_rel);
    ws_.dirs.erase(*to_rel);
    ws_.mtimes.erase(*to_rel);
    dropProvenance(*to_rel);
    rekey(ws_.files, *from_rel, *to_rel);
    rekey(ws_.mtimes, *from_rel, *to_rel);
    rekey(provenance_, *from_rel, *to_rel);
    std::set<std::string> dirs;
    for (const auto& dir : ws_.dirs) dirs.insert(renamed(dir, *from_rel, *to_rel));
    ws_.dirs = std::move(dirs);
    ws_.touch(parentOf(*from_rel));
    ws_.touch(parentOf(*to_rel));
    return {};
  }

  Result<WorkspaceStat> stat(const std::string& path) override {
    auto rel = checkRelativePath(path);
    if (!rel) return tl::unexpected(rel.error());
    std::lock_guard lock(mu_);
    WorkspaceStat out;
    auto file = ws_.files.find(*rel);
    if (file != ws_.files.end()) {
      out.size_bytes = static_cast<std::int64_t>(file->second.size());
      out.mode = 0644;
    } else if (ws_.isDir(*rel)) {
      out.type = WorkspaceEntry::Type::kDirectory;
      out.mode = 0755;
    } else {
      return fail(ErrorCode::kNotFound, "stat: " + q(path) + " does not exist");
    }
    auto when = ws_.mtimes.find(*rel);
    out.mtime_ns = when == ws_.mtimes.end() ? 0 : when->second;
    return out;
  }

  void beginSandboxCommand() override {}
  void recordSandboxChanges(const std::vector<FileChange>& /*changes*/,
                            bool /*complete*/) override {}

  bool isDirectory(const std::string& rel) {
    std::lock_guard lock(mu_);
    return ws_.isDir(rel);
  }

  // ScriptedWorkspace: a scripted command's writes and deletes.
  Result<bool> put(const std::string& path, const std::string& bytes) override {
    std::lock_guard lock(mu_);
    auto put = putFile(ws_, limits_, path, bytes);
    if (put) return true;
    if (put.error().code == ErrorCode::kExecutionRejected) return false;  // workspace full
    return tl::unexpected(put.error());
  }
  void remove(const std::string& path) override {
    std::lock_guard lock(mu_);
    ws_.files.erase(path);
    ws_.mtimes.erase(path);
  }

  std::map<std::string, std::string> files() {
    std::lock_guard lock(mu_);
    return ws_.files;
  }

  // A command's files_changed, from the files `before` it to now (at most
  // `listing` paths); the provenance record learns every change, not only
  // the listed ones: the fake sees its whole workspace.
  void commandChanged(const std::map<std::string, std::string>& before, std::int64_t listing,
                      ExecutionResult& result) {
    std::lock_guard lock(mu_);
    for (const auto& change :
         diffFiles(before, ws_.files, std::numeric_limits<std::int64_t>::max()).changes) {
      if (change.change == ChangeKind::kDeleted) {
        provenance_.erase(change.path);
      } else {
        provenance_[change.path] = WorkspaceProvenance::kSandboxWritten;
      }
    }
    DiffResult diff = diffFiles(before, ws_.files, listing);
    result.files_changed = std::move(diff.changes);
    result.files_changed_truncated = diff.truncated;
  }

 private:
  Result<void> writeFile(const std::string& path, std::string_view data, bool tool_written) {
    auto rel = checkRelativePath(path);
    if (!rel) return tl::unexpected(rel.error());
    std::lock_guard lock(mu_);
    auto put = putFile(ws_, limits_, *rel, data);
    if (!put) return put;
    if (tool_written) {
      provenance_[*rel] = WorkspaceProvenance::kToolWritten;
    } else {
      provenance_.erase(*rel);
    }
    return put;
  }

  // rename's refusals, in the local workspace's order and codes.
  Result<void> checkRename(const std::string& from, const std::string& to, bool replace) {
    if (from.empty() || to.empty()) {
      return fail(ErrorCode::kToolValidationError,
                  "rename: the workspace root cannot be moved or replaced");
    }
    if (to.size() > from.size() && to.compare(0, from.size(), from) == 0 && to[from.size()] == '/')
      return fail(ErrorCode::kToolValidationError,
                  "rename: " + q(from) + " cannot be moved below itself (" + q(to) + ")");
    if (!ws_.isDir(parentOf(from)) || (!ws_.files.count(from) && !ws_.dirs.count(from)))
      return fail(ErrorCode::kNotFound, "rename: " + q(from) + " does not exist");
    if (!ws_.isDir(parentOf(to)))
      return fail(ErrorCode::kNotFound, "rename: the directory " + q(parentOf(to)) + " that " +
                                            q(to) + " would go in does not exist");
    const bool to_exists = ws_.files.count(to) > 0 || ws_.dirs.count(to) > 0;
    if (!to_exists || from == to) return {};
    if (!replace)
      return fail(ErrorCode::kExecutionRejected,
                  "rename: " + q(to) + " already exists; set replace to overwrite it");
    const bool from_dir = ws_.dirs.count(from) > 0;
    const bool to_dir = ws_.dirs.count(to) > 0;
    if (from_dir != to_dir) {
      return fail(ErrorCode::kToolValidationError,
                  "rename: " + q(from) + " and " + q(to) +
                      " are not both directories or both non-directories");
    }
    if (to_dir && ws_.hasEntries(to))
      return fail(
          ErrorCode::kExecutionRejected,
          "rename: " + q(to) + " is a directory that is not empty; only an empty one is replaced");
    return {};
  }

  // `path` with its prefix `from` (itself or a directory above it) replaced by `to`.
  static std::string renamed(const std::string& path, const std::string& from,
                             const std::string& to) {
    if (path == from) return to;
    if (path.size() > from.size() && path.compare(0, from.size(), from) == 0 &&
        path[from.size()] == '/')
      return to + path.substr(from.size());
    return path;
  }

  template <class Map>
  static void rekey(Map& map, const std::string& from, const std::string& to) {
    Map out;
    for (auto& [key, value] : map) out.emplace(renamed(key, from, to), std::move(value));
    map = std::move(out);
  }

  // Everything strictly below the directory `dir`.
  void eraseBelow(const std::string& dir) {
    const std::string below = dir + "/";
    auto under = [&](const std::string& p) { return p.compare(0, below.size(), below) == 0; };
    std::erase_if(ws_.files, [&](const auto& f) { return under(f.first); });
    std::erase_if(ws_.dirs, under);
    std::erase_if(ws_.mtimes, [&](const auto& m) { return under(m.first); });
  }

  void dropProvenance(const std::string& rel) {
    const std::string below = rel + "/";
    std::erase_if(provenance_, [&](const auto& p) {
      return p.first == rel || p.first.compare(0, below.size(), below) == 0;
    });
  }

  std::mutex mu_;
  FakeWorkspace ws_;
  // Same rules as the local workspace: write -> TOOL_WRITTEN, created or
  // modified by a command -> SANDBOX_WRITTEN, deleted -> dropped, anything
  // else UNKNOWN.
  std::map<std::string, WorkspaceProvenance> provenance_;
  const ResourceLimits limits_;
};

std::optional<ScriptedBehaviour> basicCommands(const ExecutionCommand& command,
                                               const CommandVariables& variables) {
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
  if (name == "printenv" && argv.size() == 2) {
    auto it = variables.find(argv[1]);
    if (it == variables.end()) {
      b.exit_code = 1;
    } else {
      b.stdout_data = it->second + "\n";
    }
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

namespace {

// Scripted paths are the script author's, not the sandbox's: one that fails
// containment is an error before anything happens.
Result<ScriptedRun> planRun(ScriptedBehaviour behaviour) {
  ScriptedRun run;
  run.behaviour = std::move(behaviour);
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

}  // namespace

FakeEnvironment::FakeEnvironment(FakeOptions options)
    : HostedEnvironment(
          HostPolicy{options.service_hard_cap,
                     {std::make_shared<const SandboxImage>(SandboxImage{kFakeImageDigest, {}, {}})},
                     options.ceilings,
                     /*has_egress_route=*/true,
                     /*cgroup_prefix=*/"",
                     options.node_name,
                     options.clock}),
      options_(std::move(options)) {
  // Without its eventfd the flag still refuses new work; a running command
  // then learns of the shutdown only from destroy's end request.
  (void)initHost();
}

FakeEnvironment::~FakeEnvironment() {
  destroyAll();
}

void FakeEnvironment::script(std::vector<std::string> argv, ScriptedBehaviour behaviour) {
  std::lock_guard lock(mu_);
  scripts_[std::move(argv)] = std::move(behaviour);
}

void FakeEnvironment::setFallback(ScriptFallback fallback) {
  std::lock_guard lock(mu_);
  fallback_ = std::move(fallback);
}

std::vector<ExecutionCommand> FakeEnvironment::history() const {
  std::lock_guard lock(mu_);
  return history_;
}

std::vector<ChannelCalls> FakeEnvironment::channelCalls() const {
  std::lock_guard lock(mu_);
  return channel_calls_;
}

std::size_t FakeEnvironment::liveCount() const {
  return sandboxes_.ids().size();
}

ScriptedBehaviour FakeEnvironment::behaviourFor(const ExecutionCommand& command,
                                                const CommandVariables& variables) {
  std::lock_guard lock(mu_);
  history_.push_back(command);
  if (auto it = scripts_.find(command.argv); it != scripts_.end()) return it->second;
  if (auto b = fallback_ ? fallback_(command, variables) : std::nullopt) return std::move(*b);
  ScriptedBehaviour not_found;
  not_found.stderr_data = "airlock-fake: " + command.argv[0] + ": command not found\n";
  not_found.exit_code = 127;
  return not_found;
}

Result<void> FakeEnvironment::setUp(FakeRecord& sandbox, const EnvironmentSpec& spec,
                                    bool /*egress*/) {
  if (spec.tenant_id.empty()) return fail(ErrorCode::kExecutionRejected, "tenant_id is empty");
  if (spec.run_id.empty()) return fail(ErrorCode::kExecutionRejected, "run_id is empty");
  sandbox.memory = std::make_shared<MemoryWorkspace>(sandbox.limits);
  sandbox.workspace = sandbox.memory;
  return {};
}

// Nothing of a fake sandbox outlives its record.
void FakeEnvironment::teardown(FakeRecord& /*sandbox*/) {}

// A command that runs until cancelled has been told why it ends (the end
// request); nothing else runs.
void FakeEnvironment::destroyTaken(std::shared_ptr<FakeRecord> /*sandbox*/) {}

Result<std::unique_ptr<SideProcess>> FakeEnvironment::launchSideProcess(
    const std::shared_ptr<FakeRecord>& /*sandbox*/, const SideCommand& /*command*/) {
  return fail(ErrorCode::kExecutionUnavailable, "this mechanism cannot start side processes");
}

Result<void> FakeEnvironment::checkWorkingDirectory(FakeRecord& sandbox, const std::string& cwd) {
  if (sandbox.memory->isDirectory(cwd)) return {};
  return fail(ErrorCode::kToolValidationError,
              "working_directory \"" + cwd + "\" is not a directory inside the workspace");
}

Result<ExecutionResult> FakeEnvironment::runCommand(const CommandRun& run) {
  FakeRecord& sb = *run.admitted.sandbox;
  auto plan = planRun(behaviourFor(
      run.command,
      host::commandVariables(sb.environment, run.command.env_additions, run.admitted.cwd)));
  if (!plan) return tl::unexpected(plan.error());
  auto channel = ScriptedChannel::create(std::move(*plan), *sb.memory);
  if (!channel) return tl::unexpected(channel.error());
  const auto before = sb.memory->files();
  host::LimitSource* const sources[] = {&(*channel)->diskLimit()};
  auto result = superviseNamed(run, **channel, sources, channel->get());
  {
    std::lock_guard lock(mu_);
    channel_calls_.push_back((*channel)->calls());
  }
  if (!result) return result;
  sb.memory->commandChanged(before, options_.files_changed_listing, *result);
  if (const auto& failure = (*channel)->failure()) return tl::unexpected(*failure);
  host::afterCommand(*this, sandboxes_, run.admitted, *result);  // EXPIRED expires the sandbox
  return result;
}

}  // namespace airlock::fake
