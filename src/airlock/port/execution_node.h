// The execution node: what a gateway asks of the execution side beyond the
// ExecutionEnvironment port (spec 000, "Where the boundary is", "The
// execution service holds nothing worth stealing" and "Nothing outlives its
// lease"). The node keeps the registry of the environments it provisioned
// (what runs where), the claims that keep a program and a command apart in
// one environment, and the reaper. The gateway keeps tenants, the lease
// book, artifacts, tools, schedules and the operator's egress policy; the
// reaper's question about stale leases (StaleLeaseQuery) is the only call
// the node makes back toward it.
//
// Implementations: execution/node.h (LocalNode, over an adapter in this
// process).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "airlock/core/error.h"
#include "airlock/core/types.h"
#include "airlock/port/execution_environment.h"
#include "airlock/port/job_port.h"

namespace airlock {

// What the node knows about one environment it provisioned and has not yet
// destroyed.
struct LiveEnvironment {
  EnvironmentHandle handle;
  std::chrono::steady_clock::time_point provisioned_at;
  std::chrono::nanoseconds busy{0};     // time inside execute (utilization)
  std::int64_t wall_clock_seconds = 0;  // the spec's limit, for the tools' timeout rule
  int destroy_failures = 0;             // failed destroys since the last success (reaper retries)
  EgressPolicy egress;                  // what the sandbox was provisioned with
  std::string image_digest;             // the image it runs ("sha256:<hex>")
};

// One live environment's lease, as the reaper asks about it: opaque ids and
// the epoch the environment was provisioned under.
struct LiveLease {
  std::string tenant_id;
  std::string run_id;
  std::int64_t lease_epoch = 0;
  std::string environment_id;
  bool operator==(const LiveLease&) const = default;
};

// What a node says about itself: the gateway's registry of nodes keeps it
// (health and room; spec 000, "Where the boundary is"). A gateway places a
// new environment on a node with room and routes every later call by the
// node name its environment id carries (core/ids.h environmentIdNode).
struct NodeStatus {
  std::string name;          // the node name in its environment ids; "" for bare ids
  std::size_t live = 0;      // environments it holds now
  std::size_t capacity = 0;  // the most it holds at once; 0: no bound configured
  bool operator==(const NodeStatus&) const = default;
};

// The reaper's call back toward the gateway: given the leases of the live
// environments, the ids of those whose lease is stale (their run's current
// epoch is newer). An id that is not one of the given leases is ignored.
using StaleLeaseQuery = std::function<std::vector<std::string>(const std::vector<LiveLease>&)>;

// What the node reports as environments come and go (the service's gauges
// and counters; any member may be empty). Called with the node's registry
// locked: an observer must not call back into the node.
struct ExecutionNodeEvents {
  std::function<void(std::size_t live)> live_count;        // after every provision and destroy
  std::function<void(double lifetime_seconds)> destroyed;  // a registered environment is gone
  std::function<void()> destroy_failed;                    // a destroy failed (the reaper retries)
  std::function<void(std::string_view why)> reaped;        // "expired", "stale_lease", "retried"
};

// What a claim is for: a command (execute) or a program (code mode).
enum class RunKind { kCommand, kProgram };

class ExecutionNode;

// A claim on one environment for a command or a program, released when the
// claim is destroyed. Move-only.
class RunClaim {
 public:
  RunClaim(RunClaim&& other) noexcept
      : node_(std::exchange(other.node_, nullptr)), id_(std::move(other.id_)), kind_(other.kind_) {}
  RunClaim(const RunClaim&) = delete;
  RunClaim& operator=(const RunClaim&) = delete;
  RunClaim& operator=(RunClaim&&) = delete;
  inline ~RunClaim();

 private:
  friend class ExecutionNode;
  RunClaim(ExecutionNode* node, std::string id, RunKind kind)
      : node_(node), id_(std::move(id)), kind_(kind) {}

  ExecutionNode* node_;
  std::string id_;
  RunKind kind_;
};

// An ExecutionEnvironment that also answers for the environments it holds.
// provision registers the environment, destroy forgets it (a failed destroy
// is counted and retried by the reaper), execute and executeStreaming add to
// its busy time. It keeps each live environment's background jobs
// (JobPort, job_port.h): a job outlives the request or program that started
// it and dies with its environment (destroy, the reaper and destroyAll kill
// it and join its pump before the sandbox goes). Thread-safe: every method
// may be called from any thread.
class ExecutionNode : public ExecutionEnvironment, public JobPort {
 public:
  // The live environments, ordered by id; with a tenant, only that tenant's.
  virtual std::vector<LiveEnvironment> live(
      const std::optional<std::string>& tenant_id = std::nullopt) const = 0;
  // One live environment; nullopt when it is not live (never provisioned
  // here, or destroyed).
  virtual std::optional<LiveEnvironment> find(const std::string& environment_id) const = 0;
  // Claims the environment for a command or a program until the claim is
  // released. A program is refused while anything runs there (it writes
  // kCapabilityDirInSandbox before its command starts), a command while a
  // program runs (two commands are the adapter's to refuse, as always).
  // Errors: ExecutionRejected, "a program is running in environment '<id>'"
  // or "another command is running in environment '<id>'".
  virtual Result<RunClaim> claim(const std::string& environment_id, RunKind kind) = 0;
  // One reaper pass: destroys the environments whose destroy failed before
  // ("retried"), those past expires_at by the node's clock (as extend last
  // moved it: "expired"), and
  // those `stale` names ("stale_lease"; it is asked about every live lease,
  // and not called when none is live). Returns how many were destroyed.
  virtual int reap(const StaleLeaseQuery& stale) = 0;
  // Destroys every live environment (shutdown).
  virtual void destroyAll() = 0;
  virtual std::size_t liveCount() const = 0;

 protected:
  static RunClaim makeClaim(ExecutionNode& node, std::string environment_id, RunKind kind) {
    return RunClaim(&node, std::move(environment_id), kind);
  }
  // Ends a claim made by claim() (RunClaim's destructor).
  virtual void release(const std::string& environment_id, RunKind kind) noexcept = 0;

 private:
  friend class RunClaim;
};

inline RunClaim::~RunClaim() {
  if (node_ != nullptr) node_->release(id_, kind_);
}

}  // namespace airlock
