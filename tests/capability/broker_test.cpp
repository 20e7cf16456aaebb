// The broker's checks and lifecycle (broker.h; spec 001 "Invariants"):
// token, deadline, policy, ceilings, cancellation, audit, outcome. No
// sandbox: capabilities here are test handlers.
#include "airlock/capability/broker/broker.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/stat.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "airlock/artifacts/memory_repository.h"
#include "airlock/capability/broker/capabilities.h"
#include "broker_test_support.h"

namespace airlock::testing {
namespace {

using capability::BootShape;
using capability::BrokerSession;
using capability::CallContext;
using capability::CapabilityTable;
using capability::CeilingClass;
using capability::SessionOptions;
using capability::wire::Answer;
using capability::wire::Frame;
using capability::wire::Refusal;
using capability::wire::Value;
namespace wire = capability::wire;

struct Recorder {
  std::mutex mu;
  std::vector<std::string> lines;
  std::function<void(std::string_view)> sink() {
    return [this](std::string_view l) {
      std::lock_guard lk(mu);
      lines.emplace_back(l);
    };
  }
  std::vector<nlohmann::json> parsed() {
    std::lock_guard lk(mu);
    std::vector<nlohmann::json> out;
    for (auto& l : lines) out.push_back(nlohmann::json::parse(l));
    return out;
  }
};

// Set by the slow handler: it started, and whether it saw its cancel fire.
struct SlowProbe {
  std::atomic<int> started{0};
  std::atomic<int> cancelled{0};
};

std::shared_ptr<CapabilityTable> testTable(std::shared_ptr<SlowProbe> probe) {
  auto t = std::make_shared<CapabilityTable>();
  t->add("test.echo", CeilingClass::kNone, [](const CallContext& c) -> Answer { return c.args; });
  t->add("proc.run", CeilingClass::kSpawn,
         [](const CallContext&) -> Answer { return Value::string("ran"); });
  t->add("test.slow", CeilingClass::kNone, [probe](const CallContext& c) -> Answer {
    probe->started.fetch_add(1);
    pollfd p{c.cancel.pollFd(), POLLIN, 0};
    if (::poll(&p, 1, 30000) == 1) probe->cancelled.fetch_add(1);
    return Value::string("slow done");
  });
  return t;
}

class BrokerTest : public ::testing::Test {
 protected:
  std::unique_ptr<BrokerSession> open(BootShape shape = BootShape::kRun, TempCapDir* dir = nullptr,
                                      std::shared_ptr<CapabilityTable> table = nullptr) {
    SessionOptions o;
    o.execution_id = "exec-test";
    o.shape = shape;
    o.policy.allowed = {"test.*", "proc.run", "notes.*"};
    o.audit = audit_.sink();
    auto s = BrokerSession::open((dir ? dir : &dir_)->channel(), std::move(o),
                                 table ? table : testTable(probe_));
    EXPECT_TRUE(s.has_value()) << (s ? "" : s.error().message());
    return s ? std::move(*s) : nullptr;
  }
  std::string socketPath(TempCapDir* dir = nullptr) {
    return (dir ? dir : &dir_)->path() + "/cap.sock";
  }

  TempCapDir dir_;
  Recorder audit_;
  std::shared_ptr<SlowProbe> probe_ = std::make_shared<SlowProbe>();
};

TEST_F(BrokerTest, TokenFileAndSocketAreCreatedWithTheDirectoryOwnerAndPrivateModes) {
  auto s = open();
  struct stat st {};
  ASSERT_EQ(::stat((dir_.path() + "/token").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0400u);
  ASSERT_EQ(::stat((dir_.path() + "/cap.sock").c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  std::string token;
  {
    FILE* f = std::fopen((dir_.path() + "/token").c_str(), "r");
    ASSERT_NE(f, nullptr);
    char buf[128];
    token.assign(buf, std::fread(buf, 1, sizeof buf, f));
    std::fclose(f);
  }
  EXPECT_EQ(token, s->token());
  EXPECT_EQ(token.size(), 64u);
  s->finish();
  EXPECT_NE(::access((dir_.path() + "/token").c_str(), F_OK), 0) << "finish removes the token file";
  EXPECT_NE(::access((dir_.path() + "/cap.sock").c_str(), F_OK), 0) << "finish removes the socket";
}

TEST_F(BrokerTest, GoodTokenIsServedAndForeignTokenRefused) {
  auto s = open();
  WireClient c(socketPath());
  ASSERT_TRUE(c.connected());
  c.call(s->token(), "test.echo", Value::string("hi"));
  auto r = c.result();
  ASSERT_TRUE(r);
  ASSERT_TRUE(std::holds_alternative<Value>(r->second));
  EXPECT_EQ(std::get<Value>(r->second), Value::string("hi"));

  std::string foreign = s->token();
  foreign[0] = foreign[0] == 'a' ? 'b' : 'a';
  c.call(foreign, "test.echo", Value::string("hi"));
  r = c.result();
  ASSERT_TRUE(r);
  EXPECT_EQ(refusalCode(r->second), "bad_token");
  c.call("", "test.echo", Value::nil());
  r = c.result();
  ASSERT_TRUE(r);
  EXPECT_EQ(refusalCode(r->second), "bad_token");
}

TEST_F(BrokerTest, TokenOfAnotherExecutionIsRefused) {
  TempCapDir other_dir;
  auto a = open();
  auto b = open(BootShape::kRun, &other_dir);
  WireClient c(socketPath(&other_dir));
  c.call(a->token(), "test.echo", Value::nil());
  auto r = c.result();
  ASSERT_TRUE(r);
  EXPECT_EQ(refusalCode(r->second), "bad_token");
}

TEST_F(BrokerTest, TokenReplayedFromAFinishedExecutionIsRefused) {
  auto first = open();
  const std::string old_token = first->token();
  first->finish();
  auto second = open();  // same capability directory, the next execution
  ASSERT_NE(second->token(), old_token);
  WireClient c(socketPath());
  ASSERT_TRUE(c.connected());
  c.call(old_token, "test.echo", Value::nil());
  auto r = c.result();
  ASSERT_TRUE(r);
  EXPECT_EQ(refusalCode(r->second), "bad_token");
  c.call(second->token(), "test.echo", Value::nil());
  r = c.result();
  ASSERT_TRUE(r);
  EXPECT_TRUE(std::holds_alternative<Value>(r->second));
}

TEST_F(BrokerTest, CallWithNoTimeLeftIsRefused) {
  auto s = open();
  WireClient c(socketPath());
  c.call(s->token(), "test.echo", Value::nil(), 0);
  auto r = c.result();
  ASSERT_TRUE(r);
  EXPECT_EQ(refusalCode(r->second), "deadline_exceeded");
}

TEST_F(BrokerTest, CallPastItsDeadlineIsRefusedAndItsEffectCancelled) {
  auto s = open();
  WireClient c(socketPath());
  const auto before = std::chrono::steady_clock::now();
  c.call(s->token(), "test.slow", Value::nil(), 200);
  auto r = c.result();
  ASSERT_TRUE(r);
  EXPECT_EQ(refusalCode(r->second), "deadline_exceeded");
  EXPECT_LT(std::chrono::steady_clock::now() - before, std::chrono::seconds(10));
  EXPECT_EQ(probe_->cancelled.load(), 1) << "the handler saw its cancel fire";
}

TEST_F(BrokerTest, PolicyRefusesACapabilityNotAllowed) {
  auto t = testTable(probe_);
  t->add("secret.read", CeilingClass::kNone,
         [](const CallContext&) -> Answer { return Value::string("x"); });
  auto s = open(BootShape::kRun, nullptr, t);
  WireClient c(socketPath());
  c.call(s->token(), "secret.read", Value::nil());
  auto r = c.result();
  ASSERT_TRUE(r);
  EXPECT_EQ(refusalCode(r->second), "denied");
  EXPECT_NE(refusalMessage(r->second).find("secret.read"), std::string::npos);
}

TEST_F(BrokerTest, UnknownCapabilityAndUnroutedPlatformModulesAreRefusedByName) {
  SessionOptions o;
  o.policy.allowed = {"*"};
  auto s = BrokerSession::open(dir_.channel(), std::move(o), testTable(probe_));
  ASSERT_TRUE(s);
  WireClient c(socketPath());
  c.call((*s)->token(), "test.nope", Value::nil());
  auto r = c.result();
  ASSERT_TRUE(r);
  EXPECT_EQ(refusalCode(r->second), "unknown_capability");
  c.call((*s)->token(), "strand.spawn", Value::nil());
  r = c.result();
  ASSERT_TRUE(r);
  EXPECT_EQ(refusalCode(r->second), "unavailable");
  EXPECT_NE(refusalMessage(r->second).find("strand.spawn"), std::string::npos);
}

TEST_F(BrokerTest, PlatformRouteServesItsModule) {
  auto t = testTable(probe_);
  t->addModuleRoute("strand", [](const CallContext& c) -> Answer {
    return Value::string(std::string(c.capability));
  });
  SessionOptions o;
  o.policy.allowed = {"strand.*"};
  auto s = BrokerSession::open(dir_.channel(), std::move(o), t);
  ASSERT_TRUE(s);
  WireClient c(socketPath());
  c.call((*s)->token(), "strand.roster", Value::nil());
  auto r = c.result();
  ASSERT_TRUE(r);
  ASSERT_TRUE(std::holds_alternative<Value>(r->second));
  EXPECT_EQ(std::get<Value>(r->second), Value::string("strand.roster"));
}

TEST_F(BrokerTest, The33rdSpawnIsRefusedNamingTheCeiling) {
  auto s = open();
  WireClient c(socketPath());
  for (int i = 0; i < 32; ++i) {
    c.call(s->token(), "proc.run", Value::nil());
    auto r = c.result();
    ASSERT_TRUE(r);
    ASSERT_TRUE(std::holds_alternative<Value>(r->second))
        << "call " << i + 1 << ": " << refusalMessage(r->second);
  }
  c.call(s->token(), "proc.run", Value::nil());
  auto r = c.result();
  ASSERT_TRUE(r);
  EXPECT_EQ(refusalCode(r->second), "spawn_ceiling_reached");
  EXPECT_EQ(refusalMessage(r->second), "ceiling spawn=32 reached");
}

TEST_F(BrokerTest, NotesCeilingsNameTheirClass) {
  auto table = capability::makeSandboxCapabilities(capability::SandboxServices{});
  auto s = open(BootShape::kRun, nullptr, table);
  WireClient c(socketPath());
  for (int i = 0; i < 64; ++i) {
    c.call(s->token(), "notes.list", Value::nil());
    auto r = c.result();
    ASSERT_TRUE(r && std::holds_alternative<Value>(r->second));
  }
  c.call(s->token(), "notes.get", Value::map({{"key", Value::string("k")}}));
  auto r = c.result();
  ASSERT_TRUE(r);
  EXPECT_EQ(refusalCode(r->second), "admission_ceiling_reached");
  EXPECT_EQ(refusalMessage(r->second), "ceiling notes=64 reached");
}

TEST_F(BrokerTest, NotesPutGetListRoundTrip) {
  auto table = capability::makeSandboxCapabilities(capability::SandboxServices{});
  auto s = open(BootShape::kRun, nullptr, table);
  WireClient c(socketPath());
  auto value =
      Value::map({{"n", Value::integer(-3)}, {"list", Value::array({Value::boolean(true)})}});
  c.call(s->token(), "notes.put", Value::map({{"key", Value::string("a/b")}, {"value", value}}));
  auto r = c.result();
  ASSERT_TRUE(r && std::holds_alternative<Value>(r->second)) << refusalMessage(r->second);
  c.call(s->token(), "notes.get", Value::map({{"key", Value::string("a/b")}}));
  r = c.result();
  ASSERT_TRUE(r && std::holds_alternative<Value>(r->second));
  EXPECT_EQ(std::get<Value>(r->second), value);
  c.call(s->token(), "notes.list", Value::map({{"prefix", Value::string("a/")}}));
  r = c.result();
  ASSERT_TRUE(r && std::holds_alternative<Value>(r->second));
  EXPECT_EQ(std::get<Value>(r->second), Value::array({Value::string("a/b")}));
  c.call(s->token(), "notes.put",
         Value::map({{"key", Value::string("bin")}, {"value", Value::bytes("x")}}));
  r = c.result();
  ASSERT_TRUE(r);
  EXPECT_EQ(refusalCode(r->second), "bad_request") << "bytes are not JSON-shaped";
  c.call(s->token(), "notes.get", Value::map({{"key", Value::string("missing")}}));
  r = c.result();
  ASSERT_TRUE(r);
  EXPECT_EQ(refusalCode(r->second), "not_found");
}

// Over a metadata repository the notes are the run's, stored as JSON text
// that reads back as the same value (integers, floats, nesting), written by
// the environment and expiring after the retention; a run holds at most
// kNotesListMax notes (a put of a new key past it is too_large, replacing
// one is not).
TEST_F(BrokerTest, RepositoryNotesRoundTripAndARunsNotesAreBounded) {
  artifacts::MemoryArtifactRepository repository;
  const Timestamp now = Timestamp(std::chrono::milliseconds(1'700'000'000'000));
  capability::SandboxServices services;
  services.notes = gateway::NoteServices{
      &repository, "t1", "r1", "env-1", std::chrono::hours(1), [now] { return now; }};
  auto s = open(BootShape::kRun, nullptr, capability::makeSandboxCapabilities(services));
  WireClient c(socketPath());
  const Value value = Value::map({{"n", Value::integer(-3)},
                                  {"big", Value::unsignedInteger(18'000'000'000'000'000'000ULL)},
                                  {"f", Value::floating(2.5)},
                                  {"list", Value::array({Value::boolean(true), Value::nil()})}});
  c.call(s->token(), "notes.put", Value::map({{"key", Value::string("plan")}, {"value", value}}));
  auto r = c.result();
  ASSERT_TRUE(r && std::holds_alternative<Value>(r->second)) << refusalMessage(r->second);
  auto stored = repository.findNote("t1", "r1", "plan");
  ASSERT_TRUE(stored && *stored);
  EXPECT_EQ((*stored)->written_by, "env-1");
  EXPECT_EQ((*stored)->expires_at, now + std::chrono::hours(1));
  c.call(s->token(), "notes.get", Value::map({{"key", Value::string("plan")}}));
  r = c.result();
  ASSERT_TRUE(r && std::holds_alternative<Value>(r->second)) << refusalMessage(r->second);
  ASSERT_EQ(std::get<Value>(r->second).asMap()->size(), 4u);
  EXPECT_EQ(std::get<Value>(r->second), value);

  for (std::size_t i = 1; i < gateway::kNotesListMax; ++i)
    ASSERT_TRUE(repository.putNote("t1", "r1",
                                   artifacts::RunNote{"k" + std::to_string(i), "1", "env-0", now,
                                                      now + std::chrono::hours(1)}));
  c.call(s->token(), "notes.put",
         Value::map({{"key", Value::string("one-more")}, {"value", Value::integer(1)}}));
  r = c.result();
  ASSERT_TRUE(r);
  EXPECT_EQ(refusalCode(r->second), "too_large");
  c.call(s->token(), "notes.put",
         Value::map({{"key", Value::string("plan")}, {"value", Value::integer(2)}}));
  r = c.result();
  ASSERT_TRUE(r && std::holds_alternative<Value>(r->second)) << "replacing a note is not a new one";
  c.call(s->token(), "notes.put",
         Value::map(
             {{"key", Value::string(std::string("nul\0key", 7))}, {"value", Value::integer(2)}}));
  r = c.result();
  ASSERT_TRUE(r);
  EXPECT_EQ(refusalCode(r->second), "bad_request");
}

TEST_F(BrokerTest, CancelFrameCancelsTheEffect) {
  auto s = open();
  WireClient c(socketPath());
  const auto id = c.call(s->token(), "test.slow", Value::nil(), 60000);
  for (int i = 0; i < 2000 && probe_->started.load() == 0; ++i) ::usleep(1000);
  ASSERT_EQ(probe_->started.load(), 1);
  c.send(Frame{id, wire::Cancel{}});
  auto r = c.result();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->first, id);
  EXPECT_EQ(refusalCode(r->second), "cancelled");
  EXPECT_EQ(probe_->cancelled.load(), 1);
}

TEST_F(BrokerTest, DroppedConnectionCancelsTheEffect) {
  auto s = open();
  {
    WireClient c(socketPath());
    c.call(s->token(), "test.slow", Value::nil(), 60000);
    for (int i = 0; i < 2000 && probe_->started.load() == 0; ++i) ::usleep(1000);
    ASSERT_EQ(probe_->started.load(), 1);
  }  // the program dies: its end of the socket closes
  EXPECT_TRUE(s->waitForConnectionsClosed(std::chrono::seconds(20)));
  EXPECT_EQ(probe_->cancelled.load(), 1);
  auto lines = audit_.parsed();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["verdict"], "cancelled");
  EXPECT_EQ(lines[0]["code"], "disconnected");
}

TEST_F(BrokerTest, OneAuditLinePerCallWithoutTokenOrArguments) {
  auto s = open();
  WireClient c(socketPath());
  const std::string secret_arg = "an-argument-value-that-must-not-be-logged";
  c.call(s->token(), "test.echo", Value::string(secret_arg));
  ASSERT_TRUE(c.result());
  c.call("wrong", "test.echo", Value::nil());
  ASSERT_TRUE(c.result());
  c.call(s->token(), "nope.nope", Value::nil());
  ASSERT_TRUE(c.result());
  auto lines = audit_.parsed();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]["cap"], "test.echo");
  EXPECT_EQ(lines[0]["verdict"], "ok");
  EXPECT_GT(lines[0]["request_bytes"].get<int>(), static_cast<int>(secret_arg.size()));
  EXPECT_GT(lines[0]["response_bytes"].get<int>(), static_cast<int>(secret_arg.size()));
  EXPECT_TRUE(lines[0]["duration_us"].is_number());
  EXPECT_EQ(lines[0]["execution"], "exec-test");
  EXPECT_EQ(lines[1]["verdict"], "refused");
  EXPECT_EQ(lines[1]["code"], "bad_token");
  EXPECT_EQ(lines[2]["code"], "denied");
  std::lock_guard lk(audit_.mu);
  // The fields in broker.h's order, written by hand.
  EXPECT_EQ(audit_.lines[0].rfind("{\"ts_ms\":", 0), 0u) << audit_.lines[0];
  EXPECT_NE(
      audit_.lines[0].find(
          ",\"execution\":\"exec-test\",\"call_id\":1,\"cap\":\"test.echo\",\"verdict\":\"ok\","
          "\"code\":\"\",\"duration_us\":"),
      std::string::npos)
      << audit_.lines[0];
  for (const auto& l : audit_.lines) {
    EXPECT_EQ(l.find(s->token()), std::string::npos);
    EXPECT_EQ(l.find(secret_arg), std::string::npos);
    EXPECT_EQ(l.find('\n'), std::string::npos);
  }
}

TEST_F(BrokerTest, InvalidCapCallIsAnsweredBadRequestAndTheChannelStaysOpen) {
  auto s = open();
  WireClient c(socketPath());
  // A cap_call whose deadline_ms is a string.
  Value env = Value::map({{"v", Value::integer(1)},
                          {"id", Value::integer(7)},
                          {"kind", Value::string("cap_call")},
                          {"body", Value::map({{"token", Value::bytes(s->token())},
                                               {"cap", Value::string("test.echo")},
                                               {"args", Value::nil()},
                                               {"deadline_ms", Value::string("soon")}})}});
  std::string payload;
  ASSERT_TRUE(wire::encodeValue(env, payload));
  std::string framed(4, '\0');
  framed[0] = static_cast<char>(payload.size() >> 24);
  framed[1] = static_cast<char>(payload.size() >> 16);
  framed[2] = static_cast<char>(payload.size() >> 8);
  framed[3] = static_cast<char>(payload.size());
  c.sendRaw(framed + payload);
  auto r = c.result();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->first, 7u);
  EXPECT_EQ(refusalCode(r->second), "bad_request");
  c.call(s->token(), "test.echo", Value::integer(1));
  r = c.result();
  ASSERT_TRUE(r);
  EXPECT_TRUE(std::holds_alternative<Value>(r->second));
}

TEST_F(BrokerTest, FirstOutcomeWinsAndASecondIsNoted) {
  auto s = open();
  {
    WireClient c(socketPath());
    c.send(Frame{0, wire::Outcome{wire::Completed{Value::integer(42)}}});
    c.send(Frame{0, wire::Outcome{wire::Errored{"late", Value::nil()}}});
  }
  ASSERT_TRUE(s->waitForConnectionsClosed(std::chrono::seconds(20)));
  auto report = s->outcome();
  ASSERT_TRUE(report.outcome);
  EXPECT_EQ(*report.outcome, (wire::Outcome{wire::Completed{Value::integer(42)}}));
  EXPECT_EQ(report.problem, "more than one outcome frame");
}

TEST_F(BrokerTest, FinishRevokesTheTokenForOpenConnections) {
  auto s = open();
  WireClient c(socketPath());
  c.call(s->token(), "test.echo", Value::nil());
  ASSERT_TRUE(c.result());
  const std::string token = s->token();
  s->finish();
  // The connection is closed by finish, and no new one can be made.
  EXPECT_FALSE(c.result(std::chrono::seconds(2)));
  WireClient again(socketPath());
  EXPECT_FALSE(again.connected());
}

// Two worker calls decoded from one read each get a worker of their own:
// the second does not queue behind the first, which here waits for it (as
// job.wait may wait for the job.send sent after it). Before the pool counted
// queued tasks against idle workers, one idle worker took both in turn and
// the first call ran into its deadline.
TEST_F(BrokerTest, CallsDecodedFromOneReadDoNotWaitBehindEachOther) {
  struct Gate {
    std::mutex mu;
    std::condition_variable cv;
    bool opened = false;
  };
  auto gate = std::make_shared<Gate>();
  auto t = std::make_shared<CapabilityTable>();
  t->add("test.echo", CeilingClass::kNone, [](const CallContext& c) -> Answer { return c.args; });
  t->add("test.wait", CeilingClass::kNone, [gate](const CallContext& c) -> Answer {
    std::unique_lock lk(gate->mu);
    return Value::boolean(gate->cv.wait_until(lk, c.deadline, [&] { return gate->opened; }));
  });
  t->add("test.open", CeilingClass::kNone, [gate](const CallContext&) -> Answer {
    {
      std::lock_guard lk(gate->mu);
      gate->opened = true;
    }
    gate->cv.notify_all();
    return Value::boolean(true);
  });
  // Whether the worker is already idle when the pair arrives is up to the
  // scheduler: many rounds, stopping at the first that waited.
  for (int round = 0; round < 40; ++round) {
    {
      std::lock_guard lk(gate->mu);
      gate->opened = false;
    }
    auto s = open(BootShape::kRun, nullptr, t);
    ASSERT_TRUE(s);
    WireClient c(socketPath());
    // One worker, which goes idle after answering.
    c.call(s->token(), "test.echo", Value::nil());
    ASSERT_TRUE(c.result());
    auto wait =
        wire::encodeFrame(Frame{2, wire::CapCall{s->token(), "test.wait", Value::nil(), 2000}});
    auto opener =
        wire::encodeFrame(Frame{3, wire::CapCall{s->token(), "test.open", Value::nil(), 2000}});
    ASSERT_TRUE(wait && opener);
    c.sendRaw(*wait + *opener);
    std::map<std::uint64_t, Answer> answers;
    for (int i = 0; i < 2; ++i) {
      auto r = c.result();
      ASSERT_TRUE(r) << "round " << round;
      answers.emplace(r->first, r->second);
    }
    ASSERT_EQ(answers.count(2), 1u);
    ASSERT_EQ(refusalCode(answers.at(2)), "(ok)")
        << "round " << round << ": " << refusalMessage(answers.at(2));
    ASSERT_EQ(std::get<Value>(answers.at(2)), Value::boolean(true)) << "round " << round;
  }
}

// An inline call (notes.*) is not entered in in_flight, but an id already in
// flight on a worker is still refused; and a cancel frame for an inline call
// that has answered changes nothing.
TEST_F(BrokerTest, InlineCallWithAnIdInFlightOnAWorkerIsRefused) {
  auto table = testTable(probe_);
  table->add(
      "notes.get", CeilingClass::kNotes,
      [](const CallContext&) -> Answer { return Value::string("note"); },
      capability::CallPlacement::kInline);
  auto s = open(BootShape::kRun, nullptr, table);
  WireClient c(socketPath());
  c.send(Frame{5, wire::CapCall{s->token(), "test.slow", Value::nil(), 60000}});
  for (int i = 0; i < 2000 && probe_->started.load() == 0; ++i) ::usleep(1000);
  ASSERT_EQ(probe_->started.load(), 1);
  c.send(Frame{5, wire::CapCall{s->token(), "notes.get", Value::nil(), 60000}});
  auto r = c.result();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->first, 5u);
  EXPECT_EQ(refusalCode(r->second), "bad_request");
  c.send(Frame{6, wire::CapCall{s->token(), "notes.get", Value::nil(), 60000}});
  r = c.result();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->first, 6u);
  EXPECT_EQ(refusalCode(r->second), "(ok)");
  c.send(Frame{6, wire::Cancel{}});
  c.send(Frame{7, wire::CapCall{s->token(), "notes.get", Value::nil(), 60000}});
  r = c.result();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->first, 7u);
  EXPECT_EQ(refusalCode(r->second), "(ok)") << "the connection's inline token was not fired";
  c.send(Frame{5, wire::Cancel{}});
  r = c.result();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->first, 5u);
  EXPECT_EQ(refusalCode(r->second), "cancelled");
}

// The audit line is JSON whatever the strings in it hold, and
// request_bytes is the frame's size on the stream.
TEST_F(BrokerTest, AuditLineEscapesItsStringsAndCountsTheFrame) {
  SessionOptions o;
  o.execution_id = "exec \"quoted\" \\ tab\t nl\n bad\xff utf8 \xc3\xa9";
  o.policy.allowed = {"test.*"};
  o.audit = audit_.sink();
  auto opened = BrokerSession::open(dir_.channel(), std::move(o), testTable(probe_));
  ASSERT_TRUE(opened);
  auto& s = *opened;
  WireClient c(socketPath());
  const std::string odd_cap = "test.\"odd\"\\name\n\xc3\xa9";
  const Frame call{1, wire::CapCall{s->token(), odd_cap, Value::nil(), 10000}};
  const auto encoded = wire::encodeFrame(call);
  ASSERT_TRUE(encoded);
  c.send(call);
  auto r = c.result();
  ASSERT_TRUE(r);
  EXPECT_EQ(refusalCode(r->second), "unknown_capability");
  auto lines = audit_.parsed();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["cap"], odd_cap);
  EXPECT_EQ(lines[0]["execution"], "exec \"quoted\" \\ tab\t nl\n bad\xef\xbf\xbd utf8 \xc3\xa9");
  EXPECT_EQ(lines[0]["call_id"], 1);
  EXPECT_EQ(lines[0]["verdict"], "refused");
  EXPECT_EQ(lines[0]["code"], "unknown_capability");
  EXPECT_EQ(lines[0]["request_bytes"].get<std::size_t>(), encoded->size());
  EXPECT_GT(lines[0]["ts_ms"].get<std::int64_t>(), 1700000000000);
  std::lock_guard lk(audit_.mu);
  EXPECT_EQ(audit_.lines[0].find('\n'), std::string::npos);
}

// What a channel was asked to do (RecordingChannel), kept by the test.
struct ChannelLog {
  std::vector<std::string> written;
  std::vector<std::string> removed;
  unsigned token_mode = 0;
  bool token_for_sandbox_user = false;
  std::string token;
};

// A channel that records its file writes and cannot listen.
class RecordingChannel final : public CapabilityChannel {
 public:
  explicit RecordingChannel(std::shared_ptr<ChannelLog> log) : log_(std::move(log)) {}
  Result<void> writeFile(std::string_view path, std::string_view contents, unsigned mode,
                         CapabilityFileOwner owner) override {
    log_->written.emplace_back(path);
    if (path == capability::kTokenFileName) {
      log_->token = std::string(contents);
      log_->token_mode = mode;
      log_->token_for_sandbox_user = owner == CapabilityFileOwner::kSandboxUser;
    }
    return {};
  }
  Result<void> removeFile(std::string_view path) override {
    log_->removed.emplace_back(path);
    return {};
  }
  Result<void> listen() override {
    return fail(ErrorCode::kExecutionUnavailable, "this channel has no socket");
  }
  CapabilityWait waitForConnection(const CancelToken& /*stop*/) override {
    return CapabilityWait::kClosed;
  }
  std::unique_ptr<CapabilityConnection> accept() override { return nullptr; }
  bool connectionQueued() override { return false; }
  void close() noexcept override {}

 private:
  std::shared_ptr<ChannelLog> log_;
};

TEST(BrokerOpenTest, WritesTheTokenThroughTheChannelAndTakesItBackWhenItCannotListen) {
  auto log = std::make_shared<ChannelLog>();
  auto s = BrokerSession::open(std::make_unique<RecordingChannel>(log), SessionOptions{}, nullptr);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, ErrorCode::kExecutionUnavailable);
  EXPECT_NE(s.error().message().find("this channel has no socket"), std::string::npos)
      << s.error().message();
  EXPECT_EQ(log->written, std::vector<std::string>{"token"});
  EXPECT_EQ(log->token.size(), 64u);
  EXPECT_EQ(log->token_mode, 0400u);
  EXPECT_TRUE(log->token_for_sandbox_user);
  EXPECT_EQ(log->removed, std::vector<std::string>{"token"}) << "no token left behind";

  auto none = BrokerSession::open(nullptr, SessionOptions{}, nullptr);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, ErrorCode::kExecutionUnavailable);
}

TEST(PolicyTest, ExactNamesModuleWildcardsAndStar) {
  capability::Policy p;
  p.allowed = {"fs.*", "proc.run"};
  EXPECT_TRUE(p.allows("fs.read"));
  EXPECT_TRUE(p.allows("proc.run"));
  EXPECT_FALSE(p.allows("proc.runx"));
  EXPECT_FALSE(p.allows("fsx.read"));
  EXPECT_FALSE(p.allows("fs"));
  capability::Policy none;
  EXPECT_FALSE(none.allows("fs.read"));
  capability::Policy all;
  all.allowed = {"*"};
  EXPECT_TRUE(all.allows("anything.at.all"));
}

TEST(ConstantTimeEqualTest, ComparesBytes) {
  EXPECT_TRUE(capability::constantTimeEqual("abc", "abc"));
  EXPECT_FALSE(capability::constantTimeEqual("abc", "abd"));
  EXPECT_FALSE(capability::constantTimeEqual("abc", "ab"));
  EXPECT_TRUE(capability::constantTimeEqual("", ""));
}

}  // namespace
}  // namespace airlock::testing
