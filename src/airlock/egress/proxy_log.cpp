#include "airlock/egress/proxy_log.h"

#include <nlohmann/json.hpp>

#include "airlock/core/json.h"
#include "airlock/egress/authority.h"
#include "airlock/sys/io.h"

namespace airlock::egress {

std::string_view tunnelOutcomeName(TunnelOutcome outcome) noexcept {
  switch (outcome) {
    case TunnelOutcome::kTunnel:
      return "tunnel";
    case TunnelOutcome::kRefused:
      return "refused";
    case TunnelOutcome::kConnectFailed:
      return "connect_failed";
    case TunnelOutcome::kOverCapacity:
      return "over_capacity";
    case TunnelOutcome::kClientError:
      return "client_error";
    case TunnelOutcome::kDialCancelled:
      return "dial_cancelled";
  }
  return "client_error";
}

std::string formatDecisionLine(const DecisionRecord& r, std::chrono::system_clock::time_point now) {
  const Decision& d = r.decision;
  nlohmann::json line;
  line["time"] = formatTimestamp(std::chrono::time_point_cast<std::chrono::milliseconds>(now));
  line["event"] = "egress_decision";
  line["point"] = "proxy";
  line["environment"] = r.who.environment_id;
  line["tenant"] = r.who.tenant_id;
  line["run"] = r.who.run_id;
  if (d.host.empty()) {
    line["host"] = nullptr;
    line["port"] = nullptr;
    line["request"] = sanitizeForLog(r.request_line, 200);
  } else {
    line["host"] = d.host;
    line["port"] = d.port;
  }
  nlohmann::json addresses = nlohmann::json::array();
  for (const auto& a : d.resolved) addresses.push_back(a.toString());
  line["addresses"] = std::move(addresses);
  line["address"] = r.dialed ? nlohmann::json(r.dialed->toString()) : nlohmann::json(nullptr);
  nlohmann::json denied = nlohmann::json::array();
  for (const auto& x : d.denied)
    denied.push_back(
        {{"address", x.address.toString()}, {"class", addressClassName(x.address_class)}});
  line["denied"] = std::move(denied);
  line["verdict"] = d.allowed() ? "allow" : "deny";
  line["reason"] = d.reasonCode();
  line["outcome"] = tunnelOutcomeName(r.outcome);
  line["error"] =
      r.error.empty() ? nlohmann::json(nullptr) : nlohmann::json(printableMessage(r.error));
  line["elapsed_us"] = r.elapsed.count();
  // Replace invalid UTF-8 rather than throw: every field above is already
  // ASCII, this is belt and braces for identity strings.
  return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void FdDecisionLog::write(std::string_view line) {
  std::string out(line);
  out.push_back('\n');
  std::lock_guard lock(mu_);
  (void)sys::writeAll(fd_, out.data(), out.size());
}

}  // namespace airlock::egress
