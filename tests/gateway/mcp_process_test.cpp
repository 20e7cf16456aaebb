// `airlock mcp --mechanism fake` as an MCP client launches it: a child
// process spoken to over its stdin and stdout, one JSON-RPC message per
// line, through a whole session (initialize, tools/list, tools/call of
// run_command and the workspace tools, artifact_export, malformed lines),
// and ended by EOF or by SIGTERM; on the linux mechanism (root), ping,
// tools/list, progress and cancellation while a command takes real time;
// and on linux and on gvisor (root, runsc), an agent's session with a
// server job, one case body for both.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "airlock/sys/io.h"
#include "airlock/sys/sha256.h"

namespace {

using nlohmann::json;
using ::testing::HasSubstr;

// Upper bound on waiting for one response; a hang fails instead of
// blocking the suite. Not a synchronization delay: responses arrive at once.
constexpr int kResponseTimeoutMs = 20000;

class McpChild {
 public:
  explicit McpChild(std::vector<std::string> extra_args = {}, std::string mechanism = "fake") {
    int in[2], out[2], err[2];
    EXPECT_EQ(::pipe2(in, O_CLOEXEC), 0);
    EXPECT_EQ(::pipe2(out, O_CLOEXEC), 0);
    EXPECT_EQ(::pipe2(err, O_CLOEXEC), 0);
    std::vector<std::string> args = {AIRLOCK_BINARY, "mcp", "--mechanism", mechanism, "-v"};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(in[0], STDIN_FILENO);
      ::dup2(out[1], STDOUT_FILENO);
      ::dup2(err[1], STDERR_FILENO);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    ::close(err[1]);
    to_child_ = in[1];
    from_child_ = out[0];
    stderr_ = err[0];
  }
  ~McpChild() {
    closeInput();
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    ::close(from_child_);
    ::close(stderr_);
  }

  void sendLine(const std::string& line) {
    const std::string data = line + "\n";
    ASSERT_TRUE(airlock::sys::writeAll(to_child_, data.data(), data.size()));
  }
  void send(const json& message) { sendLine(message.dump()); }

  // The next line the child writes on stdout, parsed; nullopt on EOF/timeout.
  std::optional<json> receive() {
    for (;;) {
      if (auto nl = buffer_.find('\n'); nl != std::string::npos) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return json::parse(line);
      }
      pollfd p{from_child_, POLLIN, 0};
      if (::poll(&p, 1, kResponseTimeoutMs) <= 0) return std::nullopt;
      char buf[65536];
      const ssize_t n = airlock::sys::readSome(from_child_, buf, sizeof buf);
      if (n <= 0) return std::nullopt;
      buffer_.append(buf, static_cast<std::size_t>(n));
    }
  }
  json request(int id, const std::string& method, json params = json::object()) {
    send(json{{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}});
    auto response = receive();
    EXPECT_TRUE(response.has_value()) << "no response to " << method;
    if (!response) return json();
    EXPECT_EQ(response->at("id"), id);
    return *response;
  }
  json callTool(int id, const std::string& name, json arguments) {
    const json r = request(id, "tools/call", {{"name", name}, {"arguments", std::move(arguments)}});
    EXPECT_TRUE(r.contains("result")) << r.dump();
    return r.value("result", json());
  }

  void closeInput() {
    if (to_child_ >= 0) ::close(to_child_);
    to_child_ = -1;
  }
  void signal(int signo) { ::kill(pid_, signo); }
  // Exit status, or -1 when it did not exit normally.
  int wait() {
    int status = 0;
    EXPECT_EQ(::waitpid(pid_, &status, 0), pid_);
    reaped_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  std::string stderrText() {
    std::string out;
    char buf[4096];
    ssize_t n;
    while ((n = airlock::sys::readSome(stderr_, buf, sizeof buf)) > 0) out.append(buf, n);
    return out;
  }
  bool stdoutAtEof() {
    if (!buffer_.empty()) return false;
    char c;
    return airlock::sys::readSome(from_child_, &c, 1) == 0;
  }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  int to_child_ = -1;
  int from_child_ = -1;
  int stderr_ = -1;
  std::string buffer_;
};

void initialize(McpChild& child) {
  const json r = child.request(1, "initialize",
                               {{"protocolVersion", "2025-06-18"},
                                {"capabilities", json::object()},
                                {"clientInfo", {{"name", "airlock-test"}, {"version", "1"}}}});
  ASSERT_TRUE(r.contains("result")) << r.dump();
  EXPECT_EQ(r.at("result").at("protocolVersion"), "2025-06-18");
  EXPECT_EQ(r.at("result").at("serverInfo").at("name"), "airlock");
  EXPECT_TRUE(r.at("result").at("capabilities").contains("tools"));
  child.send(json{{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}});
}

TEST(McpProcess, AWholeSessionOverStdio) {
  const auto export_dir =
      std::filesystem::path(::testing::TempDir()) / ("mcp-export-" + std::to_string(::getpid()));
  std::filesystem::remove_all(export_dir);
  McpChild child({"--export-dir", export_dir.string()});
  initialize(child);

  // tools/list: the five tools, each with both schemas.
  const json list = child.request(2, "tools/list");
  std::vector<std::string> names;
  for (const json& tool : list.at("result").at("tools")) {
    names.push_back(tool.at("name"));
    EXPECT_EQ(tool.at("inputSchema").at("type"), "object");
    EXPECT_TRUE(tool.contains("outputSchema"));
  }
  EXPECT_THAT(names, ::testing::UnorderedElementsAre(
                         "sandbox_run_command", "workspace_read_text", "workspace_write_text",
                         "workspace_list", "artifact_export", "job_start", "job_poll", "job_send",
                         "job_kill", "job_resize", "job_list"));

  // run_command: the fake's echo.
  json r = child.callTool(3, "sandbox_run_command", {{"command", {"echo", "hello", "world"}}});
  EXPECT_EQ(r.at("isError"), false);
  EXPECT_EQ(r.at("structuredContent").at("stdout"), "hello world\n");
  EXPECT_EQ(r.at("structuredContent").at("exit_code"), 0);
  EXPECT_EQ(r.at("content")[0].at("type"), "text");

  // A validation failure is a tool result with isError, naming the argument.
  r = child.callTool(4, "sandbox_run_command",
                     {{"command", {"ls"}}, {"working_directory", "../../etc"}});
  EXPECT_EQ(r.at("isError"), true);
  EXPECT_THAT(r.at("content")[0].at("text").get<std::string>(), HasSubstr("working_directory"));

  // Workspace tools: write, list, read back.
  r = child.callTool(5, "workspace_write_text", {{"path", "src/main.py"}, {"text", "print(1)\n"}});
  EXPECT_EQ(r.at("isError"), false);
  r = child.callTool(6, "workspace_list", json::object());
  ASSERT_EQ(r.at("structuredContent").at("entries").size(), 1u);
  EXPECT_EQ(r.at("structuredContent").at("entries")[0].at("name"), "src");
  r = child.callTool(7, "workspace_read_text", {{"path", "src/main.py"}});
  EXPECT_EQ(r.at("structuredContent").at("text"), "print(1)\n");
  EXPECT_EQ(r.at("structuredContent").at("trust"), "INTERNAL_TOOL");

  // The same workspace is seen by commands: cat with stdin is not
  // available here, but a missing working directory is checked against it.
  r = child.callTool(8, "sandbox_run_command",
                     {{"command", {"true"}}, {"working_directory", "src"}});
  EXPECT_EQ(r.at("isError"), false) << r.dump();

  // artifact_export writes the exported bytes under --export-dir.
  r = child.callTool(9, "artifact_export", {{"path", "src/main.py"}});
  ASSERT_EQ(r.at("isError"), false) << r.dump();
  const std::string id = r.at("structuredContent").at("artifact_id");
  EXPECT_EQ(r.at("structuredContent").at("sha256"), airlock::sys::sha256Hex("print(1)\n"));
  std::ifstream exported(export_dir / id / "main.py");
  std::string bytes((std::istreambuf_iterator<char>(exported)), std::istreambuf_iterator<char>());
  EXPECT_EQ(bytes, "print(1)\n");

  // Malformed input gets JSON-RPC errors and the session goes on.
  child.sendLine("this is not json");
  auto parse_error = child.receive();
  ASSERT_TRUE(parse_error);
  EXPECT_EQ(parse_error->at("error").at("code"), -32700);
  child.sendLine(R"([{"jsonrpc":"2.0","id":1,"method":"ping"}])");
  auto batch = child.receive();
  ASSERT_TRUE(batch);
  EXPECT_EQ(batch->at("error").at("code"), -32600);
  EXPECT_EQ(child.request(10, "no/such/method").at("error").at("code"), -32601);
  EXPECT_EQ(child.request(11, "tools/call", {{"name", "nope"}}).at("error").at("code"), -32602);
  EXPECT_EQ(child.request(12, "ping").at("result"), json::object());

  // EOF ends the session: the sandbox is destroyed and the exit status is 0.
  child.closeInput();
  EXPECT_TRUE(child.stdoutAtEof());
  EXPECT_EQ(child.wait(), 0);
  const std::string log = child.stderrText();
  EXPECT_THAT(log, HasSubstr("provisioned environment"));
  EXPECT_THAT(log, HasSubstr("destroyed environment"));
  std::filesystem::remove_all(export_dir);
}

TEST(McpProcess, SigtermEndsTheSessionAndDestroysTheSandbox) {
  McpChild child;
  initialize(child);
  EXPECT_EQ(child.request(2, "ping").at("result"), json::object());
  child.signal(SIGTERM);
  EXPECT_EQ(child.wait(), 0);
  const std::string log = child.stderrText();
  EXPECT_THAT(log, HasSubstr("stopping on a signal"));
  EXPECT_THAT(log, HasSubstr("destroyed environment"));
}

TEST(McpProcess, WithoutAnExportDirExportSaysItIsNotConfigured) {
  McpChild child;
  initialize(child);
  const json r = child.callTool(2, "artifact_export", {{"text", "x"}});
  EXPECT_EQ(r.at("isError"), true);
  EXPECT_THAT(r.at("content")[0].at("text").get<std::string>(), HasSubstr("not available"));
  child.closeInput();
  EXPECT_EQ(child.wait(), 0);
}

// --- While a call runs (the linux mechanism: a command that takes real time) --

json request(int id, const std::string& method, json params = json::object()) {
  return json{{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}};
}

json runCommandCall(int id, std::vector<std::string> command,
                    std::optional<std::string> progress_token = std::nullopt) {
  json params{{"name", "sandbox_run_command"}, {"arguments", {{"command", std::move(command)}}}};
  if (progress_token) params["_meta"] = {{"progressToken", *progress_token}};
  return request(id, "tools/call", std::move(params));
}

// Messages up to and including the response with `id` (empty on a hang).
std::vector<json> receiveUntil(McpChild& child, int id) {
  std::vector<json> messages;
  while (auto message = child.receive()) {
    messages.push_back(*message);
    if (message->value("id", json()) == id) return messages;
  }
  ADD_FAILURE() << "no response with id " << id;
  return messages;
}

// Where the response with `id` is in messages (messages.size() if none).
std::size_t positionOf(const std::vector<json>& messages, int id) {
  for (std::size_t i = 0; i < messages.size(); ++i) {
    if (messages[i].value("id", json()) == id) return i;
  }
  return messages.size();
}

TEST(McpProcessLinux, PingAndToolsListAreAnsweredWhileACallRunsWithProgress) {
  if (::geteuid() != 0) GTEST_SKIP() << "the linux mechanism needs root";
  McpChild child({}, "linux");
  initialize(child);
  child.send(runCommandCall(2, {"sleep", "4"}, "call-2"));
  // The first progress notification: the call has started.
  auto first = child.receive();
  ASSERT_TRUE(first);
  ASSERT_EQ(first->value("method", ""), "notifications/progress") << first->dump();
  EXPECT_EQ(first->at("params").at("progressToken"), "call-2");
  child.send(request(3, "ping"));
  child.send(request(4, "tools/list"));
  const std::vector<json> messages = receiveUntil(child, 2);
  ASSERT_FALSE(messages.empty());
  // Both answered before the call's own response, which comes last.
  EXPECT_LT(positionOf(messages, 3), messages.size() - 1);
  EXPECT_LT(positionOf(messages, 4), messages.size() - 1);
  for (const json& m : messages) {
    if (!m.contains("id")) {
      EXPECT_EQ(m.at("params").at("progressToken"), "call-2");
    }
  }
  const json& result = messages.back().at("result");
  EXPECT_EQ(result.at("isError"), false) << result.dump();
  EXPECT_EQ(result.at("structuredContent").at("exit_code"), 0);
  // Without a progressToken: no notification at all before the response.
  child.send(runCommandCall(5, {"sleep", "3"}));
  const std::vector<json> plain = receiveUntil(child, 5);
  ASSERT_EQ(plain.size(), 1u) << plain.front().dump();
  EXPECT_EQ(plain[0].at("result").at("structuredContent").at("exit_code"), 0);
  child.closeInput();
  EXPECT_EQ(child.wait(), 0);
}

TEST(McpProcessLinux, NotificationsCancelledStopsTheRunningCommand) {
  if (::geteuid() != 0) GTEST_SKIP() << "the linux mechanism needs root";
  McpChild child({}, "linux");
  initialize(child);
  child.send(runCommandCall(2, {"sleep", "600"}, "long"));
  auto first = child.receive();
  ASSERT_TRUE(first);
  ASSERT_EQ(first->value("method", ""), "notifications/progress") << first->dump();
  child.send(json{{"jsonrpc", "2.0"},
                  {"method", "notifications/cancelled"},
                  {"params", {{"requestId", 2}, {"reason", "test"}}}});
  // Calls run one at a time: this one's answer comes only once call 2 has
  // ended, and call 2 itself is not answered (it was cancelled).
  child.send(runCommandCall(3, {"echo", "after"}));
  const std::vector<json> messages = receiveUntil(child, 3);
  ASSERT_FALSE(messages.empty());
  EXPECT_EQ(positionOf(messages, 2), messages.size());
  EXPECT_EQ(messages.back().at("result").at("structuredContent").at("stdout"), "after\n");
  child.closeInput();
  EXPECT_EQ(child.wait(), 0);
}

// Why `airlock mcp --mechanism <mechanism>` cannot run on this machine, or
// nullopt: both real mechanisms need root, gvisor also runsc.
std::optional<std::string> mechanismUnavailable(const std::string& mechanism) {
  if (::geteuid() != 0) return "the " + mechanism + " mechanism needs root";
  if (mechanism == "gvisor" && ::access("/usr/bin/runsc", X_OK) != 0)
    return "runsc is not installed at /usr/bin/runsc (Debian package runsc)";
  return std::nullopt;
}

// The output of a job read through job_poll, from cursor 0 on.
struct PolledJob {
  std::string stdout_data, stderr_data;
  json last;  // the last answer's structuredContent
};

// Polls `job_id` from the cursors `polled` has reached until `done` holds or
// the job is no longer pending (at most 20 polls, each waiting at most 5 s
// for its output to move, so the loop follows the job's output, not time).
void pollJobUntil(McpChild& child, int& id, const std::string& job_id, PolledJob& polled,
                  const std::function<bool(const PolledJob&)>& done) {
  for (int i = 0; i < 20; ++i) {
    const json r = child.callTool(id++, "job_poll",
                                  {{"job_id", job_id},
                                   {"stdout_cursor", polled.stdout_data.size()},
                                   {"stderr_cursor", polled.stderr_data.size()},
                                   {"wait_ms", 5000}});
    ASSERT_EQ(r.at("isError"), false) << r.dump();
    polled.last = r.at("structuredContent");
    // Every byte after the cursors came back: none left the tail unread.
    ASSERT_EQ(polled.last.at("stdout").at("dropped"), 0) << polled.last.dump();
    ASSERT_EQ(polled.last.at("stderr").at("dropped"), 0) << polled.last.dump();
    polled.stdout_data += polled.last.at("stdout").at("data").get<std::string>();
    polled.stderr_data += polled.last.at("stderr").at("data").get<std::string>();
    if (done(polled) || !polled.last.at("pending").get<bool>()) return;
  }
}

// What --export-dir holds of a job's stream: DIR/<artifact_id>/<job_id>.<stream>.
std::string exportedStream(const std::filesystem::path& export_dir, const json& spill,
                           const std::string& job_id, const std::string& stream) {
  const std::string artifact = spill.at(stream).at("artifact_id");
  std::ifstream in(export_dir / artifact / (job_id + "." + stream));
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// One agent session through the MCP door, the same on every mechanism: a
// small HTTP server started with job_start, polled until it says it
// listens, a client command against it, the server's log read, the job
// killed and polled until it settles; once it is over, its whole output is
// in --export-dir, byte for byte what the polls returned.
void expectAJobServesAClientAndItsWholeOutputIsExported(const std::string& mechanism) {
  const auto export_dir = std::filesystem::path(::testing::TempDir()) /
                          ("mcp-job-export-" + mechanism + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(export_dir);
  McpChild child({"--export-dir", export_dir.string()}, mechanism);
  initialize(child);
  int id = 2;
  json r = child.callTool(id++, "workspace_write_text",
                          {{"path", "hello.txt"}, {"text", "hello from the workspace\n"}});
  ASSERT_EQ(r.at("isError"), false) << r.dump();
  const std::string server =
      "import http.server\n"
      "s = http.server.HTTPServer(('127.0.0.1', 8765), http.server.SimpleHTTPRequestHandler)\n"
      "print('listening', flush=True)\n"
      "s.serve_forever()\n";
  r = child.callTool(id++, "job_start", {{"command", {"python3", "-c", server}}});
  ASSERT_EQ(r.at("isError"), false) << r.dump();
  const std::string job_id = r.at("structuredContent").at("job_id");

  PolledJob polled;
  ASSERT_NO_FATAL_FAILURE(pollJobUntil(child, id, job_id, polled, [](const PolledJob& p) {
    return p.stdout_data.find('\n') != std::string::npos;
  }));
  ASSERT_EQ(polled.stdout_data, "listening\n") << polled.stderr_data;
  ASSERT_EQ(polled.last.at("state"), "running") << polled.last.dump();

  r = child.callTool(id++, "sandbox_run_command",
                     {{"command",
                       {"python3", "-c",
                        "import urllib.request\n"
                        "r = urllib.request.urlopen('http://127.0.0.1:8765/hello.txt')\n"
                        "print(r.status, r.read().decode(), end='')\n"}},
                      {"timeout_seconds", 60}});
  ASSERT_EQ(r.at("isError"), false) << r.dump();
  EXPECT_EQ(r.at("structuredContent").at("exit_code"), 0) << r.dump();
  EXPECT_EQ(r.at("structuredContent").at("stdout"), "200 hello from the workspace\n") << r.dump();

  // The server logged the request on its stderr.
  const std::string request_line = "\"GET /hello.txt HTTP/1.1\" 200";
  ASSERT_NO_FATAL_FAILURE(pollJobUntil(child, id, job_id, polled, [&](const PolledJob& p) {
    return p.stderr_data.find(request_line) != std::string::npos;
  }));
  EXPECT_THAT(polled.stderr_data, HasSubstr(request_line));

  r = child.callTool(id++, "job_kill", {{"job_id", job_id}});
  ASSERT_EQ(r.at("isError"), false) << r.dump();
  // Past the output already read, each poll waits for the job to settle
  // (a poll from cursor 0 would answer at once with the old output).
  ASSERT_NO_FATAL_FAILURE(
      pollJobUntil(child, id, job_id, polled, [](const PolledJob&) { return false; }));
  const json& state = polled.last;
  ASSERT_EQ(state.at("pending"), false) << state.dump();
  EXPECT_EQ(state.at("state"), "killed");
  EXPECT_EQ(state.at("kill_reason"), "requested");

  // Each stream's artifact is the whole of what the polls read.
  const json& spill = state.at("spill");
  for (const char* stream : {"stdout", "stderr"}) {
    const std::string& read =
        std::string(stream) == "stdout" ? polled.stdout_data : polled.stderr_data;
    ASSERT_TRUE(spill.at(stream).is_object()) << state.dump();
    EXPECT_EQ(spill.at(stream).at("size_bytes"), read.size()) << stream;
    EXPECT_EQ(spill.at(stream).at("sha256"), airlock::sys::sha256Hex(read)) << stream;
    EXPECT_EQ(exportedStream(export_dir, spill, job_id, stream), read) << stream;
  }
  child.closeInput();
  EXPECT_EQ(child.wait(), 0);
  std::filesystem::remove_all(export_dir);
}

TEST(McpProcessLinux, AJobServesAClientAndItsWholeOutputIsExported) {
  if (auto why = mechanismUnavailable("linux")) GTEST_SKIP() << *why;
  expectAJobServesAClientAndItsWholeOutputIsExported("linux");
}

TEST(McpProcessGvisor, AJobServesAClientAndItsWholeOutputIsExported) {
  if (auto why = mechanismUnavailable("gvisor")) GTEST_SKIP() << *why;
  expectAJobServesAClientAndItsWholeOutputIsExported("gvisor");
}

TEST(McpProcess, BadFlagsFailBeforeAnySandboxExists) {
  McpChild child({"--memory", "lots"});
  EXPECT_EQ(child.wait(), 125);
  EXPECT_THAT(child.stderrText(), HasSubstr("--memory"));
}

}  // namespace
