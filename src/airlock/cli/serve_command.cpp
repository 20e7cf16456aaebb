#include "airlock/cli/serve_command.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "airlock/cli/artifact_store_open.h"
#include "airlock/cli/exit_codes.h"
#include "airlock/cli/image_command.h"
#include "airlock/cli/serve_execution.h"
#include "airlock/cli/summary.h"
#include "airlock/core/encoding.h"
#include "airlock/execution/adapters.h"
#include "airlock/execution/capabilities/execution_capabilities.h"
#include "airlock/execution/node.h"
#include "airlock/gateway/api/api.h"
#include "airlock/gateway/node_pool.h"
#include "airlock/gateway/remote/remote_node.h"
#include "airlock/service/http_server.h"
#include "airlock/service/metrics.h"
#include "airlock/service/settings.h"
#include "airlock/service/tenant_keys.h"
#include "airlock/sys/io.h"
#include "airlock/sys/random.h"

namespace airlock::cli {
namespace {

// dev auth without a configured token: a random one (24 bytes of the
// kernel's CSPRNG, 48 hex digits), written 0600 to
// <state_dir>/service-token, atomically, for local clients to read.
Result<std::string> makeDevToken(const std::string& state_dir) {
  auto token = sys::randomHexToken(24);
  if (!token) return tl::unexpected(token.error());
  if (::mkdir(state_dir.c_str(), 0711) != 0 && errno != EEXIST)
    return failErrno(ErrorCode::kExecutionUnavailable, "create state directory " + state_dir,
                     errno);
  auto written =
      sys::writeFileAtomically(AT_FDCWD, state_dir + "/service-token", *token + "\n", 0600);
  if (!written) return tl::unexpected(written.error());
  return token;
}

// Tenant keys: read once, at start (checkStartup has loaded the file too);
// how many is logged, never a key or a digest.
Result<void> attachTenantKeys(const service::Settings& settings, gateway::Api& api) {
  if (settings.tenant_keys_file.empty()) return {};
  auto keys = service::TenantKeys::loadFile(settings.tenant_keys_file);
  if (!keys) return tl::unexpected(keys.error());
  writeOut(STDERR_FILENO, "airlock: " + std::to_string(keys->size()) + " tenant key(s) from " +
                              settings.tenant_keys_file + "\n");
  api.attachTenantKeys(std::move(*keys));
  return {};
}

// The gateway's stores: artifacts (objects and the SQLite metadata under
// <state_dir>/artifacts; what a crash left behind is cleaned up before
// serving), code mode's schedules and the lease book (SQLite beside the
// artifact metadata, or the PostgreSQL database the settings name). Returns what the API
// borrows, for the caller to keep while it serves.
struct GatewayStores {
  LocalArtifactStore artifacts;
};

Result<GatewayStores> attachGatewayStores(const service::Settings& settings, gateway::Api& api) {
  if (auto r = attachTenantKeys(settings, api); !r) return tl::unexpected(r.error());
  artifacts::FilesystemStoreOptions store_options;
  store_options.max_artifact_bytes = settings.artifacts.max_artifact_bytes;
  store_options.tenant_byte_cap = settings.artifacts.tenant_byte_cap;
  auto local_store = openLocalArtifactStore(settings.state_dir, store_options);
  if (!local_store) return tl::unexpected(local_store.error());
  gateway::ArtifactBackend backend;
  backend.store = local_store->store.get();
  backend.repository = local_store->repository.get();
  backend.retention.retention = std::chrono::hours(24 * settings.artifacts.retention_days);
  backend.max_bytes = settings.artifacts.max_artifact_bytes;
  api.attachArtifacts(backend);
  auto schedules = openScheduleStore(settings.state_dir, settings.schedule_database);
  if (!schedules) return tl::unexpected(schedules.error());
  api.attachSchedules(std::move(*schedules));
  // The lease book in the same database: a restarted gateway forgets no
  // renewal, and gateways sharing PostgreSQL share it.
  auto leases = openLeaseBook(settings.state_dir, settings.schedule_database);
  if (!leases) return tl::unexpected(leases.error());
  api.attachLeases(std::move(*leases));
  return GatewayStores{std::move(*local_store)};
}

gateway::ServiceImages serviceImages(const std::vector<ServedImage>& images) {
  gateway::ServiceImages out;
  for (const auto& image : images)
    out.images.push_back(gateway::ServiceImage{image.name, image.reference, image.digest});
  return out;
}

// Both sides in one process: today's `airlock serve`.
int serveBoth(const service::Settings& settings) {
  service::Metrics metrics(std::string(service::mechanismName(settings.sandbox)));
  // Declared before the node: the proxy and the held images outlive every
  // sandbox.
  auto side = openServeExecution(settings, metrics);
  if (!side) return printErrorLine(side.error());
  execution::Adapter* adapter = &side->execution.adapter;
  // The execution node keeps what runs where and reaps; the API is the
  // gateway in front of it.
  execution::LocalNode node(*adapter->env, {}, service::nodeEvents(metrics),
                            JobSettings{.allow_session_lifetime = settings.allow_session_jobs});
  gateway::Api api(settings, node, serviceImages(side->images), metrics);
  api.allowEgress(side->operator_egress);
  api.attachExecutionCapabilities(execution::addExecutionCapabilities);
  auto stores = attachGatewayStores(settings, api);
  if (!stores) return printErrorLine(stores.error());
  auto server = service::HttpServer::create(settings, api, node);
  if (!server) return printErrorLine(server.error());
  (*server)->run();
  return 0;
}

// The gateway role: the public API over a pool of remote execution nodes.
int serveGateway(const service::Settings& settings) {
  service::Metrics metrics(std::string(service::mechanismName(settings.sandbox)));
  std::vector<gateway::PoolMember> members;
  for (const auto& entry : settings.execution_nodes) {
    auto remote = std::make_shared<gateway::RemoteNode>(
        gateway::RemoteNodeOptions{.base_url = entry.url, .credential = settings.internal_token});
    std::string name = entry.name;
    if (name.empty()) {
      // Named by the node itself, once: its ids carry that name from now on.
      auto status = remote->status();
      if (!status)
        return printErrorLine("refusing to start: execution_nodes entry " +
                              quoteForMessage(entry.url) +
                              " has no name and the node does not answer for it (" +
                              status.error().message() + "); name it ({name, url}) or start it");
      name = status->name;
    }
    members.push_back(gateway::PoolMember{
        name, entry.url, remote, [remote]() -> Result<NodeStatus> { return remote->status(); }});
  }
  gateway::NodePoolOptions pool_options;
  pool_options.log = [](std::string_view line) {
    writeOut(STDERR_FILENO, std::string(line) + "\n");
  };
  auto pool = gateway::NodePool::create(std::move(members), std::move(pool_options));
  if (!pool) return printErrorLine(pool.error());
  (*pool)->refresh();
  // The images a caller may name, by the digests the nodes hold.
  gateway::ServiceImages images;
  if (!settings.host_image_digest.empty())
    images.images.push_back(gateway::ServiceImage{kHostImageName, "", settings.host_image_digest});
  for (const auto& image : settings.images) {
    gateway::ServiceImage served{image.name, image.reference, image.reference};
    if (image.name == settings.default_image)
      images.images.insert(images.images.begin(), served);
    else
      images.images.push_back(served);
  }
  auto operator_egress = operatorEgress(settings);
  if (!operator_egress) return printErrorLine(operator_egress.error());
  gateway::Api api(settings, **pool, std::move(images), metrics);
  api.allowEgress(std::move(*operator_egress));
  // The nodes' reapers ask POST /internal/v1/leases/stale with it.
  api.attachInternalCredential(settings.internal_token);
  auto stores = attachGatewayStores(settings, api);
  if (!stores) return printErrorLine(stores.error());
  auto server = service::HttpServer::create(settings, api, **pool);
  if (!server) return printErrorLine(server.error());
  (*server)->run();
  return 0;
}

// The execution role runs in airlock-node, beside this binary: this
// process (which links the gateway's database clients) becomes it.
int execExecutionNode(const std::optional<std::string>& config_path, bool role_flag) {
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0)
    return printErrorLine(
        failErrno(ErrorCode::kExecutionUnavailable, "find this executable (/proc/self/exe)", errno)
            .value());
  std::string path(self, static_cast<std::size_t>(n));
  path = path.substr(0, path.rfind('/') + 1) + "airlock-node";
  if (::access(path.c_str(), X_OK) != 0)
    return printErrorLine(
        "refusing to start: role execution runs in airlock-node, which is not "
        "beside this airlock (" +
        path + ": " + std::strerror(errno) + ")");
  std::vector<std::string> args = {"airlock-node"};
  if (config_path) args.insert(args.end(), {"--config", *config_path});
  if (role_flag) args.insert(args.end(), {"--role", "execution"});
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  ::execv(path.c_str(), argv.data());
  return printErrorLine(failErrno(ErrorCode::kExecutionUnavailable, "run " + path, errno).value());
}

}  // namespace

int executeServe(const std::optional<std::string>& config_path,
                 const std::optional<std::string>& role) {
  auto settings = service::loadSettings(config_path, service::processEnvironment());
  if (!settings) return printErrorLine(settings.error());
  if (role) {
    if (*role == "execution")
      settings->role = service::ServiceRole::kExecution;
    else if (*role == "gateway")
      settings->role = service::ServiceRole::kGateway;
    else
      return printErrorLine("--role " + quoteForMessage(*role) +
                            " is not one of gateway, execution");
  }
  if (settings->role == service::ServiceRole::kExecution)
    return execExecutionNode(config_path, role.has_value());
  if (auto r = service::checkStartup(*settings); !r) return printErrorLine(r.error());
  if (settings->service_token.empty()) {
    auto token = makeDevToken(settings->state_dir);
    if (!token) return printErrorLine(token.error());
    settings->service_token = *token;
    const std::string note =
        "airlock: dev auth: the service token is in " + settings->state_dir + "/service-token\n";
    writeOut(STDERR_FILENO, note);
  }
  if (settings->role == service::ServiceRole::kGateway) return serveGateway(*settings);
  return serveBoth(*settings);
}

}  // namespace airlock::cli
