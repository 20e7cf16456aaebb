#include "airlock/port/wire_json.h"

#include <chrono>
#include <cstdint>
#include <limits>
#include <utility>

#include "airlock/core/json_fields.h"

namespace airlock {

using json = nlohmann::json;
using namespace json_fields;  // NOLINT(google-build-using-namespace)

namespace {

constexpr ErrorCode kAllErrorCodes[] = {
    ErrorCode::kExecutionUnavailable,
    ErrorCode::kExecutionRejected,
    ErrorCode::kSandboxEscapeSuspected,
    ErrorCode::kWorkspaceEscape,
    ErrorCode::kToolValidationError,
    ErrorCode::kArtifactIntegrityError,
    ErrorCode::kNotFound,
    ErrorCode::kConfigurationError,
    ErrorCode::kEnvironmentBusy,
    ErrorCode::kEnvironmentGone,
};

std::uint64_t countField(const json& j, const char* name,
                         std::uint64_t max = std::numeric_limits<std::uint64_t>::max()) {
  const json& v = member(j, name);
  auto n = countFromJson(v, CountSpec{name, "", max});
  if (!n) fieldError(name, n.error().context);
  return *n;
}

std::optional<int> optionalInt(const json& j, const char* name) {
  const json* v = optionalMember(j, name);
  if (v == nullptr) return std::nullopt;
  return intValue(*v, name);
}

std::optional<std::string> optionalString(const json& j, const char* name) {
  const json* v = optionalMember(j, name);
  if (v == nullptr) return std::nullopt;
  return stringValue(*v, name);
}

std::optional<WorkspaceEntry::Type> parseEntryType(std::string_view name) noexcept {
  for (auto t : {WorkspaceEntry::Type::kFile, WorkspaceEntry::Type::kDirectory,
                 WorkspaceEntry::Type::kSymlink, WorkspaceEntry::Type::kOther}) {
    if (name == workspaceEntryTypeName(t)) return t;
  }
  return std::nullopt;
}

WorkspaceEntry::Type entryTypeField(const json& j, const char* name) {
  const json& v = member(j, name);
  return nested(name, [&] {
    return enumValue<WorkspaceEntry::Type>(v, parseEntryType,
                                           {"file", "directory", "symlink", "other"});
  });
}

std::optional<WorkspaceProvenance> parseProvenance(std::string_view name) noexcept {
  for (auto p : {WorkspaceProvenance::kUnknown, WorkspaceProvenance::kToolWritten,
                 WorkspaceProvenance::kSandboxWritten}) {
    if (name == workspaceProvenanceName(p)) return p;
  }
  return std::nullopt;
}

std::optional<JobState> parseJobState(std::string_view name) noexcept {
  for (auto s : {JobState::kRunning, JobState::kExited, JobState::kKilled}) {
    if (name == jobStateName(s)) return s;
  }
  return std::nullopt;
}

std::optional<JobKillReason> parseJobKillReason(std::string_view name) noexcept {
  for (auto r :
       {JobKillReason::kRequested, JobKillReason::kDeadline, JobKillReason::kEnvironment}) {
    if (name == jobKillReasonName(r)) return r;
  }
  return std::nullopt;
}

std::map<std::string, std::string> stringMapField(const json& j, const char* name) {
  std::map<std::string, std::string> out;
  const json* v = optionalMember(j, name);
  if (v == nullptr) return out;
  if (!v->is_object()) fieldError(name, "must be an object");
  for (const auto& [key, value] : v->items()) {
    out[key] = bytesValue(value, joinField(name, key));
  }
  return out;
}

json stringMapJson(const std::map<std::string, std::string>& map) {
  json out = json::object();
  for (const auto& [key, value] : map) out[key] = bytesToJson(value);
  return out;
}

std::vector<std::string> bytesArrayField(const json& j, const char* name) {
  const json& v = member(j, name);
  if (!v.is_array()) fieldError(name, "must be an array");
  std::vector<std::string> out;
  out.reserve(v.size());
  for (std::size_t k = 0; k < v.size(); ++k) {
    out.push_back(bytesValue(v[k], std::string(name) + "[" + std::to_string(k) + "]"));
  }
  return out;
}

json bytesArrayJson(const std::vector<std::string>& items) {
  json out = json::array();
  for (const auto& item : items) out.push_back(bytesToJson(item));
  return out;
}

}  // namespace

std::optional<ErrorCode> parseErrorCode(std::string_view name) noexcept {
  for (ErrorCode code : kAllErrorCodes) {
    if (errorCodeName(code) == name) return code;
  }
  return std::nullopt;
}

// --- Error ------------------------------------------------------------------

void to_json(json& j, const Error& v) {
  j = json{{"code", errorCodeName(v.code)}, {"message", v.message()}};
}

void from_json(const json& j, Error& v) {
  requireObject(j);
  const json& code = member(j, "code");
  v.code = nested("code", [&] {
    return enumValue<ErrorCode>(
        code, parseErrorCode,
        {"execution_unavailable", "execution_rejected", "sandbox_escape_suspected",
         "workspace_escape", "tool_validation_error", "artifact_integrity_error", "not_found",
         "configuration_error", "environment_busy", "environment_gone"});
  });
  v.sys_errno = 0;
  v.context = stringField(j, "message");
}

// --- the node ---------------------------------------------------------------

void to_json(json& j, const NodeStatus& v) {
  j = json{{"name", v.name}, {"live", v.live}, {"capacity", v.capacity}};
}

void from_json(const json& j, NodeStatus& v) {
  requireObject(j);
  v.name = stringField(j, "name");
  v.live = countField(j, "live");
  v.capacity = countField(j, "capacity");
}

void to_json(json& j, const LiveEnvironment& v) {
  const auto age = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - v.provisioned_at);
  j = json{{"handle", v.handle},
           {"provisioned_ms_ago", std::max<std::int64_t>(0, age.count())},
           {"busy_ns", v.busy.count()},
           {"wall_clock_seconds", v.wall_clock_seconds},
           {"destroy_failures", v.destroy_failures},
           {"egress", v.egress},
           {"image_digest", v.image_digest}};
}

void from_json(const json& j, LiveEnvironment& v) {
  requireObject(j);
  v.handle = decodeField<EnvironmentHandle>(j, "handle");
  const std::int64_t age_ms = nonNegativeField(j, "provisioned_ms_ago");
  v.provisioned_at = std::chrono::steady_clock::now() - std::chrono::milliseconds(age_ms);
  v.busy = std::chrono::nanoseconds(nonNegativeField(j, "busy_ns"));
  v.wall_clock_seconds = int64Field(j, "wall_clock_seconds");
  v.destroy_failures = intValue(member(j, "destroy_failures"), "destroy_failures");
  v.egress = decodeField<EgressPolicy>(j, "egress");
  v.image_digest = stringField(j, "image_digest");
}

// --- the workspace ----------------------------------------------------------

void to_json(json& j, const WorkspaceEntry& v) {
  j = json{{"name", bytesToJson(v.name)},
           {"type", workspaceEntryTypeName(v.type)},
           {"size_bytes", v.size_bytes}};
}

void from_json(const json& j, WorkspaceEntry& v) {
  requireObject(j);
  v.name = bytesField(j, "name");
  v.type = entryTypeField(j, "type");
  v.size_bytes = nonNegativeField(j, "size_bytes");
}

void to_json(json& j, const WorkspaceStat& v) {
  j = json{{"type", workspaceEntryTypeName(v.type)},
           {"size_bytes", v.size_bytes},
           {"mode", v.mode},
           {"mtime_ns", v.mtime_ns}};
}

void from_json(const json& j, WorkspaceStat& v) {
  requireObject(j);
  v.type = entryTypeField(j, "type");
  v.size_bytes = nonNegativeField(j, "size_bytes");
  const std::int64_t mode = nonNegativeField(j, "mode");
  if (mode > 07777) fieldError("mode", "must be permission bits (at most 07777)");
  v.mode = static_cast<std::uint32_t>(mode);
  v.mtime_ns = int64Field(j, "mtime_ns");
}

void to_json(json& j, WorkspaceProvenance v) {
  j = workspaceProvenanceName(v);
}

void from_json(const json& j, WorkspaceProvenance& v) {
  v = enumValue<WorkspaceProvenance>(j, parseProvenance,
                                     {"unknown", "tool_written", "sandbox_written"});
}

// --- side commands and jobs ---------------------------------------------------

void to_json(json& j, const TerminalSize& v) {
  j = json{{"rows", v.rows}, {"columns", v.columns}};
}

void from_json(const json& j, TerminalSize& v) {
  requireObject(j);
  v.rows = static_cast<std::uint16_t>(countField(j, "rows", kMaxTerminalCells));
  v.columns = static_cast<std::uint16_t>(countField(j, "columns", kMaxTerminalCells));
  if (auto valid = checkTerminalSize(v); !valid) fieldError("", valid.error().context);
}

void to_json(json& j, const SideCommand& v) {
  j = json{{"argv", bytesArrayJson(v.argv)},
           {"working_directory", bytesToJson(v.working_directory)},
           {"env", stringMapJson(v.env_additions)},
           {"with_stdin", v.with_stdin},
           {"terminal", v.terminal ? json(*v.terminal) : json(nullptr)}};
}

void from_json(const json& j, SideCommand& v) {
  requireObject(j);
  v.argv = bytesArrayField(j, "argv");
  v.working_directory = bytesField(j, "working_directory");
  v.env_additions = stringMapField(j, "env");
  v.with_stdin = boolField(j, "with_stdin");
  v.terminal.reset();
  if (optionalMember(j, "terminal") != nullptr)
    v.terminal = decodeField<TerminalSize>(j, "terminal");
}

void to_json(json& j, const JobStartRequest& v) {
  j = json{{"command", v.command}, {"wall_ms", v.wall_ms ? json(*v.wall_ms) : json(nullptr)}};
}

void from_json(const json& j, JobStartRequest& v) {
  requireObject(j);
  v.command = decodeField<SideCommand>(j, "command");
  v.wall_ms.reset();
  if (optionalMember(j, "wall_ms") != nullptr) v.wall_ms = countField(j, "wall_ms");
  v.spill = JobSpillSettings{};
}

void to_json(json& j, const JobStarted& v) {
  j = json{{"job_id", v.job_id}, {"wall_ms", v.wall_ms}, {"deadline", formatTimestamp(v.deadline)}};
}

void from_json(const json& j, JobStarted& v) {
  requireObject(j);
  v.job_id = stringField(j, "job_id");
  v.wall_ms = countField(j, "wall_ms");
  v.deadline = timestampField(j, "deadline");
}

void to_json(json& j, const JobStreamSlice& v) {
  j = json{{"data", bytesToJson(v.data)}, {"cursor", v.cursor}, {"dropped", v.dropped}};
}

void from_json(const json& j, JobStreamSlice& v) {
  requireObject(j);
  v.data = bytesField(j, "data");
  v.cursor = countField(j, "cursor");
  v.dropped = countField(j, "dropped");
}

void to_json(json& j, const JobStreamSpill& v) {
  j = json{{"error", v.error ? json(*v.error) : json(nullptr)},
           {"artifact_id", v.artifact_id ? json(*v.artifact_id) : json(nullptr)},
           {"media_type", v.media_type},
           {"sha256", v.sha256},
           {"size_bytes", v.size_bytes},
           {"dropped_bytes", v.dropped_bytes}};
}

void from_json(const json& j, JobStreamSpill& v) {
  requireObject(j);
  v.error = optionalString(j, "error");
  v.artifact_id = optionalString(j, "artifact_id");
  v.media_type = stringField(j, "media_type");
  v.sha256 = stringField(j, "sha256");
  v.size_bytes = countField(j, "size_bytes");
  v.dropped_bytes = countField(j, "dropped_bytes");
}

void to_json(json& j, const JobSnapshot& v) {
  const char* reason = jobKillReasonName(v.kill_reason);
  j = json{{"job_id", v.job_id},
           {"argv", bytesArrayJson(v.argv)},
           {"state", jobStateName(v.state)},
           {"kill_reason", reason != nullptr ? json(reason) : json(nullptr)},
           {"exit_code", v.exit_code ? json(*v.exit_code) : json(nullptr)},
           {"signal", v.signal ? json(*v.signal) : json(nullptr)},
           {"pending", v.pending},
           {"stdout", v.out},
           {"stderr", v.err},
           {"spill", v.spill ? json{{"stdout", v.spill->first}, {"stderr", v.spill->second}}
                             : json(nullptr)},
           {"wall_ms", v.wall_ms},
           {"deadline", formatTimestamp(v.deadline)},
           {"terminal", v.terminal ? json(*v.terminal) : json(nullptr)}};
}

void from_json(const json& j, JobSnapshot& v) {
  requireObject(j);
  v.job_id = stringField(j, "job_id");
  v.argv = bytesArrayField(j, "argv");
  const json& state = member(j, "state");
  v.state = nested("state", [&] {
    return enumValue<JobState>(state, parseJobState, {"running", "exited", "killed"});
  });
  v.kill_reason = JobKillReason::kNone;
  if (const json* reason = optionalMember(j, "kill_reason")) {
    v.kill_reason = nested("kill_reason", [&] {
      return enumValue<JobKillReason>(*reason, parseJobKillReason,
                                      {"requested", "deadline", "environment_destroyed"});
    });
  }
  v.exit_code = optionalInt(j, "exit_code");
  v.signal = optionalInt(j, "signal");
  v.pending = boolField(j, "pending");
  v.out = decodeField<JobStreamSlice>(j, "stdout");
  v.err = decodeField<JobStreamSlice>(j, "stderr");
  v.spill.reset();
  if (const json* spill = optionalMember(j, "spill")) {
    nested("spill", [&] {
      requireObject(*spill);
      v.spill.emplace(decodeField<JobStreamSpill>(*spill, "stdout"),
                      decodeField<JobStreamSpill>(*spill, "stderr"));
    });
  }
  v.wall_ms = countField(j, "wall_ms");
  v.deadline = timestampField(j, "deadline");
  v.terminal.reset();
  if (optionalMember(j, "terminal") != nullptr)
    v.terminal = decodeField<TerminalSize>(j, "terminal");
}

void to_json(json& j, const JobPollRequest& v) {
  j = json{{"job_id", v.job_id},
           {"stdout_cursor", v.stdout_cursor},
           {"stderr_cursor", v.stderr_cursor},
           {"wait_ms", v.wait_ms}};
}

void from_json(const json& j, JobPollRequest& v) {
  requireObject(j);
  v.job_id = stringField(j, "job_id");
  v.stdout_cursor = countField(j, "stdout_cursor");
  v.stderr_cursor = countField(j, "stderr_cursor");
  v.wait_ms = countField(j, "wait_ms", kMaxJobWaitMs);
  v.cancel = nullptr;
}

}  // namespace airlock
