// NodePool over LocalNodes on the fake mechanism, each fake with its own
// node name: placement by room, refusal when the pool is full, routing by
// the node an environment id names, a member marked down answering
// ExecutionUnavailable while the others keep working, and a name mismatch
// refused. A property: whatever sequence of provisions and destroys, no
// node holds more than its capacity, a provision is refused only when every
// node is full, and every live environment is reachable through the pool.
#include "airlock/gateway/node_pool.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "airlock/core/ids.h"
#include "airlock/execution/node.h"
#include "airlock/sandbox/fake/fake_environment.h"

namespace airlock::gateway {
namespace {

using ::testing::HasSubstr;

// One execution node: a fake adapter named `name`, a LocalNode over it, and
// a status the test can make fail or lie about the name.
struct TestNode {
  TestNode(std::string name, std::size_t capacity) : name(std::move(name)), capacity(capacity) {
    fake::FakeOptions options;
    options.node_name = this->name;
    fake = std::make_unique<fake::FakeEnvironment>(options);
    fake->setFallback(fake::basicCommands);
    node = std::make_shared<execution::LocalNode>(*fake);
  }
  PoolMember member() {
    return PoolMember{
        name, "http://" + name + ".test", node, [this]() -> Result<NodeStatus> {
          if (!answering) return fail(ErrorCode::kExecutionUnavailable, "refused");
          return NodeStatus{reported_name.value_or(name), node->liveCount(), capacity};
        }};
  }
  std::string name;
  std::size_t capacity;
  bool answering = true;
  std::optional<std::string> reported_name;
  std::unique_ptr<fake::FakeEnvironment> fake;
  std::shared_ptr<execution::LocalNode> node;
};

EnvironmentSpec specFor(const std::string& run) {
  EnvironmentSpec spec;
  spec.tenant_id = "t1";
  spec.run_id = run;
  spec.lease_epoch = 1;
  spec.image_digest = fake::kFakeImageDigest;
  spec.limits = defaultLimits();
  return spec;
}

std::string nodeOf(const EnvironmentHandle& handle) {
  return std::string(environmentIdNode(handle.environment_id).value_or("?"));
}

ExecutionCommand echo(const std::string& word) {
  ExecutionCommand command;
  command.argv = {"echo", word};
  command.timeout_seconds = 10;
  command.maximum_output_bytes = 1 << 20;
  return command;
}

class NodePoolTest : public ::testing::Test {
 protected:
  void makePool(std::vector<std::pair<std::string, std::size_t>> nodes) {
    std::vector<PoolMember> members;
    for (auto& [name, capacity] : nodes) {
      nodes_.push_back(std::make_unique<TestNode>(name, capacity));
      members.push_back(nodes_.back()->member());
    }
    NodePoolOptions options;
    options.log = [this](std::string_view line) { log_.emplace_back(line); };
    auto pool = NodePool::create(std::move(members), options);
    ASSERT_TRUE(pool.has_value()) << pool.error().message();
    pool_ = std::move(*pool);
    ASSERT_EQ(pool_->refresh(), nodes_.size());
    log_.clear();  // each member's first "is up"
  }
  EnvironmentHandle provision(const std::string& run) {
    auto handle = pool_->provision(specFor(run));
    EXPECT_TRUE(handle.has_value()) << handle.error().message();
    return handle.value_or(EnvironmentHandle{});
  }

  std::vector<std::unique_ptr<TestNode>> nodes_;
  std::vector<std::string> log_;
  std::unique_ptr<NodePool> pool_;
};

TEST_F(NodePoolTest, PlacementSpreadsOverNodesByRoom) {
  makePool({{"node-a", 4}, {"node-b", 4}});
  std::map<std::string, int> per_node;
  for (int i = 0; i < 6; ++i) ++per_node[nodeOf(provision("r" + std::to_string(i)))];
  EXPECT_EQ(per_node["node-a"], 3);
  EXPECT_EQ(per_node["node-b"], 3);
  EXPECT_EQ(nodes_[0]->node->liveCount(), 3U);
  EXPECT_EQ(nodes_[1]->node->liveCount(), 3U);
  EXPECT_EQ(pool_->liveCount(), 6U);
  EXPECT_EQ(pool_->live().size(), 6U);
  EXPECT_EQ(pool_->live("t1").size(), 6U);
  EXPECT_TRUE(pool_->live("t2").empty());
}

TEST_F(NodePoolTest, MostRoomFirstThenFewestLive) {
  // node-b has the most room (unbounded): it takes every environment.
  makePool({{"node-a", 2}, {"node-b", 0}});
  for (int i = 0; i < 3; ++i) EXPECT_EQ(nodeOf(provision("r" + std::to_string(i))), "node-b");
  pool_->destroyAll();
}

TEST_F(NodePoolTest, EqualRoomGoesToFewestLive) {
  makePool({{"node-c", 0}, {"node-d", 0}});
  EXPECT_EQ(nodeOf(provision("x")), "node-c");
  EXPECT_EQ(nodeOf(provision("y")), "node-d");
  EXPECT_EQ(nodeOf(provision("z")), "node-c");
  pool_->destroyAll();
}

TEST_F(NodePoolTest, FullPoolRefusesWithEnvironmentBusy) {
  makePool({{"node-a", 1}, {"node-b", 1}});
  auto first = provision("r1");
  auto second = provision("r2");
  EXPECT_NE(nodeOf(first), nodeOf(second));
  auto refused = pool_->provision(specFor("r3"));
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, ErrorCode::kEnvironmentBusy);
  EXPECT_THAT(refused.error().message(), HasSubstr("no execution node has room"));
  EXPECT_EQ(pool_->liveCount(), 2U);
  // Room again after a destroy, on the node that was freed.
  ASSERT_TRUE(pool_->destroy(first).has_value());
  auto third = provision("r3");
  EXPECT_EQ(nodeOf(third), nodeOf(first));
}

TEST_F(NodePoolTest, NoNodeUpIsExecutionUnavailable) {
  makePool({{"node-a", 0}});
  nodes_[0]->answering = false;
  EXPECT_EQ(pool_->refresh(), 0U);
  auto refused = pool_->provision(specFor("r1"));
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, ErrorCode::kExecutionUnavailable);
}

TEST_F(NodePoolTest, CallsRouteByTheNodeTheIdNames) {
  makePool({{"node-a", 0}, {"node-b", 0}});
  auto a = provision("ra");
  auto b = provision("rb");
  ASSERT_EQ(nodeOf(a), "node-a");
  ASSERT_EQ(nodeOf(b), "node-b");
  // Each node holds only its own; the pool finds both.
  EXPECT_TRUE(nodes_[0]->node->find(a.environment_id).has_value());
  EXPECT_FALSE(nodes_[0]->node->find(b.environment_id).has_value());
  EXPECT_TRUE(nodes_[1]->node->find(b.environment_id).has_value());
  ASSERT_TRUE(pool_->find(a.environment_id).has_value());
  ASSERT_TRUE(pool_->find(b.environment_id).has_value());
  auto out = pool_->execute(b, echo("hello-b"));
  ASSERT_TRUE(out.has_value()) << out.error().message();
  EXPECT_EQ(out->stdout_data, "hello-b\n");
  auto ws = pool_->workspace(a);
  ASSERT_TRUE(ws.has_value()) << ws.error().message();
  ASSERT_TRUE((*ws)->write("f.txt", "on a").has_value());
  EXPECT_EQ((*ws)->read("f.txt").value_or(""), "on a");
  // A claim goes to the node and is released through the pool.
  {
    auto claim = pool_->claim(a.environment_id, RunKind::kProgram);
    ASSERT_TRUE(claim.has_value()) << claim.error().message();
    auto second = nodes_[0]->node->claim(a.environment_id, RunKind::kCommand);
    EXPECT_FALSE(second.has_value());
  }
  EXPECT_TRUE(nodes_[0]->node->claim(a.environment_id, RunKind::kCommand).has_value());
  ASSERT_TRUE(pool_->destroy(a).has_value());
  EXPECT_EQ(nodes_[0]->node->liveCount(), 0U);
  EXPECT_EQ(nodes_[1]->node->liveCount(), 1U);
}

TEST_F(NodePoolTest, AnIdNamingNoKnownNodeIsAnUnknownEnvironment) {
  makePool({{"node-a", 0}});
  auto a = provision("ra");
  EnvironmentHandle stranger = a;
  stranger.environment_id = newEnvironmentId("node-z", a.created_at);
  EXPECT_FALSE(pool_->find(stranger.environment_id).has_value());
  auto executed = pool_->execute(stranger, echo("x"));
  ASSERT_FALSE(executed.has_value());
  // The same answer the node gives for an environment it does not hold.
  EnvironmentHandle unknown_here = a;
  unknown_here.environment_id = newEnvironmentId("node-a", a.created_at);
  auto node_answer = pool_->execute(unknown_here, echo("x"));
  ASSERT_FALSE(node_answer.has_value());
  EXPECT_EQ(executed.error().code, node_answer.error().code);
  EXPECT_EQ(executed.error().code, ErrorCode::kEnvironmentGone);
  auto jobs = pool_->listJobs(stranger);
  ASSERT_FALSE(jobs.has_value());
  EXPECT_EQ(jobs.error().code, pool_->listJobs(unknown_here).error().code);
  EXPECT_TRUE(pool_->destroy(stranger).has_value());
  auto cancelled = pool_->cancel(stranger, "exec-1");
  ASSERT_FALSE(cancelled.has_value());
  EXPECT_EQ(cancelled.error().code, ErrorCode::kEnvironmentGone);
  EXPECT_FALSE(pool_->find("not-an-id").has_value());
}

TEST_F(NodePoolTest, ADownNodesEnvironmentsAreUnavailableTheOthersWork) {
  makePool({{"node-a", 0}, {"node-b", 0}});
  auto a = provision("ra");
  auto b = provision("rb");
  ASSERT_EQ(nodeOf(a), "node-a");
  nodes_[0]->answering = false;
  EXPECT_EQ(pool_->refresh(), 1U);
  auto health = pool_->nodes();
  ASSERT_EQ(health.size(), 2U);
  EXPECT_FALSE(health[0].up);
  EXPECT_THAT(health[0].problem, HasSubstr("does not answer"));
  EXPECT_TRUE(health[1].up);
  ASSERT_EQ(log_.size(), 1U);
  EXPECT_THAT(log_[0], HasSubstr("node-a"));
  EXPECT_THAT(log_[0], HasSubstr("is down"));
  // Found as last seen, so that the call answers ExecutionUnavailable.
  EXPECT_TRUE(pool_->find(a.environment_id).has_value());
  auto executed = pool_->execute(a, echo("x"));
  ASSERT_FALSE(executed.has_value());
  EXPECT_EQ(executed.error().code, ErrorCode::kExecutionUnavailable);
  EXPECT_THAT(executed.error().message(), HasSubstr("is down"));
  auto destroyed = pool_->destroy(a);
  ASSERT_FALSE(destroyed.has_value());
  EXPECT_EQ(destroyed.error().code, ErrorCode::kExecutionUnavailable);
  // The other node keeps working, and takes the new environments.
  auto out = pool_->execute(b, echo("still"));
  ASSERT_TRUE(out.has_value()) << out.error().message();
  EXPECT_EQ(out->stdout_data, "still\n");
  EXPECT_EQ(nodeOf(provision("rc")), "node-b");
  EXPECT_EQ(pool_->liveCount(), 2U);  // the up member's
  // Back up: its environment works again.
  nodes_[0]->answering = true;
  EXPECT_EQ(pool_->refresh(), 2U);
  EXPECT_THAT(log_.back(), HasSubstr("is up"));
  EXPECT_TRUE(pool_->execute(a, echo("back")).has_value());
  pool_->destroyAll();
  EXPECT_EQ(pool_->liveCount(), 0U);
}

TEST_F(NodePoolTest, ANodeThatDiedSinceTheLastRefreshIsFoundDown) {
  makePool({{"node-a", 0}, {"node-b", 0}});
  auto a = provision("ra");
  auto b = provision("rb");
  ASSERT_TRUE(pool_->find(a.environment_id).has_value());
  // node-a stops answering (its environments no longer found), no refresh.
  ASSERT_TRUE(nodes_[0]->node->destroy(a).has_value());
  nodes_[0]->answering = false;
  ASSERT_TRUE(pool_->find(a.environment_id).has_value()) << "as last seen";
  EXPECT_FALSE(pool_->nodes()[0].up);
  EXPECT_THAT(log_.back(), HasSubstr("is down"));
  auto executed = pool_->execute(a, echo("x"));
  ASSERT_FALSE(executed.has_value());
  EXPECT_EQ(executed.error().code, ErrorCode::kExecutionUnavailable);
  // A node that answers and no longer holds one: gone, and it stays up.
  ASSERT_TRUE(nodes_[1]->node->destroy(b).has_value());
  EXPECT_FALSE(pool_->find(b.environment_id).has_value());
  EXPECT_TRUE(pool_->nodes()[1].up);
}

TEST_F(NodePoolTest, ANodeCallingItselfByAnotherNameIsRefused) {
  makePool({{"node-a", 0}, {"node-b", 0}});
  nodes_[1]->reported_name = "node-x";
  EXPECT_EQ(pool_->refresh(), 1U);
  auto health = pool_->nodes();
  EXPECT_FALSE(health[1].up);
  EXPECT_THAT(health[1].problem, HasSubstr("node-x"));
  ASSERT_FALSE(log_.empty());
  EXPECT_THAT(log_.back(), HasSubstr("node-x"));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(nodeOf(provision("r" + std::to_string(i))), "node-a");
  pool_->destroyAll();
}

TEST(NodePoolCreate, RefusesDuplicateAndInvalidNames) {
  TestNode a("node-a", 0);
  TestNode again("node-a", 0);
  auto twice = NodePool::create({a.member(), again.member()});
  ASSERT_FALSE(twice.has_value());
  EXPECT_EQ(twice.error().code, ErrorCode::kConfigurationError);
  EXPECT_THAT(twice.error().message(), HasSubstr("there twice"));
  TestNode bad("Bad_Name", 0);
  auto invalid = NodePool::create({bad.member()});
  ASSERT_FALSE(invalid.has_value());
  EXPECT_THAT(invalid.error().message(), HasSubstr("Bad_Name"));
  // Before the first refresh nothing is up.
  auto pool = NodePool::create({a.member()});
  ASSERT_TRUE(pool.has_value());
  EXPECT_FALSE((*pool)->nodes()[0].up);
  EXPECT_EQ((*pool)->provision(specFor("r")).error().code, ErrorCode::kExecutionUnavailable);
}

RC_GTEST_PROP(NodePoolProperty, NeverOverCapacityAndEveryEnvironmentReachable, ()) {
  const auto count = *rc::gen::inRange<std::size_t>(1, 4);
  std::vector<std::unique_ptr<TestNode>> nodes;
  std::vector<PoolMember> members;
  for (std::size_t i = 0; i < count; ++i) {
    nodes.push_back(std::make_unique<TestNode>("node-" + std::to_string(i),
                                               *rc::gen::inRange<std::size_t>(0, 4)));
    members.push_back(nodes.back()->member());
  }
  auto pool = NodePool::create(std::move(members));
  RC_ASSERT(pool.has_value());
  RC_ASSERT((*pool)->refresh() == count);
  const bool unbounded =
      std::any_of(nodes.begin(), nodes.end(), [](const auto& n) { return n->capacity == 0; });
  std::size_t total_capacity = 0;
  for (const auto& n : nodes) total_capacity += n->capacity;

  std::vector<EnvironmentHandle> held;
  const auto steps = *rc::gen::inRange(1, 30);
  for (int step = 0; step < steps; ++step) {
    const bool destroy = !held.empty() && *rc::gen::arbitrary<bool>();
    if (destroy) {
      const auto at = *rc::gen::inRange<std::size_t>(0, held.size());
      RC_ASSERT((*pool)->destroy(held[at]).has_value());
      held.erase(held.begin() + static_cast<std::ptrdiff_t>(at));
    } else {
      auto handle = (*pool)->provision(specFor("r" + std::to_string(step)));
      const bool room = unbounded || held.size() < total_capacity;
      RC_ASSERT(handle.has_value() == room);
      if (handle) {
        held.push_back(*handle);
      } else {
        RC_ASSERT(handle.error().code == ErrorCode::kEnvironmentBusy);
      }
    }
    for (const auto& n : nodes)
      if (n->capacity > 0) RC_ASSERT(n->node->liveCount() <= n->capacity);
    RC_ASSERT((*pool)->liveCount() == held.size());
  }
  for (const auto& handle : held) {
    const auto found = (*pool)->find(handle.environment_id);
    RC_ASSERT(found.has_value());
    RC_ASSERT(found->handle.environment_id == handle.environment_id);
    auto out = (*pool)->execute(handle, echo("ok"));
    RC_ASSERT(out.has_value());
    RC_ASSERT(out->stdout_data == std::string("ok\n"));
  }
  (*pool)->destroyAll();
  RC_ASSERT((*pool)->liveCount() == 0U);
}

}  // namespace
}  // namespace airlock::gateway
