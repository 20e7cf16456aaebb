#include "airlock/egress/sandbox_route.h"

#include "airlock/egress/policy.h"

namespace airlock::egress {
namespace {

class ListenerAttachment final : public EgressAttachment {
 public:
  ListenerAttachment(std::shared_ptr<EgressProxy> proxy, ListenerId id)
      : proxy_(std::move(proxy)), id_(id) {}
  ~ListenerAttachment() override { proxy_->closeListener(id_); }

 private:
  std::shared_ptr<EgressProxy> proxy_;
  ListenerId id_;
};

ProxyIdentity identityOf(const EnvironmentHandle& sandbox) {
  return ProxyIdentity{sandbox.environment_id, sandbox.tenant_id, sandbox.run_id};
}

Result<std::shared_ptr<const Policy>> compileFor(const EnvironmentHandle& sandbox,
                                                 const EgressPolicy& policy) {
  return compilePolicy(policy, "environment " + sandbox.environment_id + " egress");
}

// EgressProxy::adoptHandoff or EgressProxy::adoptListener.
using AdoptFd = Result<ListenerId> (EgressProxy::*)(sys::UniqueFd, ProxyIdentity,
                                                    std::shared_ptr<const Policy>);

// The sandbox's policy compiled, and `fd` handed to the proxy with it by
// `adopt` (adoptHandoff or adoptListener); the attachment closes it.
Result<std::unique_ptr<EgressAttachment>> attach(const std::shared_ptr<EgressProxy>& proxy,
                                                 const EnvironmentHandle& sandbox,
                                                 const EgressPolicy& policy, sys::UniqueFd fd,
                                                 AdoptFd adopt) {
  auto compiled = compileFor(sandbox, policy);
  if (!compiled) return tl::unexpected(compiled.error());
  auto id = ((*proxy).*adopt)(std::move(fd), identityOf(sandbox), std::move(*compiled));
  if (!id) return tl::unexpected(id.error());
  return std::unique_ptr<EgressAttachment>(new ListenerAttachment(proxy, *id));
}

}  // namespace

Result<std::unique_ptr<EgressAttachment>> ProxyEgressRoute::attachHandoff(
    const EnvironmentHandle& sandbox, const EgressPolicy& policy, sys::UniqueFd channel) {
  return attach(proxy_, sandbox, policy, std::move(channel), &EgressProxy::adoptHandoff);
}

Result<std::unique_ptr<EgressAttachment>> ProxyEgressRoute::attachListener(
    const EnvironmentHandle& sandbox, const EgressPolicy& policy, sys::UniqueFd listener) {
  return attach(proxy_, sandbox, policy, std::move(listener), &EgressProxy::adoptListener);
}

}  // namespace airlock::egress
