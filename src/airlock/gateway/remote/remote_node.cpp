// RemoteNode over libcurl (egress/http_client.h): one request per port
// call, the routes and bodies of execution/internal_api.cpp. Commands always
// go as streamed calls (NDJSON), so a gateway that goes away cancels them
// and a cancelled token reaches the node as its cancel route.
#include "airlock/gateway/remote/remote_node.h"

#include <poll.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <condition_variable>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>

#include "airlock/core/encoding.h"
#include "airlock/core/json.h"
#include "airlock/egress/http_client.h"
#include "airlock/port/wire_json.h"
#include "airlock/sys/random.h"
#include "airlock/sys/sha256.h"

namespace airlock::gateway {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::string_view kPrefix = "/internal/v1";
// The most an answer that is not a stream may hold (a workspace file read
// whole, as the port's read returns it, in JSON).
constexpr std::size_t kMaxAnswerBytes = std::size_t{1} << 30;
// The longest metadata line of an export.
constexpr std::size_t kMaxPreambleBytes = 64 * 1024;
// Bytes an export keeps queued between the wire and its reader.
constexpr std::size_t kExportQueueBytes = std::size_t{4} << 20;
// How often a cancel is tried again while the node does not yet know the
// command (the call is on its way).
constexpr auto kCancelRetry = std::chrono::milliseconds(20);

const char* kindName(RunKind kind) {
  return kind == RunKind::kProgram ? "program" : "command";
}

}  // namespace

// How to reach the node; shared with the workspace handles and exports
// that may outlive one call.
struct RemoteNode::Wire {
  RemoteNodeOptions options;

  Error unavailable(const std::string& what) const {
    return Error{ErrorCode::kExecutionUnavailable, 0,
                 "execution node " + quoteForMessage(options.base_url) + ": " + what};
  }

  Error transportError(const egress::HttpError& e, std::string_view path) const {
    std::string what;
    switch (e.kind) {
      case egress::HttpFailure::kConnectFailed:
        what = "cannot connect";
        break;
      case egress::HttpFailure::kTimeout:
        what = "no answer in time";
        break;
      case egress::HttpFailure::kCancelled:
        what = "the call was cancelled";
        break;
      case egress::HttpFailure::kBodyTooLarge:
        what = "the answer is too large";
        break;
      default:
        what = "the call failed";
        break;
    }
    if (!e.detail.empty()) what += " (" + e.detail + ")";
    return unavailable(std::string(path) + ": " + what);
  }

  egress::HttpRequest request(std::string_view path, const std::string& method, std::string body,
                              std::chrono::milliseconds timeout) const {
    egress::HttpRequest r;
    r.url = options.base_url + std::string(kPrefix) + std::string(path);
    r.method = method;
    r.body = std::move(body);
    r.limits.max_redirects = 0;
    r.limits.max_body_bytes = kMaxAnswerBytes;
    r.limits.connect_timeout = options.connect_timeout;
    r.limits.hop_timeout = timeout;
    return r;
  }

  egress::HopPolicy policy(bool json_body) const {
    return [this, json_body](const egress::HopContext&) -> egress::HopDecision {
      egress::HopPlan plan;
      plan.headers.emplace_back("Authorization", "Bearer " + options.credential);
      if (json_body) plan.headers.emplace_back("Content-Type", "application/json");
      return plan;
    };
  }

  // The Error a node answered with (its body), or ExecutionUnavailable
  // when the body is not one.
  Error answeredError(long status, std::string_view body, std::string_view path) const {
    auto parsed = parseUntrustedJson(body);
    if (parsed && parsed->is_object()) {
      auto error = wireMember<Error>(*parsed, "error");
      if (error) return *error;
    }
    return unavailable(std::string(path) + ": a malformed answer (HTTP " + std::to_string(status) +
                       ")");
  }

  // One call: the JSON answer (null for 204), the node's Error, or
  // ExecutionUnavailable for anything the wire did wrong.
  Result<json> call(std::string_view path, const std::string& method, const json* body,
                    std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) const {
    if (timeout.count() == 0) timeout = options.call_timeout;
    std::string text;
    if (body != nullptr) text = body->dump(-1, ' ', false, json::error_handler_t::replace);
    auto r =
        egress::httpFetch(request(path, method, std::move(text), timeout), policy(body != nullptr));
    if (!r) return tl::unexpected(transportError(r.error(), path));
    if (r->status < 200 || r->status >= 300)
      return tl::unexpected(answeredError(r->status, r->body, path));
    if (r->status == 204 || r->body.empty()) return json(nullptr);
    auto parsed = parseUntrustedJson(r->body);
    if (!parsed) return tl::unexpected(unavailable(std::string(path) + ": a malformed answer"));
    return std::move(*parsed);
  }

  Result<json> post(std::string_view path, const json& body,
                    std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) const {
    return call(path, "POST", &body, timeout);
  }

  // A decoded answer; a value that does not decode is the wire's fault.
  template <class T>
  Result<T> decode(const Result<json>& answer, std::string_view path) const {
    if (!answer) return tl::unexpected(answer.error());
    auto value = wireFromJson<T>(*answer);
    if (!value)
      return tl::unexpected(
          unavailable(std::string(path) + ": a malformed answer: " + value.error().context));
    return value;
  }
  template <class T>
  Result<T> decodeMember(const Result<json>& answer, const char* name,
                         std::string_view path) const {
    if (!answer) return tl::unexpected(answer.error());
    auto value = wireMember<T>(*answer, name);
    if (!value)
      return tl::unexpected(
          unavailable(std::string(path) + ": a malformed answer: " + value.error().context));
    return value;
  }
};

namespace {

Result<void> done(const Result<json>& answer) {
  if (!answer) return tl::unexpected(answer.error());
  return {};
}

// The bytes of an export as they arrive from the node: filled by a thread
// that runs the transfer, read by the consumer; bounded, so a slow consumer
// holds the transfer back. The first line is the node's metadata.
class ExportPipe {
 public:
  // Called on the transfer's thread; false stops the transfer.
  bool push(long status, std::string_view bytes) {
    std::unique_lock lk(mu_);
    if (status != 200) {
      if (error_body_.size() + bytes.size() > kMaxPreambleBytes) return false;
      error_body_.append(bytes);
      return true;
    }
    if (!preamble_done_) {
      const std::size_t nl = bytes.find('\n');
      const std::string_view head = bytes.substr(0, nl);
      if (preamble_.size() + head.size() > kMaxPreambleBytes) return false;
      preamble_.append(head);
      if (nl == std::string_view::npos) return true;
      preamble_done_ = true;
      bytes.remove_prefix(nl + 1);
      cv_.notify_all();
    }
    cv_.wait(lk, [&] { return abandoned_ || queued_ < kExportQueueBytes; });
    if (abandoned_) return false;
    if (!bytes.empty()) {
      chunks_.emplace_back(bytes);
      queued_ += bytes.size();
      cv_.notify_all();
    }
    return true;
  }

  void finish(Result<void> outcome) {
    std::lock_guard lk(mu_);
    finished_ = true;
    outcome_ = std::move(outcome);
    cv_.notify_all();
  }

  // Waits for the metadata line (or the end).
  std::optional<std::string> waitPreamble() {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return preamble_done_ || finished_; });
    if (!preamble_done_) return std::nullopt;
    return preamble_;
  }

  const std::string& errorBody() const { return error_body_; }
  // Valid once finished.
  const Result<void>& outcome() const { return outcome_; }

  // The next bytes; 0 at the end; the transfer's failure as an Error.
  Result<std::size_t> pull(char* buffer, std::size_t size) {
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return !chunks_.empty() || finished_; });
    if (chunks_.empty()) {
      if (!outcome_) return tl::unexpected(outcome_.error());
      return std::size_t{0};
    }
    std::string& front = chunks_.front();
    const std::size_t n = std::min(size, front.size());
    std::copy_n(front.data(), n, buffer);
    front.erase(0, n);
    queued_ -= n;
    if (front.empty()) chunks_.pop_front();
    cv_.notify_all();
    return n;
  }

  void abandon() {
    std::lock_guard lk(mu_);
    abandoned_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::string preamble_;
  bool preamble_done_ = false;
  std::string error_body_;
  std::deque<std::string> chunks_;
  std::size_t queued_ = 0;
  bool finished_ = false;
  bool abandoned_ = false;
  Result<void> outcome_;
};

// The consumer's side of an export: the bytes as they arrive, hashed; at
// the end the length and digest must be what the node said at open, or the
// last read fails with ArtifactIntegrityError (so a store keeps nothing).
class RemoteExportSource final : public sys::ByteSource {
 public:
  RemoteExportSource(std::shared_ptr<ExportPipe> pipe, std::thread transfer, std::int64_t size,
                     std::string sha256, std::string path)
      : pipe_(std::move(pipe)),
        transfer_(std::move(transfer)),
        expected_size_(size),
        expected_sha256_(std::move(sha256)),
        path_(std::move(path)) {}
  ~RemoteExportSource() override {
    pipe_->abandon();
    if (transfer_.joinable()) transfer_.join();
  }
  RemoteExportSource(const RemoteExportSource&) = delete;
  RemoteExportSource& operator=(const RemoteExportSource&) = delete;

  Result<std::size_t> read(char* buffer, std::size_t size) override {
    auto n = pipe_->pull(buffer, size);
    if (!n) return n;
    if (*n > 0) {
      seen_ += static_cast<std::int64_t>(*n);
      if (seen_ > expected_size_) return mismatch("more bytes than the node measured");
      hash_.update(buffer, *n);
      return n;
    }
    if (seen_ != expected_size_) return mismatch("fewer bytes than the node measured");
    if (hash_.finishHex() != expected_sha256_)
      return mismatch("bytes whose SHA-256 is not the one the node measured");
    return std::size_t{0};
  }

 private:
  Result<std::size_t> mismatch(const std::string& what) {
    return fail(ErrorCode::kArtifactIntegrityError,
                "export of " + quoteForMessage(path_) + " through the execution node: " + what);
  }

  std::shared_ptr<ExportPipe> pipe_;
  std::thread transfer_;
  std::int64_t expected_size_;
  std::string expected_sha256_;
  std::string path_;
  std::int64_t seen_ = 0;
  sys::Sha256 hash_;
};

bool isLowerHex64(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// The workspace port of one remote environment: each method one call.
class RemoteWorkspace final : public WorkspaceHandle {
 public:
  RemoteWorkspace(std::shared_ptr<const RemoteNode::Wire> wire, EnvironmentHandle handle)
      : wire_(std::move(wire)), handle_(std::move(handle)) {}

  Result<std::string> read(const std::string& path) override {
    auto answer = wire_->post("/workspace/read", body(path));
    auto data = wire_->decodeMember<json>(answer, "data", "/workspace/read");
    if (!data) return tl::unexpected(data.error());
    auto bytes = bytesFromJson(*data);
    if (!bytes)
      return tl::unexpected(
          wire_->unavailable("/workspace/read: a malformed answer: " + bytes.error().context));
    return bytes;
  }
  Result<void> write(const std::string& path, std::string_view data) override {
    json b = body(path);
    b["data"] = bytesToJson(data);
    return done(wire_->post("/workspace/write", b));
  }
  Result<void> placeFile(const std::string& path, std::string_view data) override {
    json b = body(path);
    b["data"] = bytesToJson(data);
    return done(wire_->post("/workspace/place", b));
  }
  Result<void> mkdir(const std::string& path) override {
    return done(wire_->post("/workspace/mkdir", body(path)));
  }
  Result<std::vector<WorkspaceEntry>> listdir(const std::string& path) override {
    return wire_->decodeMember<std::vector<WorkspaceEntry>>(
        wire_->post("/workspace/listdir", body(path)), "entries", "/workspace/listdir");
  }
  Result<WorkspaceProvenance> provenance(const std::string& path) override {
    return wire_->decodeMember<WorkspaceProvenance>(
        wire_->post("/workspace/provenance", body(path)), "provenance", "/workspace/provenance");
  }
  Result<void> remove(const std::string& path, bool recursive) override {
    json b = body(path);
    b["recursive"] = recursive;
    return done(wire_->post("/workspace/remove", b));
  }
  Result<void> rename(const std::string& from, const std::string& to, bool replace) override {
    json b{{"handle", handle_}, {"from", from}, {"to", to}, {"replace", replace}};
    return done(wire_->post("/workspace/rename", b));
  }
  Result<WorkspaceStat> stat(const std::string& path) override {
    return wire_->decode<WorkspaceStat>(wire_->post("/workspace/stat", body(path)),
                                        "/workspace/stat");
  }

  Result<WorkspaceFileStream> openExport(const std::string& path, std::int64_t max_bytes) override {
    constexpr std::string_view kPath = "/workspace/export";
    json b = body(path);
    b["max_bytes"] = max_bytes;
    auto pipe = std::make_shared<ExportPipe>();
    auto request =
        wire_->request(kPath, "POST", b.dump(-1, ' ', false, json::error_handler_t::replace),
                       wire_->options.call_timeout);
    // The transfer's own bound is the pipe's, not the client's.
    request.limits.max_body_bytes = std::numeric_limits<std::size_t>::max();
    request.sink = [pipe](long status, std::string_view bytes) {
      return pipe->push(status, bytes);
    };
    auto wire = wire_;
    std::thread transfer([pipe, wire, request = std::move(request), kPath] {
      auto r = egress::httpFetch(request, wire->policy(true));
      if (!r) {
        pipe->finish(tl::unexpected(wire->transportError(r.error(), kPath)));
      } else if (r->status != 200) {
        pipe->finish(tl::unexpected(wire->answeredError(r->status, pipe->errorBody(), kPath)));
      } else if (r->stopped) {
        pipe->finish(
            tl::unexpected(wire->unavailable(std::string(kPath) + ": the transfer stopped")));
      } else {
        pipe->finish({});
      }
    });
    auto fail_with = [&](Error e) -> Result<WorkspaceFileStream> {
      pipe->abandon();
      transfer.join();
      return tl::unexpected(std::move(e));
    };
    auto preamble = pipe->waitPreamble();
    if (!preamble) {
      transfer.join();
      if (!pipe->outcome()) return tl::unexpected(pipe->outcome().error());
      return tl::unexpected(wire_->unavailable(std::string(kPath) + ": no metadata line"));
    }
    auto parsed = parseUntrustedJson(*preamble);
    if (!parsed)
      return fail_with(wire_->unavailable(std::string(kPath) + ": a malformed metadata line"));
    auto size = wireMember<std::int64_t>(*parsed, "size_bytes");
    auto sha = wireMember<std::string>(*parsed, "sha256");
    auto name = parsed->is_object() && parsed->contains("filename")
                    ? bytesFromJson((*parsed)["filename"])
                    : Result<std::string>(fail(ErrorCode::kToolValidationError, "missing"));
    if (!size || !sha || !name || *size < 0 || !isLowerHex64(*sha))
      return fail_with(wire_->unavailable(std::string(kPath) + ": a malformed metadata line"));
    WorkspaceFileStream out;
    out.size_bytes = *size;
    out.sha256 = *sha;
    out.filename = std::move(*name);
    out.reader = std::make_unique<RemoteExportSource>(pipe, std::move(transfer), *size, *sha, path);
    return out;
  }

 private:
  json body(const std::string& path) const { return json{{"handle", handle_}, {"path", path}}; }

  std::shared_ptr<const RemoteNode::Wire> wire_;
  EnvironmentHandle handle_;
};

}  // namespace

RemoteNode::RemoteNode(RemoteNodeOptions options)
    : options_(options), wire_(std::make_shared<Wire>(Wire{std::move(options)})) {
  egress::curlGlobalInitOnce();
}
RemoteNode::~RemoteNode() = default;

Result<NodeStatus> RemoteNode::status() const {
  return wire_->decode<NodeStatus>(wire_->call("/node", "GET", nullptr), "/node");
}

Result<EnvironmentHandle> RemoteNode::provision(const EnvironmentSpec& spec) {
  return wire_->decode<EnvironmentHandle>(wire_->post("/environments", json(spec)),
                                          "/environments");
}

Result<ExecutionResult> RemoteNode::execute(const EnvironmentHandle& handle,
                                            const ExecutionCommand& command,
                                            const CancelToken* cancel) {
  return executeStreaming(handle, command, cancel, OutputSink());
}

Result<ExecutionResult> RemoteNode::executeStreaming(const EnvironmentHandle& handle,
                                                     const ExecutionCommand& command,
                                                     const CancelToken* cancel,
                                                     const OutputSink& sink) {
  constexpr std::string_view kPath = "/execute?stream=1";
  ExecutionCommand sent = command;
  // A cancel needs a name the node knows the command by.
  if (sent.execution_id.empty() && cancel != nullptr) {
    auto token = sys::randomHexToken(12);
    if (!token) return tl::unexpected(token.error());
    sent.execution_id = "remote-" + *token;
  }
  json body{{"handle", handle}, {"command", sent}};
  if (cancel != nullptr && cancel->cancelled()) body["cancelled"] = true;
  const auto timeout =
      std::chrono::milliseconds(std::max<std::int64_t>(0, command.timeout_seconds) * 1000) +
      options_.call_timeout;
  auto request = wire_->request(kPath, "POST",
                                body.dump(-1, ' ', false, json::error_handler_t::replace), timeout);
  // The output cap bounds the lines (each byte at most 6 JSON bytes, the
  // result line a second copy) beside the result's other fields.
  const std::size_t max_line =
      (std::size_t{16} << 20) +
      12 * static_cast<std::size_t>(std::max<std::int64_t>(0, command.maximum_output_bytes));
  std::string pending;
  std::string error_body;
  std::optional<Result<ExecutionResult>> end;
  std::optional<Error> wire_fault;
  auto on_line = [&](std::string_view line) {
    auto parsed = parseUntrustedJson(line);
    if (!parsed || !parsed->is_object()) {
      wire_fault = wire_->unavailable(std::string(kPath) + ": a malformed line");
      return false;
    }
    if (auto data = parsed->find("data"); data != parsed->end() && parsed->contains("stream")) {
      auto bytes = bytesFromJson(*data);
      const json& stream = (*parsed)["stream"];
      if (!bytes || !stream.is_string() || (stream != "stdout" && stream != "stderr")) {
        wire_fault = wire_->unavailable(std::string(kPath) + ": a malformed output line");
        return false;
      }
      if (sink) sink(stream == "stdout" ? OutputStream::kStdout : OutputStream::kStderr, *bytes);
      return true;
    }
    if (parsed->contains("result")) {
      auto result = wireMember<ExecutionResult>(*parsed, "result");
      if (!result) {
        wire_fault = wire_->unavailable(std::string(kPath) +
                                        ": a malformed result: " + result.error().context);
        return false;
      }
      end = std::move(*result);
      return true;
    }
    auto error = wireMember<Error>(*parsed, "error");
    if (!error) {
      wire_fault = wire_->unavailable(std::string(kPath) + ": a malformed line");
      return false;
    }
    end = tl::unexpected(std::move(*error));
    return true;
  };
  request.limits.max_body_bytes = std::numeric_limits<std::size_t>::max();
  request.sink = [&](long status, std::string_view bytes) {
    if (status != 200) {
      if (error_body.size() + bytes.size() > kMaxPreambleBytes) return false;
      error_body.append(bytes);
      return true;
    }
    pending.append(bytes);
    std::size_t start = 0;
    for (std::size_t nl = pending.find('\n'); nl != std::string::npos;
         nl = pending.find('\n', start)) {
      if (!on_line(std::string_view(pending).substr(start, nl - start))) return false;
      start = nl + 1;
    }
    pending.erase(0, start);
    if (pending.size() > max_line) {
      wire_fault = wire_->unavailable(std::string(kPath) + ": a line past its bound");
      return false;
    }
    return true;
  };

  // A cancelled token reaches the node as its cancel route; the command
  // then ends CANCELLED and its result still arrives on this call.
  std::thread watcher;
  std::optional<CancelToken> finished;
  if (cancel != nullptr) {
    auto made = CancelToken::create();
    if (!made) return tl::unexpected(made.error());
    finished.emplace(std::move(*made));
    const int cancel_fd = cancel->pollFd();
    const int finished_fd = finished->pollFd();
    watcher = std::thread([this, handle, id = sent.execution_id, cancel_fd, finished_fd] {
      std::array<pollfd, 2> fds{{{cancel_fd, POLLIN, 0}, {finished_fd, POLLIN, 0}}};
      while (::poll(fds.data(), fds.size(), -1) < 0 && errno == EINTR) {
      }
      if ((fds[1].revents & POLLIN) != 0) return;
      // Until the node has the command (the call is still on its way) it
      // answers NotFound: try again until it takes it or the call is over.
      for (;;) {
        auto cancelled = this->cancel(handle, id);
        if (cancelled || cancelled.error().code != ErrorCode::kNotFound) return;
        pollfd f{finished_fd, POLLIN, 0};
        if (::poll(&f, 1, static_cast<int>(kCancelRetry.count())) > 0) return;
      }
    });
  }
  auto r = egress::httpFetch(request, wire_->policy(true));
  if (finished) finished->cancel();
  if (watcher.joinable()) watcher.join();

  if (!r) return tl::unexpected(wire_fault ? *wire_fault : wire_->transportError(r.error(), kPath));
  if (r->status != 200) return tl::unexpected(wire_->answeredError(r->status, error_body, kPath));
  if (wire_fault) return tl::unexpected(*wire_fault);
  if (!end)
    return tl::unexpected(
        wire_->unavailable(std::string(kPath) + ": the answer ended before the result"));
  return std::move(*end);
}

Result<void> RemoteNode::cancel(const EnvironmentHandle& handle, std::string_view execution_id) {
  return done(wire_->post("/cancel",
                          json{{"handle", handle}, {"execution_id", std::string(execution_id)}}));
}

Result<void> RemoteNode::destroy(const EnvironmentHandle& handle) {
  return done(wire_->post("/destroy", json{{"handle", handle}}));
}

Result<EnvironmentHandle> RemoteNode::extend(const EnvironmentHandle& handle,
                                             Timestamp expires_at) {
  return wire_->decode<EnvironmentHandle>(
      wire_->post("/extend", json{{"handle", handle}, {"expires_at", formatTimestamp(expires_at)}}),
      "/extend");
}

Result<std::shared_ptr<WorkspaceHandle>> RemoteNode::workspace(const EnvironmentHandle& handle) {
  if (auto opened = done(wire_->post("/workspace/open", json{{"handle", handle}})); !opened)
    return tl::unexpected(opened.error());
  return std::shared_ptr<WorkspaceHandle>(std::make_shared<RemoteWorkspace>(wire_, handle));
}

Result<std::unique_ptr<SideProcess>> RemoteNode::startSideProcess(
    const EnvironmentHandle& /*handle*/, const SideCommand& /*command*/) {
  return fail(ErrorCode::kExecutionUnavailable,
              "execution node " + quoteForMessage(options_.base_url) +
                  ": a remote node cannot start side processes (code mode) through its internal "
                  "API yet");
}

Result<std::unique_ptr<CapabilityChannel>> RemoteNode::openCapabilityChannel(
    const EnvironmentHandle& /*handle*/) {
  return fail(ErrorCode::kExecutionUnavailable,
              "execution node " + quoteForMessage(options_.base_url) +
                  ": a remote node has no capability channel (code mode) through its internal "
                  "API yet");
}

std::vector<LiveEnvironment> RemoteNode::live(const std::optional<std::string>& tenant_id) const {
  std::string path = "/environments";
  if (tenant_id) path += "?tenant_id=" + egress::urlEscape(*tenant_id);
  auto listed = wire_->decodeMember<std::vector<LiveEnvironment>>(wire_->call(path, "GET", nullptr),
                                                                  "environments", "/environments");
  if (!listed) return {};
  return std::move(*listed);
}

std::optional<LiveEnvironment> RemoteNode::find(const std::string& environment_id) const {
  auto answer = wire_->post("/environments/find", json{{"environment_id", environment_id}});
  if (!answer || !answer->is_object()) return std::nullopt;
  const auto it = answer->find("environment");
  if (it == answer->end() || it->is_null()) return std::nullopt;
  auto found = wireFromJson<LiveEnvironment>(*it);
  if (!found) return std::nullopt;
  return std::move(*found);
}

Result<RunClaim> RemoteNode::claim(const std::string& environment_id, RunKind kind) {
  auto id = wire_->decodeMember<std::string>(
      wire_->post("/claims", json{{"environment_id", environment_id}, {"kind", kindName(kind)}}),
      "claim_id", "/claims");
  if (!id) return tl::unexpected(id.error());
  {
    std::lock_guard lk(claims_mu_);
    claims_.emplace(std::pair(environment_id, kind), std::move(*id));
  }
  return makeClaim(*this, environment_id, kind);
}

void RemoteNode::release(const std::string& environment_id, RunKind kind) noexcept {
  std::string id;
  {
    std::lock_guard lk(claims_mu_);
    auto it = claims_.find(std::pair(environment_id, kind));
    if (it == claims_.end()) return;
    id = std::move(it->second);
    claims_.erase(it);
  }
  // A release that does not arrive leaves the claim until the environment
  // is destroyed (the node drops its claims then).
  try {
    (void)wire_->post("/claims/release", json{{"claim_id", id}});
  } catch (...) {  // NOLINT(bugprone-empty-catch): noexcept, and nothing to do
  }
}

int RemoteNode::reap(const StaleLeaseQuery& /*stale*/) {
  return 0;
}

void RemoteNode::destroyAll() {}

std::size_t RemoteNode::liveCount() const {
  auto s = status();
  return s ? s->live : 0;
}

// --- jobs --------------------------------------------------------------------

Result<JobStarted> RemoteNode::startJob(const EnvironmentHandle& handle,
                                        const JobStartRequest& request) {
  return wire_->decode<JobStarted>(
      wire_->post("/jobs/start", json{{"handle", handle}, {"request", request}}), "/jobs/start");
}

Result<JobSnapshot> RemoteNode::pollJob(const EnvironmentHandle& handle,
                                        const JobPollRequest& request) {
  JobPollRequest sent = request;
  sent.wait_ms = std::min(request.wait_ms, kMaxJobWaitMs);
  const auto timeout = std::chrono::milliseconds(sent.wait_ms) + options_.call_timeout;
  return wire_->decode<JobSnapshot>(
      wire_->post("/jobs/poll", json{{"handle", handle}, {"poll", sent}}, timeout), "/jobs/poll");
}

Result<void> RemoteNode::sendJobInput(const EnvironmentHandle& handle, const std::string& job_id,
                                      std::string_view bytes, bool last, std::uint64_t timeout_ms,
                                      const CancelToken* /*cancel*/) {
  const std::uint64_t bounded = std::min(timeout_ms, kMaxJobWaitMs);
  return done(wire_->post("/jobs/input",
                          json{{"handle", handle},
                               {"job_id", job_id},
                               {"data", bytesToJson(bytes)},
                               {"last", last},
                               {"timeout_ms", bounded}},
                          std::chrono::milliseconds(bounded) + options_.call_timeout));
}

Result<void> RemoteNode::resizeJob(const EnvironmentHandle& handle, const std::string& job_id,
                                   const TerminalSize& size) {
  return done(
      wire_->post("/jobs/resize", json{{"handle", handle}, {"job_id", job_id}, {"size", size}}));
}

Result<void> RemoteNode::killJob(const EnvironmentHandle& handle, const std::string& job_id) {
  return done(wire_->post("/jobs/kill", json{{"handle", handle}, {"job_id", job_id}}));
}

Result<std::vector<JobSnapshot>> RemoteNode::listJobs(const EnvironmentHandle& handle) {
  return wire_->decodeMember<std::vector<JobSnapshot>>(
      wire_->post("/jobs/list", json{{"handle", handle}}), "jobs", "/jobs/list");
}

}  // namespace airlock::gateway
