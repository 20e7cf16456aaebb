#include "airlock/gateway/tools/job_tools.h"

#include "airlock/core/command_validation.h"
#include "airlock/core/encoding.h"
#include "airlock/core/json.h"
#include "airlock/gateway/tools/tool_support.h"

namespace airlock::gateway {

using detail::invalidArgument;
using nlohmann::json;

namespace {

// How long job_send waits for the job to take its input.
constexpr std::uint64_t kSendTimeoutMs = 30'000;

json streamJson(const JobStreamSlice& s) {
  return {{"data", bytesToJson(s.data)}, {"cursor", s.cursor}, {"dropped", s.dropped}};
}

// A stream's spill: the reason it was not stored, or what was.
json streamSpillJson(const JobStreamSpill& s) {
  if (s.error) return *s.error;
  return {{"artifact_id", s.artifact_id ? json(*s.artifact_id) : json(nullptr)},
          {"media_type", s.artifact_id ? json(s.media_type) : json(nullptr)},
          {"sha256", s.sha256},
          {"size_bytes", s.size_bytes},
          {"truncated", s.dropped_bytes > 0},
          {"dropped_bytes", s.dropped_bytes}};
}

json deadlineJson(Timestamp deadline) {
  return deadline.time_since_epoch().count() > 0 ? json(formatTimestamp(deadline)) : json(nullptr);
}

// The context's job port, or the failure saying there is none (asked after
// the arguments are checked, so a bad argument is named first).
tl::expected<JobPort*, ToolFailure> jobsOf(const ToolContext& context) {
  if (context.jobs == nullptr)
    return tl::unexpected(
        ToolFailure{ErrorCode::kExecutionUnavailable, "", "this server keeps no background jobs"});
  return context.jobs;
}

// A count argument (countFromJson); `fallback` when absent.
tl::expected<std::uint64_t, ToolFailure> count(const json& arguments, const CountSpec& spec,
                                               std::uint64_t fallback) {
  const json* v = detail::member(arguments, spec.field);
  if (v == nullptr) return fallback;
  auto n = countFromJson(*v, spec);
  if (!n) return invalidArgument(std::string(spec.field), n.error().context);
  return *n;
}

// A ToolFailure naming `argument` for a ToolValidationError.
tl::unexpected<ToolFailure> invalid(std::string argument, const Error& e) {
  return invalidArgument(std::move(argument), e.context);
}

ToolResult jobStart(const json& arguments, ToolContext& context) {
  const json* command = detail::member(arguments, "command");
  if (command == nullptr || !command->is_array() || command->empty())
    return invalidArgument("command",
                           "command must be a non-empty array of strings: the program and its "
                           "arguments, e.g. [\"python3\", \"-u\", \"-m\", \"http.server\", "
                           "\"8000\"]");
  JobStartRequest request;
  for (const auto& a : *command) {
    if (!a.is_string()) return invalidArgument("command", "command must be an array of strings");
    request.command.argv.push_back(a.get<std::string>());
  }
  if (auto problem = shellStringProblem(request.command.argv, ArgvSpelling::kJson))
    return invalidArgument("command", "command: " + *problem);
  auto wd = detail::optionalString(arguments, "working_directory", ".");
  if (!wd) return tl::unexpected(wd.error());
  auto checked = detail::workspacePath("working_directory", *wd, true);
  if (!checked) return tl::unexpected(checked.error());
  request.command.working_directory = *checked;
  auto env = detail::envAdditions(arguments);
  if (!env) return tl::unexpected(env.error());
  request.command.env_additions = std::move(*env);
  if (detail::member(arguments, "wall_ms") != nullptr) {
    auto wall = count(arguments, {"wall_ms", "milliseconds"}, 0);
    if (!wall) return tl::unexpected(wall.error());
    request.wall_ms = *wall;
  }
  if (const json* pty = detail::member(arguments, "pty"); pty != nullptr && !pty->is_null()) {
    auto size = terminalSizeFromJson(*pty, "pty");
    if (!size) return invalid("pty", size.error());
    request.command.terminal = *size;
  }
  if (auto known = detail::onlyKnownArguments(
          arguments, {"command", "working_directory", "env", "wall_ms", "pty"});
      !known)
    return tl::unexpected(known.error());
  request.spill = context.job_spill;
  auto jobs = jobsOf(context);
  if (!jobs) return tl::unexpected(jobs.error());
  auto started = (*jobs)->startJob(context.environment, request);
  if (!started) return detail::failureFrom(started.error());
  return jobStartedJson(*started);
}

ToolResult jobPoll(const json& arguments, ToolContext& context) {
  auto id = detail::requiredString(arguments, "job_id");
  if (!id) return tl::unexpected(id.error());
  JobPollRequest poll;
  poll.job_id = *id;
  auto out = count(arguments, {"stdout_cursor", ""}, 0);
  if (!out) return tl::unexpected(out.error());
  auto err = count(arguments, {"stderr_cursor", ""}, 0);
  if (!err) return tl::unexpected(err.error());
  auto wait = count(arguments, {"wait_ms", "milliseconds", kMaxJobWaitMs}, 0);
  if (!wait) return tl::unexpected(wait.error());
  if (auto known = detail::onlyKnownArguments(
          arguments, {"job_id", "stdout_cursor", "stderr_cursor", "wait_ms"});
      !known)
    return tl::unexpected(known.error());
  poll.stdout_cursor = *out;
  poll.stderr_cursor = *err;
  poll.wait_ms = *wait;
  poll.cancel = context.cancel;
  auto jobs = jobsOf(context);
  if (!jobs) return tl::unexpected(jobs.error());
  auto state = (*jobs)->pollJob(context.environment, poll);
  if (!state) return detail::failureFrom(state.error(), "job_id");
  return jobJson(*state, true);
}

ToolResult jobSend(const json& arguments, ToolContext& context) {
  auto id = detail::requiredString(arguments, "job_id");
  if (!id) return tl::unexpected(id.error());
  auto data = detail::optionalString(arguments, "data", "");
  if (!data) return tl::unexpected(data.error());
  const json* last = detail::member(arguments, "last");
  if (last != nullptr && !last->is_boolean())
    return invalidArgument("last", "last must be true or false");
  if (auto known = detail::onlyKnownArguments(arguments, {"job_id", "data", "last"}); !known)
    return tl::unexpected(known.error());
  auto jobs = jobsOf(context);
  if (!jobs) return tl::unexpected(jobs.error());
  auto sent =
      (*jobs)->sendJobInput(context.environment, *id, *data, last != nullptr && last->get<bool>(),
                            kSendTimeoutMs, context.cancel);
  if (!sent) return detail::failureFrom(sent.error(), "job_id");
  return json{{"job_id", *id}, {"sent_bytes", data->size()}};
}

ToolResult jobKill(const json& arguments, ToolContext& context) {
  auto id = detail::requiredString(arguments, "job_id");
  if (!id) return tl::unexpected(id.error());
  if (auto known = detail::onlyKnownArguments(arguments, {"job_id"}); !known)
    return tl::unexpected(known.error());
  auto jobs = jobsOf(context);
  if (!jobs) return tl::unexpected(jobs.error());
  auto killed = (*jobs)->killJob(context.environment, *id);
  if (!killed) return detail::failureFrom(killed.error(), "job_id");
  return json{{"job_id", *id}, {"killing", true}};
}

ToolResult jobResize(const json& arguments, ToolContext& context) {
  auto id = detail::requiredString(arguments, "job_id");
  if (!id) return tl::unexpected(id.error());
  if (auto known = detail::onlyKnownArguments(arguments, {"job_id", "rows", "columns"}); !known)
    return tl::unexpected(known.error());
  json size = json::object();
  for (const char* field : {"rows", "columns"})
    if (const json* v = detail::member(arguments, field)) size[field] = *v;
  auto parsed = terminalSizeFromJson(size, "");
  if (!parsed)
    return invalid(parsed.error().context.starts_with("rows") ? "rows" : "columns", parsed.error());
  auto jobs = jobsOf(context);
  if (!jobs) return tl::unexpected(jobs.error());
  auto resized = (*jobs)->resizeJob(context.environment, *id, *parsed);
  if (!resized) return detail::failureFrom(resized.error(), "job_id");
  return json{{"job_id", *id}, {"rows", parsed->rows}, {"columns", parsed->columns}};
}

ToolResult jobList(const json& arguments, ToolContext& context) {
  if (auto known = detail::onlyKnownArguments(arguments, {}); !known)
    return tl::unexpected(known.error());
  auto jobs = jobsOf(context);
  if (!jobs) return tl::unexpected(jobs.error());
  auto listed = (*jobs)->listJobs(context.environment);
  if (!listed) return detail::failureFrom(listed.error());
  json out = json::array();
  for (const auto& j : *listed) out.push_back(jobJson(j, false));
  return json{{"jobs", std::move(out)}};
}

json objectSchema(json properties, json required) {
  json schema = {
      {"type", "object"}, {"properties", std::move(properties)}, {"additionalProperties", false}};
  if (!required.empty()) schema["required"] = std::move(required);
  return schema;
}

json jobIdProperty() {
  return json{{"type", "string"}, {"description", "The job's id from job_start or job_list."}};
}

json cursorProperty(const char* stream) {
  return json{{"type", "integer"},
              {"minimum", 0},
              {"description", std::string("The ") + stream +
                                  " cursor the last job_poll returned (0: from the start)."}};
}

// What a job result is: an object; the tools' descriptions say the members.
json jobOutputSchema() {
  return json{{"type", "object"}};
}

json terminalSizeSchema(const char* description) {
  const json cells = {{"type", "integer"}, {"minimum", 1}, {"maximum", kMaxTerminalCells}};
  return json{{"type", "object"},
              {"properties", {{"rows", cells}, {"columns", cells}}},
              {"required", json::array({"rows", "columns"})},
              {"additionalProperties", false},
              {"description", description}};
}

}  // namespace

Result<TerminalSize> terminalSizeFromJson(const json& value, std::string_view where) {
  const std::string prefix = where.empty() ? std::string() : std::string(where) + ".";
  if (!value.is_object())
    return fail(ErrorCode::kToolValidationError,
                std::string(where.empty() ? "the terminal size" : where) +
                    " must be an object {\"rows\": R, \"columns\": C}");
  for (const auto& [key, v] : value.items())
    if (key != "rows" && key != "columns")
      return fail(ErrorCode::kToolValidationError,
                  std::string(where.empty() ? "" : std::string(where) + ": ") + "unknown key " +
                      quoteForMessage(key) + " (known keys: rows, columns)");
  TerminalSize size;
  for (auto [field, cells] : {std::pair{"rows", &size.rows}, std::pair{"columns", &size.columns}}) {
    auto it = value.find(field);
    // 0 (refused below) when absent, below 1 or not a whole number. A
    // parsed body holds unsigned numbers, one built in memory signed ones.
    std::uint64_t n = 0;
    if (it != value.end() && it->is_number_unsigned()) {
      n = it->get<std::uint64_t>();
    } else if (it != value.end() && it->is_number_integer() && it->get<std::int64_t>() > 0) {
      n = static_cast<std::uint64_t>(it->get<std::int64_t>());
    }
    if (n < 1 || n > kMaxTerminalCells)
      return fail(ErrorCode::kToolValidationError,
                  prefix + field + (it == value.end() ? " is required: " : " must be ") +
                      "a whole number from 1 to " + std::to_string(kMaxTerminalCells));
    *cells = static_cast<std::uint16_t>(n);
  }
  return size;
}

json jobJson(const JobSnapshot& s, bool with_output) {
  json j = {{"job_id", s.job_id},
            {"argv", json::array()},
            {"state", jobStateName(s.state)},
            {"exit_code", s.exit_code ? json(*s.exit_code) : json(nullptr)},
            {"signal", s.signal ? json(*s.signal) : json(nullptr)},
            {"kill_reason", nullptr},
            {"pending", s.pending},
            {"wall_ms", s.wall_ms},
            {"deadline", deadlineJson(s.deadline)},
            {"spill", nullptr},
            {"pty", nullptr}};
  if (s.terminal) j["pty"] = {{"rows", s.terminal->rows}, {"columns", s.terminal->columns}};
  for (const auto& a : s.argv) j["argv"].push_back(bytesToJson(a));
  if (const char* reason = jobKillReasonName(s.kill_reason)) j["kill_reason"] = reason;
  if (with_output) {
    j["stdout"] = streamJson(s.out);
    j["stderr"] = streamJson(s.err);
  } else {
    j["stdout_cursor"] = s.out.cursor;
    j["stderr_cursor"] = s.err.cursor;
  }
  if (!s.pending && s.spill)
    j["spill"] = {{"stdout", streamSpillJson(s.spill->first)},
                  {"stderr", streamSpillJson(s.spill->second)}};
  return j;
}

json jobStartedJson(const JobStarted& started) {
  return json{{"job_id", started.job_id},
              {"stdout_cursor", 0},
              {"stderr_cursor", 0},
              {"wall_ms", started.wall_ms},
              {"deadline", deadlineJson(started.deadline)}};
}

void addJobTools(ToolRegistry& registry) {
  registry.add(Tool{
      "job_start", "Start a background job",
      "Start a long-running program in this run's sandbox in the background (a server, a watcher, "
      "a long build) and return at once with its job_id. It keeps running across later tool "
      "calls until it exits, job_kill ends it, its wall_ms budget passes (default 30 minutes; 0: "
      "as long as the sandbox lives) or the sandbox goes. Read its output with job_poll. command "
      "is an array like sandbox_run_command's.",
      objectSchema(
          {{"command",
            {{"type", "array"},
             {"items", {{"type", "string"}}},
             {"minItems", 1},
             {"description",
              "The program and its arguments, e.g. [\"python3\", \"-u\", \"-m\", "
              "\"http.server\", \"8000\"]. job_poll sees output once the program writes it: "
              "Python holds what it prints back while its output is not a terminal, so start "
              "it with -u (or print with flush=True) to see a line such as a server's "
              "'listening' at once."}}},
           {"working_directory", {{"type", "string"}, {"default", "."}}},
           {"env",
            {{"type", "object"},
             {"additionalProperties", {{"type", "string"}}},
             {"description",
              "Environment variables for this job only, e.g. {\"PORT\": \"8000\"}; credential "
              "names and names the sandbox sets itself (PATH, HOME, ...) are refused."}}},
           {"wall_ms", {{"type", "integer"}, {"minimum", 0}}},
           {"pty", terminalSizeSchema(
                       "Run on a pseudo-terminal of this size (a PTY job), for programs that "
                       "want a console: shells (sh -i), REPLs (python3 -i), editors, progress "
                       "bars. Its stderr is merged into stdout; what you send is echoed back; "
                       "lines end in \\r\\n; job_send with last: true types ^D (end of input "
                       "on an empty line) and the terminal stays open. Change the size with "
                       "job_resize.")}},
          json::array({"command"})),
      jobOutputSchema(), /*read_only=*/false, /*idempotent=*/false, &jobStart});
  registry.add(Tool{
      "job_poll", "Read a job's output",
      "A background job's state (running, exited or killed; exit_code) and its output since the "
      "cursors: pass the stdout.cursor and stderr.cursor of the previous answer to get only new "
      "output. wait_ms (at most 60000) waits until there is new output or the job ends, instead "
      "of calling repeatedly. Output older than the last 64 KiB is counted in dropped; once the "
      "job is over and pending is false, spill names the whole output as artifacts.",
      objectSchema({{"job_id", jobIdProperty()},
                    {"stdout_cursor", cursorProperty("stdout")},
                    {"stderr_cursor", cursorProperty("stderr")},
                    {"wait_ms", {{"type", "integer"}, {"minimum", 0}, {"maximum", kMaxJobWaitMs}}}},
                   json::array({"job_id"})),
      jobOutputSchema(), /*read_only=*/true, /*idempotent=*/false, &jobPoll});
  registry.add(Tool{"job_send", "Write to a job's input",
                    "Write text to a background job's standard input; last: true then closes it "
                    "(end of input). For a PTY job (started with pty) this is typing at its "
                    "terminal: end a line with \"\\n\" to enter it, \"\\u0003\" is ^C, and "
                    "last: true types ^D once instead of closing anything.",
                    objectSchema({{"job_id", jobIdProperty()},
                                  {"data", {{"type", "string"}}},
                                  {"last", {{"type", "boolean"}, {"default", false}}}},
                                 json::array({"job_id"})),
                    jobOutputSchema(), /*read_only=*/false, /*idempotent=*/false, &jobSend});
  registry.add(Tool{"job_kill", "Stop a background job",
                    "Kill a background job and everything it started in its process group.",
                    objectSchema({{"job_id", jobIdProperty()}}, json::array({"job_id"})),
                    jobOutputSchema(), /*read_only=*/false, /*idempotent=*/true, &jobKill});
  registry.add(
      Tool{"job_resize", "Resize a PTY job's terminal",
           "Set the terminal size (rows and columns of characters) of a PTY job, a background job "
           "started with pty: the program sees the new size (stty size) and is told by SIGWINCH, "
           "as when a terminal window is resized. Refused for a job started without pty and for a "
           "job that has ended.",
           objectSchema(
               {{"job_id", jobIdProperty()},
                {"rows", {{"type", "integer"}, {"minimum", 1}, {"maximum", kMaxTerminalCells}}},
                {"columns", {{"type", "integer"}, {"minimum", 1}, {"maximum", kMaxTerminalCells}}}},
               json::array({"job_id", "rows", "columns"})),
           jobOutputSchema(), /*read_only=*/false, /*idempotent=*/true, &jobResize});
  registry.add(Tool{"job_list", "List background jobs",
                    "The background jobs of this run's sandbox, oldest first, with their states "
                    "and output cursors.",
                    objectSchema(json::object(), json::array()), jobOutputSchema(),
                    /*read_only=*/true, /*idempotent=*/true, &jobList});
}

}  // namespace airlock::gateway
