#include "airlock/cli/serve_command.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <set>

#include "airlock/cli/artifact_store_open.h"
#include "airlock/cli/exit_codes.h"
#include "airlock/cli/image_command.h"
#include "airlock/cli/summary.h"
#include "airlock/core/encoding.h"
#include "airlock/egress/policy.h"
#include "airlock/execution/adapters.h"
#include "airlock/execution/capabilities/execution_capabilities.h"
#include "airlock/execution/node.h"
#include "airlock/gateway/api/api.h"
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

}  // namespace

int executeServe(const std::optional<std::string>& config_path) {
  auto settings = service::loadSettings(config_path, service::processEnvironment());
  if (!settings) return printErrorLine(settings.error());
  if (auto r = service::checkStartup(*settings); !r) return printErrorLine(r.error());
  if (settings->service_token.empty()) {
    auto token = makeDevToken(settings->state_dir);
    if (!token) return printErrorLine(token.error());
    settings->service_token = *token;
    const std::string note =
        "airlock: dev auth: the service token is in " + settings->state_dir + "/service-token\n";
    writeOut(STDERR_FILENO, note);
  }
  service::Metrics metrics(std::string(service::mechanismName(settings->sandbox)));
  // Egress: the operator's policy (validated by checkStartup). The proxy
  // runs only when the policy allows something; its decision lines go to
  // stderr with the service's log, and its refusals to the metrics. It is
  // declared before the adapter so that it outlives every sandbox.
  EgressPolicy operator_egress;
  if (!settings->egress_policy_path.empty()) {
    auto policy = egress::loadEgressPolicyFile(settings->egress_policy_path);
    if (!policy) return printErrorLine(policy.error());
    operator_egress = (*policy)->toValue();
  }
  execution::LocalExecutionOptions execution_options;
  // Images: each configured reference resolved to a digest now (spec 000,
  // "EnvironmentSpec"); only the digest is used after this.
  std::vector<gateway::ServiceImage> configured;
  std::set<std::string> pulled;  // names of the entries fetched now
  if (!settings->images.empty()) {
    auto store = openImageStore(settings->state_dir);
    if (!store) return printErrorLine(store.error());
    for (const auto& image : settings->images) {
      auto resolved = resolveImage(**store, image.reference, {});
      if (!resolved) {
        Error error = resolved.error();
        error.context = "refusing to start: images entry " + quoteForMessage(image.name) +
                        (image.name == image.reference ? "" : " (" + image.reference + ")") + ": " +
                        error.context;
        return printErrorLine(error);
      }
      configured.push_back(
          gateway::ServiceImage{image.name, image.reference, resolved->stored.digest});
      execution_options.image_digests.push_back(resolved->stored.digest);
      if (resolved->pulled) pulled.insert(image.name);
    }
    execution_options.image_store = std::move(*store);
  }
  execution_options.adapter.state_dir = settings->state_dir;
  execution_options.adapter.ceilings = settings->limit_ceilings;
  execution_options.adapter.node_name = settings->node_name;
  execution_options.adapter.environment_lifetime = settings->environment_lifetime;
  execution_options.adapter.start_budget = settings->start_budget;
  execution_options.adapter.files_changed_listing = settings->files_changed_listing;
  execution_options.egress = operator_egress;
  execution_options.on_refusal = [&metrics](std::string_view reason) {
    metrics.egressRefused(std::string(reason));
  };
  auto execution = execution::openLocalExecution(
      settings->sandbox, std::move(execution_options),
      settings->deployment_mode == service::DeploymentMode::kDevelopment
          ? std::optional<execution::DevelopmentMechanismsAllowed>(
                execution::DevelopmentMechanismsAllowed{})
          : std::nullopt);
  if (!execution) return printErrorLine(execution.error());
  execution::Adapter* adapter = &execution->adapter;
  // The default image first; every image named in the log with its digest.
  gateway::ServiceImages images;
  images.images.push_back(gateway::ServiceImage{kHostImageName, "", adapter->image_digest});
  for (auto& image : configured) {
    auto& list = images.images;
    if (image.name == settings->default_image)
      list.insert(list.begin(), image);
    else
      list.push_back(image);
  }
  for (const auto& image : images.images) {
    std::string notes;
    if (pulled.count(image.name)) notes += " (pulled)";
    if (&image == &images.images.front()) notes += " (the default)";
    writeOut(STDERR_FILENO, "airlock: image " + image.name +
                                (image.reference.empty()         ? " (this host's /usr)"
                                 : image.reference == image.name ? ""
                                                                 : " " + image.reference) +
                                " is " + image.digest + notes + "\n");
  }
  // The execution node keeps what runs where and reaps; the API is the
  // gateway in front of it.
  execution::LocalNode node(*adapter->env, {}, service::nodeEvents(metrics),
                            JobSettings{.allow_session_lifetime = settings->allow_session_jobs});
  gateway::Api api(*settings, node, std::move(images), metrics);
  api.allowEgress(operator_egress);
  if (auto r = attachTenantKeys(*settings, api); !r) return printErrorLine(r.error());
  api.attachExecutionCapabilities(execution::addExecutionCapabilities);

  // Artifacts: objects and the SQLite metadata under <state_dir>/artifacts;
  // what a crash left behind is cleaned up before serving.
  artifacts::FilesystemStoreOptions store_options;
  store_options.max_artifact_bytes = settings->artifacts.max_artifact_bytes;
  store_options.tenant_byte_cap = settings->artifacts.tenant_byte_cap;
  auto local_store = openLocalArtifactStore(settings->state_dir, store_options);
  if (!local_store) return printErrorLine(local_store.error());
  gateway::ArtifactBackend backend;
  backend.store = local_store->store.get();
  backend.repository = local_store->repository.get();
  backend.retention.retention = std::chrono::hours(24 * settings->artifacts.retention_days);
  backend.max_bytes = settings->artifacts.max_artifact_bytes;
  api.attachArtifacts(backend);
  // Code mode's schedules: SQLite beside the artifact metadata, or the
  // PostgreSQL database the settings name.
  auto schedules = openScheduleStore(settings->state_dir, settings->schedule_database);
  if (!schedules) return printErrorLine(schedules.error());
  api.attachSchedules(std::move(*schedules));
  auto server = service::HttpServer::create(*settings, api, node);
  if (!server) return printErrorLine(server.error());
  (*server)->run();
  return 0;
}

}  // namespace airlock::cli
