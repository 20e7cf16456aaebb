// The model-facing tools over the fake mechanism: run_command's validation in
// the spec's order and its result shape, the truncation path, the workspace
// tools, artifact_export, and what the descriptions tell the model.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "airlock/core/command_validation.h"
#include "airlock/core/limits_defaults.h"
#include "airlock/gateway/tools/tool_registry.h"
#include "airlock/sys/sha256.h"
#include "gateway_test_support.h"

namespace airlock::gateway {
namespace {

using nlohmann::json;
using testing::FakeSandbox;
using ::testing::HasSubstr;
using ::testing::StartsWith;

class ToolsTest : public ::testing::Test {
 protected:
  ToolResult call(std::string_view name, const json& arguments) {
    return registry_.call(name, arguments, box_.context);
  }
  json ok(std::string_view name, const json& arguments) {
    auto result = call(name, arguments);
    EXPECT_TRUE(result.has_value()) << (result ? "" : result.error().message);
    return result.value_or(json());
  }
  ToolFailure failure(std::string_view name, const json& arguments) {
    auto result = call(name, arguments);
    EXPECT_FALSE(result.has_value()) << "unexpected success: " << result->dump();
    return result ? ToolFailure{} : result.error();
  }
  // The argument named by a validation failure of run_command.
  std::string rejected(const json& arguments) {
    const ToolFailure f = failure("sandbox_run_command", arguments);
    EXPECT_EQ(f.code, ErrorCode::kToolValidationError) << f.message;
    EXPECT_THAT(f.message, StartsWith(f.argument.substr(0, f.argument.find('['))));
    return f.argument;
  }

  ToolOptions options_;
  ToolRegistry registry_ = builtinTools(options_);
  FakeSandbox box_;
};

TEST_F(ToolsTest, RegistersTheFiveToolsWithSchemas) {
  std::vector<std::string> names;
  for (const Tool& tool : registry_.tools()) {
    names.push_back(tool.name);
    EXPECT_EQ(tool.input_schema.at("type"), "object") << tool.name;
    EXPECT_EQ(tool.output_schema.at("type"), "object") << tool.name;
    EXPECT_FALSE(tool.description.empty());
    EXPECT_TRUE(static_cast<bool>(tool.call));
  }
  EXPECT_THAT(names, ::testing::ElementsAre("sandbox_run_command", "workspace_read_text",
                                            "workspace_write_text", "workspace_list",
                                            "artifact_export", "job_start", "job_poll", "job_send",
                                            "job_kill", "job_resize", "job_list"));
}

TEST_F(ToolsTest, RunCommandDescriptionTellsTheModelWhatItCannotInfer) {
  const std::string& d = registry_.find("sandbox_run_command")->description;
  EXPECT_THAT(d, HasSubstr("No network"));
  EXPECT_THAT(d, HasSubstr("connection error"));
  EXPECT_THAT(d, HasSubstr("approved"));
  EXPECT_THAT(d, HasSubstr("discarded when the run finishes or pauses"));
  EXPECT_THAT(d, HasSubstr("artifact_export"));
  EXPECT_THAT(d, HasSubstr("stdout_artifact"));
  EXPECT_THAT(d, HasSubstr(std::to_string(options_.max_output_bytes) + " bytes"));
  EXPECT_THAT(d, HasSubstr("argument vector"));
  EXPECT_THAT(registry_.find("workspace_write_text")->description, HasSubstr("discarded"));
  EXPECT_THAT(registry_.find("artifact_export")->description, HasSubstr("attached to your reply"));
}

// The sandbox's lifetime is in the descriptions of the tools that use it,
// from the settings: the lifetime, and the hard cap when extend has room.
TEST_F(ToolsTest, DescriptionsSayHowLongTheSandboxLives) {
  const std::string lifetime = "The sandbox itself lives 30 minutes from its creation;";
  for (const char* name :
       {"sandbox_run_command", "workspace_read_text", "workspace_write_text", "workspace_list"})
    EXPECT_THAT(registry_.find(name)->description, HasSubstr(lifetime)) << name;
  ToolOptions longer = options_;
  longer.environment_lifetime = std::chrono::minutes(10);
  longer.environment_hard_cap = std::chrono::hours(2);
  const ToolRegistry extended = builtinTools(longer);
  EXPECT_THAT(extended.find("sandbox_run_command")->description,
              HasSubstr("lives 10 minutes from its creation unless the platform extends it "
                        "(never beyond 120 minutes); then it is destroyed with its workspace"));
}

TEST_F(ToolsTest, RunCommandReturnsTheSpecResultShape) {
  box_.env.script(
      {"python3", "make.py"},
      fake::ScriptedBehaviour{.stdout_data = "done\n", .writes = {{"out.csv", "a,b\n"}}});
  const json r = ok("sandbox_run_command", {{"command", {"python3", "make.py"}}});
  EXPECT_EQ(r.at("exit_code"), 0);
  EXPECT_EQ(r.at("stdout"), "done\n");
  EXPECT_EQ(r.at("stderr"), "");
  EXPECT_EQ(r.at("timed_out"), false);
  EXPECT_TRUE(r.at("killed_by").is_null());
  EXPECT_TRUE(r.at("duration_ms").is_number_integer());
  EXPECT_EQ(r.at("stdout_truncated"), false);
  EXPECT_TRUE(r.at("stdout_artifact").is_null());
  ASSERT_EQ(r.at("files_changed").size(), 1u);
  const json& change = r.at("files_changed")[0];
  EXPECT_EQ(change.at("path"), "out.csv");
  EXPECT_EQ(change.at("change"), "CREATED");
  EXPECT_EQ(change.at("size_bytes"), 4);
  EXPECT_EQ(change.at("sha256"), sys::sha256Hex("a,b\n"));
  for (const auto& field : registry_.find("sandbox_run_command")->output_schema.at("required")) {
    EXPECT_TRUE(r.contains(field.get<std::string>())) << field;
  }
}

TEST_F(ToolsTest, RunCommandReportsTheKillReason) {
  const json r = ok("sandbox_run_command", {{"command", {"sleep", "100"}}, {"timeout_seconds", 2}});
  EXPECT_TRUE(r.at("exit_code").is_null());
  EXPECT_EQ(r.at("killed_by"), "TIMEOUT");
  EXPECT_EQ(r.at("timed_out"), true);
}

// A background process held stdout open after the command exited: the
// model gets the exit code, the stream named, and a warning that tells a
// forgotten redirect from a hang.
TEST_F(ToolsTest, RunCommandSaysWhenABackgroundProcessHeldTheOutputOpen) {
  box_.env.script(
      {"sh", "-c", "sleep 60 & echo started"},
      fake::ScriptedBehaviour{.stdout_data = "started\n", .background_holds_stdout = true});
  const json r = ok("sandbox_run_command", {{"command", {"sh", "-c", "sleep 60 & echo started"}}});
  EXPECT_EQ(r.at("exit_code"), 0);
  EXPECT_TRUE(r.at("killed_by").is_null());
  EXPECT_EQ(r.at("stdout"), "started\n");
  EXPECT_EQ(r.at("output_held_open"), json::array({"stdout"}));
  ASSERT_TRUE(r.contains("warnings"));
  const std::string warning = r.at("warnings")[0];
  EXPECT_THAT(warning, HasSubstr("held stdout open"));
  EXPECT_THAT(warning, HasSubstr("not a hang"));
  EXPECT_THAT(warning, HasSubstr("redirect its output"));
  EXPECT_THAT(registry_.find("sandbox_run_command")->description, HasSubstr("output_held_open"));
  // An ordinary command has no such warning.
  const json plain = ok("sandbox_run_command", {{"command", {"echo", "hi"}}});
  EXPECT_EQ(plain.at("output_held_open"), json::array());
  EXPECT_FALSE(plain.contains("warnings"));
}

// `env` reaches its command only; a name the tier rules refuse is an
// argument error naming it, before anything runs.
TEST_F(ToolsTest, RunCommandEnvReachesOnlyItsCommand) {
  const json seen = ok("sandbox_run_command",
                       {{"command", {"printenv", "GREETING"}}, {"env", {{"GREETING", "hi"}}}});
  EXPECT_EQ(seen.at("stdout"), "hi\n");
  const json after = ok("sandbox_run_command", {{"command", {"printenv", "GREETING"}}});
  EXPECT_EQ(after.at("exit_code"), 1) << "the variable outlived its command";
  for (const auto& [name, value] : {std::pair{"OPENAI_API_KEY", json("x")},
                                    std::pair{"PATH", json("/tmp")}, std::pair{"A", json(1)}}) {
    const std::size_t before = box_.env.history().size();
    const ToolFailure f =
        failure("sandbox_run_command", {{"command", {"true"}}, {"env", {{name, value}}}});
    EXPECT_EQ(f.code, ErrorCode::kToolValidationError) << name;
    EXPECT_EQ(f.argument, "env") << name;
    EXPECT_THAT(f.message, HasSubstr(name));
    EXPECT_EQ(box_.env.history().size(), before) << "a refused env reached the sandbox";
  }
  EXPECT_EQ(rejected({{"command", {"true"}}, {"env", "A=1"}}), "env");
}

// --- Validation, one rule at a time --------------------------------------

TEST_F(ToolsTest, CommandAsAStringTeachesTheVectorForm) {
  const ToolFailure f = failure("sandbox_run_command", {{"command", "ls -la | wc -l"}});
  EXPECT_EQ(f.code, ErrorCode::kToolValidationError);
  EXPECT_EQ(f.argument, "command");
  EXPECT_THAT(f.message, HasSubstr("argument vector"));
  EXPECT_THAT(f.message, HasSubstr(R"(["bash","-lc","ls -la | wc -l"])"));
}

TEST_F(ToolsTest, AShellStringInsideTheVectorIsRefusedWithTheShellForm) {
  const ToolFailure f = failure("sandbox_run_command", {{"command", {"ls -la"}}});
  EXPECT_EQ(f.code, ErrorCode::kToolValidationError);
  EXPECT_EQ(f.argument, "command");
  EXPECT_THAT(f.message, HasSubstr("shell string"));
  EXPECT_THAT(f.message, HasSubstr(R"(["sh","-c","ls -la"])"));
  EXPECT_TRUE(box_.env.history().empty());
}

TEST_F(ToolsTest, EachRuleNamesItsArgument) {
  EXPECT_EQ(rejected(json::object()), "command");
  EXPECT_EQ(rejected({{"command", json::array()}}), "command");
  EXPECT_EQ(rejected({{"command", 42}}), "command");
  EXPECT_EQ(rejected({{"command", {"echo", 1}}}), "command[1]");
  EXPECT_EQ(rejected({{"command", {"echo", std::string("a\0b", 3)}}}), "command[1]");
  EXPECT_EQ(rejected({{"command", {"echo", std::string(70000, 'x')}}}), "command");
  EXPECT_EQ(rejected({{"command", {"./setup.sh"}}}), "command[0]");
  EXPECT_EQ(rejected({{"command", {"bin/tool"}}}), "command[0]");
  EXPECT_EQ(rejected({{"command", {""}}}), "command[0]");
  EXPECT_EQ(rejected({{"command", {"ls"}}, {"working_directory", "../etc"}}), "working_directory");
  EXPECT_EQ(rejected({{"command", {"ls"}}, {"working_directory", "/etc"}}), "working_directory");
  EXPECT_EQ(rejected({{"command", {"ls"}}, {"working_directory", 3}}), "working_directory");
  EXPECT_EQ(rejected({{"command", {"ls"}}, {"timeout_seconds", 0}}), "timeout_seconds");
  EXPECT_EQ(rejected({{"command", {"ls"}}, {"timeout_seconds", -5}}), "timeout_seconds");
  EXPECT_EQ(rejected({{"command", {"ls"}}, {"timeout_seconds", 2.5}}), "timeout_seconds");
  EXPECT_EQ(rejected({{"command", {"ls"}}, {"timeout_seconds", "30"}}), "timeout_seconds");
  EXPECT_EQ(rejected({{"command", {"ls"}}, {"timeout_seconds", true}}), "timeout_seconds");
  EXPECT_EQ(rejected({{"command", {"ls"}}, {"shell", true}}), "shell");
  EXPECT_EQ(rejected(json::array({"ls"})), "arguments");
  // Nothing that failed validation reached the execution service.
  EXPECT_TRUE(box_.env.history().empty());
}

TEST_F(ToolsTest, RulesAreCheckedInTheSpecsOrder) {
  // Each case breaks two rules; the earlier one (in the spec's list) wins.
  EXPECT_EQ(rejected({{"command", "ls"}, {"working_directory", "../x"}}), "command");
  EXPECT_EQ(rejected({{"command", {"ls", 7}}, {"timeout_seconds", -1}}), "command[1]");
  EXPECT_EQ(rejected({{"command", {"./a", std::string(1, '\0')}}}),
            "command[1]");  // NUL before argv0
  EXPECT_EQ(rejected({{"command", {"./a"}}, {"working_directory", "/"}}), "command[0]");
  EXPECT_EQ(rejected({{"command", {"ls"}}, {"working_directory", "a//b"}, {"timeout_seconds", 0}}),
            "working_directory");
  EXPECT_EQ(rejected({{"command", {"ls"}}, {"timeout_seconds", 0}, {"bogus", 1}}),
            "timeout_seconds");
}

TEST_F(ToolsTest, TimeoutIsClampedThenFoldedIntoTheMinimumRule) {
  auto planned = [&](const json& timeout) {
    json args = {{"command", {"true"}}};
    if (!timeout.is_null()) args["timeout_seconds"] = timeout;
    auto command = planRunCommand(args, box_.context, options_);
    EXPECT_TRUE(command.has_value()) << (command ? "" : command.error().message);
    return command ? command->timeout_seconds : -1;
  };
  EXPECT_EQ(planned(3600), 300);
  EXPECT_EQ(planned(1e300), 300);
  EXPECT_EQ(planned(json(std::uint64_t{18446744073709551615u})), 300);
  EXPECT_EQ(planned(5), 5);
  EXPECT_EQ(planned(30.0), 30);
  // Absent: the other bounds alone (the hard cap, then the spec's limit).
  EXPECT_EQ(planned(nullptr), options_.service_hard_cap.count());
  box_.context.spec_wall_clock = std::chrono::seconds(600);
  EXPECT_EQ(planned(nullptr), 600);
  EXPECT_EQ(planned(3600), 300);
  box_.context.spec_wall_clock = std::chrono::seconds(20);
  EXPECT_EQ(planned(nullptr), 20);
  EXPECT_EQ(planned(60), 20);
  box_.context.remaining_run_budget = std::chrono::seconds(12);
  EXPECT_EQ(planned(60), 12);
  box_.context.remaining_run_budget = std::chrono::seconds(2);
  const ToolFailure f = failure("sandbox_run_command", {{"command", {"true"}}});
  EXPECT_EQ(f.code, ErrorCode::kExecutionRejected);
  EXPECT_THAT(f.message, HasSubstr("remaining run budget"));
  EXPECT_TRUE(box_.env.history().empty());
}

TEST_F(ToolsTest, TheCommandSentCarriesTheClampedTimeoutAndTheHardOutputCeiling) {
  ok("sandbox_run_command", {{"command", {"echo", "hi"}}, {"timeout_seconds", 9999}});
  ASSERT_EQ(box_.env.history().size(), 1u);
  const ExecutionCommand sent = box_.env.history()[0];
  EXPECT_EQ(sent.timeout_seconds, 300);
  EXPECT_EQ(sent.maximum_output_bytes, 4 * options_.max_output_bytes);
  EXPECT_EQ(sent.working_directory, ".");
}

TEST_F(ToolsTest, AMissingWorkingDirectoryIsAnArgumentError) {
  const ToolFailure f =
      failure("sandbox_run_command", {{"command", {"ls"}}, {"working_directory", "nope"}});
  EXPECT_EQ(f.code, ErrorCode::kToolValidationError);
  EXPECT_EQ(f.argument, "working_directory");
}

// --- Truncation and artifactization ---------------------------------------

TEST_F(ToolsTest, OutputAboveTheLimitIsAnExcerptAndAnArtifact) {
  options_.max_output_bytes = 100;
  registry_ = builtinTools(options_);
  std::string big;
  for (int i = 0; i < 50; ++i) big += "line " + std::to_string(i) + "\n";
  box_.env.script({"gen"}, fake::ScriptedBehaviour{.stdout_data = big, .stderr_data = "warn\n"});
  const json r = ok("sandbox_run_command", {{"command", {"gen"}}});

  EXPECT_EQ(r.at("stderr"), "warn\n");  // fits in its share, whole
  EXPECT_TRUE(r.at("stderr_artifact").is_null());
  EXPECT_EQ(r.at("stdout_truncated"), true);
  ASSERT_TRUE(r.at("stdout_artifact").is_object());
  const std::string id = r.at("stdout_artifact").at("artifact_id");
  const std::string shown = r.at("stdout");
  EXPECT_THAT(shown, StartsWith("line 0\n"));
  EXPECT_THAT(shown, ::testing::EndsWith("line 49\n"));
  EXPECT_THAT(shown, HasSubstr("artifact " + id));
  EXPECT_LT(shown.size(), big.size());

  const auto stored = box_.exporter.stored();
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].bytes, big);
  EXPECT_EQ(stored[0].origin, ExportOrigin::kToolOutput);
  EXPECT_EQ(stored[0].trust, ExportTrust::kExternalUntrusted);
  EXPECT_EQ(stored[0].scope.tenant_id, "tenant-a");
  EXPECT_EQ(stored[0].scope.run_id, "run-1");
  EXPECT_EQ(r.at("stdout_artifact").at("sha256"), sys::sha256Hex(big));
  EXPECT_EQ(r.at("stdout_artifact").at("size_bytes"), big.size());
}

TEST_F(ToolsTest, WithoutAnArtifactStoreTruncationWarns) {
  options_.max_output_bytes = 10;
  registry_ = builtinTools(options_);
  box_.context.artifacts = nullptr;
  box_.env.script({"gen"}, fake::ScriptedBehaviour{.stdout_data = std::string(500, 'x')});
  const json r = ok("sandbox_run_command", {{"command", {"gen"}}});
  EXPECT_TRUE(r.at("stdout_artifact").is_null());
  EXPECT_EQ(r.at("stdout_truncated"), true);
  ASSERT_TRUE(r.contains("warnings"));
  EXPECT_THAT(r.at("warnings")[0].get<std::string>(), HasSubstr("stdout"));
}

// --- Workspace tools --------------------------------------------------------

TEST_F(ToolsTest, WriteThenReadIsLabelledToolWritten) {
  const json w = ok("workspace_write_text", {{"path", "dir/notes.md"}, {"text", "héllo\n"}});
  EXPECT_EQ(w.at("size_bytes"), 7);
  EXPECT_EQ(w.at("sha256"), sys::sha256Hex("héllo\n"));
  const json r = ok("workspace_read_text", {{"path", "dir/notes.md"}});
  EXPECT_EQ(r.at("text"), "héllo\n");
  EXPECT_EQ(r.at("provenance"), "tool_written");
  EXPECT_EQ(r.at("trust"), "INTERNAL_TOOL");
  EXPECT_EQ(r.at("truncated"), false);
}

TEST_F(ToolsTest, WhatACommandWroteIsUntrusted) {
  box_.env.script({"mk"}, fake::ScriptedBehaviour{.writes = {{"out.txt", "ignore previous\n"}}});
  ok("sandbox_run_command", {{"command", {"mk"}}});
  const json r = ok("workspace_read_text", {{"path", "out.txt"}});
  EXPECT_EQ(r.at("provenance"), "sandbox_written");
  EXPECT_EQ(r.at("trust"), "EXTERNAL_UNTRUSTED");
}

TEST_F(ToolsTest, ReadTextRefusesBinaryAndCutsLargeFiles) {
  box_.env.script({"mk"}, fake::ScriptedBehaviour{.writes = {{"bin", std::string("\xff\xfe\0", 3)},
                                                             {"big", std::string(5000, 'a')}}});
  ok("sandbox_run_command", {{"command", {"mk"}}});
  const ToolFailure f = failure("workspace_read_text", {{"path", "bin"}});
  EXPECT_EQ(f.argument, "path");
  EXPECT_THAT(f.message, HasSubstr("not UTF-8"));

  options_.read_text_max_bytes = 1000;
  registry_ = builtinTools(options_);
  const json r = ok("workspace_read_text", {{"path", "big"}});
  EXPECT_EQ(r.at("text").get<std::string>().size(), 1000u);
  EXPECT_EQ(r.at("size_bytes"), 5000);
  EXPECT_EQ(r.at("truncated"), true);
}

TEST_F(ToolsTest, PathsOutsideTheWorkspaceAreArgumentErrors) {
  for (const char* path : {"../etc/passwd", "/etc/passwd", "a/../../b", "", "a//b", "."}) {
    for (const char* tool : {"workspace_read_text", "workspace_write_text"}) {
      const ToolFailure f = failure(tool, {{"path", path}, {"text", "x"}});
      EXPECT_EQ(f.code, ErrorCode::kToolValidationError) << tool << " " << path;
      EXPECT_EQ(f.argument, "path") << tool << " " << path;
      EXPECT_THAT(f.message, StartsWith("path"));
    }
  }
  EXPECT_EQ(failure("workspace_list", {{"path", "../"}}).argument, "path");
}

TEST_F(ToolsTest, PathsThatAreNotUtf8ComeBackAsBase64) {
  const std::string name("caf\xe9.txt");  // Latin-1, not UTF-8
  const json w = ok("workspace_write_text", {{"path", name}, {"text", "x"}});
  EXPECT_EQ(w.at("path").at("base64"), "Y2Fm6S50eHQ=");
  EXPECT_NO_THROW((void)w.dump());  // strict: every string is UTF-8
  const json listed = ok("workspace_list", json::object());
  EXPECT_EQ(listed.at("entries")[0].at("name").at("base64"), "Y2Fm6S50eHQ=");
  const ToolFailure f = failure("workspace_read_text", {{"path", name}, {std::string("\xff"), 1}});
  EXPECT_EQ(f.argument, "\"\\xff\"");
  EXPECT_NO_THROW((void)json(f.message).dump());
}

TEST_F(ToolsTest, MissingFilesAreNotFound) {
  const ToolFailure f = failure("workspace_read_text", {{"path", "missing.txt"}});
  EXPECT_EQ(f.code, ErrorCode::kNotFound);
  EXPECT_EQ(f.argument, "path");
  EXPECT_THAT(f.message, HasSubstr("missing.txt"));
}

TEST_F(ToolsTest, ListShowsEntriesSortedAndCapped) {
  ok("workspace_write_text", {{"path", "b.txt"}, {"text", "bb"}});
  ok("workspace_write_text", {{"path", "a/x.txt"}, {"text", "x"}});
  const json root = ok("workspace_list", json::object());
  ASSERT_EQ(root.at("entries").size(), 2u);
  EXPECT_EQ(root.at("entries")[0].at("name"), "a");
  EXPECT_EQ(root.at("entries")[0].at("type"), "directory");
  EXPECT_EQ(root.at("entries")[1].at("name"), "b.txt");
  EXPECT_EQ(root.at("entries")[1].at("type"), "file");
  EXPECT_EQ(root.at("entries")[1].at("size_bytes"), 2);
  EXPECT_EQ(root.at("truncated"), false);

  options_.list_max_entries = 1;
  registry_ = builtinTools(options_);
  const json capped = ok("workspace_list", {{"path", "."}});
  EXPECT_EQ(capped.at("entries").size(), 1u);
  EXPECT_EQ(capped.at("total_entries"), 2);
  EXPECT_EQ(capped.at("truncated"), true);
}

// --- artifact_export --------------------------------------------------------

TEST_F(ToolsTest, ExportAWorkspaceFile) {
  box_.env.script({"mk"}, fake::ScriptedBehaviour{.writes = {{"out/report.csv", "a,b\n1,2\n"}}});
  ok("sandbox_run_command", {{"command", {"mk"}}});
  const json ref = ok("artifact_export", {{"path", "out/report.csv"}});
  EXPECT_EQ(ref.at("sha256"), sys::sha256Hex("a,b\n1,2\n"));
  EXPECT_EQ(ref.at("size_bytes"), 8);
  EXPECT_EQ(ref.at("media_type"), "text/csv; charset=utf-8");
  EXPECT_FALSE(ref.contains("filename"));  // an ArtifactRef carries no filename
  const auto stored = box_.exporter.stored();
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].filename, "report.csv");
  EXPECT_EQ(stored[0].origin, ExportOrigin::kSandboxExport);
  EXPECT_EQ(stored[0].trust, ExportTrust::kExternalUntrusted);
  EXPECT_EQ(stored[0].ref.artifact_id, ref.at("artifact_id"));
}

TEST_F(ToolsTest, ExportText) {
  const json ref = ok("artifact_export", {{"text", "# Summary\n"}, {"filename", "summary.md"}});
  const auto stored = box_.exporter.stored();
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].bytes, "# Summary\n");
  EXPECT_EQ(stored[0].origin, ExportOrigin::kModelOutput);
  EXPECT_EQ(ref.at("media_type"), "text/markdown; charset=utf-8");
}

TEST_F(ToolsTest, ExportArgumentErrors) {
  // Exactly one of path and text: the schema cannot say it (no top-level
  // oneOf), so the tool does, naming both fields.
  const ToolFailure neither = failure("artifact_export", json::object());
  EXPECT_EQ(neither.argument, "path");
  EXPECT_THAT(neither.message, StartsWith("path and text: give exactly one of them"));
  const ToolFailure both = failure("artifact_export", {{"path", "a"}, {"text", "b"}});
  EXPECT_EQ(both.argument, "path");
  EXPECT_THAT(both.message, HasSubstr("exactly one of them, not both"));
  EXPECT_EQ(failure("artifact_export", {{"text", "b"}, {"filename", "../x"}}).argument, "filename");
  EXPECT_EQ(failure("artifact_export", {{"text", "b"}, {"media_type", "a\nb"}}).argument,
            "media_type");
  EXPECT_EQ(failure("artifact_export", {{"path", "../x"}}).argument, "path");
  EXPECT_EQ(failure("artifact_export", {{"path", "nope"}}).code, ErrorCode::kNotFound);
  box_.context.artifacts = nullptr;
  EXPECT_EQ(failure("artifact_export", {{"text", "b"}}).code, ErrorCode::kExecutionUnavailable);
  EXPECT_TRUE(box_.exporter.stored().empty());
}

TEST_F(ToolsTest, StoreFailuresPassThrough) {
  box_.exporter.fail_with = Error{ErrorCode::kExecutionRejected, 0, "tenant byte cap reached"};
  const ToolFailure f = failure("artifact_export", {{"text", "b"}});
  EXPECT_EQ(f.code, ErrorCode::kExecutionRejected);
  EXPECT_THAT(f.message, HasSubstr("tenant byte cap"));
}

// --- The registry's own checks ---------------------------------------------

TEST_F(ToolsTest, UnknownToolAndForeignContextAreRefused) {
  EXPECT_EQ(failure("sandbox.rm_rf", json::object()).argument, "name");
  box_.context.tenant_id = "tenant-b";
  EXPECT_EQ(failure("workspace_list", json::object()).code, ErrorCode::kExecutionRejected);
  box_.context.tenant_id = "tenant-a";
  box_.context.execution = nullptr;
  EXPECT_EQ(failure("workspace_list", json::object()).code, ErrorCode::kExecutionRejected);
}

TEST_F(ToolsTest, ADestroyedSandboxIsAFailureNotACrash) {
  ASSERT_TRUE(box_.env.destroy(box_.handle).has_value());
  EXPECT_EQ(failure("sandbox_run_command", {{"command", {"true"}}}).code,
            ErrorCode::kEnvironmentGone);
  EXPECT_EQ(failure("workspace_list", json::object()).code, ErrorCode::kEnvironmentGone);
}

// The job tools check their arguments first, naming the bad one; without a
// job port (ToolContext::jobs) a well-formed call is ExecutionUnavailable.
// tests/service/api_jobs_cases.h drives them against real jobs.
// A required argument missing beside one the tool does not have (argv for
// command): the answer names both, though the checks run in the spec's
// order; a failure about the unknown name itself is not repeated.
TEST_F(ToolsTest, AMissingArgumentBesideAnUnknownOneNamesBoth) {
  const ToolFailure f = failure("sandbox_run_command", {{"argv", {"ls"}}});
  EXPECT_EQ(f.argument, "command");
  EXPECT_NE(f.message.find("command is required"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("\"argv\" is not an argument of this tool"), std::string::npos)
      << f.message;
  const ToolFailure only = failure("sandbox_run_command", {{"command", {"ls"}}, {"argv", 1}});
  EXPECT_EQ(only.argument, "argv");
  EXPECT_EQ(only.message.find("(\"argv\""), std::string::npos) << only.message;
}

TEST_F(ToolsTest, JobToolsNameABadArgumentAndNeedAJobPort) {
  EXPECT_EQ(failure("job_start", {{"command", "sleep 1"}}).argument, "command");
  EXPECT_EQ(failure("job_start", json::object()).argument, "command");
  EXPECT_EQ(failure("job_start", {{"command", {"sleep", "1"}}, {"wall_ms", -1}}).argument,
            "wall_ms");
  EXPECT_EQ(failure("job_start", {{"command", {"true"}}, {"working_directory", "../x"}}).argument,
            "working_directory");
  EXPECT_EQ(failure("job_poll", json::object()).argument, "job_id");
  EXPECT_EQ(failure("job_poll", {{"job_id", "job-1"}, {"wait_ms", 60001}}).argument, "wait_ms");
  EXPECT_EQ(failure("job_send", {{"job_id", "job-1"}, {"last", "yes"}}).argument, "last");
  EXPECT_EQ(failure("job_kill", {{"job_id", "job-1"}, {"signal", 9}}).argument, "signal");
  EXPECT_EQ(failure("job_list", {{"all", true}}).argument, "all");
  EXPECT_NE(failure("job_list", {{"all", true}}).message.find("it takes none"), std::string::npos);
  EXPECT_EQ(failure("job_start", {{"command", {"true"}}, {"env", {{"PATH", "/x"}}}}).argument,
            "env");
  const ToolFailure none = failure("job_list", json::object());
  EXPECT_EQ(none.code, ErrorCode::kExecutionUnavailable);
  EXPECT_EQ(none.message, "this server keeps no background jobs");
  EXPECT_EQ(failure("job_start", {{"command", {"true"}}}).code, ErrorCode::kExecutionUnavailable);
}

// job_start's pty and job_resize name the argument a bad terminal size is
// in, and the field inside it, before anything asks for a job port.
TEST_F(ToolsTest, PtyArgumentsNameTheBadFieldBeforeAnyJobIsTouched) {
  const ToolFailure rows =
      failure("job_start", {{"command", {"sh", "-i"}}, {"pty", {{"rows", 0}, {"columns", 80}}}});
  EXPECT_EQ(rows.argument, "pty");
  EXPECT_EQ(rows.code, ErrorCode::kToolValidationError);
  EXPECT_THAT(rows.message, HasSubstr("pty.rows must be a whole number from 1 to 1000"));
  const ToolFailure columns =
      failure("job_start", {{"command", {"sh", "-i"}}, {"pty", {{"rows", 24}, {"columns", 1001}}}});
  EXPECT_THAT(columns.message, HasSubstr("pty.columns"));
  const ToolFailure unknown = failure(
      "job_start", {{"command", {"sh"}}, {"pty", {{"rows", 24}, {"columns", 80}, {"cols", 80}}}});
  EXPECT_EQ(unknown.argument, "pty");
  EXPECT_THAT(unknown.message, HasSubstr("unknown key \"cols\""));
  EXPECT_EQ(failure("job_start", {{"command", {"sh"}}, {"pty", "24x80"}}).argument, "pty");

  EXPECT_EQ(failure("job_resize", {{"rows", 24}, {"columns", 80}}).argument, "job_id");
  const ToolFailure resize_rows =
      failure("job_resize", {{"job_id", "job-1"}, {"rows", -1}, {"columns", 80}});
  EXPECT_EQ(resize_rows.argument, "rows");
  EXPECT_THAT(resize_rows.message, HasSubstr("rows must be a whole number from 1 to 1000"));
  EXPECT_EQ(failure("job_resize", {{"job_id", "job-1"}, {"rows", 24}}).argument, "columns");
  EXPECT_EQ(failure("job_resize", {{"job_id", "job-1"}, {"rows", 24}, {"columns", 2.5}}).argument,
            "columns");
  EXPECT_EQ(failure("job_resize", {{"job_id", "job-1"}, {"rows", 24}, {"columns", 80}, {"x", 1}})
                .argument,
            "x");
  // A good size reaches the port, which this registry has none of.
  EXPECT_EQ(failure("job_resize", {{"job_id", "job-1"}, {"rows", 1000}, {"columns", 1}}).code,
            ErrorCode::kExecutionUnavailable);
}

}  // namespace
}  // namespace airlock::gateway
