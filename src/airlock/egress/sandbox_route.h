// The egress proxy as the route of sandboxes' connections (the
// port/egress_route.h seam; spec 000 "The sandbox proxy").
//
// Each attachment compiles the sandbox's EnvironmentSpec.egress with the
// loader's rules (compilePolicy), registers the sandbox's channel with the
// proxy under the sandbox's identity (environment, tenant, run), and closes
// that channel and its tunnels when destroyed. The proxy is shared by every
// sandbox of a service; it must outlive the attachments (they hold it).
#pragma once

#include <memory>

#include "airlock/egress/proxy.h"
#include "airlock/port/egress_route.h"

namespace airlock::egress {

class ProxyEgressRoute final : public EgressRoute {
 public:
  explicit ProxyEgressRoute(std::shared_ptr<EgressProxy> proxy) : proxy_(std::move(proxy)) {}

  Result<std::unique_ptr<EgressAttachment>> attachHandoff(const EnvironmentHandle& sandbox,
                                                          const EgressPolicy& policy,
                                                          sys::UniqueFd channel) override;
  Result<std::unique_ptr<EgressAttachment>> attachListener(const EnvironmentHandle& sandbox,
                                                           const EgressPolicy& policy,
                                                           sys::UniqueFd listener) override;

 private:
  std::shared_ptr<EgressProxy> proxy_;
};

}  // namespace airlock::egress
