// One JSON line per egress decision (spec 000: "Log the decision with run,
// tenant, host, port, resolved address, and outcome. Refusals carry a
// reason"). This log is how an operator
// answers "what did that run talk to".
//
// Line fields (all present; null when unknown):
//   time         RFC 3339 UTC with milliseconds
//   event        "egress_decision"
//   point        "proxy" (later also "platform", the outbound guard)
//   environment, tenant, run   the sandbox the listener belongs to
//   host, port   canonical request-target (null when it did not parse)
//   request      the sanitized request line, only when host is null
//   addresses    every resolved address (strings)
//   address      the address actually connected to (tunnels only)
//   denied       [{address, class}] for every denied resolved address
//   verdict      "allow" | "deny"
//   reason       reason code ("allowed", "host_not_allowed",
//                "resolved_denied:link_local", ...)
//   outcome      "tunnel" | "refused" | "connect_failed" | "over_capacity" |
//                "client_error" | "dial_cancelled" (allowed, but the
//                sandbox's listener closed or the proxy stopped before the
//                dial completed; error says which and where)
//   error        connect or client error text, else null
//   elapsed_us   from accepting the connection to the decision's outcome
// Addresses appear here (the operator's log) but never in a response to the
// sandbox, which gets only the reason code.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "airlock/egress/address.h"
#include "airlock/egress/decision.h"

namespace airlock::egress {

// Who is asking: fixed per listener (the per-sandbox socket), never taken
// from the request.
struct ProxyIdentity {
  std::string environment_id;
  std::string tenant_id;
  std::string run_id;
};

enum class TunnelOutcome : std::uint8_t {
  kTunnel,
  kRefused,
  kConnectFailed,
  kOverCapacity,
  kClientError,
  kDialCancelled,
};

std::string_view tunnelOutcomeName(TunnelOutcome outcome) noexcept;

struct DecisionRecord {
  const ProxyIdentity& who;
  const Decision& decision;
  TunnelOutcome outcome;
  std::optional<IpAddress> dialed;
  std::string error;         // empty: none
  std::string request_line;  // raw first line (sanitized here); used when host is empty
  std::chrono::microseconds elapsed{0};
};

// The JSON line (without the newline) for `record` at `now`.
std::string formatDecisionLine(const DecisionRecord& record,
                               std::chrono::system_clock::time_point now);

// Where decision lines go. write() is called from proxy threads and must be
// thread-safe; `line` has no trailing newline.
class DecisionLog {
 public:
  virtual ~DecisionLog() = default;
  virtual void write(std::string_view line) = 0;
};

// Appends each line plus '\n' to a file descriptor it does not own (stderr,
// a log file opened O_APPEND), one write per line under a mutex so lines
// never interleave.
class FdDecisionLog final : public DecisionLog {
 public:
  explicit FdDecisionLog(int fd) : fd_(fd) {}
  void write(std::string_view line) override;

 private:
  std::mutex mu_;
  int fd_;
};

}  // namespace airlock::egress
