#include "airlock/service/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

namespace airlock::service {

namespace {

// One family of `registry`, its type the builder's (BuildCounter, BuildGauge,
// BuildHistogram): every metric below is a name and a help line, nothing else.
template <class Builder>
auto& family(Builder builder, prometheus::Registry& registry, const char* name, const char* help) {
  return builder.Name(name).Help(help).Register(registry);
}

using Counters = prometheus::Family<prometheus::Counter>;
using Gauges = prometheus::Family<prometheus::Gauge>;
using Histograms = prometheus::Family<prometheus::Histogram>;

}  // namespace

struct Metrics::Impl {
  std::string mechanism;
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  Histograms& provision = family(prometheus::BuildHistogram(), *registry,
                                 "airlock_provision_seconds", "Sandbox provision latency");
  Counters& busy =
      family(prometheus::BuildCounter(), *registry, "airlock_sandbox_busy_seconds_total",
             "Time sandboxes spent inside execute");
  Counters& lifetime =
      family(prometheus::BuildCounter(), *registry, "airlock_sandbox_lifetime_seconds_total",
             "Lifetime of destroyed sandboxes");
  Gauges& live =
      family(prometheus::BuildGauge(), *registry, "airlock_sandboxes_live", "Live sandboxes");
  Counters& executions = family(prometheus::BuildCounter(), *registry, "airlock_executions_total",
                                "Executions by kill reason");
  Counters& egress = family(prometheus::BuildCounter(), *registry, "airlock_egress_refusals_total",
                            "Egress refusals by reason");
  Counters& orphans = family(prometheus::BuildCounter(), *registry, "airlock_orphans_reaped_total",
                             "Sandboxes destroyed by the reaper");
  Counters& destroy_failures =
      family(prometheus::BuildCounter(), *registry, "airlock_destroy_failures_total",
             "Destroys that failed (retried)");
  Counters& schedule_fires =
      family(prometheus::BuildCounter(), *registry, "airlock_schedule_fires_total",
             "Schedule occurrences moved to the fire outbox");
  Gauges& artifact_bytes = family(prometheus::BuildGauge(), *registry, "airlock_artifact_bytes",
                                  "Artifact bytes stored per tenant");
  Counters& requests = family(prometheus::BuildCounter(), *registry, "airlock_http_requests_total",
                              "HTTP requests by route and status");
  Histograms& request_seconds =
      family(prometheus::BuildHistogram(), *registry, "airlock_http_request_seconds",
             "HTTP request latency by route");
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
