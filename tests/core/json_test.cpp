#include "airlock/core/json.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <limits>
#include <set>
#include <string>
#include <vector>

#include "airlock/core/encoding.h"

namespace airlock {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

Timestamp at(std::int64_t ms) {
  return Timestamp{milliseconds{ms}};
}

ResourceLimits sampleLimits() {
  return ResourceLimits{2000, std::int64_t{2} << 30, 512, std::int64_t{4} << 30, 100000, 300};
}

EnvironmentSpec sampleSpec() {
  EnvironmentSpec spec;
  spec.tenant_id = "tenant-a";
  spec.run_id = "run-1";
  spec.lease_epoch = 7;
  spec.image_digest = "sha256:" + std::string(64, 'a');
  spec.limits = sampleLimits();
  spec.egress.mode = EgressMode::kAllowlist;
  spec.egress.destinations = {{"pypi.org", {443}}, {"*.pythonhosted.org", {443, 8443}}};
  spec.environment = {{"HOME", "/workspace"}, {"RAW", std::string("\xff\xfe", 2)}};
  spec.bridge = BridgeEndpoint{"/run/airlock/bridge.sock", "tok-123"};
  return spec;
}

ExecutionResult sampleResult() {
  ExecutionResult r;
  r.exit_code = 0;
  r.stdout_data = "hello\n";
  r.stderr_data = "";
  r.files_changed = {
      {"output.csv", ChangeKind::kCreated, 1204, std::string(64, 'f')},
      {"old.txt", ChangeKind::kDeleted, 0, std::nullopt},
  };
  r.duration_ms = 1840;
  r.peak_memory_bytes = 52428800;
  r.cpu_time_ms = 1700;
  r.output_held_open = {"stdout"};
  return r;
}

template <class T>
T roundTrip(const T& value) {
  const std::string text = toJsonText(value);
  auto back = fromJson<T>(text);
  EXPECT_TRUE(back.has_value()) << (back ? "" : back.error().context) << "\n" << text;
  return back.value_or(T{});
}

std::string errorOf(std::string_view text, auto tag) {
  using T = decltype(tag);
  auto r = fromJson<T>(text);
  if (r.has_value()) return "<no error>";
  EXPECT_EQ(r.error().code, ErrorCode::kToolValidationError);
  return r.error().context;
}

// --- round trips ----------------------------------------------------------

TEST(JsonRoundTrip, ResourceLimits) {
  EXPECT_EQ(roundTrip(sampleLimits()), sampleLimits());
  const json j = sampleLimits();
  EXPECT_EQ(j.at("memory_bytes"), 2147483648LL);
  EXPECT_EQ(j.at("wall_clock_seconds"), 300);
  EXPECT_EQ(j.size(), 6u);
}

TEST(JsonRoundTrip, EgressPolicy) {
  const EgressPolicy deny;
  EXPECT_EQ(json(deny).at("mode"), "deny");
  EXPECT_EQ(roundTrip(deny), deny);
  EXPECT_EQ(roundTrip(sampleSpec().egress), sampleSpec().egress);
  EXPECT_EQ(json(sampleSpec().egress).at("mode"), "allowlist");
  EXPECT_EQ(json(sampleSpec().egress).at("destinations")[1].at("ports"), json({443, 8443}));
}

TEST(JsonRoundTrip, EnvironmentSpecWithBridgeAndBinaryEnvironmentValue) {
  const EnvironmentSpec spec = sampleSpec();
  EXPECT_EQ(roundTrip(spec), spec);
  const json j = spec;
  EXPECT_EQ(j.at("environment").at("HOME"), "/workspace");
  EXPECT_EQ(j.at("environment").at("RAW").at("base64"), "//4=");
  EXPECT_EQ(j.at("bridge").at("token"), "tok-123");
}

TEST(JsonRoundTrip, EnvironmentSpecWithoutBridge) {
  EnvironmentSpec spec = sampleSpec();
  spec.bridge.reset();
  EXPECT_TRUE(json(spec).at("bridge").is_null());
  EXPECT_EQ(roundTrip(spec), spec);
}

TEST(JsonRoundTrip, EnvironmentHandle) {
  EnvironmentHandle h;
  h.environment_id = "0190163d-8694-739b-aea5-966c26f8ad91";
  h.tenant_id = "t";
  h.run_id = "r";
  h.lease_epoch = 3;
  h.created_at = at(1796006637123);
  h.expires_at = at(1796006637123 + 1800 * 1000);
  EXPECT_EQ(roundTrip(h), h);
  const json j = h;
  EXPECT_EQ(j.at("created_at"), "2026-11-30T02:43:57.123Z");
  EXPECT_EQ(j.at("expires_at"), "2026-11-30T03:13:57.123Z");
}

TEST(JsonRoundTrip, ExecutionCommandWithAndWithoutStdin) {
  ExecutionCommand c;
  c.argv = {"python3", "-c", "print(1)"};
  c.working_directory = "src/pkg";
  c.timeout_seconds = 30;
  c.maximum_output_bytes = 1048576;
  EXPECT_TRUE(json(c).at("stdin").is_null());
  EXPECT_EQ(roundTrip(c), c);
  c.stdin_data = std::string("\x00\x01\xff", 3);
  EXPECT_EQ(json(c).at("stdin").at("base64"), "AAH/");
  EXPECT_EQ(roundTrip(c), c);
  c.stdin_data = "";
  EXPECT_EQ(json(c).at("stdin"), "");
  EXPECT_EQ(roundTrip(c), c);
  EXPECT_FALSE(json(c).contains("env")) << "no additions: no env member";
  c.env_additions = {{"GREETING", "hi"}, {"RAW", std::string("\xff", 1)}};
  EXPECT_EQ(json(c).at("env").at("GREETING"), "hi");
  EXPECT_EQ(json(c).at("env").at("RAW").at("base64"), "/w==");
  EXPECT_EQ(roundTrip(c), c);
}

TEST(JsonRoundTrip, ExecutionCommandWithNonUtf8ArgumentAndDirectory) {
  ExecutionCommand c;
  c.argv = {"cat", std::string("\xff\xfe.txt")};
  c.working_directory = std::string("dir\xc0");
  c.timeout_seconds = 5;
  c.maximum_output_bytes = 10;
  const json j = c;
  EXPECT_TRUE(j.at("argv")[0].is_string());
  EXPECT_TRUE(j.at("argv")[1].is_object());
  EXPECT_TRUE(j.at("working_directory").is_object());
  EXPECT_EQ(roundTrip(c), c);
}

TEST(JsonRoundTrip, ExecutionResultUsesTheSpecFieldNames) {
  const ExecutionResult r = sampleResult();
  const json j = r;
  for (const char* name : {"exit_code", "stdout", "stderr", "stdout_truncated", "stderr_truncated",
                           "timed_out", "killed_by", "files_changed", "files_changed_truncated",
                           "duration_ms", "peak_memory_bytes", "cpu_time_ms", "output_held_open"}) {
    EXPECT_TRUE(j.contains(name)) << name;
  }
  EXPECT_EQ(j.size(), 13u);
  EXPECT_EQ(j.at("output_held_open"), json::array({"stdout"}));
  EXPECT_EQ(j.at("stdout"), "hello\n");
  EXPECT_TRUE(j.at("killed_by").is_null());
  EXPECT_EQ(j.at("files_changed")[0].at("change"), "CREATED");
  EXPECT_TRUE(j.at("files_changed")[1].at("sha256").is_null());
  EXPECT_EQ(roundTrip(r), r);
}

TEST(JsonRoundTrip, ExecutionResultWithNonUtf8StdoutAndKillReason) {
  ExecutionResult r;
  r.stdout_data = std::string("ok\xff\xfe\x00tail", 9);
  r.stderr_data = std::string("\xed\xa0\x80");  // a UTF-8-encoded surrogate: not UTF-8
  r.stdout_truncated = true;
  r.timed_out = true;
  r.killed_by = KillReason::kTimeout;
  r.files_changed_truncated = true;
  r.duration_ms = 300000;
  const json j = r;
  EXPECT_EQ(j.at("stdout").at("base64"), "b2v//gB0YWls");
  EXPECT_TRUE(j.at("stderr").is_object());
  EXPECT_TRUE(j.at("exit_code").is_null());
  EXPECT_EQ(j.at("killed_by"), "TIMEOUT");
  EXPECT_EQ(roundTrip(r), r);
}

TEST(JsonRoundTrip, EveryKillReason) {
  for (const KillReason k : {KillReason::kTimeout, KillReason::kMemory, KillReason::kOutputLimit,
                             KillReason::kPids, KillReason::kDisk, KillReason::kCancelled,
                             KillReason::kExpired, KillReason::kServiceShutdown}) {
    EXPECT_EQ(json(k), std::string(killReasonName(k)));
    EXPECT_EQ(roundTrip(k), k);
  }
}

TEST(JsonRoundTrip, FileChangeWithAnInvalidUtf8Path) {
  const FileChange f{std::string("dir/\xff\xfe.txt"), ChangeKind::kModified, 3,
                     std::string(64, '0')};
  const json j = f;
  EXPECT_EQ(j.at("path").at("base64"), "ZGlyL//+LnR4dA==");
  EXPECT_EQ(roundTrip(f), f);
  for (const ChangeKind k : {ChangeKind::kCreated, ChangeKind::kModified}) {
    EXPECT_EQ(roundTrip(k), k);
  }
  EXPECT_EQ(roundTrip(ChangeKind::kDeleted), ChangeKind::kDeleted);
}

TEST(JsonRoundTrip, FileChangeWithNewlineAndNulInItsName) {
  const FileChange f{std::string("a\nb\0c", 5), ChangeKind::kCreated, 0, std::string(64, 'e')};
  EXPECT_TRUE(json(f).at("path").is_string());
  EXPECT_EQ(roundTrip(f), f);
}

TEST(JsonRoundTrip, ArbitraryExecutionResultsRoundTrip) {
  EXPECT_TRUE(rc::check("ExecutionResult round-trips through JSON text", [] {
    ExecutionResult r;
    r.stdout_data = *rc::gen::arbitrary<std::string>();
    r.stderr_data = *rc::gen::arbitrary<std::string>();
    r.stdout_truncated = *rc::gen::arbitrary<bool>();
    r.stderr_truncated = *rc::gen::arbitrary<bool>();
    if (*rc::gen::arbitrary<bool>()) {
      r.killed_by = static_cast<KillReason>(*rc::gen::inRange(0, 8));
      r.timed_out = r.killed_by == KillReason::kTimeout;
    } else {
      r.exit_code = *rc::gen::arbitrary<int>();
    }
    const int n = *rc::gen::inRange(0, 4);
    for (int i = 0; i < n; ++i) {
      FileChange f;
      f.path = *rc::gen::arbitrary<std::string>();
      f.change = static_cast<ChangeKind>(*rc::gen::inRange(0, 3));
      f.size_bytes = *rc::gen::inRange<std::int64_t>(0, std::int64_t{1} << 40);
      if (f.change != ChangeKind::kDeleted) f.sha256 = std::string(64, 'a');
      r.files_changed.push_back(f);
    }
    r.files_changed_truncated = *rc::gen::arbitrary<bool>();
    r.duration_ms = *rc::gen::inRange<std::int64_t>(0, 1000000000);
    const std::string text = toJsonText(r);
    const auto back = fromJson<ExecutionResult>(text);
    RC_ASSERT(back.has_value());
    RC_ASSERT(*back == r);
  }));
}

// --- decoding errors ------------------------------------------------------

TEST(JsonDecode, EveryResourceLimitsFieldIsRequired) {
  for (const char* name : {"cpu_millicores", "memory_bytes", "pids_max", "workspace_bytes",
                           "inodes_max", "wall_clock_seconds"}) {
    json j = sampleLimits();
    j.erase(name);
    const std::string message = errorOf(j.dump(), ResourceLimits{});
    EXPECT_EQ(message, "invalid JSON: field \"" + std::string(name) + "\" is missing");
  }
}

TEST(JsonDecode, NestedMissingFieldIsNamedWithItsPath) {
  json j = sampleSpec();
  j["limits"].erase("pids_max");
  EXPECT_EQ(errorOf(j.dump(), EnvironmentSpec{}),
            "invalid JSON: field \"limits.pids_max\" is missing");
}

TEST(JsonDecode, WrongTypesAreNamed) {
  json limits = sampleLimits();
  limits["memory_bytes"] = "2G";
  EXPECT_EQ(errorOf(limits.dump(), ResourceLimits{}),
            "invalid JSON: field \"memory_bytes\" must be a whole number");
  limits = sampleLimits();
  limits["pids_max"] = 1.5;
  EXPECT_NE(errorOf(limits.dump(), ResourceLimits{}).find("\"pids_max\" must be a whole number"),
            std::string::npos);
  limits = sampleLimits();
  limits["inodes_max"] = 18446744073709551615ULL;
  EXPECT_NE(errorOf(limits.dump(), ResourceLimits{}).find("\"inodes_max\" is out of range"),
            std::string::npos);

  json result = sampleResult();
  result["timed_out"] = 0;
  EXPECT_EQ(errorOf(result.dump(), ExecutionResult{}),
            "invalid JSON: field \"timed_out\" must be true or false");
  result = sampleResult();
  result["files_changed"][1]["size_bytes"] = "big";
  EXPECT_EQ(errorOf(result.dump(), ExecutionResult{}),
            "invalid JSON: field \"files_changed[1].size_bytes\" must be a whole number");
  result = sampleResult();
  result["stdout"] = 5;
  EXPECT_NE(errorOf(result.dump(), ExecutionResult{}).find("field \"stdout\" must be a string"),
            std::string::npos);
  result = sampleResult();
  result["exit_code"] = 4294967296LL;
  EXPECT_NE(errorOf(result.dump(), ExecutionResult{}).find("\"exit_code\" is out of range"),
            std::string::npos);
}

TEST(JsonDecode, ArgvAsAStringTeachesTheVectorForm) {
  const std::string text =
      R"({"argv": "python3 script.py", "working_directory": ".", "timeout_seconds": 5,
          "stdin": null, "maximum_output_bytes": 10})";
  const std::string message = errorOf(text, ExecutionCommand{});
  EXPECT_NE(message.find("field \"argv\" must be an argument vector like [\"python3\""),
            std::string::npos)
      << message;
  const std::string element =
      R"({"argv": ["ls", 3], "working_directory": ".", "timeout_seconds": 5,
          "maximum_output_bytes": 10})";
  EXPECT_NE(errorOf(element, ExecutionCommand{}).find("field \"argv[1]\""), std::string::npos);
}

TEST(JsonDecode, UnknownEnumNamesAreNamed) {
  json result = sampleResult();
  result["exit_code"] = nullptr;
  result["killed_by"] = "OOM";
  const std::string message = errorOf(result.dump(), ExecutionResult{});
  EXPECT_NE(message.find("field \"killed_by\" must be one of TIMEOUT"), std::string::npos)
      << message;
  EXPECT_NE(message.find("(got \"OOM\")"), std::string::npos) << message;

  result = sampleResult();
  result["files_changed"][0]["change"] = "RENAMED";
  EXPECT_NE(errorOf(result.dump(), ExecutionResult{})
                .find("field \"files_changed[0].change\" must be one of CREATED"),
            std::string::npos);

  json spec = sampleSpec();
  spec["egress"]["mode"] = "allow";
  EXPECT_NE(errorOf(spec.dump(), EnvironmentSpec{}).find("field \"egress.mode\" must be"),
            std::string::npos);

  EXPECT_NE(errorOf("\"timeout\"", KillReason{}).find("value must be one of"), std::string::npos);
  EXPECT_NE(errorOf("\"created\"", ChangeKind{}).find("value must be one of"), std::string::npos);
}

TEST(JsonDecode, EgressDestinationsAreChecked) {
  json spec = sampleSpec();
  spec["egress"]["destinations"][1]["ports"][0] = 70000;
  EXPECT_EQ(
      errorOf(spec.dump(), EnvironmentSpec{}),
      "invalid JSON: field \"egress.destinations[1].ports[0]\" must be a port number 1-65535");
  spec = sampleSpec();
  spec["egress"]["destinations"][0].erase("ports");
  EXPECT_EQ(errorOf(spec.dump(), EnvironmentSpec{}),
            "invalid JSON: field \"egress.destinations[0].ports\" is missing");
  // Omitted destinations are an empty list.
  EXPECT_EQ(fromJson<EgressPolicy>(R"({"mode": "deny"})").value(), EgressPolicy{});
}

TEST(JsonDecode, EnvironmentAndBridgeShapes) {
  json spec = sampleSpec();
  spec["environment"]["N"] = 5;
  EXPECT_NE(errorOf(spec.dump(), EnvironmentSpec{}).find("field \"environment.N\""),
            std::string::npos);
  spec = sampleSpec();
  spec["bridge"] = json{{"socket_path", "/s"}};
  EXPECT_EQ(errorOf(spec.dump(), EnvironmentSpec{}),
            "invalid JSON: field \"bridge.token\" is missing");
  spec = sampleSpec();
  spec.erase("bridge");
  EXPECT_FALSE(fromJson<EnvironmentSpec>(spec.dump()).value().bridge.has_value());
}

TEST(JsonDecode, InvariantsStatedAsExactlyAreEnforced) {
  json result = sampleResult();
  result["killed_by"] = "MEMORY";  // exit_code is still 0
  EXPECT_NE(errorOf(result.dump(), ExecutionResult{}).find("\"exit_code\" must be null"),
            std::string::npos);
  result = sampleResult();
  result["exit_code"] = nullptr;
  EXPECT_NE(errorOf(result.dump(), ExecutionResult{}).find("\"exit_code\" must be set"),
            std::string::npos);
  result = sampleResult();
  result["exit_code"] = nullptr;
  result["killed_by"] = "TIMEOUT";  // timed_out still false
  EXPECT_NE(errorOf(result.dump(), ExecutionResult{}).find("\"timed_out\" must be true exactly"),
            std::string::npos);
  result = sampleResult();
  result["files_changed"][1]["sha256"] = std::string(64, 'a');  // DELETED with a digest
  EXPECT_NE(errorOf(result.dump(), ExecutionResult{}).find("files_changed[1].sha256"),
            std::string::npos);
  result = sampleResult();
  result["exit_code"] = nullptr;
  result["killed_by"] = "CANCELLED";  // a kill, yet stdout named as held open
  EXPECT_NE(errorOf(result.dump(), ExecutionResult{}).find("\"output_held_open\" must be empty"),
            std::string::npos);
  result = sampleResult();
  result["output_held_open"] = json::array({"stdout", "stdin"});
  EXPECT_NE(errorOf(result.dump(), ExecutionResult{}).find("output_held_open[1]"),
            std::string::npos);
  result = sampleResult();
  result["output_held_open"] = json::array({"stderr", "stderr"});
  EXPECT_NE(errorOf(result.dump(), ExecutionResult{}).find("names a stream twice"),
            std::string::npos);
  result = sampleResult();
  result.erase("output_held_open");  // written before the field existed: none
  EXPECT_TRUE(fromJson<ExecutionResult>(result.dump()).value().output_held_open.empty());
  result = sampleResult();
  result["files_changed"][0]["sha256"] = nullptr;  // a file too large to hash (sparse)
  EXPECT_TRUE(fromJson<ExecutionResult>(result.dump()).has_value());
  result = sampleResult();
  result["duration_ms"] = -1;
  EXPECT_NE(errorOf(result.dump(), ExecutionResult{}).find("must not be negative"),
            std::string::npos);
}

TEST(JsonDecode, FilesChangedTruncatedMayBeOmitted) {
  json result = sampleResult();
  result.erase("files_changed_truncated");
  EXPECT_FALSE(fromJson<ExecutionResult>(result.dump()).value().files_changed_truncated);
}

TEST(JsonDecode, MalformedBytesObjectsAreRejected) {
  json result = sampleResult();
  result["stdout"] = json{{"base64", "Zg="}};
  EXPECT_NE(errorOf(result.dump(), ExecutionResult{}).find("field \"stdout\" has invalid base64"),
            std::string::npos);
  result["stdout"] = json{{"base64", "Zg=="}, {"extra", 1}};
  EXPECT_NE(errorOf(result.dump(), ExecutionResult{}).find("field \"stdout\" must be a string or"),
            std::string::npos);
  result["stdout"] = json{{"b64", "Zg=="}};
  EXPECT_NE(errorOf(result.dump(), ExecutionResult{}).find("field \"stdout\""), std::string::npos);
}

TEST(JsonDecode, NonObjectsAndBrokenTextDoNotThrow) {
  EXPECT_EQ(errorOf("[]", ResourceLimits{}), "invalid JSON: value must be an object");
  EXPECT_EQ(errorOf("null", ExecutionResult{}), "invalid JSON: value must be an object");
  const std::string broken = errorOf("{\"cpu_millicores\": ", ResourceLimits{});
  EXPECT_EQ(broken.rfind("invalid JSON: parse error", 0), 0u) << broken;
  EXPECT_EQ(errorOf("", ExecutionCommand{}).rfind("invalid JSON: ", 0), 0u);
  // Raw invalid UTF-8 inside JSON text is a parse error, not a crash.
  EXPECT_EQ(errorOf("\"\xff\"", KillReason{}).rfind("invalid JSON: ", 0), 0u);
}

TEST(JsonDecode, UnknownMembersAreIgnored) {
  json limits = sampleLimits();
  limits["future_field"] = true;
  EXPECT_EQ(fromJson<ResourceLimits>(limits.dump()).value(), sampleLimits());
}

TEST(JsonDecode, ArbitraryTextNeverThrows) {
  EXPECT_TRUE(rc::check("fromJson is total", [](const std::string& text) {
    (void)fromJson<ExecutionResult>(text);
    (void)fromJson<EnvironmentSpec>(text);
    (void)fromJson<ExecutionCommand>(text);
  }));
}

TEST(JsonDecode, MutatedDocumentsFailWithAFieldNameOrSucceed) {
  const auto scalar = rc::gen::oneOf(
      rc::gen::just(json(nullptr)),
      rc::gen::map(rc::gen::arbitrary<bool>(), [](bool b) { return json(b); }),
      rc::gen::map(rc::gen::arbitrary<std::int64_t>(), [](std::int64_t v) { return json(v); }),
      rc::gen::map(rc::gen::arbitrary<double>(), [](double v) { return json(v); }),
      rc::gen::map(rc::gen::element<std::string>("TIMEOUT", "CREATED", "x", ""),
                   [](std::string v) { return json(v); }),
      rc::gen::just(json::array()), rc::gen::just(json::object()));
  EXPECT_TRUE(rc::check("replacing or removing one member never throws", [&] {
    json doc = *rc::gen::arbitrary<bool>() ? json(sampleResult()) : json(sampleSpec());
    const bool is_result = doc.contains("stdout");
    // Pick a member, possibly one level down.
    json* target = &doc;
    std::vector<std::string> keys;
    for (const auto& [k, v] : target->items()) keys.push_back(k);
    const std::string key = *rc::gen::elementOf(keys);
    std::string field = key;
    if ((*target)[key].is_object() && !(*target)[key].empty() && *rc::gen::arbitrary<bool>()) {
      target = &(*target)[key];
      keys.clear();
      for (const auto& [k, v] : target->items()) keys.push_back(k);
      const std::string inner = *rc::gen::elementOf(keys);
      field += "." + inner;
      if (*rc::gen::arbitrary<bool>()) {
        target->erase(inner);
      } else {
        (*target)[inner] = *scalar;
      }
    } else if (*rc::gen::arbitrary<bool>()) {
      target->erase(key);
    } else {
      (*target)[key] = *scalar;
    }
    const std::string text = doc.dump();
    const std::string context = is_result ? (fromJson<ExecutionResult>(text).has_value()
                                                 ? std::string()
                                                 : fromJson<ExecutionResult>(text).error().context)
                                          : (fromJson<EnvironmentSpec>(text).has_value()
                                                 ? std::string()
                                                 : fromJson<EnvironmentSpec>(text).error().context);
    if (!context.empty()) RC_ASSERT(context.find("field \"") != std::string::npos);
  }));
}

// --- bytes and timestamps -------------------------------------------------

TEST(BytesJson, ValidUtf8IsAStringAndOtherBytesAreBase64) {
  EXPECT_EQ(bytesToJson("plain ✓"), json("plain ✓"));
  EXPECT_EQ(bytesToJson(std::string("\xff")), json({{"base64", "/w=="}}));
  EXPECT_EQ(bytesFromJson(json("x")).value(), "x");
  EXPECT_EQ(bytesFromJson(json({{"base64", "/w=="}})).value(), "\xff");
  EXPECT_FALSE(bytesFromJson(json(3)).has_value());
  EXPECT_FALSE(bytesFromJson(json::array()).has_value());
}

TEST(BytesJson, ToJsonTextNeverThrowsOnNonUtf8TextFields) {
  EnvironmentHandle h;
  h.tenant_id = std::string("bad\xff");
  EXPECT_NO_THROW((void)toJsonText(h));
}

TEST(Timestamps, FormatWithMillisecondsAndZ) {
  EXPECT_EQ(formatTimestamp(at(0)), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(formatTimestamp(at(1796006637123)), "2026-11-30T02:43:57.123Z");
  EXPECT_EQ(formatTimestamp(at(951782400000)), "2000-02-29T00:00:00.000Z");
  EXPECT_EQ(formatTimestamp(at(-1)), "1969-12-31T23:59:59.999Z");
}

TEST(Timestamps, ParseAcceptsRfc3339Forms) {
  EXPECT_EQ(parseTimestamp("2026-11-30T02:43:57.123Z").value(), at(1796006637123));
  EXPECT_EQ(parseTimestamp("2026-11-30t02:43:57.123z").value(), at(1796006637123));
  EXPECT_EQ(parseTimestamp("2026-11-30T02:43:57Z").value(), at(1796006637000));
  EXPECT_EQ(parseTimestamp("2026-11-30T02:43:57.1Z").value(), at(1796006637100));
  EXPECT_EQ(parseTimestamp("2026-11-30T02:43:57.123999Z").value(), at(1796006637123));
  EXPECT_EQ(parseTimestamp("2026-11-30T04:43:57.123+02:00").value(), at(1796006637123));
  EXPECT_EQ(parseTimestamp("2026-11-29T21:13:57.123-05:30").value(), at(1796006637123));
}

TEST(Timestamps, ParseRejectsMalformedText) {
  for (const char* bad :
       {"", "2026-11-30", "2026-11-30 02:43:57Z", "2026-11-30T02:43:57", "2026-13-01T00:00:00Z",
        "2026-02-29T00:00:00Z", "2026-11-30T24:00:00Z", "2026-11-30T02:60:00Z",
        "2026-11-30T02:43:60Z", "2026-11-30T02:43:57.Z", "2026-11-30T02:43:57Zjunk",
        "2026-11-30T02:43:57+0200", "26-11-30T02:43:57Z", "+2026-11-30T02:43:57Z"}) {
    const auto r = parseTimestamp(bad);
    ASSERT_FALSE(r.has_value()) << bad;
    EXPECT_EQ(r.error().code, ErrorCode::kToolValidationError);
    EXPECT_NE(r.error().context.find("invalid timestamp"), std::string::npos);
  }
}

TEST(Timestamps, RoundTripForAnyMillisecondInRange) {
  EXPECT_TRUE(rc::check("parse(format(t)) == t", [] {
    // 0000-01-01 .. 9999-12-31 in Unix milliseconds.
    const auto ms = *rc::gen::inRange<std::int64_t>(-62167219200000, 253402300800000);
    const auto back = parseTimestamp(formatTimestamp(at(ms)));
    RC_ASSERT(back.has_value());
    RC_ASSERT(*back == at(ms));
  }));
}

TEST(JsonDecode, HandleTimestampErrorsNameTheField) {
  json h = json{{"environment_id", "x"},
                {"tenant_id", "t"},
                {"run_id", "r"},
                {"lease_epoch", 1},
                {"created_at", "yesterday"},
                {"expires_at", "2026-11-30T02:43:57.123Z"}};
  EXPECT_NE(errorOf(h.dump(), EnvironmentHandle{})
                .find("field \"created_at\" must be an RFC 3339 timestamp like "
                      "2026-11-30T02:43:57.123Z (got \"yesterday\")"),
            std::string::npos);
}

// --- untrusted text: a key named twice -------------------------------------

std::string parseErrorOf(std::string_view text) {
  auto r = parseUntrustedJson(text);
  if (r.has_value()) return "<no error>";
  EXPECT_EQ(r.error().code, ErrorCode::kToolValidationError);
  return r.error().context;
}

TEST(UntrustedJson, AKeyNamedTwiceInOneObjectIsRefusedByName) {
  EXPECT_EQ(parseErrorOf(R"({"lease_epoch": 1, "lease_epoch": 2})"),
            "the key \"lease_epoch\" appears twice in one object");
  EXPECT_EQ(parseErrorOf(R"({"limits": {"pids_max": 1, "cpu": 2, "pids_max": 3}})"),
            "the key \"pids_max\" appears twice in one object");
  EXPECT_EQ(parseErrorOf(R"([1, {"a": [{"b": 1, "b": 1}]}])"),
            "the key \"b\" appears twice in one object");
  // The same name spelt with an escape is the same key.
  EXPECT_EQ(parseErrorOf(R"({"argv": [], "\u0061rgv": ["rm"]})"),
            "the key \"argv\" appears twice in one object");
  // A key that cannot be shown is quoted, never echoed raw.
  EXPECT_EQ(parseErrorOf("{\"a\\nb\": 1, \"a\\nb\": 2}"),
            "the key \"a\\nb\" appears twice in one object");
}

TEST(UntrustedJson, TheSameKeyInDifferentObjectsIsFine) {
  auto r = parseUntrustedJson(R"({"a": {"a": 1}, "b": [{"a": 1}, {"a": 2}], "c": {"a": {}}})");
  ASSERT_TRUE(r) << r.error().context;
  EXPECT_EQ((*r)["b"][1]["a"], 2);
  EXPECT_EQ(parseUntrustedJson("{}").value(), json::object());
  EXPECT_EQ(parseUntrustedJson(R"("x")").value(), "x");
}

TEST(UntrustedJson, BrokenTextIsAParseErrorThatSaysWhere) {
  const std::string broken = parseErrorOf(R"({"a": )");
  EXPECT_EQ(broken.rfind("parse error at line 1, column 7", 0), 0u) << broken;
  EXPECT_EQ(parseErrorOf("").rfind("parse error", 0), 0u);
  EXPECT_EQ(parseErrorOf("\"\xff\"").rfind("parse error", 0), 0u);
  EXPECT_EQ(parseErrorOf("{} {}").rfind("parse error", 0), 0u) << "one value only";
  EXPECT_EQ(parseErrorOf("/* c */ {}").rfind("parse error", 0), 0u) << "no comments";
}

TEST(UntrustedJson, TheDecodersRefuseAKeyNamedTwice) {
  EXPECT_EQ(errorOf(R"({"argv": ["true"], "working_directory": ".", "timeout_seconds": 5,
                        "timeout_seconds": 500000, "maximum_output_bytes": 10})",
                    ExecutionCommand{}),
            "invalid JSON: the key \"timeout_seconds\" appears twice in one object");
}

// Printable ASCII, so that every generated key is valid JSON text as is.
rc::Gen<std::string> genKey() {
  return rc::gen::container<std::string>(rc::gen::inRange<char>(' ', '~' + 1));
}

std::string objectText(const std::vector<std::pair<std::string, int>>& members) {
  std::string out = "{";
  for (const auto& [key, value] : members) {
    if (out.size() > 1) out += ",";
    out += json(key).dump() + ":" + std::to_string(value);
  }
  return out + "}";
}

TEST(UntrustedJson, PropertyDistinctKeysParseAndARepeatedOneIsNamed) {
  EXPECT_TRUE(rc::check("distinct keys parse to the same object", [] {
    const auto keys = *rc::gen::container<std::set<std::string>>(genKey());
    std::vector<std::pair<std::string, int>> members;
    for (const auto& k : keys) members.emplace_back(k, *rc::gen::arbitrary<int>());
    const std::string text = "[" + objectText(members) + "]";
    auto parsed = parseUntrustedJson(text);
    RC_ASSERT(parsed.has_value());
    RC_ASSERT((*parsed)[0].size() == keys.size());
    for (const auto& [k, v] : members) RC_ASSERT((*parsed)[0][k] == v);
    RC_ASSERT(*parsed == json::parse(text));
  }));
  EXPECT_TRUE(rc::check("a key named twice is refused, naming it", [] {
    const auto keys = *rc::gen::nonEmpty(rc::gen::container<std::set<std::string>>(genKey()));
    std::vector<std::pair<std::string, int>> members;
    for (const auto& k : keys) members.emplace_back(k, 1);
    const auto again = *rc::gen::elementOf(std::vector<std::string>(keys.begin(), keys.end()));
    const auto at = *rc::gen::inRange<std::size_t>(0, members.size() + 1);
    members.insert(members.begin() + static_cast<std::ptrdiff_t>(at), {again, 2});
    const bool nested = *rc::gen::arbitrary<bool>();
    const std::string text =
        nested ? "{\"outer\": [null, " + objectText(members) + "]}" : objectText(members);
    auto parsed = parseUntrustedJson(text);
    RC_ASSERT(!parsed.has_value());
    RC_ASSERT(parsed.error().context ==
              "the key " + quoteForMessage(again) + " appears twice in one object");
  }));
}

// --- integers --------------------------------------------------------------

// A count is refused with one sentence that says what the field takes, in
// its unit, never the uint64 range.
TEST(CountFromJson, ARefusalSaysWhatTheFieldTakesInItsUnit) {
  const CountSpec wall{"wall_ms", "milliseconds"};
  const CountSpec wait{"wait_ms", "milliseconds", 60000};
  const CountSpec cursor{"stdout_cursor", ""};
  EXPECT_EQ(countFromJson(json(0), wall).value(), 0u);
  EXPECT_EQ(countFromJson(json::parse("18446744073709551615"), wall).value(),
            std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ(countFromJson(json(60000), wait).value(), 60000u);
  EXPECT_EQ(countFromJson(json(std::int64_t{7}), cursor).value(), 7u);
  for (const char* bad : {"-1", "-9223372036854775808", "-9223372036854775809", "1.5", "\"5\"",
                          "null", "1e3", "-0.5"})
    EXPECT_EQ(countFromJson(json::parse(bad), wall).error().context,
              "wall_ms must be a whole number of milliseconds, 0 or more")
        << bad;
  EXPECT_EQ(countFromJson(json::parse("18446744073709551616"), wall).error().context,
            "wall_ms is out of range: the largest allowed is 18446744073709551615");
  const CountSpec epoch{"lease_epoch", "", 9223372036854775807};
  EXPECT_EQ(countFromJson(json::parse("9223372036854775808"), epoch).error().context,
            "lease_epoch is out of range: the largest allowed is 9223372036854775807");
  EXPECT_EQ(countFromJson(json(60001), wait).error().context,
            "wait_ms must be a whole number of milliseconds from 0 to 60000");
  EXPECT_EQ(countFromJson(json(-1), cursor).error().context,
            "stdout_cursor must be a whole number, 0 or more");
  EXPECT_EQ(countFromText("42", wait).value(), 42u);
  for (const char* bad : {"-1", "+1", "", "1x", " 1", "60001", "99999999999999999999"})
    EXPECT_EQ(countFromText(bad, wait).error().context,
              "wait_ms must be a whole number of milliseconds from 0 to 60000")
        << bad;
  EXPECT_EQ(countFromText("-3", cursor).error().context,
            "stdout_cursor must be a whole number, 0 or more");
}

TEST(Int64FromJson, OutOfRangeNamesTheLimitAndNeverWraps) {
  const auto contextOf = [](std::string_view text) {
    auto r = int64FromJson(json::parse(text));
    return r ? "<" + std::to_string(*r) + ">" : r.error().context;
  };
  EXPECT_EQ(contextOf("9223372036854775807"), "<9223372036854775807>");
  EXPECT_EQ(contextOf("-9223372036854775808"), "<-9223372036854775808>");
  for (const char* big : {"9223372036854775808", "18446744073709551615", "18446744073709551616",
                          "100000000000000000000000000000"})
    EXPECT_EQ(contextOf(big), "is out of range: the largest allowed is 9223372036854775807") << big;
  EXPECT_EQ(contextOf("-9223372036854775809"),
            "is out of range: the smallest allowed is -9223372036854775808");
  for (const char* other : {"1.5", "\"1\"", "null", "true", "[1]", "1e3"})
    EXPECT_EQ(contextOf(other), "must be a whole number") << other;
  EXPECT_TRUE(rc::check("every int64 reads back; every larger uint64 is out of range", [] {
    const auto n = *rc::gen::arbitrary<std::int64_t>();
    RC_ASSERT(int64FromJson(json::parse(std::to_string(n))).value() == n);
    const auto u = *rc::gen::inRange<std::uint64_t>(std::uint64_t{1} << 63,
                                                    std::numeric_limits<std::uint64_t>::max());
    RC_ASSERT(!int64FromJson(json::parse(std::to_string(u))).has_value());
  }));
}

TEST(Int64FromJson, TheDecodersUseIt) {
  EXPECT_EQ(errorOf(R"({"tenant_id": "t", "run_id": "r", "lease_epoch": 9223372036854775808})",
                    EnvironmentSpec{}),
            "invalid JSON: field \"lease_epoch\" is out of range: the largest allowed is "
            "9223372036854775807");
}

}  // namespace
}  // namespace airlock
