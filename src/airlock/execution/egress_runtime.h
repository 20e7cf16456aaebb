// The egress proxy of one process (`airlock run`, `airlock serve`): the
// composition of the proxy (egress/proxy.h) with the platform resolver, the
// production address classifier (fixed denylist plus this host's interface
// addresses) and a decision log, exposed to adapters as an EgressRoute
// (port/egress_route.h; spec 000 "The egress boundary").
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "airlock/core/error.h"
#include "airlock/port/egress_route.h"

namespace airlock::execution {

struct EgressRuntime {
  // Adapters attach sandboxes through this; it keeps the proxy alive.
  std::shared_ptr<EgressRoute> route;
  // Holds the log file and stops the proxy when the last owner goes. Must be
  // destroyed after every adapter that holds `route`: declare it first.
  std::shared_ptr<void> keepalive;
};

// Called with the reason code of every refusal ("host_not_allowed",
// "resolved_denied:link_local"), from proxy threads: the service counts them.
using RefusalObserver = std::function<void(std::string_view reason)>;

// `log_path`: where decision lines go, one JSON object per line, appended
// (created 0600 if missing); empty: standard error. ConfigurationError
// naming the path when the log cannot be opened.
Result<EgressRuntime> startEgressRuntime(const std::string& log_path,
                                         RefusalObserver on_refusal = {});

// Creates (or truncates nothing of) the log file without starting a proxy:
// a run without egress still leaves the file an operator asked for, empty
// of decisions because nothing was decided.
Result<void> touchEgressLog(const std::string& log_path);

}  // namespace airlock::execution
