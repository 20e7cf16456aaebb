#include "airlock/cli/serve_execution.h"

#include <unistd.h>

#include <cstring>
#include <set>
#include <string_view>

#include "airlock/cli/image_command.h"
#include "airlock/cli/summary.h"
#include "airlock/core/encoding.h"
#include "airlock/egress/policy.h"
#include "airlock/execution/node.h"
#include "airlock/node/internal_api.h"
#include "airlock/node/stale_lease_client.h"
#include "airlock/service/http_server.h"

namespace airlock::cli {

Result<EgressPolicy> operatorEgress(const service::Settings& settings) {
  if (settings.egress_policy_path.empty()) return EgressPolicy{};
  auto policy = egress::loadEgressPolicyFile(settings.egress_policy_path);
  if (!policy) return tl::unexpected(policy.error());
  return (*policy)->toValue();
}

Result<ServeExecution> openServeExecution(const service::Settings& settings,
                                          service::Metrics& metrics) {
  ServeExecution out;
  // Egress: the operator's policy. The proxy runs only when the policy
  // allows something; its decision lines go to stderr with the service's
  // log, and its refusals to the metrics.
  auto egress = operatorEgress(settings);
  if (!egress) return tl::unexpected(egress.error());
  out.operator_egress = std::move(*egress);
  execution::LocalExecutionOptions execution_options;
  // Images: each configured reference resolved to a digest now (spec 000,
  // "EnvironmentSpec"); only the digest is used after this.
  std::vector<ServedImage> configured;
  std::set<std::string> pulled;  // names of the entries fetched now
  if (!settings.images.empty()) {
    auto store = openImageStore(settings.state_dir);
    if (!store) return tl::unexpected(store.error());
    for (const auto& image : settings.images) {
      auto resolved = resolveImage(**store, image.reference, {});
      if (!resolved) {
        Error error = resolved.error();
        error.context = "refusing to start: images entry " + quoteForMessage(image.name) +
                        (image.name == image.reference ? "" : " (" + image.reference + ")") + ": " +
                        error.context;
        return tl::unexpected(error);
      }
      configured.push_back(ServedImage{image.name, image.reference, resolved->stored.digest});
      execution_options.image_digests.push_back(resolved->stored.digest);
      if (resolved->pulled) pulled.insert(image.name);
    }
    execution_options.image_store = std::move(*store);
  }
  execution_options.adapter.state_dir = settings.state_dir;
  execution_options.adapter.ceilings = settings.limit_ceilings;
  execution_options.adapter.node_name = settings.node_name;
  execution_options.adapter.environment_lifetime = settings.environment_lifetime;
  execution_options.adapter.start_budget = settings.start_budget;
  execution_options.adapter.files_changed_listing = settings.files_changed_listing;
  execution_options.egress = out.operator_egress;
  execution_options.on_refusal = [&metrics](std::string_view reason) {
    metrics.egressRefused(std::string(reason));
  };
  auto execution = execution::openLocalExecution(
      settings.sandbox, std::move(execution_options),
      settings.deployment_mode == service::DeploymentMode::kDevelopment
          ? std::optional<execution::DevelopmentMechanismsAllowed>(
                execution::DevelopmentMechanismsAllowed{})
          : std::nullopt);
  if (!execution) return tl::unexpected(execution.error());
  out.execution = std::move(*execution);
  // The default image first; every image named in the log with its digest.
  out.images.push_back(ServedImage{kHostImageName, "", out.execution.adapter.image_digest});
  for (auto& image : configured) {
    if (image.name == settings.default_image)
      out.images.insert(out.images.begin(), image);
    else
      out.images.push_back(image);
  }
  for (const auto& image : out.images) {
    std::string notes;
    if (pulled.count(image.name)) notes += " (pulled)";
    if (&image == &out.images.front()) notes += " (the default)";
    writeOut(STDERR_FILENO, "airlock: image " + image.name +
                                (image.reference.empty()         ? " (this host's /usr)"
                                 : image.reference == image.name ? ""
                                                                 : " " + image.reference) +
                                " is " + image.digest + notes + "\n");
  }
  return out;
}

int runExecutionNode(const service::Settings& settings) {
  service::Metrics metrics(std::string(service::mechanismName(settings.sandbox)));
  auto side = openServeExecution(settings, metrics);
  if (!side) return printErrorLine(side.error());
  execution::Adapter& adapter = side->execution.adapter;
  execution::LocalNode node(*adapter.env, {}, service::nodeEvents(metrics),
                            JobSettings{.allow_session_lifetime = settings.allow_session_jobs});
  airlock::node::InternalApiOptions options;
  options.credential = settings.internal_token;
  options.node_name = settings.node_name;
  options.capacity = static_cast<std::size_t>(settings.node_capacity);
  if (!settings.gateways.empty())
    options.stale_leases = airlock::node::staleLeaseQueryOverHttp(
        airlock::node::GatewayEndpoints{settings.gateways, settings.internal_token});
  airlock::node::InternalApi api(node, std::move(options), metrics);
  auto server = service::HttpServer::create(settings, api, node);
  if (!server) return printErrorLine(server.error());
  writeOut(STDERR_FILENO, "airlock: execution node " + settings.node_name + " serves on " +
                              settings.listen + " (port " + std::to_string((*server)->port()) +
                              ")\n");
  (*server)->run();
  return 0;
}

int executionNodeMain(int argc, char** argv) {
  std::optional<std::string> config;
  std::optional<std::string> role;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if ((arg == "--config" || arg == "--role") && i + 1 < argc) {
      (arg == "--config" ? config : role) = argv[++i];
    } else {
      return printErrorLine("airlock-node: unknown argument " + quoteForMessage(arg) +
                            " (usage: airlock-node [--config FILE] [--role execution])");
    }
  }
  if (role && *role != "execution")
    return printErrorLine("airlock-node runs role execution only, not " + quoteForMessage(*role) +
                          " (use airlock serve)");
  auto settings = service::loadSettings(config, service::processEnvironment());
  if (!settings) return printErrorLine(settings.error());
  if (role) settings->role = service::ServiceRole::kExecution;
  if (settings->role != service::ServiceRole::kExecution)
    return printErrorLine("airlock-node runs role execution only, but the settings say role=" +
                          std::string(service::serviceRoleName(settings->role)));
  if (auto r = service::checkStartup(*settings); !r) return printErrorLine(r.error());
  return runExecutionNode(*settings);
}

}  // namespace airlock::cli
