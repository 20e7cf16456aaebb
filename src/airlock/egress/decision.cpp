#include "airlock/egress/decision.h"

namespace airlock::egress {

std::string Decision::reasonCode() const {
  std::string code(reasonName(reason));
  if (reason == Reason::kResolvedDenied) {
    code += ':';
    code += addressClassName(address_class);
  }
  return code;
}

const std::vector<IpAddress>& Decision::dialAddresses() const noexcept {
  static const std::vector<IpAddress> kNone;
  return allowed() ? resolved : kNone;
}

Decision decideNameOnly(const Policy& policy, const Authority& target) noexcept {
  Decision d;
  try {
    d.host = target.host;
    d.port = target.port;
    d.reason = policy.check(target.host, target.port);
    if (d.reason == Reason::kAllowed) d.verdict = Verdict::kAllow;
  } catch (...) {
    d.verdict = Verdict::kDeny;
    d.reason = Reason::kInternalError;
  }
  return d;
}

Decision deniedBeforePolicy(Reason reason, std::string detail) {
  Decision d;
  d.reason = reason;
  d.detail = std::move(detail);
  return d;
}

Decision decide(const Policy& policy, const Authority& target, Resolver& resolver,
                const AddressClassifier& classifier) noexcept {
  Decision d = decideNameOnly(policy, target);
  if (!d.allowed()) return d;
  d.verdict = Verdict::kDeny;  // until every step below passes
  try {
    ++d.lookups;
    ResolveResult answer = resolver.resolve(target.host);
    if (!answer) {
      d.reason = answer.error().reason;
      d.detail = std::move(answer.error().detail);
      return d;
    }
    if (answer->empty()) {
      d.reason = Reason::kDnsNoAnswer;
      return d;
    }
    d.resolved = std::move(*answer);
    for (const IpAddress& a : d.resolved) {
      const AddressClass c = classifier.classify(a);
      if (c != AddressClass::kPublic) d.denied.push_back(DeniedAddress{a, c});
    }
    if (!d.denied.empty()) {
      d.reason = Reason::kResolvedDenied;
      d.address_class = d.denied.front().address_class;
      return d;
    }
    d.reason = Reason::kAllowed;
    d.verdict = Verdict::kAllow;
  } catch (...) {
    d.verdict = Verdict::kDeny;
    d.reason = Reason::kInternalError;
  }
  return d;
}

Decision decideAuthority(const Policy& policy, std::string_view target, Resolver& resolver,
                         const AddressClassifier& classifier) noexcept {
  try {
    auto parsed = parseAuthority(target);
    if (!parsed) return deniedBeforePolicy(parsed.error().reason, std::move(parsed.error().detail));
    return decide(policy, *parsed, resolver, classifier);
  } catch (...) {
    return Decision{};
  }
}

}  // namespace airlock::egress
