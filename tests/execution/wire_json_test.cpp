// The internal API's codec (port/wire_json.h): whatever is encoded decodes
// to the same value (rapidcheck over generated values), and decoding never
// throws and names the field it refuses.
#include "airlock/port/wire_json.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <map>
#include <string>
#include <vector>

#include "airlock/core/encoding.h"

namespace airlock {
namespace {

using json = nlohmann::json;

// Encoded, then decoded from the text: the value back.
template <class T>
Result<T> throughText(const T& value) {
  return wireFromJson<T>(json::parse(toJsonText(value)));
}

// Text fields that are not byte strings are UTF-8 on the wire.
std::string anyText() {
  return *rc::gen::container<std::string>(rc::gen::inRange<char>(' ', '~' + 1));
}

std::string anyBytes() {
  return *rc::gen::arbitrary<std::string>();
}

TerminalSize anyTerminal() {
  TerminalSize t;
  t.rows = *rc::gen::inRange<std::uint16_t>(1, kMaxTerminalCells + 1);
  t.columns = *rc::gen::inRange<std::uint16_t>(1, kMaxTerminalCells + 1);
  return t;
}

Timestamp anyTime() {
  return Timestamp(std::chrono::milliseconds(*rc::gen::inRange<std::int64_t>(0, 253402300799000)));
}

JobStreamSlice anySlice() {
  JobStreamSlice s;
  s.data = anyBytes();
  s.cursor = *rc::gen::arbitrary<std::uint64_t>();
  s.dropped = *rc::gen::arbitrary<std::uint64_t>();
  return s;
}

JobStreamSpill anySpill() {
  JobStreamSpill s;
  if (*rc::gen::arbitrary<bool>()) s.error = anyText();
  if (*rc::gen::arbitrary<bool>()) s.artifact_id = anyText();
  s.media_type = anyText();
  s.sha256 = anyText();
  s.size_bytes = *rc::gen::arbitrary<std::uint64_t>();
  s.dropped_bytes = *rc::gen::arbitrary<std::uint64_t>();
  return s;
}

bool sameSlice(const JobStreamSlice& a, const JobStreamSlice& b) {
  return a.data == b.data && a.cursor == b.cursor && a.dropped == b.dropped;
}
bool sameSpill(const JobStreamSpill& a, const JobStreamSpill& b) {
  return a.error == b.error && a.artifact_id == b.artifact_id && a.media_type == b.media_type &&
         a.sha256 == b.sha256 && a.size_bytes == b.size_bytes && a.dropped_bytes == b.dropped_bytes;
}

TEST(WireJson, ErrorsNodeStatusAndWorkspaceValuesRoundTrip) {
  EXPECT_TRUE(rc::check("Error", [] {
    Error e{static_cast<ErrorCode>(*rc::gen::inRange(0, 10)), 0, anyText()};
    auto back = throughText(e);
    RC_ASSERT(back.has_value());
    RC_ASSERT(back->code == e.code);
    RC_ASSERT(back->context == e.context);
  }));
  EXPECT_TRUE(rc::check("NodeStatus", [] {
    NodeStatus s{anyText(), *rc::gen::inRange<std::size_t>(0, 1U << 30),
                 *rc::gen::inRange<std::size_t>(0, 1U << 30)};
    auto back = throughText(s);
    RC_ASSERT(back.has_value());
    RC_ASSERT(*back == s);
  }));
  EXPECT_TRUE(rc::check("WorkspaceEntry and WorkspaceStat", [] {
    WorkspaceEntry e;
    e.name = anyBytes();
    e.type = static_cast<WorkspaceEntry::Type>(*rc::gen::inRange(0, 4));
    e.size_bytes = *rc::gen::inRange<std::int64_t>(0, std::int64_t{1} << 50);
    auto entry = throughText(e);
    RC_ASSERT(entry.has_value());
    RC_ASSERT(*entry == e);
    WorkspaceStat st;
    st.type = e.type;
    st.size_bytes = e.size_bytes;
    st.mode = *rc::gen::inRange<std::uint32_t>(0, 07777 + 1);
    st.mtime_ns = *rc::gen::arbitrary<std::int64_t>();
    auto stat = throughText(st);
    RC_ASSERT(stat.has_value());
    RC_ASSERT(*stat == st);
    const auto p = static_cast<WorkspaceProvenance>(*rc::gen::inRange(0, 3));
    auto provenance = throughText(p);
    RC_ASSERT(provenance.has_value());
    RC_ASSERT(*provenance == p);
  }));
}

TEST(WireJson, LiveEnvironmentsRoundTripWithTheirAge) {
  EXPECT_TRUE(rc::check("LiveEnvironment", [] {
    LiveEnvironment e;
    e.handle.environment_id = anyText();
    e.handle.tenant_id = anyText();
    e.handle.run_id = anyText();
    e.handle.lease_epoch = *rc::gen::arbitrary<std::int64_t>();
    e.handle.created_at = anyTime();
    e.handle.expires_at = anyTime();
    e.provisioned_at = std::chrono::steady_clock::now() -
                       std::chrono::milliseconds(*rc::gen::inRange<std::int64_t>(0, 1'000'000'000));
    e.busy = std::chrono::nanoseconds(*rc::gen::inRange<std::int64_t>(0, INT64_MAX));
    e.wall_clock_seconds = *rc::gen::arbitrary<std::int64_t>();
    e.destroy_failures = *rc::gen::arbitrary<int>();
    e.egress.mode = EgressMode::kAllowlist;
    e.egress.destinations = {{"example.test", {443}}};
    e.image_digest = "sha256:" + std::string(64, 'a');
    auto back = throughText(e);
    RC_ASSERT(back.has_value());
    RC_ASSERT(back->handle == e.handle);
    RC_ASSERT(back->busy == e.busy);
    RC_ASSERT(back->wall_clock_seconds == e.wall_clock_seconds);
    RC_ASSERT(back->destroy_failures == e.destroy_failures);
    RC_ASSERT(back->egress == e.egress);
    RC_ASSERT(back->image_digest == e.image_digest);
    // The age crosses, not the steady clock: back within the time the
    // round trip took (well under a minute), never later than now.
    RC_ASSERT(back->provisioned_at <= std::chrono::steady_clock::now());
    RC_ASSERT(std::chrono::abs(back->provisioned_at - e.provisioned_at) < std::chrono::minutes(1));
  }));
}

TEST(WireJson, SideCommandsAndJobValuesRoundTrip) {
  EXPECT_TRUE(rc::check("JobStartRequest", [] {
    JobStartRequest r;
    r.command.argv = *rc::gen::arbitrary<std::vector<std::string>>();
    r.command.working_directory = anyBytes();
    for (int k = *rc::gen::inRange(0, 4); k > 0; --k)
      r.command.env_additions[anyText()] = anyBytes();
    r.command.with_stdin = *rc::gen::arbitrary<bool>();
    if (*rc::gen::arbitrary<bool>()) r.command.terminal = anyTerminal();
    if (*rc::gen::arbitrary<bool>()) r.wall_ms = *rc::gen::arbitrary<std::uint64_t>();
    auto back = throughText(r);
    RC_ASSERT(back.has_value());
    RC_ASSERT(back->command.argv == r.command.argv);
    RC_ASSERT(back->command.working_directory == r.command.working_directory);
    RC_ASSERT(back->command.env_additions == r.command.env_additions);
    RC_ASSERT(back->command.with_stdin == r.command.with_stdin);
    RC_ASSERT(back->command.terminal == r.command.terminal);
    RC_ASSERT(back->wall_ms == r.wall_ms);
    RC_ASSERT(back->spill.sink == nullptr);
  }));
  EXPECT_TRUE(rc::check("JobStarted and JobPollRequest", [] {
    JobStarted s{anyText(), *rc::gen::arbitrary<std::uint64_t>(), anyTime()};
    auto started = throughText(s);
    RC_ASSERT(started.has_value());
    RC_ASSERT(started->job_id == s.job_id && started->wall_ms == s.wall_ms &&
              started->deadline == s.deadline);
    JobPollRequest p;
    p.job_id = s.job_id;
    p.stdout_cursor = *rc::gen::arbitrary<std::uint64_t>();
    p.stderr_cursor = *rc::gen::arbitrary<std::uint64_t>();
    p.wait_ms = *rc::gen::inRange<std::uint64_t>(0, kMaxJobWaitMs + 1);
    auto poll = throughText(p);
    RC_ASSERT(poll.has_value());
    RC_ASSERT(poll->job_id == p.job_id && poll->stdout_cursor == p.stdout_cursor &&
              poll->stderr_cursor == p.stderr_cursor && poll->wait_ms == p.wait_ms);
  }));
  EXPECT_TRUE(rc::check("JobSnapshot", [] {
    JobSnapshot s;
    s.job_id = "job-" + std::to_string(*rc::gen::inRange(1, 1000));
    s.argv = *rc::gen::arbitrary<std::vector<std::string>>();
    s.state = static_cast<JobState>(*rc::gen::inRange(0, 3));
    s.kill_reason = static_cast<JobKillReason>(*rc::gen::inRange(0, 4));
    if (*rc::gen::arbitrary<bool>()) s.exit_code = *rc::gen::arbitrary<int>();
    if (*rc::gen::arbitrary<bool>()) s.signal = *rc::gen::arbitrary<int>();
    s.pending = *rc::gen::arbitrary<bool>();
    s.out = anySlice();
    s.err = anySlice();
    if (*rc::gen::arbitrary<bool>()) s.spill.emplace(anySpill(), anySpill());
    s.wall_ms = *rc::gen::arbitrary<std::uint64_t>();
    s.deadline = anyTime();
    if (*rc::gen::arbitrary<bool>()) s.terminal = anyTerminal();
    auto back = throughText(s);
    RC_ASSERT(back.has_value());
    RC_ASSERT(back->job_id == s.job_id && back->argv == s.argv);
    RC_ASSERT(sameSlice(back->out, s.out) && sameSlice(back->err, s.err));
    RC_ASSERT(back->state == s.state && back->kill_reason == s.kill_reason);
    RC_ASSERT(back->exit_code == s.exit_code && back->signal == s.signal);
    RC_ASSERT(back->pending == s.pending && back->wall_ms == s.wall_ms);
    RC_ASSERT(back->terminal == s.terminal && back->deadline == s.deadline);
    RC_ASSERT(back->spill.has_value() == s.spill.has_value());
    if (s.spill) {
      RC_ASSERT(sameSpill(back->spill->first, s.spill->first));
      RC_ASSERT(sameSpill(back->spill->second, s.spill->second));
    }
  }));
}

TEST(WireJson, MalformedValuesAreErrorsNamingTheField) {
  auto missing = wireFromJson<NodeStatus>(json{{"name", "n"}, {"live", 1}});
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code, ErrorCode::kToolValidationError);
  EXPECT_NE(missing.error().context.find("capacity"), std::string::npos) << missing.error().context;

  auto code = wireFromJson<Error>(json{{"code", "no_such_code"}, {"message", "m"}});
  ASSERT_FALSE(code.has_value());
  EXPECT_NE(code.error().context.find("no_such_code"), std::string::npos) << code.error().context;

  auto size = wireFromJson<TerminalSize>(json{{"rows", 0}, {"columns", 80}});
  ASSERT_FALSE(size.has_value());
  EXPECT_NE(size.error().context.find("rows"), std::string::npos) << size.error().context;

  auto nested = wireFromJson<JobSnapshot>(json{{"job_id", "job-1"},
                                               {"argv", json::array()},
                                               {"state", "running"},
                                               {"pending", true},
                                               {"stdout", {{"data", ""}, {"cursor", -1}}}});
  ASSERT_FALSE(nested.has_value());
  EXPECT_NE(nested.error().context.find("stdout.cursor"), std::string::npos)
      << nested.error().context;

  auto member = wireMember<EnvironmentHandle>(json{{"other", 1}}, "handle");
  ASSERT_FALSE(member.has_value());
  EXPECT_NE(member.error().context.find("\"handle\" is missing"), std::string::npos);
}

TEST(WireJson, DecodingArbitraryJsonNeverThrows) {
  EXPECT_TRUE(rc::check("any text", [](const std::string& text) {
    auto parsed = parseUntrustedJson(text);
    if (!parsed) return;
    (void)wireFromJson<LiveEnvironment>(*parsed);
    (void)wireFromJson<JobSnapshot>(*parsed);
    (void)wireFromJson<JobStartRequest>(*parsed);
    (void)wireFromJson<Error>(*parsed);
  }));
  // Right shapes with wrong members: each is refused, never thrown.
  for (const json& bad : {json(nullptr), json(1), json::array(), json{{"job_id", 1}},
                          json{{"command", {{"argv", {1}}}}}, json{{"handle", "x"}},
                          json{{"stdout", {{"data", {{"base64", "!!"}}}}}}}) {
    EXPECT_FALSE(wireFromJson<JobSnapshot>(bad).has_value()) << bad.dump();
    EXPECT_FALSE(wireFromJson<JobStartRequest>(bad).has_value()) << bad.dump();
    EXPECT_FALSE(wireFromJson<LiveEnvironment>(bad).has_value()) << bad.dump();
  }
}

}  // namespace
}  // namespace airlock
