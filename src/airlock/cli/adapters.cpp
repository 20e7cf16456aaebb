#include "airlock/cli/adapters.h"

#include "airlock/sandbox/fake/fake_environment.h"
#if AIRLOCK_HAVE_LINUX_MECHANISM
#include "airlock/sandbox/linux/linux_environment.h"
#endif
#if AIRLOCK_HAVE_GVISOR_MECHANISM
#include "airlock/sandbox/oci/gvisor_environment.h"
#endif

namespace airlock::cli {

Result<Adapter> createAdapter(std::string_view mechanism, const AdapterOptions& options) {
  if (mechanism == "fake") {
    auto env = std::make_unique<fake::FakeEnvironment>();
    env->setFallback(fake::basicCommands);
    return Adapter{std::move(env), fake::kFakeImageDigest};
  }
  if (mechanism == "linux") {
#if AIRLOCK_HAVE_LINUX_MECHANISM
    linux_jail::LinuxEnvironmentOptions linux_options;
    linux_options.state_dir = options.state_dir;
    linux_options.egress_route = options.egress_route;
    auto digest = linux_jail::computeImageDigest(linux_options);
    if (!digest) return tl::unexpected(digest.error());
    auto env = linux_jail::createLinuxEnvironment(linux_options);
    if (!env) return tl::unexpected(env.error());
    return Adapter{std::move(*env), std::move(*digest)};
#else
    return fail(ErrorCode::kExecutionUnavailable,
                "the linux mechanism is not built into this airlock; use the fake mechanism");
#endif
  }
#if AIRLOCK_HAVE_GVISOR_MECHANISM
  if (mechanism == "gvisor") {
    // Its own state directory: the two mechanisms' crash recovery must not
    // see each other's lock files.
    gvisor::GvisorEnvironmentOptions gvisor_options;
    gvisor_options.state_dir = options.state_dir + "/gvisor";
    gvisor_options.egress_route = options.egress_route;
    auto digest = gvisor::gvisorImageDigest(gvisor_options);
    if (!digest) return tl::unexpected(digest.error());
    auto env = gvisor::createGvisorEnvironment(gvisor_options);
    if (!env) return tl::unexpected(env.error());
    return Adapter{std::move(*env), std::move(*digest)};
  }
#endif
  if (mechanism == "gvisor" || mechanism == "microvm")
    return fail(ErrorCode::kExecutionUnavailable,
                "the " + std::string(mechanism) + " mechanism is not built into this airlock yet");
  return fail(ErrorCode::kConfigurationError, "unknown mechanism \"" + std::string(mechanism) +
                                                  "\" (linux, gvisor, microvm or fake)");
}

}  // namespace airlock::cli
