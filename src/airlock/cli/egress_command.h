// `airlock egress check --policy FILE URL|host:port` (spec 000,
// "The egress boundary"; docs/cli.md and docs/egress.md): decides one
// destination with the same function the proxy and the outbound guard use,
// and prints the decision, the reason code, the resolved addresses and which
// of them the denylist refused. Nothing is dialled.
//
// The target is a URL when it contains "://" (decided as the outbound guard
// decides it: outbound_guard.h, http and https only) and otherwise a CONNECT
// request-target "host:port" (decided as the proxy decides it:
// decision.h decideAuthority). Names go to the system resolver (getaddrinfo
// of "name."), only after the policy allowed them; the classifier includes
// this host's own interface addresses.
//
// Output on stdout (one "key: value" per line; --json prints one object with
// the same fields instead):
//   decision: allowed | denied
//   reason: <code>            ("allowed", "host_not_allowed", "resolved_denied:private", ...)
//   point: outbound_guard | proxy
//   host: <canonical name>     (absent when the target did not parse)
//   port: <port>
//   resolved: <address> (public | denied: <class>)   one line per address
//   detail: <why>              (only when there is one)
// Exit status: 0 allowed; 1 denied (kExitEgressDenied); 125 the policy file
// cannot be read or is invalid (the message carries its line and column), or
// the arguments are wrong (one line on stderr).
#pragma once

#include <string>

namespace airlock::cli {

inline constexpr int kExitEgressDenied = 1;

struct EgressCheckFlags {
  std::string policy_file;
  std::string target;
  bool json = false;
};

// Decides, prints and returns the exit status.
int runEgressCheck(const EgressCheckFlags& flags);

}  // namespace airlock::cli
