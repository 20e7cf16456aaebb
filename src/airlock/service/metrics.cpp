#include "airlock/service/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

namespace airlock::service {

struct Metrics::Impl {
  std::string mechanism;
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  prometheus::Family<prometheus::Histogram>& provision = prometheus::BuildHistogram()
                                                             .Name("airlock_provision_seconds")
                                                             .Help("Sandbox provision latency")
                                                             .Register(*registry);
  prometheus::Family<prometheus::Counter>& busy = prometheus::BuildCounter()
                                                      .Name("airlock_sandbox_busy_seconds_total")
                                                      .Help("Time sandboxes spent inside execute")
                                                      .Register(*registry);
  prometheus::Family<prometheus::Counter>& lifetime =
      prometheus::BuildCounter()
          .Name("airlock_sandbox_lifetime_seconds_total")
          .Help("Lifetime of destroyed sandboxes")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& live = prometheus::BuildGauge()
                                                    .Name("airlock_sandboxes_live")
                                                    .Help("Live sandboxes")
                                                    .Register(*registry);
  prometheus::Family<prometheus::Counter>& executions = prometheus::BuildCounter()
                                                            .Name("airlock_executions_total")
                                                            .Help("Executions by kill reason")
                                                            .Register(*registry);
  prometheus::Family<prometheus::Counter>& egress = prometheus::BuildCounter()
                                                        .Name("airlock_egress_refusals_total")
                                                        .Help("Egress refusals by reason")
                                                        .Register(*registry);
  prometheus::Family<prometheus::Counter>& orphans = prometheus::BuildCounter()
                                                         .Name("airlock_orphans_reaped_total")
                                                         .Help("Sandboxes destroyed by the reaper")
                                                         .Register(*registry);
  prometheus::Family<prometheus::Counter>& destroy_failures =
      prometheus::BuildCounter()
          .Name("airlock_destroy_failures_total")
          .Help("Destroys that failed (retried)")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& schedule_fires =
      prometheus::BuildCounter()
          .Name("airlock_schedule_fires_total")
          .Help("Schedule occurrences moved to the fire outbox")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& artifact_bytes =
      prometheus::BuildGauge()
          .Name("airlock_artifact_bytes")
          .Help("Artifact bytes stored per tenant")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& requests = prometheus::BuildCounter()
                                                          .Name("airlock_http_requests_total")
                                                          .Help("HTTP requests by route and status")
                                                          .Register(*registry);
  prometheus::Family<prometheus::Histogram>& request_seconds =
      prometheus::BuildHistogram()
          .Name("airlock_http_request_seconds")
          .Help("HTTP request latency by route")
          .Register(*registry);
};

namespace {
// 1 ms .. ~30 s, roughly doubling.
const prometheus::Histogram::BucketBoundaries& latencyBuckets() {
  static const prometheus::Histogram::BucketBoundaries kBuckets = {
      0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30};
  return kBuckets;
}
}  // namespace

Metrics::Metrics(std::string mechanism) : impl_(std::make_unique<Impl>()) {
  impl_->mechanism = std::move(mechanism);
  impl_->live.Add({}).Set(0);
  impl_->destroy_failures.Add({});
  impl_->schedule_fires.Add({});
  impl_->busy.Add({});
  impl_->lifetime.Add({});
}
Metrics::~Metrics() = default;

void Metrics::provisioned(double seconds) {
  impl_->provision.Add({{"mechanism", impl_->mechanism}}, latencyBuckets()).Observe(seconds);
}
void Metrics::destroyed(double lifetime_seconds) {
  impl_->lifetime.Add({}).Increment(lifetime_seconds);
}
void Metrics::executed(double busy_seconds, const std::string& killed_by) {
  impl_->busy.Add({}).Increment(busy_seconds);
  impl_->executions.Add({{"killed_by", killed_by}}).Increment();
}
void Metrics::liveSandboxes(double count) {
  impl_->live.Add({}).Set(count);
}
void Metrics::egressRefused(const std::string& reason) {
  impl_->egress.Add({{"reason", reason}}).Increment();
}
void Metrics::orphanReaped(const std::string& why) {
  impl_->orphans.Add({{"why", why}}).Increment();
}
void Metrics::destroyFailed() {
  impl_->destroy_failures.Add({}).Increment();
}
void Metrics::scheduleFired(double fires) {
  impl_->schedule_fires.Add({}).Increment(fires);
}
void Metrics::artifactBytes(const std::string& tenant, double bytes) {
  impl_->artifact_bytes.Add({{"tenant", tenant}}).Set(bytes);
}
void Metrics::request(const std::string& route, int status, double seconds) {
  impl_->requests.Add({{"route", route}, {"status", std::to_string(status)}}).Increment();
  impl_->request_seconds.Add({{"route", route}}, latencyBuckets()).Observe(seconds);
}

std::string Metrics::render() const {
  prometheus::TextSerializer serializer;
  return serializer.Serialize(impl_->registry->Collect());
}

ExecutionNodeEvents nodeEvents(Metrics& metrics) {
  ExecutionNodeEvents events;
  events.live_count = [&metrics](std::size_t n) { metrics.liveSandboxes(static_cast<double>(n)); };
  events.destroyed = [&metrics](double seconds) { metrics.destroyed(seconds); };
  events.destroy_failed = [&metrics] { metrics.destroyFailed(); };
  events.reaped = [&metrics](std::string_view why) { metrics.orphanReaped(std::string(why)); };
  return events;
}

}  // namespace airlock::service
