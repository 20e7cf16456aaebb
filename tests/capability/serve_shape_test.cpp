// The serving boot shape (spec 001 "cap/runtime.serve", "Invariants: one
// invocation at a time, and a crash is an answer"; broker.h invoke()): a
// Python extension served by airlock_cap.serve answers hook_calls one at a
// time: "busy" to a concurrent call, "crashed" after its handler raised (and
// goes on), "bad_kind" to an unknown kind; the working token works during
// its invocation only. The extension runs on the host here: this tests the
// guest library and the broker, not a sandbox.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>

#include "airlock/capability/broker/broker.h"
#include "broker_test_support.h"

extern char** environ;

namespace airlock::testing {
namespace {

using capability::BootShape;
using capability::BrokerSession;
using capability::CallContext;
using capability::CapabilityTable;
using capability::CeilingClass;
using capability::wire::Answer;
using capability::wire::Refusal;
using capability::wire::Value;

constexpr const char* kExtension = R"PY(
import airlock_cap as cap

stash = {}

def answer(inv, args, deadline_ms):
    if inv.name == "block":
        return cap.call("test.gate", None, 30000)
    if inv.name == "crash":
        raise RuntimeError("boom")
    if inv.name == "stash":
        stash["token"] = cap.channel().token
        return cap.call("test.echo", "stashed")
    if inv.name == "replay":
        cap.channel().token = stash["token"]
        try:
            cap.call("test.echo", "replayed")
            return "accepted"
        except cap.BadToken as e:
            return e.code
    return {"kind": inv.kind, "name": inv.name, "args": args}

cap.serve(answer)
)PY";

class ServeShapeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto table = std::make_shared<CapabilityTable>();
    table->add("test.echo", CeilingClass::kNone,
               [](const CallContext& c) -> Answer { return c.args; });
    table->add("test.gate", CeilingClass::kNone, [this](const CallContext& c) -> Answer {
      std::unique_lock lk(mu_);
      entered_ = true;
      cv_.notify_all();
      cv_.wait_until(lk, c.deadline, [&] { return released_; });
      return Value::string("unblocked");
    });
    capability::SessionOptions o;
    o.shape = BootShape::kServe;
    o.policy.allowed = {"test.*"};
    auto s = BrokerSession::open(dir_.channel(), std::move(o), table);
    ASSERT_TRUE(s) << s.error().message();
    session_ = std::move(*s);

    const std::string script = dir_.path() + "/extension.py";
    FILE* f = std::fopen(script.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(kExtension, f);
    std::fclose(f);
    std::vector<std::string> env_strings = {"AIRLOCK_CAP_SOCKET=" + dir_.path() + "/cap.sock",
                                            "AIRLOCK_CAP_TOKEN_FILE=" + dir_.path() + "/token",
                                            std::string("PYTHONPATH=") + AIRLOCK_GUEST_PYTHON_DIR,
                                            "LANG=C.UTF-8"};
    std::vector<char*> envp;
    for (auto& e : env_strings) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::string py = "/usr/bin/python3";
    std::string dash_b = "-B";
    char* argv[] = {py.data(), dash_b.data(), const_cast<char*>(script.c_str()), nullptr};
    ASSERT_EQ(::posix_spawn(&child_, py.c_str(), nullptr, nullptr, argv, envp.data()), 0);
    // The extension connects on start; an invocation before that is
    // refused, so wait for the serving connection.
    for (int i = 0; i < 10000; ++i) {
      auto r = session_->invoke("tool", "ping", Value::nil(), std::chrono::seconds(10));
      if (r) return;
      ::usleep(2000);
    }
    FAIL() << "the extension never connected";
  }
  void TearDown() override {
    if (session_) session_->finish();  // the extension sees its channel close and returns
    if (child_ > 0) {
      int status = 0;
      for (int i = 0; i < 5000 && ::waitpid(child_, &status, WNOHANG) == 0; ++i) ::usleep(2000);
      if (::waitpid(child_, &status, WNOHANG) == 0) {
        ::kill(child_, SIGKILL);
        ::waitpid(child_, &status, 0);
        ADD_FAILURE() << "the extension did not end when its channel closed";
      }
    }
  }
  Answer invoke(const std::string& hook, const std::string& name, Value args = Value::nil()) {
    auto r = session_->invoke(hook, name, args, std::chrono::seconds(30));
    EXPECT_TRUE(r) << (r ? "" : r.error().message());
    return r ? *r : Answer{Refusal{"(transport)", ""}};
  }

  TempCapDir dir_;
  std::unique_ptr<BrokerSession> session_;
  pid_t child_ = -1;
  std::mutex mu_;
  std::condition_variable cv_;
  bool entered_ = false;
  bool released_ = false;
};

TEST_F(ServeShapeTest, AnswersAnInvocationWithItsValue) {
  auto a = invoke("tool", "greet", Value::map({{"who", Value::string("x")}}));
  ASSERT_TRUE(std::holds_alternative<Value>(a)) << refusalCode(a);
  const Value& v = std::get<Value>(a);
  ASSERT_NE(v.find("name"), nullptr);
  EXPECT_EQ(*v.find("name"), Value::string("greet"));
  EXPECT_EQ(*v.find("kind"), Value::string("tool"));
}

TEST_F(ServeShapeTest, ASecondConcurrentInvocationIsAnsweredBusyAndTheFirstCompletes) {
  auto first = std::async(std::launch::async, [&] { return invoke("tool", "block"); });
  {
    std::unique_lock lk(mu_);
    ASSERT_TRUE(cv_.wait_for(lk, std::chrono::seconds(30), [&] { return entered_; }))
        << "the first invocation's handler reached the broker with its working token";
  }
  auto second = invoke("tool", "other");
  EXPECT_EQ(refusalCode(second), "busy");
  {
    std::lock_guard lk(mu_);
    released_ = true;
  }
  cv_.notify_all();
  auto a = first.get();
  ASSERT_TRUE(std::holds_alternative<Value>(a)) << refusalCode(a);
  EXPECT_EQ(std::get<Value>(a), Value::string("unblocked"));
  // The loop goes on.
  EXPECT_TRUE(std::holds_alternative<Value>(invoke("event", "after")));
}

TEST_F(ServeShapeTest, AHandlerCrashIsAnsweredCrashedAndTheLoopContinues) {
  auto a = invoke("tool", "crash");
  EXPECT_EQ(refusalCode(a), "crashed");
  EXPECT_NE(refusalMessage(a).find("RuntimeError: boom"), std::string::npos) << refusalMessage(a);
  auto b = invoke("tool", "fine");
  EXPECT_TRUE(std::holds_alternative<Value>(b)) << refusalCode(b);
}

TEST_F(ServeShapeTest, AnUnknownKindIsAnsweredBadKind) {
  EXPECT_EQ(refusalCode(invoke("cron", "x")), "bad_kind");
  EXPECT_TRUE(std::holds_alternative<Value>(invoke("tool", "x")));
}

TEST_F(ServeShapeTest, AWorkingTokenIsRevokedWhenItsInvocationEnds) {
  auto a = invoke("tool", "stash");
  ASSERT_TRUE(std::holds_alternative<Value>(a)) << refusalCode(a) << " " << refusalMessage(a);
  EXPECT_EQ(std::get<Value>(a), Value::string("stashed"))
      << "the token works during its invocation";
  auto b = invoke("tool", "replay");
  ASSERT_TRUE(std::holds_alternative<Value>(b)) << refusalCode(b);
  EXPECT_EQ(std::get<Value>(b), Value::string("bad_token")) << "and not after it";
}

TEST_F(ServeShapeTest, TheTokenFileIsNotAWorkingToken) {
  WireClient c(dir_.path() + "/cap.sock");
  ASSERT_TRUE(c.connected());
  c.call(session_->token(), "test.echo", Value::nil());
  auto r = c.result();
  ASSERT_TRUE(r);
  EXPECT_EQ(refusalCode(r->second), "bad_token");
}

}  // namespace
}  // namespace airlock::testing
