#include "airlock/core/json.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <unordered_set>
#include <vector>

#include "airlock/core/encoding.h"
#include "airlock/core/json_fields.h"
#include "airlock/core/limits_defaults.h"

namespace airlock {

using nlohmann::json;

JsonFieldError::JsonFieldError(std::string field, std::string problem)
    : nlohmann::json::exception(
          599, (field.empty() ? "value " + problem : "field \"" + field + "\" " + problem).c_str()),
      field_(std::move(field)),
      problem_(std::move(problem)) {}

std::string JsonFieldError::describe() const {
  return what();
}

namespace json_detail {
std::string withoutExceptionTag(const char* what) {
  std::string_view text(what);
  if (text.starts_with("[json.exception.")) {
    const auto end = text.find("] ");
    if (end != std::string_view::npos) text.remove_prefix(end + 2);
  }
  return std::string(text);
}
}  // namespace json_detail

// --- untrusted text and integers -------------------------------------------

namespace {

// Thrown out of the parser callback to end the parse at a repeated key.
struct DuplicateKey {
  std::string key;
};

}  // namespace

Result<json> parseUntrustedJson(std::string_view text) {
  // The keys seen so far in each object still open, innermost last.
  std::vector<std::unordered_set<std::string>> open;
  const json::parser_callback_t check = [&open](int, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        open.emplace_back();
        break;
      case json::parse_event_t::object_end:
        if (!open.empty()) open.pop_back();
        break;
      case json::parse_event_t::key:
        if (!open.empty() && !open.back().insert(parsed.get_ref<const std::string&>()).second)
          throw DuplicateKey{parsed.get<std::string>()};
        break;
      default:
        break;
    }
    return true;
  };
  try {
    return json::parse(text, check, /*allow_exceptions=*/true);
  } catch (const DuplicateKey& d) {
    return fail(ErrorCode::kToolValidationError,
                "the key " + quoteForMessage(d.key) + " appears twice in one object");
  } catch (const json::exception& e) {
    return fail(ErrorCode::kToolValidationError, json_detail::withoutExceptionTag(e.what()));
  } catch (const std::bad_alloc&) {
    return fail(ErrorCode::kToolValidationError, "too large to parse");
  }
}

Result<std::int64_t> int64FromJson(const json& v) {
  constexpr auto kMax = std::numeric_limits<std::int64_t>::max();
  constexpr auto kMin = std::numeric_limits<std::int64_t>::min();
  const auto tooLarge = [] {
    return fail(ErrorCode::kToolValidationError,
                "is out of range: the largest allowed is " + std::to_string(kMax));
  };
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(kMax)) return tooLarge();
    return static_cast<std::int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<std::int64_t>();
  if (v.is_number_float()) {
    // nlohmann keeps an integer literal that fits no 64-bit type as a
    // double: a whole number, just too far from zero. Such a double is at
    // least 2^63 or at most -2^63 (-2^63 - 1 rounds to it; -2^63 itself
    // parses as an int64 and never arrives here).
    const double d = v.get<double>();
    if (std::isfinite(d) && std::trunc(d) == d) {
      if (d >= 0x1p63) return tooLarge();
      if (d <= -0x1p63)
        return fail(ErrorCode::kToolValidationError,
                    "is out of range: the smallest allowed is " + std::to_string(kMin));
    }
  }
  return fail(ErrorCode::kToolValidationError, "must be a whole number");
}

namespace {

// A count's maximum below this is spelled out in its expectation; one at or
// past it is too large for anyone to type, so only a value past it names it.
constexpr std::uint64_t kSpelledMax = std::uint64_t{1} << 53;

}  // namespace

std::string countExpectation(const CountSpec& spec) {
  std::string out = std::string(spec.field) + " must be a whole number";
  if (!spec.unit.empty()) out += " of " + std::string(spec.unit);
  if (spec.max < kSpelledMax) return out + " from 0 to " + std::to_string(spec.max);
  return out + ", 0 or more";
}

Result<std::uint64_t> countFromJson(const json& value, const CountSpec& spec) {
  const auto refuse = [&] { return fail(ErrorCode::kToolValidationError, countExpectation(spec)); };
  const auto past = [&] {
    if (spec.max < kSpelledMax) return refuse();
    return fail(ErrorCode::kToolValidationError, std::string(spec.field) +
                                                     " is out of range: the largest allowed is " +
                                                     std::to_string(spec.max));
  };
  if (value.is_number_unsigned()) {
    const auto u = value.get<std::uint64_t>();
    if (u > spec.max) return past();
    return u;
  }
  // Parsed, a non-negative integer is unsigned; built from a signed value,
  // it is signed whatever its sign.
  if (value.is_number_integer()) {
    const auto i = value.get<std::int64_t>();
    if (i < 0) return refuse();
    if (static_cast<std::uint64_t>(i) > spec.max) return past();
    return static_cast<std::uint64_t>(i);
  }
  // An integer literal too long for 64 bits is kept as a whole double.
  if (value.is_number_float()) {
    const double d = value.get<double>();
    if (std::isfinite(d) && std::trunc(d) == d && d >= 0x1p63) return past();
  }
  return refuse();
}

Result<std::uint64_t> countFromText(std::string_view text, const CountSpec& spec) {
  std::uint64_t v = 0;
  const char* end = text.data() + text.size();
  auto [stop, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc{} || stop != end || v > spec.max)
    return fail(ErrorCode::kToolValidationError, countExpectation(spec));
  return v;
}

using namespace json_fields;  // NOLINT(google-build-using-namespace)

// --- bytes -----------------------------------------------------------------

json bytesToJson(std::string_view bytes) {
  if (isValidUtf8(bytes)) return json(std::string(bytes));
  return json{{"base64", base64Encode(bytes)}};
}

Result<std::string> bytesFromJson(const json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object() && j.size() == 1) {
    const auto it = j.find("base64");
    if (it != j.end() && it->is_string()) {
      auto decoded = base64Decode(it->get_ref<const std::string&>());
      if (!decoded) {
        return fail(ErrorCode::kToolValidationError, "has " + decoded.error().context);
      }
      return decoded;
    }
  }
  return fail(ErrorCode::kToolValidationError,
              "must be a string or an object {\"base64\": \"...\"}");
}

// --- timestamps ------------------------------------------------------------

namespace {

using namespace std::chrono;

constexpr Timestamp kMinTimestamp{
    duration_cast<milliseconds>(sys_days{year{0} / January / 1}.time_since_epoch())};
constexpr Timestamp kMaxTimestamp{
    duration_cast<milliseconds>(sys_days{year{10000} / January / 1}.time_since_epoch()) -
    milliseconds{1}};

}  // namespace

std::string formatTimestamp(Timestamp t) {
  // Outside 0000..9999 RFC 3339 has no spelling; clamp rather than emit one.
  t = std::clamp(t, kMinTimestamp, kMaxTimestamp);
  const auto day = floor<days>(t);
  const year_month_day ymd{day};
  const auto ms_of_day = (t - day).count();
  char buffer[64];
  (void)std::snprintf(buffer, sizeof buffer, "%04d-%02u-%02uT%02lld:%02lld:%02lld.%03lldZ",
                      static_cast<int>(ymd.year()), static_cast<unsigned>(ymd.month()),
                      static_cast<unsigned>(ymd.day()), static_cast<long long>(ms_of_day / 3600000),
                      static_cast<long long>(ms_of_day / 60000 % 60),
                      static_cast<long long>(ms_of_day / 1000 % 60),
                      static_cast<long long>(ms_of_day % 1000));
  return buffer;
}

Result<Timestamp> parseTimestamp(std::string_view text) {
  const auto bad = [&](std::string_view why) {
    return fail(ErrorCode::kToolValidationError,
                "invalid timestamp " + quoteForMessage(text) + ": " + std::string(why) +
                    " (expected RFC 3339 like 2026-11-30T02:43:57.123Z)");
  };
  std::size_t pos = 0;
  const auto digits = [&](std::size_t count, int& out) {
    if (text.size() - pos < count) return false;
    out = 0;
    for (std::size_t k = 0; k < count; ++k) {
      const char c = text[pos + k];
      if (c < '0' || c > '9') return false;
      out = out * 10 + (c - '0');
    }
    pos += count;
    return true;
  };
  const auto literal = [&](char a, char b) {
    if (pos >= text.size() || (text[pos] != a && text[pos] != b)) return false;
    ++pos;
    return true;
  };

  int y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  if (!digits(4, y) || !literal('-', '-') || !digits(2, mo) || !literal('-', '-') ||
      !digits(2, d)) {
    return bad("malformed date");
  }
  if (!literal('T', 't')) return bad("missing 'T' between date and time");
  if (!digits(2, h) || !literal(':', ':') || !digits(2, mi) || !literal(':', ':') ||
      !digits(2, s)) {
    return bad("malformed time");
  }
  const year_month_day ymd{year{y}, month{static_cast<unsigned>(mo)},
                           day{static_cast<unsigned>(d)}};
  if (!ymd.ok()) return bad("no such date");
  if (h > 23 || mi > 59 || s > 59) return bad("time out of range");

  long long millis = 0;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    std::size_t count = 0;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      if (count < 3) millis = millis * 10 + (text[pos] - '0');
      ++count;
      ++pos;
    }
    if (count == 0) return bad("empty fraction of a second");
    for (std::size_t k = count; k < 3; ++k) millis *= 10;
  }

  long long offset_minutes = 0;
  if (literal('Z', 'z')) {
    // UTC
  } else if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    const bool negative = text[pos] == '-';
    ++pos;
    int oh = 0, om = 0;
    if (!digits(2, oh) || !literal(':', ':') || !digits(2, om) || oh > 23 || om > 59) {
      return bad("malformed UTC offset");
    }
    offset_minutes = (negative ? -1 : 1) * (oh * 60LL + om);
  } else {
    return bad("missing time zone ('Z' or an offset like +02:00)");
  }
  if (pos != text.size()) return bad("unexpected text after the time zone");

  const auto local = sys_days{ymd} + hours{h} + minutes{mi} + seconds{s} + milliseconds{millis};
  const Timestamp utc{duration_cast<milliseconds>(local.time_since_epoch()) -
                      duration_cast<milliseconds>(minutes{offset_minutes})};
  return utc;
}

// --- enums -----------------------------------------------------------------

void to_json(json& j, KillReason v) {
  j = std::string(killReasonName(v));
}

void from_json(const json& j, KillReason& v) {
  v = enumValue(j, parseKillReason,
                {"TIMEOUT", "MEMORY", "OUTPUT_LIMIT", "PIDS", "DISK", "CANCELLED", "EXPIRED",
                 "SERVICE_SHUTDOWN"});
}

void to_json(json& j, ChangeKind v) {
  j = std::string(changeKindName(v));
}

void from_json(const json& j, ChangeKind& v) {
  v = enumValue(j, parseChangeKind, {"CREATED", "MODIFIED", "DELETED"});
}

// --- ResourceLimits --------------------------------------------------------

// Both directions walk the spec's limits table (limits_defaults.h).
void to_json(json& j, const ResourceLimits& v) {
  j = json::object();
  const auto fields = limitFields(v);
  for (std::size_t i = 0; i < fields.size(); ++i) j[limitTable()[i].name] = *fields[i];
}

void from_json(const json& j, ResourceLimits& v) {
  requireObject(j);
  // Every field is required: a forgotten limit must not become a default.
  const auto fields = limitFields(v);
  for (std::size_t i = 0; i < fields.size(); ++i) *fields[i] = int64Field(j, limitTable()[i].name);
}

// --- EgressPolicy ----------------------------------------------------------

void to_json(json& j, const EgressPolicy& v) {
  json destinations = json::array();
  for (const auto& d : v.destinations) {
    destinations.push_back(json{{"host", d.host}, {"ports", d.ports}});
  }
  j = json{{"mode", v.mode == EgressMode::kAllowlist ? "allowlist" : "deny"},
           {"destinations", std::move(destinations)}};
}

void from_json(const json& j, EgressPolicy& v) {
  requireObject(j);
  const std::string mode = stringField(j, "mode");
  if (mode == "deny") {
    v.mode = EgressMode::kDeny;
  } else if (mode == "allowlist") {
    v.mode = EgressMode::kAllowlist;
  } else {
    fieldError("mode", "must be \"deny\" or \"allowlist\" (got " + quoteForMessage(mode) + ")");
  }
  v.destinations.clear();
  const json* list = optionalMember(j, "destinations");
  if (list == nullptr) return;
  if (!list->is_array()) fieldError("destinations", "must be an array");
  for (std::size_t i = 0; i < list->size(); ++i) {
    const std::string at = "destinations[" + std::to_string(i) + "]";
    const json& entry = (*list)[i];
    nested(at, [&] {
      requireObject(entry);
      EgressDestination d;
      d.host = stringField(entry, "host");
      const json& ports = member(entry, "ports");
      if (!ports.is_array()) fieldError("ports", "must be an array of port numbers");
      for (std::size_t k = 0; k < ports.size(); ++k) {
        const std::string port_at = "ports[" + std::to_string(k) + "]";
        const std::int64_t port = int64Value(ports[k], port_at);
        if (port < 1 || port > 65535) fieldError(port_at, "must be a port number 1-65535");
        d.ports.push_back(static_cast<int>(port));
      }
      v.destinations.push_back(std::move(d));
    });
  }
}

// --- EnvironmentSpec -------------------------------------------------------

void to_json(json& j, const EnvironmentSpec& v) {
  json environment = json::object();
  for (const auto& [name, value] : v.environment) environment[name] = bytesToJson(value);
  json bridge = nullptr;
  if (v.bridge) bridge = json{{"socket_path", v.bridge->socket_path}, {"token", v.bridge->token}};
  j = json{{"tenant_id", v.tenant_id},
           {"run_id", v.run_id},
           {"lease_epoch", v.lease_epoch},
           {"image_digest", v.image_digest},
           {"limits", v.limits},
           {"egress", v.egress},
           {"environment", std::move(environment)},
           {"bridge", std::move(bridge)}};
}

void from_json(const json& j, EnvironmentSpec& v) {
  requireObject(j);
  v.tenant_id = stringField(j, "tenant_id");
  v.run_id = stringField(j, "run_id");
  v.lease_epoch = int64Field(j, "lease_epoch");
  v.image_digest = stringField(j, "image_digest");
  v.limits = decodeField<ResourceLimits>(j, "limits");
  v.egress = decodeField<EgressPolicy>(j, "egress");
  const json& environment = member(j, "environment");
  if (!environment.is_object()) fieldError("environment", "must be an object of strings");
  v.environment.clear();
  for (const auto& [name, value] : environment.items()) {
    v.environment.emplace(name, bytesValue(value, "environment." + name));
  }
  v.bridge.reset();
  if (const json* bridge = optionalMember(j, "bridge")) {
    nested("bridge", [&] {
      requireObject(*bridge);
      v.bridge = BridgeEndpoint{stringField(*bridge, "socket_path"), stringField(*bridge, "token")};
    });
  }
}

// --- EnvironmentHandle -----------------------------------------------------

void to_json(json& j, const EnvironmentHandle& v) {
  j = json{{"environment_id", v.environment_id},
           {"tenant_id", v.tenant_id},
           {"run_id", v.run_id},
           {"lease_epoch", v.lease_epoch},
           {"created_at", formatTimestamp(v.created_at)},
           {"expires_at", formatTimestamp(v.expires_at)}};
}

void from_json(const json& j, EnvironmentHandle& v) {
  requireObject(j);
  v.environment_id = stringField(j, "environment_id");
  v.tenant_id = stringField(j, "tenant_id");
  v.run_id = stringField(j, "run_id");
  v.lease_epoch = int64Field(j, "lease_epoch");
  v.created_at = timestampField(j, "created_at");
  v.expires_at = timestampField(j, "expires_at");
}

// --- ExecutionCommand ------------------------------------------------------

void to_json(json& j, const ExecutionCommand& v) {
  json argv = json::array();
  for (const auto& arg : v.argv) argv.push_back(bytesToJson(arg));
  j = json{{"argv", std::move(argv)},
           {"working_directory", bytesToJson(v.working_directory)},
           {"timeout_seconds", v.timeout_seconds},
           {"stdin", v.stdin_data ? bytesToJson(*v.stdin_data) : json(nullptr)},
           {"maximum_output_bytes", v.maximum_output_bytes}};
  if (!v.env_additions.empty()) {
    json env = json::object();
    for (const auto& [name, value] : v.env_additions) env[name] = bytesToJson(value);
    j["env"] = std::move(env);
  }
  if (!v.execution_id.empty()) j["execution_id"] = bytesToJson(v.execution_id);
}

void from_json(const json& j, ExecutionCommand& v) {
  requireObject(j);
  const json& argv = member(j, "argv");
  if (!argv.is_array()) {
    fieldError("argv", argv.is_string()
                           ? "must be an argument vector like [\"python3\", \"script.py\"], "
                             "not a single string"
                           : "must be an array of strings");
  }
  v.argv.clear();
  for (std::size_t i = 0; i < argv.size(); ++i) {
    v.argv.push_back(bytesValue(argv[i], "argv[" + std::to_string(i) + "]"));
  }
  v.working_directory = bytesField(j, "working_directory");
  v.timeout_seconds = int64Field(j, "timeout_seconds");
  v.stdin_data.reset();
  if (const json* in = optionalMember(j, "stdin")) v.stdin_data = bytesValue(*in, "stdin");
  v.maximum_output_bytes = int64Field(j, "maximum_output_bytes");
  v.env_additions.clear();
  if (const json* env = optionalMember(j, "env")) {
    if (!env->is_object()) fieldError("env", "must be an object of strings");
    for (const auto& [name, value] : env->items())
      v.env_additions.emplace(name, bytesValue(value, "env." + name));
  }
  v.execution_id.clear();
  if (const json* id = optionalMember(j, "execution_id"))
    v.execution_id = bytesValue(*id, "execution_id");
}

// --- FileChange ------------------------------------------------------------

void to_json(json& j, const FileChange& v) {
  j = json{{"path", bytesToJson(v.path)},
           {"change", v.change},
           {"size_bytes", v.size_bytes},
           {"sha256", v.sha256 ? json(*v.sha256) : json(nullptr)}};
}

void from_json(const json& j, FileChange& v) {
  requireObject(j);
  v.path = bytesField(j, "path");
  v.change = decodeField<ChangeKind>(j, "change");
  v.size_bytes = nonNegativeField(j, "size_bytes");
  v.sha256.reset();
  if (const json* sha = optionalMember(j, "sha256")) v.sha256 = stringValue(*sha, "sha256");
  if (v.change == ChangeKind::kDeleted && v.sha256) {
    fieldError("sha256", "must be null for a DELETED change");
  }
  // A CREATED or MODIFIED file may carry no sha256 when it was too large to
  // hash within the diff's budget (a sparse file; workspace/snapshot.h).
}

// --- ExecutionResult -------------------------------------------------------

void to_json(json& j, const ExecutionResult& v) {
  j = json{{"exit_code", v.exit_code ? json(*v.exit_code) : json(nullptr)},
           {"stdout", bytesToJson(v.stdout_data)},
           {"stderr", bytesToJson(v.stderr_data)},
           {"stdout_truncated", v.stdout_truncated},
           {"stderr_truncated", v.stderr_truncated},
           {"timed_out", v.timed_out},
           {"killed_by", v.killed_by ? json(*v.killed_by) : json(nullptr)},
           {"files_changed", v.files_changed},
           {"files_changed_truncated", v.files_changed_truncated},
           {"output_held_open", v.output_held_open},
           {"duration_ms", v.duration_ms},
           {"peak_memory_bytes", v.peak_memory_bytes ? json(*v.peak_memory_bytes) : json(nullptr)},
           {"cpu_time_ms", v.cpu_time_ms ? json(*v.cpu_time_ms) : json(nullptr)}};
}

void from_json(const json& j, ExecutionResult& v) {
  requireObject(j);
  v.exit_code.reset();
  if (const json* code = optionalMember(j, "exit_code")) v.exit_code = intValue(*code, "exit_code");
  v.stdout_data = bytesField(j, "stdout");
  v.stderr_data = bytesField(j, "stderr");
  v.stdout_truncated = boolField(j, "stdout_truncated");
  v.stderr_truncated = boolField(j, "stderr_truncated");
  v.timed_out = boolField(j, "timed_out");
  v.killed_by.reset();
  if (const json* reason = optionalMember(j, "killed_by")) {
    v.killed_by = nested("killed_by", [&] { return reason->get<KillReason>(); });
  }
  const json& files = member(j, "files_changed");
  if (!files.is_array()) fieldError("files_changed", "must be an array");
  v.files_changed.clear();
  for (std::size_t i = 0; i < files.size(); ++i) {
    v.files_changed.push_back(nested("files_changed[" + std::to_string(i) + "]",
                                     [&] { return files[i].get<FileChange>(); }));
  }
  v.files_changed_truncated = false;
  if (optionalMember(j, "files_changed_truncated") != nullptr) {
    v.files_changed_truncated = boolField(j, "files_changed_truncated");
  }
  v.output_held_open.clear();
  if (const json* held = optionalMember(j, "output_held_open")) {
    if (!held->is_array()) fieldError("output_held_open", "must be an array");
    for (std::size_t i = 0; i < held->size(); ++i) {
      const std::string name = "output_held_open[" + std::to_string(i) + "]";
      std::string stream = stringValue((*held)[i], name);
      if (stream != "stdout" && stream != "stderr") fieldError(name, "must be stdout or stderr");
      if (std::find(v.output_held_open.begin(), v.output_held_open.end(), stream) !=
          v.output_held_open.end())
        fieldError(name, "names a stream twice");
      v.output_held_open.push_back(std::move(stream));
    }
  }
  v.duration_ms = nonNegativeField(j, "duration_ms");
  v.peak_memory_bytes.reset();
  if (const json* peak = optionalMember(j, "peak_memory_bytes"); peak && !peak->is_null())
    v.peak_memory_bytes = nonNegativeField(j, "peak_memory_bytes");
  v.cpu_time_ms.reset();
  if (const json* cpu = optionalMember(j, "cpu_time_ms"); cpu && !cpu->is_null())
    v.cpu_time_ms = nonNegativeField(j, "cpu_time_ms");

  if (v.exit_code.has_value() == v.killed_by.has_value()) {
    fieldError("exit_code", v.killed_by ? "must be null when killed_by is set"
                                        : "must be set when killed_by is null");
  }
  if (v.timed_out != (v.killed_by == KillReason::kTimeout)) {
    fieldError("timed_out", "must be true exactly when killed_by is TIMEOUT");
  }
  if (!v.output_held_open.empty() && v.killed_by)
    fieldError("output_held_open", "must be empty when killed_by is set");
}

}  // namespace airlock
