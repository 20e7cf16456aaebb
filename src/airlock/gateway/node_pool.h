// NodePool: the gateway's execution nodes as one ExecutionNode, and its
// registry of them (spec 000, "Where the boundary is": the gateway places a
// new environment on a node with room and routes every later call by the
// node its environment id names; "the port is the same either way").
//
// Members are named ExecutionNodes: RemoteNodes (gateway/remote) in
// `airlock serve --role gateway`, LocalNodes in tests. Each comes with a
// status function (RemoteNode::status for a remote one) that the registry
// asks for the node's name, live count and capacity.
//
// Placement (provision): among the members that are up and whose status
// answers now, the one with the most room (capacity - live - provisions in
// flight here; capacity 0 is unbounded), ties broken by fewest live, then by
// the order of the members. A member that answers EnvironmentBusy (another
// gateway filled it) is passed over for the next. When no member has room:
// EnvironmentBusy, "no execution node has room ..." (retriable); when none
// is up: ExecutionUnavailable.
//
// Routing: every call that names an environment goes to the member whose
// name the environment id carries (core/ids.h environmentIdNode). An id that
// names no member is answered as a node answers an id it does not hold
// (EnvironmentGone, "unknown or destroyed environment '<id>'"; for the job
// calls ExecutionRejected, "no live environment '<id>'"; destroy succeeds;
// find is nullopt). A member marked down answers
// ExecutionUnavailable, "execution node '<name>' is down ..." (retriable)
// for its environments, until a refresh finds it up again. So that a caller
// that looks an environment up first (find) reaches that answer rather than
// "no such environment", the pool remembers the environments it has seen
// (placed, or found) and find answers a down member's from that memory; a
// known environment its member no longer finds has that member asked for
// its status, and marked down when it does not answer. Refresh prunes the
// memory to what the members that are up hold.
//
// Registry: refresh() asks every member's status and records its health
// (up or down, when it last answered, live, capacity). A member whose status
// names another node than the one configured is refused (down, with the
// reason, logged): its environment ids would not route back to it. Until
// the first refresh every member is down.
//
// Links no execution or sandbox code (a structural gate walks the includes
// of gateway/). Thread-safe; no lock is held while a member is called.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "airlock/core/error.h"
#include "airlock/core/types.h"
#include "airlock/port/execution_node.h"

namespace airlock::gateway {

// One execution node of the pool.
struct PoolMember {
  // The node name its environment ids carry (core/ids.h isNodeName, or ""
  // for a single node handing out bare ids). Unique in the pool.
  std::string name;
  // Where it is reached, for the operator's listing ("" for a node in this
  // process).
  std::string url;
  // The node (shared; a borrowed one can be wrapped in a shared_ptr with a
  // no-op deleter). Non-null.
  std::shared_ptr<ExecutionNode> node;
  // Its status now (ExecutionUnavailable, or any error, when it does not
  // answer). Non-empty.
  std::function<Result<NodeStatus>()> status;
};

// What the registry knows of one member (GET /v1/nodes, metrics).
struct NodeHealth {
  std::string name;
  std::string url;
  bool up = false;
  std::optional<Timestamp> last_seen;  // its last good status answer
  std::size_t live = 0;                // as of last_seen
  std::size_t capacity = 0;            // as of last_seen; 0: unbounded
  std::string problem;                 // why it is down ("" when up)
  bool operator==(const NodeHealth&) const = default;
};

struct NodePoolOptions {
  // Where a member's change of health goes (one line, no newline); empty:
  // nowhere. Called without the pool's lock held.
  std::function<void(std::string_view line)> log;
  // The clock of last_seen (empty: system_clock).
  std::function<Timestamp()> clock;
};

class NodePool final : public ExecutionNode {
 public:
  // ConfigurationError when a member has no node or status, an invalid
  // name, or a name another member has.
  static Result<std::unique_ptr<NodePool>> create(std::vector<PoolMember> members,
                                                  NodePoolOptions options = {});
  ~NodePool() override;
  NodePool(const NodePool&) = delete;
  NodePool& operator=(const NodePool&) = delete;

  // Asks every member's status (in turn, without the lock) and records it.
  // Returns how many members are up.
  std::size_t refresh();
  // The registry, in the members' order.
  std::vector<NodeHealth> nodes() const;

  Result<EnvironmentHandle> provision(const EnvironmentSpec& spec) override;
  Result<ExecutionResult> execute(const EnvironmentHandle& handle, const ExecutionCommand& command,
                                  const CancelToken* cancel = nullptr) override;
  Result<ExecutionResult> executeStreaming(const EnvironmentHandle& handle,
                                           const ExecutionCommand& command,
                                           const CancelToken* cancel,
                                           const OutputSink& sink) override;
  Result<void> cancel(const EnvironmentHandle& handle, std::string_view execution_id) override;
  Result<void> destroy(const EnvironmentHandle& handle) override;
  Result<EnvironmentHandle> extend(const EnvironmentHandle& handle, Timestamp expires_at) override;
  Result<std::shared_ptr<WorkspaceHandle>> workspace(const EnvironmentHandle& handle) override;
  Result<std::unique_ptr<SideProcess>> startSideProcess(const EnvironmentHandle& handle,
                                                        const SideCommand& command) override;
  Result<std::unique_ptr<CapabilityChannel>> openCapabilityChannel(
      const EnvironmentHandle& handle) override;
  // Passed to every member.
  void shutdown() noexcept override;

  // The members that are up, merged (ordered by id).
  std::vector<LiveEnvironment> live(
      const std::optional<std::string>& tenant_id = std::nullopt) const override;
  std::optional<LiveEnvironment> find(const std::string& environment_id) const override;
  Result<RunClaim> claim(const std::string& environment_id, RunKind kind) override;
  // A registry refresh, then every member's own pass (a remote node reaps on
  // its own timer: its pass is nothing). The sum of what they destroyed.
  int reap(const StaleLeaseQuery& stale) override;
  void destroyAll() override;
  // The sum over the members that are up.
  std::size_t liveCount() const override;

  Result<JobStarted> startJob(const EnvironmentHandle& handle,
                              const JobStartRequest& request) override;
  Result<JobSnapshot> pollJob(const EnvironmentHandle& handle,
                              const JobPollRequest& request) override;
  Result<void> sendJobInput(const EnvironmentHandle& handle, const std::string& job_id,
                            std::string_view bytes, bool last, std::uint64_t timeout_ms,
                            const CancelToken* cancel) override;
  Result<void> resizeJob(const EnvironmentHandle& handle, const std::string& job_id,
                         const TerminalSize& size) override;
  Result<void> killJob(const EnvironmentHandle& handle, const std::string& job_id) override;
  Result<std::vector<JobSnapshot>> listJobs(const EnvironmentHandle& handle) override;

 protected:
  void release(const std::string& environment_id, RunKind kind) noexcept override;

 private:
  struct Slot {
    PoolMember member;
    NodeHealth health;
    std::size_t in_flight = 0;  // provisions placed here and not yet answered
  };
  NodePool(std::vector<PoolMember> members, NodePoolOptions options);

  // The member an environment id routes to: its node, or the answer for
  // an id naming no member or a member that is down.
  Result<std::shared_ptr<ExecutionNode>> route(std::string_view environment_id,
                                               ErrorCode unknown) const;
  // Records a status answer (or its failure) for slot `index`; the line to
  // log when its health changed ("" otherwise).
  std::string record(std::size_t index, const Result<NodeStatus>& status) const;  // mu_ held
  void log(const std::string& line) const;

  NodePoolOptions options_;
  mutable std::mutex mu_;
  mutable std::vector<Slot> slots_;  // under mu_ (find records health too)
  // The environments seen, by id, with the index of their member (under mu_).
  mutable std::map<std::string, std::pair<std::size_t, LiveEnvironment>> known_;
  // Claims handed out by claim(), each with the member's own claim inside
  // (released with the pool's).
  std::mutex claims_mu_;
  std::multimap<std::pair<std::string, RunKind>, RunClaim> claims_;  // under claims_mu_
};

}  // namespace airlock::gateway
