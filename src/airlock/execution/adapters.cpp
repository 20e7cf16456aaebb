#include "airlock/execution/adapters.h"

#include "airlock/sandbox/fake/fake_environment.h"
#if AIRLOCK_HAVE_LINUX_MECHANISM
#include "airlock/sandbox/linux/linux_environment.h"
#endif
#if AIRLOCK_HAVE_GVISOR_MECHANISM
#include "airlock/sandbox/oci/gvisor_environment.h"
#endif

namespace airlock::execution {

namespace {

// A hosted mechanism's options (derived from MechanismOptions): the shared
// part from the front end's, and the mechanism's own state directory.
template <class Options>
Options hostedOptions(const AdapterOptions& options, const std::string& state_dir) {
  Options out;
  MechanismOptions& shared = out;
  shared.egress_route = options.egress_route;
  shared.ceilings = options.ceilings;
  shared.node_name = options.node_name;
  shared.images = options.images;
  shared.service_hard_cap = options.environment_lifetime;
  shared.start_budget = options.start_budget;
  shared.files_changed_listing = options.files_changed_listing;
  out.state_dir = state_dir;
  return out;
}

// A hosted mechanism's adapter: the digest of the image it runs, then the
// environment `create` makes from `options`; the first error otherwise.
template <class Options, class Digest, class Create>
Result<Adapter> hostedAdapter(const Options& options, Digest digest_of, Create create) {
  auto digest = digest_of(options);
  if (!digest) return tl::unexpected(digest.error());
  auto env = create(options);
  if (!env) return tl::unexpected(env.error());
  return Adapter{std::move(*env), std::move(*digest)};
}

Result<Adapter> fakeAdapter(const AdapterOptions& options) {
  if (!options.images.empty())
    return fail(ErrorCode::kExecutionRejected, "the fake mechanism runs no images (image " +
                                                   options.images.front().digest +
                                                   "); use linux or gvisor");
  fake::FakeOptions fake_options;
  fake_options.ceilings = options.ceilings;
  fake_options.node_name = options.node_name;
  fake_options.service_hard_cap = options.environment_lifetime;
  fake_options.files_changed_listing = options.files_changed_listing;
  auto env = std::make_unique<fake::FakeEnvironment>(std::move(fake_options));
  env->setFallback(fake::basicCommands);
  return Adapter{std::move(env), fake::kFakeImageDigest};
}

Result<Adapter> linuxAdapter([[maybe_unused]] const AdapterOptions& options) {
#if AIRLOCK_HAVE_LINUX_MECHANISM
  return hostedAdapter(
      hostedOptions<linux_jail::LinuxEnvironmentOptions>(options, options.state_dir),
      [](const MechanismOptions& o) { return airlock::computeImageDigest(o); },
      [](const linux_jail::LinuxEnvironmentOptions& o) {
        return linux_jail::createLinuxEnvironment(o);
      });
#else
  return fail(ErrorCode::kExecutionUnavailable,
              "the linux mechanism is not built into this airlock; use the fake mechanism");
#endif
}

#if AIRLOCK_HAVE_GVISOR_MECHANISM
Result<Adapter> gvisorAdapter(const AdapterOptions& options) {
  // Its own state directory: the two mechanisms' crash recovery must not
  // see each other's lock files.
  return hostedAdapter(
      hostedOptions<gvisor::GvisorEnvironmentOptions>(options, options.state_dir + "/gvisor"),
      [](const gvisor::GvisorEnvironmentOptions& o) { return gvisor::gvisorImageDigest(o); },
      [](const gvisor::GvisorEnvironmentOptions& o) { return gvisor::createGvisorEnvironment(o); });
}
#endif

}  // namespace

Result<Adapter> createAdapter(Mechanism mechanism, const AdapterOptions& options,
                              std::optional<DevelopmentMechanismsAllowed> development) {
  const std::string name(mechanismName(mechanism));
  if (developmentOnly(mechanism) && !development)
    return fail(ErrorCode::kExecutionRejected,
                "the " + name + " mechanism is for development only and this front end runs " +
                    "for production (use gvisor or microvm)");
  switch (mechanism) {
    case Mechanism::kFake:
      return fakeAdapter(options);
    case Mechanism::kLinux:
      return linuxAdapter(options);
    case Mechanism::kGvisor:
#if AIRLOCK_HAVE_GVISOR_MECHANISM
      return gvisorAdapter(options);
#else
      break;
#endif
    case Mechanism::kMicrovm:
      break;
  }
  return fail(ErrorCode::kExecutionUnavailable,
              "the " + name + " mechanism is not built into this airlock yet");
}

Result<LocalExecution> openLocalExecution(Mechanism mechanism, LocalExecutionOptions options,
                                          std::optional<DevelopmentMechanismsAllowed> development) {
  LocalExecution out;
  auto logError = [&](Error error) {
    if (!options.egress_log.empty()) error.context = "--egress-log: " + error.context;
    return tl::unexpected(std::move(error));
  };
  if (egressEnabled(options.egress)) {
    auto started = startEgressRuntime(options.egress_log, std::move(options.on_refusal));
    if (!started) return logError(started.error());
    out.egress = std::move(*started);
  } else if (options.touch_egress_log) {
    if (auto touched = touchEgressLog(options.egress_log); !touched)
      return logError(touched.error());
  }
  if (!options.image_digests.empty()) {
    if (!options.image_store)
      return fail(ErrorCode::kConfigurationError, "images were named without an image store");
    auto held = holdImages(*options.image_store, options.image_digests);
    if (!held) return tl::unexpected(held.error());
    out.images = std::move(*held);
    options.adapter.images = out.images.images;
  }
  options.adapter.egress_route = out.egress.route;
  auto adapter = createAdapter(mechanism, options.adapter, development);
  if (!adapter) return tl::unexpected(adapter.error());
  out.adapter = std::move(*adapter);
  return out;
}

}  // namespace airlock::execution
