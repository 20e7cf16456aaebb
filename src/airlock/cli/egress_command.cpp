#include "airlock/cli/egress_command.h"

#include <unistd.h>

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "airlock/cli/exit_codes.h"
#include "airlock/cli/summary.h"
#include "airlock/egress/classifier.h"
#include "airlock/egress/decision.h"
#include "airlock/egress/outbound_guard.h"
#include "airlock/egress/policy.h"
#include "airlock/egress/resolver.h"

namespace airlock::cli {
int runEgressCheck(const EgressCheckFlags& flags) {
  using namespace airlock::egress;
  if (flags.policy_file.empty()) return printErrorLine("egress check: --policy FILE is required");
  if (flags.target.empty())
    return printErrorLine("egress check: a URL or host:port to check is required");
  auto policy = loadEgressPolicyFile(flags.policy_file);
  if (!policy) return printErrorLine(policy.error().message());

  auto resolver = std::make_shared<GetaddrinfoResolver>();
  auto classifier = std::make_shared<AddressClassifier>(std::make_shared<InterfaceAddressSource>());
  const bool is_url = flags.target.find("://") != std::string::npos;
  Decision d;
  if (is_url) {
    const OutboundGuard guard(*policy, resolver, classifier);
    d = guard.check(flags.target).decision;
  } else {
    d = decideAuthority(**policy, flags.target, *resolver, *classifier);
  }

  auto classOf = [&d](const IpAddress& a) -> std::optional<AddressClass> {
    for (const DeniedAddress& x : d.denied)
      if (x.address == a) return x.address_class;
    return std::nullopt;
  };
  const char* point = is_url ? "outbound_guard" : "proxy";
  if (flags.json) {
    nlohmann::json j;
    j["decision"] = d.allowed() ? "allowed" : "denied";
    j["reason"] = d.reasonCode();
    j["point"] = point;
    if (!d.host.empty()) {
      j["host"] = d.host;
      j["port"] = d.port;
    }
    j["resolved"] = nlohmann::json::array();
    for (const IpAddress& a : d.resolved) {
      const auto c = classOf(a);
      j["resolved"].push_back(
          {{"address", a.toString()},
           {"class", std::string(addressClassName(c.value_or(AddressClass::kPublic)))},
           {"denied", c.has_value()}});
    }
    if (!d.detail.empty()) j["detail"] = d.detail;
    std::cout << j.dump() << "\n";
  } else {
    std::ostringstream out;
    out << "decision: " << (d.allowed() ? "allowed" : "denied") << "\n";
    out << "reason: " << d.reasonCode() << "\n";
    out << "point: " << point << "\n";
    if (!d.host.empty()) out << "host: " << d.host << "\nport: " << d.port << "\n";
    for (const IpAddress& a : d.resolved) {
      const auto c = classOf(a);
      out << "resolved: " << a.toString() << " ("
          << (c ? "denied: " + std::string(addressClassName(*c)) : std::string("public")) << ")\n";
    }
    if (!d.detail.empty()) out << "detail: " << printableMessage(d.detail) << "\n";
    std::cout << out.str();
  }
  std::cout.flush();
  return d.allowed() ? 0 : kExitEgressDenied;
}

}  // namespace airlock::cli
