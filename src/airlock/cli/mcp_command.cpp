#include "airlock/cli/mcp_command.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <memory>

#include "airlock/capability/broker/job_output_sink.h"
#include "airlock/cli/exit_codes.h"
#include "airlock/cli/summary.h"
#include "airlock/cli/termination_signals.h"
#include "airlock/core/ids.h"
#include "airlock/execution/adapters.h"
#include "airlock/execution/job_engine.h"
#include "airlock/gateway/mcp/mcp_session.h"
#include "airlock/gateway/mcp/mcp_stdio.h"
#include "airlock/gateway/tools/tool_registry.h"
#include "airlock/port/cancel_token.h"
#include "airlock/sys/io.h"
#include "airlock/sys/sha256.h"
#include "airlock/sys/unique_fd.h"
#include "airlock/workspace/local_workspace.h"

namespace airlock::cli {
namespace {

void logLine(const std::string& text) {
  const std::string line = "airlock mcp: " + text + "\n";
  writeOut(STDERR_FILENO, line);
}

// artifact_export for a local session, and where the job_* tools' jobs
// spill their whole output once terminal: each artifact becomes
// DIR/<artifact_id>/<filename>, written once (O_EXCL), never following a
// symlink, with the filename reduced to a safe single component.
class DirectoryExporter final : public gateway::ArtifactExporter, public capability::JobOutputSink {
 public:
  static Result<std::unique_ptr<DirectoryExporter>> open(const std::string& dir) {
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
      return failErrno(ErrorCode::kConfigurationError, "--export-dir " + dir, errno);
    }
    auto fd = sys::openAt(AT_FDCWD, dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (!fd) {
      Error error = fd.error();
      error.code = ErrorCode::kConfigurationError;
      error.context = "--export-dir " + dir;
      return tl::unexpected(std::move(error));
    }
    return std::unique_ptr<DirectoryExporter>(new DirectoryExporter(std::move(*fd)));
  }

  Result<gateway::ExportedArtifact> create(const gateway::ToolScope& /*scope*/,
                                           const gateway::ExportRequest& request) override {
    gateway::ExportedArtifact ref;
    ref.artifact_id = newUuidV7(
        std::chrono::time_point_cast<std::chrono::milliseconds>(std::chrono::system_clock::now()));
    ref.sha256 = sys::sha256Hex(request.bytes);
    ref.size_bytes = static_cast<std::int64_t>(request.bytes.size());
    ref.media_type = request.media_type;
    auto file = createFile(ref.artifact_id, request.filename);
    if (!file) return tl::unexpected(file.error());
    if (!sys::writeAll(file->get(), request.bytes.data(), request.bytes.size())) {
      return failErrno(ErrorCode::kExecutionUnavailable, "export: writing " + ref.artifact_id,
                       errno);
    }
    return ref;
  }

  // A terminal job stream, copied from its source as it is read.
  Result<capability::StoredJobOutput> store(capability::JobOutput output) override {
    capability::StoredJobOutput stored;
    stored.artifact_id = newUuidV7(
        std::chrono::time_point_cast<std::chrono::milliseconds>(std::chrono::system_clock::now()));
    stored.media_type = output.media_type;
    auto file = createFile(stored.artifact_id, output.filename);
    if (!file) return tl::unexpected(file.error());
    std::string buffer(std::size_t{64} << 10, '\0');
    for (;;) {
      auto got = output.source->read(buffer.data(), buffer.size());
      if (!got) return tl::unexpected(got.error());
      if (*got == 0) break;
      if (!sys::writeAll(file->get(), buffer.data(), *got)) {
        return failErrno(ErrorCode::kExecutionUnavailable, "export: writing " + stored.artifact_id,
                         errno);
      }
    }
    return stored;
  }

 private:
  explicit DirectoryExporter(sys::UniqueFd dir) : dir_(std::move(dir)) {}

  // DIR/<artifact_id>/<safe filename>, created for writing.
  Result<sys::UniqueFd> createFile(const std::string& artifact_id, std::string_view filename) {
    if (::mkdirat(dir_.get(), artifact_id.c_str(), 0700) != 0) {
      return failErrno(ErrorCode::kExecutionUnavailable, "export: creating the artifact directory",
                       errno);
    }
    auto sub = sys::openAt(dir_.get(), artifact_id.c_str(),
                           O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (!sub) return tl::unexpected(sub.error());
    const std::string name = safeName(filename);
    return sys::openAt(sub->get(), name.c_str(),
                       O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  }

  // A name that is one harmless path component: ASCII letters, digits and
  // "._-+ " kept, anything else '_', no leading dot.
  static std::string safeName(std::string_view filename) {
    std::string out;
    for (char c : filename.substr(0, 200)) {
      const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                        (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-' || c == '+' ||
                        c == ' ';
      out.push_back(keep ? c : '_');
    }
    if (out.empty()) out = "artifact";
    if (out.front() == '.') out.front() = '_';
    return out;
  }

  sys::UniqueFd dir_;
};

constexpr const char* kInstructions =
    "These tools run commands in one Airlock sandbox that belongs to this session: a Linux "
    "environment with hard limits, no network, and an empty /workspace. Files in the "
    "workspace are temporary and disappear when the session ends; use artifact_export to "
    "hand a file to the user. Commands are argument vectors, not shell strings.";

}  // namespace

int runMcp(const McpFlags& flags, const HostLookup& host_env, const std::string& version) {
  // The limit flags mean what they mean for `airlock run`; planRun checks
  // them (the command it needs is a placeholder, never run).
  RunFlags run_flags = flags.run;
  run_flags.argv = {"true"};
  auto plan = planRun(run_flags, host_env);
  if (!plan) return printErrorLine(plan.error());
  const bool verbose = flags.run.verbose;

  std::shared_ptr<DirectoryExporter> exporter;
  if (flags.export_dir) {
    auto opened = DirectoryExporter::open(*flags.export_dir);
    if (!opened) return printErrorLine(opened.error());
    exporter = std::move(*opened);
  }

  // A closed stdout must be an error value (the session ends and the
  // sandbox is destroyed), not a fatal signal.
  (void)::signal(SIGPIPE, SIG_IGN);
  auto stop = CancelToken::create();
  if (!stop) return printErrorLine(stop.error());
  cancelOnTerminationSignals(*stop);

  auto adapter =
      execution::createAdapter(plan->mechanism, {}, execution::DevelopmentMechanismsAllowed{});
  if (!adapter) return printErrorLine(adapter.error());
  ExecutionEnvironment& env = *adapter->env;
  plan->spec.image_digest = adapter->image_digest;

  // Provision (and seed) one sandbox; used at start and when the current
  // one has reached its lifetime limit.
  auto provision = [&]() -> Result<EnvironmentHandle> {
    auto handle = env.provision(plan->spec);
    if (!handle) return handle;
    if (plan->copy_in) {
      auto ws = env.workspace(*handle);
      auto seeded = ws ? workspace::copyIn(*plan->copy_in, **ws) : tl::unexpected(ws.error());
      if (!seeded) {
        (void)env.destroy(*handle);
        return tl::unexpected(seeded.error());
      }
    }
    if (verbose) logLine("provisioned environment " + handle->environment_id);
    return handle;
  };

  auto first = provision();
  if (!first) return printErrorLine(first.error());

  // The job_* tools: the sandbox's jobs, closed before it is destroyed. A
  // terminal job's output is spilled into --export-dir (without one, its
  // spill says no store is configured).
  auto jobs = std::make_unique<execution::SingleEnvironmentJobs>(env, *first);
  gateway::ToolContext context;
  context.jobs = jobs.get();
  context.tenant_id = plan->spec.tenant_id;
  context.run_id = plan->spec.run_id;
  context.environment = *first;
  context.execution = &env;
  context.artifacts = exporter.get();
  context.job_spill.sink = exporter;
  context.cancel = &*stop;
  context.spec_wall_clock = std::chrono::seconds(plan->spec.limits.wall_clock_seconds);

  gateway::ToolOptions options;
  options.max_output_bytes = plan->command.maximum_output_bytes;
  const gateway::ToolRegistry registry = gateway::builtinTools(options);

  std::optional<Error> replace_error;
  auto before_call = [&](gateway::ToolContext& ctx) -> std::optional<std::string> {
    const auto now =
        std::chrono::time_point_cast<std::chrono::milliseconds>(std::chrono::system_clock::now());
    if (now < ctx.environment.expires_at) return std::nullopt;
    ctx.jobs = nullptr;
    jobs.reset();
    (void)env.destroy(ctx.environment);
    auto fresh = provision();
    if (!fresh) {
      // The call then fails against the destroyed handle, and says why.
      return "the sandbox reached its lifetime limit and a new one could not be provisioned: " +
             fresh.error().message();
    }
    ctx.environment = *fresh;
    jobs = std::make_unique<execution::SingleEnvironmentJobs>(env, *fresh);
    ctx.jobs = jobs.get();
    return std::string(
        "note: the previous sandbox reached its lifetime limit and was destroyed; this call "
        "runs in a fresh sandbox with an empty workspace");
  };

  gateway::mcp::Session session(
      registry, context, gateway::mcp::ServerInfo{"airlock", version, kInstructions}, before_call);
  auto ended = gateway::mcp::serveStdio(session, STDIN_FILENO, STDOUT_FILENO, stop->pollFd());
  if (verbose && ended) {
    logLine(*ended == gateway::mcp::StdioEnd::kStopped        ? "stopping on a signal"
            : *ended == gateway::mcp::StdioEnd::kOutputClosed ? "stdout closed"
                                                              : "end of input");
  }

  int status = 0;
  if (!ended) status = printErrorLine(ended.error());
  jobs.reset();  // its jobs die before the sandbox
  if (auto destroyed = env.destroy(context.environment); !destroyed) {
    Error error = destroyed.error();
    error.context = "destroying the sandbox: " + error.context;
    return printErrorLine(error);
  }
  if (verbose) logLine("destroyed environment " + context.environment.environment_id);
  return status;
}

}  // namespace airlock::cli
