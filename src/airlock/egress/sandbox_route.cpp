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

}  // namespace

Result<std::unique_ptr<EgressAttachment>> ProxyEgressRoute::attachHandoff(
    const EnvironmentHandle& sandbox, const EgressPolicy& policy, sys::UniqueFd channel) {
  auto compiled = compileFor(sandbox, policy);
  if (!compiled) return tl::unexpected(compiled.error());
  auto id = proxy_->adoptHandoff(std::move(channel), identityOf(sandbox), std::move(*compiled));
  if (!id) return tl::unexpected(id.error());
  return std::unique_ptr<EgressAttachment>(new ListenerAttachment(proxy_, *id));
}

Result<std::unique_ptr<EgressAttachment>> ProxyEgressRoute::attachListener(
    const EnvironmentHandle& sandbox, const EgressPolicy& policy, sys::UniqueFd listener) {
  auto compiled = compileFor(sandbox, policy);
  if (!compiled) return tl::unexpected(compiled.error());
  auto id = proxy_->adoptListener(std::move(listener), identityOf(sandbox), std::move(*compiled));
  if (!id) return tl::unexpected(id.error());
  return std::unique_ptr<EgressAttachment>(new ListenerAttachment(proxy_, *id));
}

}  // namespace airlock::egress
