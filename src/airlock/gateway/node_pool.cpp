#include "airlock/gateway/node_pool.h"

#include <algorithm>
#include <limits>
#include <set>
#include <utility>

#include "airlock/core/encoding.h"
#include "airlock/core/ids.h"

namespace airlock::gateway {
namespace {

// What a node answers for an id it does not hold: EnvironmentGone from the
// port's calls, ExecutionRejected from the job calls (execution/node.h).
Error unknownEnvironment(ErrorCode code, std::string_view id) {
  if (code == ErrorCode::kEnvironmentGone)
    return Error{code, 0, "unknown or destroyed environment " + quoteForMessage(id)};
  return Error{code, 0, "no live environment " + quoteForMessage(id)};
}

std::string nodeLabel(const std::string& name) {
  return name.empty() ? std::string("(unnamed)") : quoteForMessage(name);
}

}  // namespace

Result<std::unique_ptr<NodePool>> NodePool::create(std::vector<PoolMember> members,
                                                   NodePoolOptions options) {
  std::set<std::string> names;
  for (const auto& m : members) {
    if (!m.node || !m.status)
      return fail(ErrorCode::kConfigurationError,
                  "execution node " + nodeLabel(m.name) + " has no node or no status function");
    if (!m.name.empty() && !isNodeName(m.name))
      return fail(ErrorCode::kConfigurationError,
                  "execution node name " + quoteForMessage(m.name) +
                      " must be 1-63 characters of a-z 0-9 and -, not starting or ending with -");
    if (!names.insert(m.name).second)
      return fail(ErrorCode::kConfigurationError,
                  "execution node name " + nodeLabel(m.name) + " is there twice");
  }
  if (!options.clock)
    options.clock = [] {
      return std::chrono::time_point_cast<std::chrono::milliseconds>(
          std::chrono::system_clock::now());
    };
  return std::unique_ptr<NodePool>(new NodePool(std::move(members), std::move(options)));
}

NodePool::NodePool(std::vector<PoolMember> members, NodePoolOptions options)
    : options_(std::move(options)) {
  for (auto& m : members) {
    Slot slot;
    slot.health.name = m.name;
    slot.health.url = m.url;
    slot.health.problem = "not asked yet";
    slot.member = std::move(m);
    slots_.push_back(std::move(slot));
  }
}

NodePool::~NodePool() = default;

void NodePool::log(const std::string& line) const {
  if (!line.empty() && options_.log) options_.log(line);
}

std::string NodePool::record(std::size_t index, const Result<NodeStatus>& status) const {
  Slot& slot = slots_[index];
  const bool was_up = slot.health.up;
  const std::string label = "execution node " + nodeLabel(slot.member.name) +
                            (slot.member.url.empty() ? "" : " at " + slot.member.url);
  if (!status) {
    slot.health.up = false;
    slot.health.problem = "it does not answer: " + status.error().message();
  } else if (status->name != slot.member.name) {
    // Its ids would carry another name and never route back here.
    slot.health.up = false;
    slot.health.problem =
        "it calls itself " + nodeLabel(status->name) + ", not " + nodeLabel(slot.member.name);
  } else {
    slot.health.up = true;
    slot.health.problem.clear();
    slot.health.last_seen = options_.clock();
    slot.health.live = status->live;
    slot.health.capacity = status->capacity;
  }
  if (slot.health.up == was_up) return "";
  return "airlock: " + label + (slot.health.up ? " is up" : " is down: " + slot.health.problem);
}

std::size_t NodePool::refresh() {
  std::vector<PoolMember> members;
  {
    std::lock_guard lk(mu_);
    for (const auto& slot : slots_) members.push_back(slot.member);
  }
  std::vector<std::string> lines;
  std::size_t up = 0;
  for (std::size_t i = 0; i < members.size(); ++i) {
    auto status = members[i].status();
    // What the member holds now, to forget the environments it no longer has.
    std::optional<std::set<std::string>> held;
    if (status && status->name == members[i].name) {
      held.emplace();
      for (const auto& live : members[i].node->live()) held->insert(live.handle.environment_id);
    }
    std::lock_guard lk(mu_);
    lines.push_back(record(i, status));
    if (slots_[i].health.up) ++up;
    if (held)
      std::erase_if(known_, [&](const auto& entry) {
        return entry.second.first == i && !held->contains(entry.first);
      });
  }
  for (const auto& line : lines) log(line);
  return up;
}

std::vector<NodeHealth> NodePool::nodes() const {
  std::lock_guard lk(mu_);
  std::vector<NodeHealth> out;
  for (const auto& slot : slots_) out.push_back(slot.health);
  return out;
}

Result<std::shared_ptr<ExecutionNode>> NodePool::route(std::string_view environment_id,
                                                       ErrorCode unknown) const {
  auto name = environmentIdNode(environment_id);
  if (!name) return tl::unexpected(unknownEnvironment(unknown, environment_id));
  std::lock_guard lk(mu_);
  for (const auto& slot : slots_) {
    if (slot.member.name != *name) continue;
    if (!slot.health.up)
      return fail(ErrorCode::kExecutionUnavailable,
                  "execution node " + nodeLabel(slot.member.name) + ", which holds environment " +
                      quoteForMessage(environment_id) + ", is down (" + slot.health.problem +
                      "); retry later");
    return slot.member.node;
  }
  return tl::unexpected(unknownEnvironment(unknown, environment_id));
}

Result<EnvironmentHandle> NodePool::provision(const EnvironmentSpec& spec) {
  // The members up now, each asked for its status afresh.
  std::vector<std::pair<std::size_t, PoolMember>> up;
  {
    std::lock_guard lk(mu_);
    for (std::size_t i = 0; i < slots_.size(); ++i)
      if (slots_[i].health.up) up.emplace_back(i, slots_[i].member);
  }
  std::vector<std::string> lines;
  std::vector<std::size_t> candidates;
  for (const auto& [index, member] : up) {
    auto status = member.status();
    std::lock_guard lk(mu_);
    lines.push_back(record(index, status));
    if (slots_[index].health.up) candidates.push_back(index);
  }
  for (const auto& line : lines) log(line);
  if (candidates.empty())
    return fail(ErrorCode::kExecutionUnavailable,
                "no execution node is up to provision an environment on; retry later");

  const std::size_t asked = candidates.size();
  while (!candidates.empty()) {
    std::size_t chosen = 0;
    std::shared_ptr<ExecutionNode> node;
    {
      std::lock_guard lk(mu_);
      constexpr std::size_t kUnbounded = std::numeric_limits<std::size_t>::max();
      auto roomOf = [&](std::size_t i) -> std::size_t {
        const Slot& s = slots_[i];
        if (s.health.capacity == 0) return kUnbounded;
        const std::size_t used = s.health.live + s.in_flight;
        return s.health.capacity > used ? s.health.capacity - used : 0;
      };
      auto usedOf = [&](std::size_t i) { return slots_[i].health.live + slots_[i].in_flight; };
      std::erase_if(candidates, [&](std::size_t i) { return roomOf(i) == 0; });
      if (candidates.empty()) break;
      chosen = *std::min_element(candidates.begin(), candidates.end(),
                                 [&](std::size_t a, std::size_t b) {
                                   if (roomOf(a) != roomOf(b)) return roomOf(a) > roomOf(b);
                                   if (usedOf(a) != usedOf(b)) return usedOf(a) < usedOf(b);
                                   return a < b;
                                 });
      ++slots_[chosen].in_flight;
      node = slots_[chosen].member.node;
    }
    auto handle = node->provision(spec);
    std::lock_guard lk(mu_);
    Slot& slot = slots_[chosen];
    --slot.in_flight;
    if (handle) {
      ++slot.health.live;
      LiveEnvironment live;
      live.handle = *handle;
      live.provisioned_at = std::chrono::steady_clock::now();
      live.wall_clock_seconds = spec.limits.wall_clock_seconds;
      live.egress = spec.egress;
      live.image_digest = spec.image_digest;
      known_[handle->environment_id] = {chosen, std::move(live)};
      return handle;
    }
    // Filled meanwhile (by another gateway): the next member.
    if (handle.error().code != ErrorCode::kEnvironmentBusy) return handle;
    if (slot.health.capacity > 0)
      slot.health.live = std::max(slot.health.live, slot.health.capacity);
    std::erase(candidates, chosen);
  }
  return fail(ErrorCode::kEnvironmentBusy,
              "no execution node has room for another environment (" + std::to_string(asked) +
                  " up, all at capacity); retry when one is destroyed");
}

Result<ExecutionResult> NodePool::execute(const EnvironmentHandle& handle,
                                          const ExecutionCommand& command,
                                          const CancelToken* cancel) {
  auto node = route(handle.environment_id, ErrorCode::kEnvironmentGone);
  if (!node) return tl::unexpected(node.error());
  return (*node)->execute(handle, command, cancel);
}

Result<ExecutionResult> NodePool::executeStreaming(const EnvironmentHandle& handle,
                                                   const ExecutionCommand& command,
                                                   const CancelToken* cancel,
                                                   const OutputSink& sink) {
  auto node = route(handle.environment_id, ErrorCode::kEnvironmentGone);
  if (!node) return tl::unexpected(node.error());
  return (*node)->executeStreaming(handle, command, cancel, sink);
}

Result<void> NodePool::cancel(const EnvironmentHandle& handle, std::string_view execution_id) {
  auto node = route(handle.environment_id, ErrorCode::kEnvironmentGone);
  if (!node) return tl::unexpected(node.error());
  return (*node)->cancel(handle, execution_id);
}

Result<void> NodePool::destroy(const EnvironmentHandle& handle) {
  auto node = route(handle.environment_id, ErrorCode::kEnvironmentGone);
  if (!node) {
    // Destroying what no node holds is done already.
    if (node.error().code == ErrorCode::kEnvironmentGone) return {};
    return tl::unexpected(node.error());
  }
  auto done = (*node)->destroy(handle);
  if (done) {
    std::lock_guard lk(mu_);
    if (auto it = known_.find(handle.environment_id); it != known_.end()) {
      Slot& slot = slots_[it->second.first];
      if (slot.health.live > 0) --slot.health.live;
      known_.erase(it);
    }
  }
  return done;
}

Result<EnvironmentHandle> NodePool::extend(const EnvironmentHandle& handle, Timestamp expires_at) {
  auto node = route(handle.environment_id, ErrorCode::kEnvironmentGone);
  if (!node) return tl::unexpected(node.error());
  auto extended = (*node)->extend(handle, expires_at);
  if (extended) {
    std::lock_guard lk(mu_);
    if (auto it = known_.find(handle.environment_id); it != known_.end())
      it->second.second.handle = *extended;
  }
  return extended;
}

Result<std::shared_ptr<WorkspaceHandle>> NodePool::workspace(const EnvironmentHandle& handle) {
  auto node = route(handle.environment_id, ErrorCode::kEnvironmentGone);
  if (!node) return tl::unexpected(node.error());
  return (*node)->workspace(handle);
}

Result<std::unique_ptr<SideProcess>> NodePool::startSideProcess(const EnvironmentHandle& handle,
                                                                const SideCommand& command) {
  auto node = route(handle.environment_id, ErrorCode::kEnvironmentGone);
  if (!node) return tl::unexpected(node.error());
  return (*node)->startSideProcess(handle, command);
}

Result<std::unique_ptr<CapabilityChannel>> NodePool::openCapabilityChannel(
    const EnvironmentHandle& handle) {
  auto node = route(handle.environment_id, ErrorCode::kEnvironmentGone);
  if (!node) return tl::unexpected(node.error());
  return (*node)->openCapabilityChannel(handle);
}

void NodePool::shutdown() noexcept {
  std::vector<std::shared_ptr<ExecutionNode>> nodes;
  {
    std::lock_guard lk(mu_);
    for (const auto& slot : slots_) nodes.push_back(slot.member.node);
  }
  for (const auto& node : nodes) node->shutdown();
}

std::vector<LiveEnvironment> NodePool::live(const std::optional<std::string>& tenant_id) const {
  std::vector<std::shared_ptr<ExecutionNode>> nodes;
  {
    std::lock_guard lk(mu_);
    for (const auto& slot : slots_)
      if (slot.health.up) nodes.push_back(slot.member.node);
  }
  std::vector<LiveEnvironment> out;
  for (const auto& node : nodes) {
    auto part = node->live(tenant_id);
    out.insert(out.end(), std::make_move_iterator(part.begin()),
               std::make_move_iterator(part.end()));
  }
  std::sort(out.begin(), out.end(), [](const LiveEnvironment& a, const LiveEnvironment& b) {
    return a.handle.environment_id < b.handle.environment_id;
  });
  return out;
}

std::optional<LiveEnvironment> NodePool::find(const std::string& environment_id) const {
  auto node = route(environment_id, ErrorCode::kEnvironmentGone);
  if (!node) {
    // A down member's environment, as last seen: the call that follows
    // answers ExecutionUnavailable.
    if (node.error().code != ErrorCode::kExecutionUnavailable) return std::nullopt;
    std::lock_guard lk(mu_);
    auto it = known_.find(environment_id);
    if (it == known_.end()) return std::nullopt;
    return it->second.second;
  }
  auto found = (*node)->find(environment_id);
  std::size_t index = 0;
  std::function<Result<NodeStatus>()> status;
  {
    std::lock_guard lk(mu_);
    for (std::size_t i = 0; i < slots_.size(); ++i)
      if (slots_[i].member.node == *node) index = i;
    if (found) {
      known_[environment_id] = {index, *found};
      return found;
    }
    if (!known_.contains(environment_id)) return found;
    status = slots_[index].member.status;
  }
  // One it knew is not found: gone, or its node died since the last
  // refresh (a remote find cannot tell). Its status says which.
  auto answer = status();
  std::string line;
  std::optional<LiveEnvironment> last_seen;
  {
    std::lock_guard lk(mu_);
    line = record(index, answer);
    auto it = known_.find(environment_id);
    if (it != known_.end()) {
      if (slots_[index].health.up)
        known_.erase(it);
      else
        last_seen = it->second.second;
    }
  }
  log(line);
  return last_seen;
}

Result<RunClaim> NodePool::claim(const std::string& environment_id, RunKind kind) {
  auto node = route(environment_id, ErrorCode::kEnvironmentGone);
  if (!node) return tl::unexpected(node.error());
  auto inner = (*node)->claim(environment_id, kind);
  if (!inner) return tl::unexpected(inner.error());
  {
    std::lock_guard lk(claims_mu_);
    claims_.emplace(std::pair(environment_id, kind), std::move(*inner));
  }
  return makeClaim(*this, environment_id, kind);
}

void NodePool::release(const std::string& environment_id, RunKind kind) noexcept {
  // The member's claim is released after the lock (destroyed last).
  std::optional<RunClaim> inner;
  std::lock_guard lk(claims_mu_);
  auto it = claims_.find(std::pair(environment_id, kind));
  if (it == claims_.end()) return;
  inner.emplace(std::move(it->second));
  claims_.erase(it);
}

int NodePool::reap(const StaleLeaseQuery& stale) {
  refresh();
  std::vector<std::shared_ptr<ExecutionNode>> nodes;
  {
    std::lock_guard lk(mu_);
    for (const auto& slot : slots_)
      if (slot.health.up) nodes.push_back(slot.member.node);
  }
  int destroyed = 0;
  for (const auto& node : nodes) destroyed += node->reap(stale);
  return destroyed;
}

void NodePool::destroyAll() {
  std::vector<std::shared_ptr<ExecutionNode>> nodes;
  {
    std::lock_guard lk(mu_);
    for (const auto& slot : slots_) nodes.push_back(slot.member.node);
  }
  for (const auto& node : nodes) node->destroyAll();
  std::lock_guard lk(mu_);
  known_.clear();
}

std::size_t NodePool::liveCount() const {
  std::vector<std::shared_ptr<ExecutionNode>> nodes;
  {
    std::lock_guard lk(mu_);
    for (const auto& slot : slots_)
      if (slot.health.up) nodes.push_back(slot.member.node);
  }
  std::size_t n = 0;
  for (const auto& node : nodes) n += node->liveCount();
  return n;
}

Result<JobStarted> NodePool::startJob(const EnvironmentHandle& handle,
                                      const JobStartRequest& request) {
  auto node = route(handle.environment_id, ErrorCode::kExecutionRejected);
  if (!node) return tl::unexpected(node.error());
  return (*node)->startJob(handle, request);
}

Result<JobSnapshot> NodePool::pollJob(const EnvironmentHandle& handle,
                                      const JobPollRequest& request) {
  auto node = route(handle.environment_id, ErrorCode::kExecutionRejected);
  if (!node) return tl::unexpected(node.error());
  return (*node)->pollJob(handle, request);
}

Result<void> NodePool::sendJobInput(const EnvironmentHandle& handle, const std::string& job_id,
                                    std::string_view bytes, bool last, std::uint64_t timeout_ms,
                                    const CancelToken* cancel) {
  auto node = route(handle.environment_id, ErrorCode::kExecutionRejected);
  if (!node) return tl::unexpected(node.error());
  return (*node)->sendJobInput(handle, job_id, bytes, last, timeout_ms, cancel);
}

Result<void> NodePool::resizeJob(const EnvironmentHandle& handle, const std::string& job_id,
                                 const TerminalSize& size) {
  auto node = route(handle.environment_id, ErrorCode::kExecutionRejected);
  if (!node) return tl::unexpected(node.error());
  return (*node)->resizeJob(handle, job_id, size);
}

Result<void> NodePool::killJob(const EnvironmentHandle& handle, const std::string& job_id) {
  auto node = route(handle.environment_id, ErrorCode::kExecutionRejected);
  if (!node) return tl::unexpected(node.error());
  return (*node)->killJob(handle, job_id);
}

Result<std::vector<JobSnapshot>> NodePool::listJobs(const EnvironmentHandle& handle) {
  auto node = route(handle.environment_id, ErrorCode::kExecutionRejected);
  if (!node) return tl::unexpected(node.error());
  return (*node)->listJobs(handle);
}

}  // namespace airlock::gateway
