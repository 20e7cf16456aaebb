// The execution node's internal API and the gateway's RemoteNode, over a
// real HTTP server on 127.0.0.1 (node_server.h): the credential on every
// route, a node that is not there or dies mid-command, claims, listings,
// exports with their digest, and jobs.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <string>
#include <thread>

#include "../sandbox/linux/linux_test_support.h"
#include "airlock/artifacts/artifact_writer.h"
#include "airlock/artifacts/filesystem_store.h"
#include "airlock/artifacts/memory_repository.h"
#include "airlock/artifacts/workspace_export.h"
#include "airlock/core/limits_defaults.h"
#include "airlock/egress/http_client.h"
#include "airlock/sandbox/fake/fake_environment.h"
#include "airlock/sys/byte_source.h"
#include "airlock/sys/sha256.h"
#include "node_server.h"

namespace airlock::testing {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

const std::vector<std::string> kWaitArgv = {"wait-for-cancel"};

std::unique_ptr<ExecutionEnvironment> scriptedFake() {
  auto env = std::make_unique<fake::FakeEnvironment>();
  fake::ScriptedBehaviour until_cancelled;
  until_cancelled.stdout_data = "started\n";
  until_cancelled.runs_until_cancelled = true;
  env->script(kWaitArgv, until_cancelled);
  return env;
}

EnvironmentSpec fakeSpec(const std::string& tenant = "tenant-a") {
  EnvironmentSpec spec;
  spec.tenant_id = tenant;
  spec.run_id = "run-1";
  spec.lease_epoch = 1;
  spec.image_digest = fake::kFakeImageDigest;
  spec.limits = defaultLimits();
  return spec;
}

ExecutionCommand waitCommand() {
  ExecutionCommand c;
  c.argv = kWaitArgv;
  c.timeout_seconds = 60;
  c.maximum_output_bytes = 1 << 20;
  return c;
}

// One raw call, as any HTTP client would make it: the status.
long statusOf(const std::string& url, const std::string& method,
              std::optional<std::string> authorization, std::string body = "{}") {
  egress::HttpRequest r;
  r.url = url;
  r.method = method;
  if (method == "POST") r.body = std::move(body);
  r.limits.max_redirects = 0;
  r.limits.hop_timeout = milliseconds(10'000);
  auto answer = egress::httpFetch(r, [&](const egress::HopContext&) -> egress::HopDecision {
    egress::HopPlan plan;
    if (authorization) plan.headers.emplace_back("Authorization", *authorization);
    return plan;
  });
  return answer ? answer->status : -1;
}

TEST(InternalApi, EveryRouteButHealthNeedsTheServiceCredential) {
  auto server = NodeServer::start(scriptedFake());
  ASSERT_TRUE(server.has_value()) << server.error().message();
  const auto table = airlock::node::InternalApi::routeTable();
  ASSERT_GE(table.size(), 20U);
  int health_routes = 0;
  for (const auto& [method, path] : table) {
    const std::string url = (*server)->url() + path;
    if (path == "/internal/v1/health") {
      ++health_routes;
      EXPECT_EQ(statusOf(url, method, std::nullopt), 200) << path;
      continue;
    }
    EXPECT_EQ(statusOf(url, method, std::nullopt), 401) << method << " " << path;
    EXPECT_EQ(statusOf(url, method, std::string("Bearer not-the-credential")), 401)
        << method << " " << path;
    EXPECT_EQ(statusOf(url, method, std::string("Basic ") + kTestCredential), 401)
        << method << " " << path;
  }
  EXPECT_EQ(health_routes, 1);
  const std::string bearer = std::string("Bearer ") + kTestCredential;
  EXPECT_EQ(statusOf((*server)->url() + "/internal/v1/node", "GET", bearer), 200);
  EXPECT_EQ(statusOf((*server)->url() + "/internal/v1/no-such-route", "GET", bearer), 404);
  EXPECT_EQ(statusOf((*server)->url() + "/internal/v1/destroy", "GET", bearer), 405);
  EXPECT_EQ(statusOf((*server)->url() + "/internal/v1/node", "POST", bearer), 405);
  // A control route's body is bounded.
  EXPECT_EQ(statusOf((*server)->url() + "/internal/v1/destroy", "POST", bearer,
                     std::string((1 << 20) + 1, ' ')),
            413);
  EXPECT_EQ(statusOf((*server)->url() + "/internal/v1/destroy", "POST", bearer, "[1]"), 400);
}

TEST(RemoteNode, ANodeThatIsNotListeningIsUnavailable) {
  // A port that was just free: nothing listens there.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  ::close(fd);
  gateway::RemoteNodeOptions options;
  options.base_url = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  options.credential = kTestCredential;
  options.connect_timeout = milliseconds(1000);
  options.call_timeout = milliseconds(2000);
  gateway::RemoteNode remote(options);
  const auto started = Clock::now();
  auto handle = remote.provision(fakeSpec());
  ASSERT_FALSE(handle.has_value());
  EXPECT_EQ(handle.error().code, ErrorCode::kExecutionUnavailable);
  EXPECT_NE(handle.error().context.find(options.base_url), std::string::npos)
      << handle.error().context;
  EXPECT_FALSE(remote.status().has_value());
  EXPECT_TRUE(remote.live().empty());
  EXPECT_FALSE(remote.find("env-1").has_value());
  EXPECT_LT(Clock::now() - started, std::chrono::seconds(10));
}

TEST(RemoteNode, ANodeKilledMidCommandIsUnavailable) {
  int ports[2];
  ASSERT_EQ(::pipe(ports), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(ports[0]);
    auto server = NodeServer::start(scriptedFake());
    const std::uint16_t port =
        server ? static_cast<std::uint16_t>(
                     std::stoi((*server)->url().substr((*server)->url().rfind(':') + 1)))
               : 0;
    (void)!::write(ports[1], &port, sizeof port);
    for (;;) ::pause();  // until the parent kills it
  }
  ::close(ports[1]);
  std::uint16_t port = 0;
  ASSERT_EQ(::read(ports[0], &port, sizeof port), static_cast<ssize_t>(sizeof port));
  ::close(ports[0]);
  ASSERT_NE(port, 0);
  gateway::RemoteNodeOptions options;
  options.base_url = "http://127.0.0.1:" + std::to_string(port);
  options.credential = kTestCredential;
  options.call_timeout = milliseconds(10'000);
  gateway::RemoteNode remote(options);
  auto handle = remote.provision(fakeSpec());
  ASSERT_TRUE(handle.has_value()) << handle.error().message();
  std::promise<void> started;
  auto started_future = started.get_future();
  bool signalled = false;
  Result<ExecutionResult> result = fail(ErrorCode::kNotFound, "did not run");
  std::thread running([&] {
    result = remote.executeStreaming(*handle, waitCommand(), nullptr,
                                     [&](ExecutionEnvironment::OutputStream, std::string_view b) {
                                       if (!signalled && b.find("started") != std::string::npos) {
                                         signalled = true;
                                         started.set_value();
                                       }
                                     });
  });
  const bool ran = started_future.wait_for(std::chrono::seconds(30)) == std::future_status::ready;
  const auto killed_at = Clock::now();
  ::kill(child, SIGKILL);
  running.join();
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(ran);
  ASSERT_FALSE(result.has_value());
  EXPECT_EQ(result.error().code, ErrorCode::kExecutionUnavailable);
  EXPECT_NE(result.error().context.find(options.base_url), std::string::npos)
      << result.error().context;
  // The cut connection is seen at once, not at the call's timeout.
  EXPECT_LT(Clock::now() - killed_at, std::chrono::seconds(5));
  // And the node is gone for every later call.
  EXPECT_EQ(remote.destroy(*handle).error().code, ErrorCode::kExecutionUnavailable);
}

TEST(RemoteNode, ListsFindsClaimsAndReportsTheNode) {
  auto server = NodeServer::start(scriptedFake());
  ASSERT_TRUE(server.has_value()) << server.error().message();
  gateway::RemoteNode remote((*server)->remoteOptions());
  auto a = remote.provision(fakeSpec("tenant-a"));
  auto b = remote.provision(fakeSpec("tenant-b"));
  ASSERT_TRUE(a.has_value() && b.has_value());
  auto status = remote.status();
  ASSERT_TRUE(status.has_value()) << status.error().message();
  EXPECT_EQ(status->name, "node-test");
  EXPECT_EQ(status->live, 2U);
  EXPECT_EQ(remote.liveCount(), 2U);
  EXPECT_EQ(remote.live().size(), 2U);
  auto only_a = remote.live(std::string("tenant-a"));
  ASSERT_EQ(only_a.size(), 1U);
  EXPECT_EQ(only_a[0].handle, *a);
  auto found = remote.find(b->environment_id);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->handle, *b);
  EXPECT_EQ(found->image_digest, fake::kFakeImageDigest);
  EXPECT_FALSE(remote.find("no-such-environment").has_value());

  {
    auto command = remote.claim(a->environment_id, RunKind::kCommand);
    ASSERT_TRUE(command.has_value()) << command.error().message();
    auto program = remote.claim(a->environment_id, RunKind::kProgram);
    ASSERT_FALSE(program.has_value());
    EXPECT_EQ(program.error().code, ErrorCode::kExecutionRejected);
  }  // the command's claim is released through the wire here
  auto program = remote.claim(a->environment_id, RunKind::kProgram);
  EXPECT_TRUE(program.has_value()) << program.error().message();

  ASSERT_TRUE(remote.destroy(*a).has_value());
  ASSERT_TRUE(remote.destroy(*b).has_value());
  EXPECT_TRUE(remote.live().empty());
  EXPECT_FALSE(remote.find(a->environment_id).has_value());
}

// --- export ------------------------------------------------------------------

// Passes every call to the API, but says another digest in an export's
// metadata line than the node measured.
class TamperingHandler final : public service::RequestHandler {
 public:
  explicit TamperingHandler(airlock::node::InternalApi& api) : api_(api) {}
  service::HttpResponse handle(const service::HttpRequest& request) override {
    service::HttpResponse r = api_.handle(request);
    if (request.target != "/internal/v1/workspace/export" || r.status != 200) return r;
    auto original = r.body_source;
    // The metadata line is the stream's first bytes: the digest's first hex
    // digit is changed as it passes.
    class Tamper final : public sys::ByteSource {
     public:
      explicit Tamper(std::shared_ptr<sys::ByteSource> inner) : inner_(std::move(inner)) {}
      Result<std::size_t> read(char* buffer, std::size_t size) override {
        auto n = inner_->read(buffer, size);
        if (n && *n > 0 && !done_) {
          std::string_view got(buffer, *n);
          if (auto at = got.find("\"sha256\":\""); at != std::string_view::npos) {
            char& digit = buffer[at + 10];
            digit = digit == '0' ? '1' : '0';
            done_ = true;
          }
        }
        return n;
      }

     private:
      std::shared_ptr<sys::ByteSource> inner_;
      bool done_ = false;
    };
    r.body_source = std::make_shared<Tamper>(original);
    return r;
  }
  service::HttpResponse handleStreaming(const service::HttpRequest& request,
                                        const std::function<void(std::string)>& emit,
                                        const CancelToken* cancel) override {
    return api_.handleStreaming(request, emit, cancel);
  }
  bool wantsStream(const service::HttpRequest& r) const override { return api_.wantsStream(r); }
  bool runsCommand(const service::HttpRequest& r) const override { return api_.runsCommand(r); }
  bool needsNoToken(const service::HttpRequest& r) const override { return api_.needsNoToken(r); }
  bool authorized(const service::HttpRequest& r) const override { return api_.authorized(r); }
  std::string routeLabel(std::string_view path) const override { return api_.routeLabel(path); }
  int reap() override { return api_.reap(); }
  Result<std::size_t> fireSchedules() override { return api_.fireSchedules(); }
  void destroyAll() override { api_.destroyAll(); }
  service::Metrics& metrics() override { return api_.metrics(); }

 private:
  airlock::node::InternalApi& api_;
};

std::string binaryFile() {
  std::string bytes;
  for (int k = 0; k < 300'000; ++k) bytes.push_back(static_cast<char>((k * 131 + k / 7) & 0xFF));
  return bytes;
}

TEST(RemoteNode, AnExportStreamsTheFileWithTheDigestTheNodeMeasured) {
  auto server = NodeServer::start(scriptedFake());
  ASSERT_TRUE(server.has_value()) << server.error().message();
  gateway::RemoteNode remote((*server)->remoteOptions());
  auto handle = remote.provision(fakeSpec());
  ASSERT_TRUE(handle.has_value());
  auto ws = remote.workspace(*handle);
  ASSERT_TRUE(ws.has_value()) << ws.error().message();
  const std::string bytes = binaryFile();
  ASSERT_TRUE((*ws)->write("out/data.bin", bytes).has_value());
  auto stream = (*ws)->openExport("out/data.bin", 1 << 20);
  ASSERT_TRUE(stream.has_value()) << stream.error().message();
  EXPECT_EQ(stream->size_bytes, static_cast<std::int64_t>(bytes.size()));
  EXPECT_EQ(stream->sha256, sys::sha256Hex(bytes));
  EXPECT_EQ(stream->filename, "data.bin");
  auto read = sys::readAll(*stream->reader, 1 << 21);
  ASSERT_TRUE(read.has_value()) << read.error().message();
  EXPECT_EQ(*read, bytes);
  // The node's refusals cross as they are.
  auto large = (*ws)->openExport("out/data.bin", 10);
  ASSERT_FALSE(large.has_value());
  EXPECT_EQ(large.error().code, ErrorCode::kExecutionRejected);
  auto missing = (*ws)->openExport("out/none.bin", 1 << 20);
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  // An export abandoned half way stops its transfer (the destructor joins).
  auto abandoned = (*ws)->openExport("out/data.bin", 1 << 20);
  ASSERT_TRUE(abandoned.has_value());
  char some[100];
  ASSERT_TRUE(abandoned->reader->read(some, sizeof some).has_value());
  abandoned->reader.reset();
  ASSERT_TRUE(remote.destroy(*handle).has_value());
}

TEST(RemoteNode, AnExportWhoseDigestDoesNotMatchItsBytesIsRefused) {
  auto server = NodeServer::start(scriptedFake(), [](airlock::node::InternalApi& api) {
    return std::unique_ptr<service::RequestHandler>(std::make_unique<TamperingHandler>(api));
  });
  ASSERT_TRUE(server.has_value()) << server.error().message();
  gateway::RemoteNode remote((*server)->remoteOptions());
  auto handle = remote.provision(fakeSpec());
  ASSERT_TRUE(handle.has_value());
  auto ws = remote.workspace(*handle);
  ASSERT_TRUE(ws.has_value());
  const std::string bytes = binaryFile();
  ASSERT_TRUE((*ws)->write("data.bin", bytes).has_value());
  auto stream = (*ws)->openExport("data.bin", 1 << 20);
  ASSERT_TRUE(stream.has_value()) << stream.error().message();
  EXPECT_NE(stream->sha256, sys::sha256Hex(bytes));  // what the double said
  auto read = sys::readAll(*stream->reader, 1 << 21);
  ASSERT_FALSE(read.has_value());
  EXPECT_EQ(read.error().code, ErrorCode::kArtifactIntegrityError);
  EXPECT_NE(read.error().context.find("SHA-256"), std::string::npos) << read.error().context;
  ASSERT_TRUE(remote.destroy(*handle).has_value());
}

// An export through the wire into the artifact store, as a gateway makes
// it: the stored bytes and digest are the file's; with a digest the node
// did not measure, the store refuses it and keeps nothing.
class StoreThroughTheWire {
 public:
  StoreThroughTheWire() {
    auto store = artifacts::FilesystemArtifactStore::create(
        sys::UniqueFd(::open(dir_.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)), repo_);
    if (store) store_ = std::move(*store);
    if (store_ != nullptr)
      writer_ = artifacts::makeArtifactWriter(
          *store_, artifacts::ArtifactWriterScope{*artifacts::TenantId::parse("tenant-a"),
                                                  std::string("run-1"),
                                                  artifacts::ArtifactOrigin::kSandboxExport,
                                                  artifacts::TrustLevel::kExternalUntrusted});
  }
  bool ready() const { return writer_ != nullptr; }
  Result<artifacts::ArtifactRef> exportFrom(WorkspaceHandle& ws, const std::string& path) {
    return artifacts::exportWorkspaceFile(*writer_, ws.openExport(path, 1 << 20),
                                          "application/octet-stream");
  }
  Result<std::string> stored(const artifacts::ArtifactRef& ref) {
    auto stream = store_->open(ref);
    if (!stream) return tl::unexpected(stream.error());
    return sys::readAll(**stream, 1 << 21);
  }
  // No regular file under the store's directory, no row.
  bool empty() const {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(dir_.path())) {
      if (entry.is_regular_file()) return false;
    }
    auto rows = repo_->listForTenant(*artifacts::TenantId::parse("tenant-a"), 10);
    return rows && rows->empty();
  }

 private:
  TempStateDir dir_;
  std::shared_ptr<artifacts::MemoryArtifactRepository> repo_ =
      std::make_shared<artifacts::MemoryArtifactRepository>();
  std::unique_ptr<artifacts::FilesystemArtifactStore> store_;
  std::unique_ptr<artifacts::ArtifactWriter> writer_;
};

TEST(RemoteNode, AnExportIsStoredThroughTheGatewayAndATamperedOneIsNot) {
  const std::string bytes = binaryFile();
  for (const bool tampered : {false, true}) {
    NodeServer::Wrap wrap;
    if (tampered) {
      wrap = [](airlock::node::InternalApi& api) {
        return std::unique_ptr<service::RequestHandler>(std::make_unique<TamperingHandler>(api));
      };
    }
    auto server = NodeServer::start(scriptedFake(), wrap);
    ASSERT_TRUE(server.has_value()) << server.error().message();
    gateway::RemoteNode remote((*server)->remoteOptions());
    auto handle = remote.provision(fakeSpec());
    ASSERT_TRUE(handle.has_value());
    auto ws = remote.workspace(*handle);
    ASSERT_TRUE(ws.has_value());
    ASSERT_TRUE((*ws)->write("data.bin", bytes).has_value());
    StoreThroughTheWire store;
    ASSERT_TRUE(store.ready());
    auto ref = store.exportFrom(**ws, "data.bin");
    if (tampered) {
      ASSERT_FALSE(ref.has_value());
      EXPECT_EQ(ref.error().code, ErrorCode::kArtifactIntegrityError) << ref.error().message();
      EXPECT_TRUE(store.empty());
    } else {
      ASSERT_TRUE(ref.has_value()) << ref.error().message();
      EXPECT_EQ(ref->sha256, sys::sha256Hex(bytes));
      auto back = store.stored(*ref);
      ASSERT_TRUE(back.has_value()) << back.error().message();
      EXPECT_TRUE(*back == bytes);
      EXPECT_FALSE(store.empty());
    }
    ASSERT_TRUE(remote.destroy(*handle).has_value());
  }
}

// --- jobs (linux: the fake has no side processes) -----------------------------

TEST(RemoteNode, JobsStartPollTakeInputAndDieThroughTheWire) {
  if (auto why = linuxJailUnavailable()) GTEST_SKIP() << *why;
  TempStateDir state;
  auto options = testOptions(state.path());
  auto env = linux_jail::createLinuxEnvironment(options);
  ASSERT_TRUE(env.has_value()) << env.error().message();
  auto server = NodeServer::start(std::move(*env));
  ASSERT_TRUE(server.has_value()) << server.error().message();
  gateway::RemoteNode remote((*server)->remoteOptions());
  auto handle = remote.provision(linuxSpec(options));
  ASSERT_TRUE(handle.has_value()) << handle.error().message();

  JobStartRequest start;
  start.command.argv = {"sh", "-c", "read line; echo got:$line; read more; echo never"};
  start.wall_ms = 60'000;
  auto job = remote.startJob(*handle, start);
  ASSERT_TRUE(job.has_value()) << job.error().message();
  EXPECT_EQ(job->wall_ms, 60'000U);

  JobPollRequest poll;
  poll.job_id = job->job_id;
  poll.wait_ms = 300;
  const auto waited_from = Clock::now();
  auto idle = remote.pollJob(*handle, poll);
  ASSERT_TRUE(idle.has_value()) << idle.error().message();
  EXPECT_GE(Clock::now() - waited_from, milliseconds(250));  // it waited: nothing came
  EXPECT_EQ(idle->state, JobState::kRunning);
  EXPECT_EQ(idle->out.cursor, 0U);

  ASSERT_TRUE(remote.sendJobInput(*handle, job->job_id, "hi\n", false, 5000, nullptr).has_value());
  std::string seen;
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (seen.find("got:hi\n") == std::string::npos && Clock::now() < deadline) {
    poll.wait_ms = 5000;
    auto state = remote.pollJob(*handle, poll);
    ASSERT_TRUE(state.has_value()) << state.error().message();
    seen += state->out.data;
    poll.stdout_cursor = state->out.cursor;
  }
  EXPECT_EQ(seen, "got:hi\n");
  EXPECT_EQ(poll.stdout_cursor, seen.size());

  auto listed = remote.listJobs(*handle);
  ASSERT_TRUE(listed.has_value()) << listed.error().message();
  ASSERT_EQ(listed->size(), 1U);
  EXPECT_EQ((*listed)[0].job_id, job->job_id);
  EXPECT_EQ((*listed)[0].argv, start.command.argv);

  ASSERT_TRUE(remote.killJob(*handle, job->job_id).has_value());
  std::optional<JobSnapshot> last;
  while (Clock::now() < deadline) {
    poll.wait_ms = 5000;
    auto state = remote.pollJob(*handle, poll);
    ASSERT_TRUE(state.has_value()) << state.error().message();
    if (!state->pending) {
      last = *state;
      break;
    }
  }
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->state, JobState::kKilled);
  EXPECT_EQ(last->kill_reason, JobKillReason::kRequested);
  ASSERT_TRUE(last->spill.has_value());
  EXPECT_EQ(
      last->spill->first.error,
      std::optional<std::string>("job output is not yet spilled through a remote execution node"));
  // An unknown job is the node's NotFound, across the wire.
  poll.job_id = "job-999";
  poll.wait_ms = 0;
  auto unknown = remote.pollJob(*handle, poll);
  ASSERT_FALSE(unknown.has_value());
  EXPECT_EQ(unknown.error().code, ErrorCode::kNotFound);
  ASSERT_TRUE(remote.destroy(*handle).has_value());
}

}  // namespace
}  // namespace airlock::testing
