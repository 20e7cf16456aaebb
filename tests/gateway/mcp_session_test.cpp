// The MCP session without a process: JSON-RPC framing and errors, version
// negotiation, tools/list and tools/call over the fake mechanism, and the
// stdio loop over pipes.
#include "airlock/gateway/mcp/mcp_session.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <rapidcheck.h>
#include <unistd.h>

#include <condition_variable>
#include <csignal>
#include <mutex>
#include <thread>

#include "airlock/gateway/mcp/mcp_stdio.h"
#include "airlock/sys/io.h"
#include "gateway_test_support.h"

namespace airlock::gateway::mcp {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

class McpSessionTest : public ::testing::Test {
 protected:
  json send(const json& message) { return sendLine(message.dump()); }
  json sendLine(std::string_view line) {
    auto response = session_.handleLine(line);
    EXPECT_TRUE(response.has_value()) << "no response to " << line;
    if (!response) return json();
    EXPECT_EQ(response->find('\n'), std::string::npos);
    return json::parse(*response);
  }
  json request(int id, const std::string& method, json params = json::object()) {
    return send(json{{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", params}});
  }
  void initialize(const std::string& version = "2025-06-18") {
    const json r = request(0, "initialize",
                           {{"protocolVersion", version},
                            {"capabilities", json::object()},
                            {"clientInfo", {{"name", "test"}, {"version", "1"}}}});
    ASSERT_TRUE(r.contains("result")) << r.dump();
    EXPECT_FALSE(session_.handleLine(R"({"jsonrpc":"2.0","method":"notifications/initialized"})"));
  }
  json call(int id, const std::string& tool, json arguments) {
    const json r = request(id, "tools/call", {{"name", tool}, {"arguments", std::move(arguments)}});
    EXPECT_TRUE(r.contains("result")) << r.dump();
    return r.value("result", json());
  }
  static int errorCode(const json& response) { return response.at("error").at("code"); }

  testing::FakeSandbox box_;
  ToolRegistry registry_ = builtinTools();
  Session session_{registry_, box_.context, ServerInfo{"airlock", "9.9", "be careful"}};
};

TEST_F(McpSessionTest, InitializeNegotiatesTheVersionAndNamesTheServer) {
  const json r = request(7, "initialize",
                         {{"protocolVersion", "2025-06-18"}, {"capabilities", json::object()}});
  EXPECT_EQ(r.at("jsonrpc"), "2.0");
  EXPECT_EQ(r.at("id"), 7);
  const json& result = r.at("result");
  EXPECT_EQ(result.at("protocolVersion"), "2025-06-18");
  EXPECT_TRUE(result.at("capabilities").contains("tools"));
  EXPECT_EQ(result.at("serverInfo").at("name"), "airlock");
  EXPECT_EQ(result.at("serverInfo").at("version"), "9.9");
  EXPECT_EQ(result.at("instructions"), "be careful");
  // A second initialize is refused.
  EXPECT_EQ(errorCode(request(8, "initialize", {{"protocolVersion", "2025-06-18"}})),
            kInvalidRequest);
}

TEST_F(McpSessionTest, AnUnknownVersionGetsTheNewestSupported) {
  const json r = request(1, "initialize", {{"protocolVersion", "1999-01-01"}});
  EXPECT_EQ(r.at("result").at("protocolVersion"), supportedProtocolVersions().front());
}

TEST_F(McpSessionTest, InitializeNeedsAProtocolVersion) {
  EXPECT_EQ(errorCode(request(1, "initialize", json::object())), kInvalidParams);
  EXPECT_EQ(errorCode(request(1, "initialize", {{"protocolVersion", 5}})), kInvalidParams);
  EXPECT_FALSE(session_.initialized());
}

TEST_F(McpSessionTest, OnlyPingWorksBeforeInitialize) {
  EXPECT_EQ(request(1, "ping").at("result"), json::object());
  EXPECT_EQ(errorCode(request(2, "tools/list")), kInvalidRequest);
  EXPECT_EQ(errorCode(request(3, "tools/call", {{"name", "workspace_list"}})), kInvalidRequest);
}

TEST_F(McpSessionTest, JsonRpcErrors) {
  initialize();
  const json parse = sendLine("{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": ");
  EXPECT_EQ(errorCode(parse), kParseError);
  EXPECT_TRUE(parse.at("id").is_null());
  EXPECT_EQ(errorCode(sendLine("[1, 2]")), kInvalidRequest);
  EXPECT_EQ(errorCode(sendLine("42")), kInvalidRequest);
  EXPECT_EQ(errorCode(sendLine(R"({"id": 1, "method": "ping"})")), kInvalidRequest);
  EXPECT_EQ(errorCode(sendLine(R"({"jsonrpc": "1.0", "id": 1, "method": "ping"})")),
            kInvalidRequest);
  EXPECT_EQ(errorCode(sendLine(R"({"jsonrpc": "2.0", "id": 1, "method": 3})")), kInvalidRequest);
  EXPECT_EQ(errorCode(sendLine(R"({"jsonrpc": "2.0", "id": true, "method": "ping"})")),
            kInvalidRequest);
  const json unknown = request(9, "resources/list");
  EXPECT_EQ(errorCode(unknown), kMethodNotFound);
  EXPECT_EQ(unknown.at("id"), 9);
  EXPECT_EQ(
      errorCode(sendLine(R"({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": 3})")),
      kInvalidParams);
  EXPECT_EQ(errorCode(request(1, "tools/call", json::object())), kInvalidParams);
  EXPECT_EQ(errorCode(request(1, "tools/call", {{"name", "sandbox.nope"}})), kInvalidParams);
  EXPECT_EQ(errorCode(request(1, "tools/call",
                              {{"name", "workspace_list"}, {"arguments", json::array()}})),
            kInvalidParams);
}

// A key named twice could mean one request to one reader and another to the
// next (nlohmann keeps the last): refused as a parse error naming the key,
// before anything runs, with a null id since the id itself may be the key.
TEST_F(McpSessionTest, AKeyNamedTwiceIsAParseErrorNamingIt) {
  initialize();
  const json twice = sendLine(
      R"({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "workspace_list",)"
      R"( "arguments": {"path": "."}, "name": "sandbox_run_command"}})");
  EXPECT_EQ(errorCode(twice), kParseError);
  EXPECT_TRUE(twice.at("id").is_null());
  EXPECT_EQ(twice.at("error").at("message"),
            "Parse error: the key \"name\" appears twice in one object");
  EXPECT_EQ(errorCode(sendLine(R"({"jsonrpc": "2.0", "id": 1, "id": 2, "method": "ping"})")),
            kParseError);
  // Still served afterwards.
  EXPECT_EQ(request(3, "ping").at("result"), json::object());
}

TEST_F(McpSessionTest, NotificationsAndClientResponsesGetNoAnswer) {
  EXPECT_FALSE(session_.handleLine(
      R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}})"));
  EXPECT_FALSE(session_.handleLine(R"({"jsonrpc":"2.0","method":"tools/list"})"));
  EXPECT_FALSE(session_.handleLine(R"({"jsonrpc":"2.0","id":5,"result":{}})"));
}

TEST_F(McpSessionTest, StringIdsAreEchoed) {
  const json r = send(json{{"jsonrpc", "2.0"}, {"id", "abc-1"}, {"method", "ping"}});
  EXPECT_EQ(r.at("id"), "abc-1");
}

TEST_F(McpSessionTest, ToolsListCarriesSchemasAndAnnotations) {
  initialize();
  const json tools = request(2, "tools/list").at("result").at("tools");
  ASSERT_EQ(tools.size(), registry_.tools().size());
  for (const json& tool : tools) {
    EXPECT_TRUE(tool.at("name").is_string());
    EXPECT_FALSE(tool.at("description").get<std::string>().empty());
    EXPECT_EQ(tool.at("inputSchema").at("type"), "object");
    EXPECT_EQ(tool.at("outputSchema").at("type"), "object");
    EXPECT_EQ(tool.at("annotations").at("openWorldHint"), false);
  }
  EXPECT_EQ(tools[0].at("name"), "sandbox_run_command");
  EXPECT_EQ(tools[0].at("annotations").at("destructiveHint"), true);
  EXPECT_EQ(tools[1].at("annotations").at("readOnlyHint"), true);
}

TEST_F(McpSessionTest, OldProtocolVersionsGetNoStructuredContent) {
  initialize("2024-11-05");
  const json tools = request(2, "tools/list").at("result").at("tools");
  EXPECT_FALSE(tools[0].contains("outputSchema"));
  const json result = call(3, "sandbox_run_command", {{"command", {"echo", "hi"}}});
  EXPECT_FALSE(result.contains("structuredContent"));
  EXPECT_EQ(json::parse(result.at("content")[0].at("text").get<std::string>()).at("stdout"),
            "hi\n");
}

TEST_F(McpSessionTest, ToolsCallReturnsStructuredContentAndText) {
  initialize();
  const json result = call(3, "sandbox_run_command", {{"command", {"echo", "hello", "mcp"}}});
  EXPECT_EQ(result.at("isError"), false);
  EXPECT_EQ(result.at("structuredContent").at("stdout"), "hello mcp\n");
  EXPECT_EQ(result.at("structuredContent").at("exit_code"), 0);
  ASSERT_EQ(result.at("content").size(), 1u);
  EXPECT_EQ(result.at("content")[0].at("type"), "text");
  EXPECT_EQ(json::parse(result.at("content")[0].at("text").get<std::string>()),
            result.at("structuredContent"));
}

TEST_F(McpSessionTest, AToolFailureIsAResultTheModelCanRead) {
  initialize();
  const json result = call(4, "sandbox_run_command", {{"command", "ls -la"}});
  EXPECT_EQ(result.at("isError"), true);
  EXPECT_FALSE(result.contains("structuredContent"));
  const std::string text = result.at("content")[0].at("text");
  EXPECT_THAT(text, HasSubstr("tool_validation_error"));
  EXPECT_THAT(text, HasSubstr("argument vector"));
}

TEST_F(McpSessionTest, MissingArgumentsMeanAnEmptyObject) {
  initialize();
  const json r = request(5, "tools/call", {{"name", "workspace_list"}});
  EXPECT_EQ(r.at("result").at("isError"), false);
  EXPECT_EQ(r.at("result").at("structuredContent").at("entries"), json::array());
}

TEST_F(McpSessionTest, BeforeCallCanReplaceTheSandboxAndSaySo) {
  int calls = 0;
  Session session(registry_, box_.context, ServerInfo{},
                  [&](ToolContext&) -> std::optional<std::string> {
                    ++calls;
                    return std::string("fresh sandbox");
                  });
  ASSERT_TRUE(session.handleLine(
      R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}})"));
  auto line = session.handleLine(
      R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"workspace_list"}})");
  ASSERT_TRUE(line);
  const json r = json::parse(*line);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(r.at("result").at("content")[0].at("text"), "fresh sandbox");
}

// Arbitrary lines never throw and always give a JSON-RPC response (or none
// for a notification-shaped object).
TEST_F(McpSessionTest, ArbitraryLinesGiveWellFormedResponses) {
  initialize();
  EXPECT_TRUE(rc::check("handleLine", [&] {
    const auto line = *rc::gen::oneOf(
        rc::gen::arbitrary<std::string>(),
        rc::gen::map(
            rc::gen::arbitrary<std::string>(),
            [](std::string s) { return R"({"jsonrpc":"2.0","id":1,"method":")" + s + R"("})"; }),
        rc::gen::map(rc::gen::arbitrary<std::string>(), [](std::string s) {
          return R"({"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"workspace_read_text","arguments":{"path":")" +
                 s + R"("}}})";
        }));
    auto response = session_.handleLine(line);
    if (!response) return;
    RC_ASSERT(response->find('\n') == std::string::npos);
    const json r = json::parse(*response);
    RC_ASSERT(r.at("jsonrpc") == "2.0");
    RC_ASSERT(r.contains("result") != r.contains("error"));
  }));
}

// --- The stdio loop over pipes ----------------------------------------------

struct Pipe {
  Pipe() { EXPECT_EQ(::pipe2(fds, O_CLOEXEC), 0); }
  ~Pipe() {
    for (int fd : fds)
      if (fd >= 0) ::close(fd);
  }
  void closeWrite() {
    ::close(fds[1]);
    fds[1] = -1;
  }
  int fds[2] = {-1, -1};
};

std::string readAll(int fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = sys::readSome(fd, buf, sizeof buf);
    if (n <= 0) return out;
    out.append(buf, static_cast<std::size_t>(n));
  }
}

TEST_F(McpSessionTest, StdioHandlesLinesInOrderAndOversizedOnes) {
  Pipe in, out;
  const std::string input = std::string(R"({"jsonrpc":"2.0","id":1,"method":"ping"})") + "\r\n" +
                            "\n" + std::string(300, 'x') + "\n" +  // longer than the limit below
                            R"({"jsonrpc":"2.0","id":2,"method":"ping"})";  // last line, no newline
  std::thread writer([&] {
    (void)sys::writeAll(in.fds[1], input.data(), input.size());
    in.closeWrite();
  });
  auto ended = serveStdio(session_, in.fds[0], out.fds[1], -1, /*max_message_bytes=*/200);
  writer.join();
  ASSERT_TRUE(ended.has_value()) << ended.error().message();
  EXPECT_EQ(*ended, StdioEnd::kEndOfInput);
  ::close(out.fds[1]);
  out.fds[1] = -1;
  const std::string written = readAll(out.fds[0]);
  std::vector<json> lines;
  std::size_t start = 0;
  for (std::size_t nl; (nl = written.find('\n', start)) != std::string::npos; start = nl + 1) {
    lines.push_back(json::parse(written.substr(start, nl - start)));
  }
  ASSERT_EQ(lines.size(), 3u) << written;
  EXPECT_EQ(lines[0].at("id"), 1);
  EXPECT_EQ(errorCode(lines[1]), kInvalidRequest);
  EXPECT_EQ(lines[2].at("id"), 2);
}

TEST_F(McpSessionTest, StdioStopsWhenTheStopFdIsReadable) {
  Pipe in, out, stop;
  ASSERT_TRUE(sys::writeAll(stop.fds[1], "x", 1));
  auto ended = serveStdio(session_, in.fds[0], out.fds[1], stop.fds[0]);
  ASSERT_TRUE(ended.has_value());
  EXPECT_EQ(*ended, StdioEnd::kStopped);
}

// --- Cancellation of a call in progress ---------------------------------------

// The port over the fake, except that execute blocks until its cancel token
// fires (a long command), after saying that it started.
class BlockingEnvironment : public ExecutionEnvironment {
 public:
  explicit BlockingEnvironment(ExecutionEnvironment& inner) : inner_(inner) {}
  Result<EnvironmentHandle> provision(const EnvironmentSpec& spec) override {
    return inner_.provision(spec);
  }
  Result<ExecutionResult> execute(const EnvironmentHandle& handle, const ExecutionCommand& command,
                                  const CancelToken* cancel) override {
    {
      std::lock_guard lock(mu_);
      started_ = true;
    }
    started_cv_.notify_all();
    if (cancel == nullptr) return fail(ErrorCode::kExecutionUnavailable, "no cancel token");
    pollfd p{cancel->pollFd(), POLLIN, 0};
    while (::poll(&p, 1, -1) < 0) {
    }
    return inner_.execute(handle, command, cancel);  // cancelled: CANCELLED
  }
  // Streams one chunk of output at once, then blocks as execute does.
  Result<ExecutionResult> executeStreaming(const EnvironmentHandle& handle,
                                           const ExecutionCommand& command,
                                           const CancelToken* cancel,
                                           const OutputSink& sink) override {
    if (sink) sink(OutputStream::kStdout, "partial output\n");
    return execute(handle, command, cancel);
  }
  Result<void> cancel(const EnvironmentHandle& handle, std::string_view execution_id) override {
    return inner_.cancel(handle, execution_id);
  }
  Result<void> destroy(const EnvironmentHandle& handle) override { return inner_.destroy(handle); }
  Result<std::shared_ptr<WorkspaceHandle>> workspace(const EnvironmentHandle& handle) override {
    return inner_.workspace(handle);
  }
  void waitUntilStarted() {
    std::unique_lock lock(mu_);
    started_cv_.wait(lock, [&] { return started_; });
  }

 private:
  ExecutionEnvironment& inner_;
  std::mutex mu_;
  std::condition_variable started_cv_;
  bool started_ = false;
};

std::optional<json> readResponse(int fd, std::string& buffer) {
  for (;;) {
    if (auto nl = buffer.find('\n'); nl != std::string::npos) {
      json r = json::parse(buffer.substr(0, nl));
      buffer.erase(0, nl + 1);
      return r;
    }
    char buf[4096];
    const ssize_t n = sys::readSome(fd, buf, sizeof buf);
    if (n <= 0) return std::nullopt;
    buffer.append(buf, static_cast<std::size_t>(n));
  }
}

class McpCancelTest : public ::testing::Test {
 protected:
  McpCancelTest() { box_.context.execution = &blocking_; }
  void write(const std::string& line) {
    const std::string data = line + "\n";
    ASSERT_TRUE(sys::writeAll(in_.fds[1], data.data(), data.size()));
  }
  void startLongCall(int id) {
    write(
        R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18"}})");
    write(
        R"({"jsonrpc":"2.0","id":)" + std::to_string(id) +
        R"(,"method":"tools/call","params":{"name":"sandbox_run_command","arguments":{"command":["sleep","1000"]}}})");
    blocking_.waitUntilStarted();
  }

  testing::FakeSandbox box_;
  BlockingEnvironment blocking_{box_.env};
  ToolRegistry registry_ = builtinTools();
  Session session_{registry_, box_.context, ServerInfo{}};
  Pipe in_, out_, stop_;
  std::string buffer_;
};

TEST_F(McpCancelTest, NotificationsCancelledEndsTheCallWithoutAResponse) {
  Result<StdioEnd> ended = StdioEnd::kOutputClosed;
  std::thread server([&] { ended = serveStdio(session_, in_.fds[0], out_.fds[1]); });
  startLongCall(5);
  write(
      R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5,"reason":"user"}})");
  write(R"({"jsonrpc":"2.0","id":6,"method":"ping"})");
  auto first = readResponse(out_.fds[0], buffer_);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->at("id"), 0);
  auto second = readResponse(out_.fds[0], buffer_);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->at("id"), 6);  // nothing for the cancelled request 5
  in_.closeWrite();
  server.join();
  ASSERT_TRUE(ended.has_value());
  EXPECT_EQ(*ended, StdioEnd::kEndOfInput);
  // The command was cancelled, not left running.
  ASSERT_EQ(box_.env.history().size(), 1u);
  // A cancellation for a request that is not running changes nothing.
  session_.cancelRequest(json(5));
}

// Every message written until EOF on the output.
std::vector<json> readUntilEof(int fd, std::string& buffer) {
  std::vector<json> messages;
  while (auto message = readResponse(fd, buffer)) messages.push_back(*message);
  return messages;
}

TEST_F(McpCancelTest, PingAndToolsListAreAnsweredWhileACallRuns) {
  Result<StdioEnd> ended = StdioEnd::kOutputClosed;
  std::thread server([&] { ended = serveStdio(session_, in_.fds[0], out_.fds[1]); });
  startLongCall(5);
  write(R"({"jsonrpc":"2.0","id":6,"method":"ping"})");
  write(R"({"jsonrpc":"2.0","id":7,"method":"tools/list"})");
  // Answered while call 5 still runs (it runs until cancelled), and no
  // progress notification: the call carries no progressToken.
  auto init = readResponse(out_.fds[0], buffer_);
  ASSERT_TRUE(init);
  EXPECT_EQ(init->at("id"), 0);
  auto ping = readResponse(out_.fds[0], buffer_);
  ASSERT_TRUE(ping);
  EXPECT_EQ(ping->at("id"), 6);
  EXPECT_EQ(ping->at("result"), json::object());
  auto list = readResponse(out_.fds[0], buffer_);
  ASSERT_TRUE(list);
  EXPECT_EQ(list->at("id"), 7);
  EXPECT_EQ(list->at("result").at("tools").size(), registry_.tools().size());
  write(R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}})");
  in_.closeWrite();
  server.join();
  ::close(out_.fds[1]);
  out_.fds[1] = -1;
  EXPECT_TRUE(readUntilEof(out_.fds[0], buffer_).empty());  // nothing for the cancelled 5
  ASSERT_TRUE(ended.has_value());
  EXPECT_EQ(*ended, StdioEnd::kEndOfInput);
}

TEST_F(McpCancelTest, ACallWaitingBehindTheRunningOneCanBeCancelled) {
  Result<StdioEnd> ended = StdioEnd::kOutputClosed;
  std::thread server([&] { ended = serveStdio(session_, in_.fds[0], out_.fds[1]); });
  startLongCall(5);
  write(
      R"({"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"workspace_write_text","arguments":{"path":"x","text":"y"}}})");
  write(R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":6}})");
  write(R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}})");
  write(R"({"jsonrpc":"2.0","id":7,"method":"ping"})");
  in_.closeWrite();
  server.join();
  ::close(out_.fds[1]);
  out_.fds[1] = -1;
  std::vector<json> ids;
  for (const json& message : readUntilEof(out_.fds[0], buffer_)) ids.push_back(message.at("id"));
  EXPECT_EQ(ids, (std::vector<json>{0, 7}));
  // Call 6 never ran: the file it would have written does not exist.
  auto ws = box_.env.workspace(box_.handle);
  ASSERT_TRUE(ws);
  EXPECT_FALSE((*ws)->read("x").has_value());
}

TEST_F(McpCancelTest, AProgressTokenGetsProgressNotificationsBeforeTheResult) {
  Result<StdioEnd> ended = StdioEnd::kOutputClosed;
  std::thread server([&] { ended = serveStdio(session_, in_.fds[0], out_.fds[1], stop_.fds[0]); });
  write(
      R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18"}})");
  write(
      R"({"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"_meta":{"progressToken":"tok-9"},"name":"sandbox_run_command","arguments":{"command":["sleep","1000"]}}})");
  blocking_.waitUntilStarted();
  auto init = readResponse(out_.fds[0], buffer_);
  ASSERT_TRUE(init);
  EXPECT_EQ(init->at("id"), 0);
  auto progress = readResponse(out_.fds[0], buffer_);  // the first, sent as the call starts
  ASSERT_TRUE(progress);
  EXPECT_EQ(progress->at("method"), "notifications/progress");
  EXPECT_FALSE(progress->contains("id"));
  EXPECT_EQ(progress->at("params").at("progressToken"), "tok-9");
  EXPECT_EQ(progress->at("params").at("progress"), 0);
  ASSERT_TRUE(sys::writeAll(stop_.fds[1], "x", 1));
  server.join();
  ::close(out_.fds[1]);
  out_.fds[1] = -1;
  // Any further notifications come before the result, and the result last.
  const std::vector<json> rest = readUntilEof(out_.fds[0], buffer_);
  ASSERT_FALSE(rest.empty());
  for (std::size_t i = 0; i + 1 < rest.size(); ++i) {
    EXPECT_EQ(rest[i].at("params").at("progressToken"), "tok-9");
  }
  EXPECT_EQ(rest.back().at("id"), 9);
  EXPECT_EQ(rest.back().at("result").at("structuredContent").at("killed_by"), "CANCELLED");
}

TEST_F(McpCancelTest, OutputBringsAProgressNotificationBeforeTheInterval) {
  session_.setProgressInterval(std::chrono::hours(1));  // only output can bring a second one
  Result<StdioEnd> ended = StdioEnd::kOutputClosed;
  std::thread server([&] { ended = serveStdio(session_, in_.fds[0], out_.fds[1], stop_.fds[0]); });
  write(
      R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18"}})");
  write(
      R"({"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"_meta":{"progressToken":4},"name":"sandbox_run_command","arguments":{"command":["sleep","1000"]}}})");
  auto init = readResponse(out_.fds[0], buffer_);
  ASSERT_TRUE(init);
  EXPECT_EQ(init->at("id"), 0);
  for (int expected = 0; expected < 2; ++expected) {
    auto progress = readResponse(out_.fds[0], buffer_);
    ASSERT_TRUE(progress);
    EXPECT_EQ(progress->at("method"), "notifications/progress");
    EXPECT_EQ(progress->at("params").at("progressToken"), 4);
    EXPECT_EQ(progress->at("params").at("progress"), expected);
  }
  ASSERT_TRUE(sys::writeAll(stop_.fds[1], "x", 1));
  server.join();
  ::close(out_.fds[1]);
  out_.fds[1] = -1;
  const std::vector<json> rest = readUntilEof(out_.fds[0], buffer_);
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0].at("id"), 4);
}

TEST_F(McpCancelTest, AClosedOutputEndsTheSession) {
  const auto previous = ::signal(SIGPIPE, SIG_IGN);  // EPIPE instead of a signal
  ::close(out_.fds[0]);
  out_.fds[0] = -1;
  write(R"({"jsonrpc":"2.0","id":1,"method":"ping"})");
  // Still open: the session ends because it cannot answer, not on EOF.
  auto ended = serveStdio(session_, in_.fds[0], out_.fds[1]);
  ::signal(SIGPIPE, previous);
  ASSERT_TRUE(ended.has_value());
  EXPECT_EQ(*ended, StdioEnd::kOutputClosed);
}

TEST_F(McpCancelTest, AStopCancelsTheCallAndStillAnswersIt) {
  Result<StdioEnd> ended = StdioEnd::kOutputClosed;
  std::thread server([&] { ended = serveStdio(session_, in_.fds[0], out_.fds[1], stop_.fds[0]); });
  startLongCall(7);
  ASSERT_TRUE(sys::writeAll(stop_.fds[1], "x", 1));
  server.join();
  ASSERT_TRUE(ended.has_value());
  EXPECT_EQ(*ended, StdioEnd::kStopped);
  auto init = readResponse(out_.fds[0], buffer_);
  ASSERT_TRUE(init);
  auto call = readResponse(out_.fds[0], buffer_);
  ASSERT_TRUE(call);
  EXPECT_EQ(call->at("id"), 7);
  EXPECT_EQ(call->at("result").at("structuredContent").at("killed_by"), "CANCELLED");
}
}  // namespace
}  // namespace airlock::gateway::mcp
