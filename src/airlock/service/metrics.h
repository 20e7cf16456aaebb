// The service's metrics (spec 000, "Tracked metrics"), kept in
// a prometheus-cpp registry and served as Prometheus text on /metrics:
//   airlock_provision_seconds{mechanism}          histogram of provision latency
//   airlock_sandbox_busy_seconds_total            time inside execute
//   airlock_sandbox_lifetime_seconds_total        lifetime of destroyed sandboxes
//     (utilization = busy / lifetime, over destroyed sandboxes)
//   airlock_sandboxes_live                        gauge
//   airlock_executions_total{killed_by}           "none" for a normal exit
//   airlock_egress_refusals_total{reason}         reason codes of egress/reason.h
//   airlock_orphans_reaped_total{why}             expired, stale_lease, retried
//   airlock_destroy_failures_total
//   airlock_schedule_fires_total                  occurrences moved to the fire outbox
//   airlock_artifact_bytes{tenant}                bytes stored per tenant
//   airlock_http_requests_total{route,status}
//   airlock_http_request_seconds{route}           histogram
// Thread-safe (prometheus-cpp metrics are atomic).
#pragma once

#include <memory>
#include <string>

#include "airlock/port/execution_node.h"

namespace airlock::service {

class Metrics {
 public:
  explicit Metrics(std::string mechanism);
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  void provisioned(double seconds);
  void destroyed(double lifetime_seconds);
  void executed(double busy_seconds, const std::string& killed_by);  // "none" if it exited
  void liveSandboxes(double count);
  void egressRefused(const std::string& reason);
  void orphanReaped(const std::string& why);
  void destroyFailed();
  void scheduleFired(double fires);
  void artifactBytes(const std::string& tenant, double bytes);
  void request(const std::string& route, int status, double seconds);

  // The Prometheus text exposition of everything above.
  std::string render() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The execution node's events (port/execution_node.h) into `metrics`: the
// live gauge, lifetimes, destroy failures and the reaper's orphans. The
// composition root hands them to its node; `metrics` must outlive it.
ExecutionNodeEvents nodeEvents(Metrics& metrics);

}  // namespace airlock::service
