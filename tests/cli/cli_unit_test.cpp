// The CLI's pure parts: planning a run from flags, the human summary, exit
// statuses, and the doctor's verdict on made-up kernels.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "airlock/cli/command.h"
#include "airlock/cli/doctor.h"
#include "airlock/cli/exit_codes.h"
#include "airlock/cli/image_command.h"
#include "airlock/cli/run_plan.h"
#include "airlock/cli/summary.h"
#include "airlock/core/command_validation.h"
#include "airlock/core/ids.h"
#include "airlock/core/limits_defaults.h"
#include "airlock/execution/adapters.h"

namespace airlock::cli {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Key;
using ::testing::Not;
using ::testing::Pair;

std::optional<std::string> noHostEnv(std::string_view) {
  return std::nullopt;
}

RunFlags fakeFlags(std::vector<std::string> argv) {
  RunFlags flags;
  flags.mechanism = "fake";
  flags.argv = std::move(argv);
  return flags;
}

TEST(PlanRun, TheGvisorMechanismIsAccepted) {
  RunFlags flags = fakeFlags({"true"});
  flags.mechanism = "gvisor";
  auto plan = planRun(flags, noHostEnv);
  ASSERT_TRUE(plan.has_value()) << plan.error().message();
  EXPECT_EQ(plan->mechanism, Mechanism::kGvisor);
  flags.mechanism = "docker";
  auto refused = planRun(flags, noHostEnv);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().context.find("linux, gvisor, microvm, fake"), std::string::npos)
      << refused.error().context;
}

// One table of mechanisms: every name round-trips, exactly the
// kernel-isolating ones are fit for production, and a development-only one
// cannot be built without the named permission.
TEST(Mechanisms, OneTableNamesEveryMechanismOnce) {
  std::set<std::string_view> names;
  for (Mechanism m : allMechanisms()) {
    EXPECT_TRUE(names.insert(mechanismName(m)).second) << mechanismName(m);
    EXPECT_EQ(mechanismNamed(mechanismName(m)), m);
    EXPECT_NE(developmentOnly(m), isolatesKernel(m)) << mechanismName(m);
  }
  EXPECT_EQ(names.size(), 4u);
  EXPECT_EQ(mechanismNamed("Linux"), std::nullopt);
  EXPECT_EQ(mechanismNamed(""), std::nullopt);
}

TEST(Mechanisms, ADevelopmentMechanismNeedsThePermission) {
  for (Mechanism m : allMechanisms()) {
    if (!developmentOnly(m)) continue;
    auto refused = execution::createAdapter(m, {}, std::nullopt);
    ASSERT_FALSE(refused) << mechanismName(m);
    EXPECT_EQ(refused.error().code, ErrorCode::kExecutionRejected);
    EXPECT_THAT(refused.error().context, HasSubstr(std::string(mechanismName(m))));
    EXPECT_THAT(refused.error().context, HasSubstr("development only"));
  }
  auto fake =
      execution::createAdapter(Mechanism::kFake, {}, execution::DevelopmentMechanismsAllowed{});
  ASSERT_TRUE(fake) << fake.error().message();
  EXPECT_NE(fake->env, nullptr);
  auto microvm = execution::createAdapter(Mechanism::kMicrovm, {}, std::nullopt);
  ASSERT_FALSE(microvm);
  EXPECT_EQ(microvm.error().code, ErrorCode::kExecutionUnavailable);
}

TEST(Mechanisms, TheAdaptersEnvironmentIdsNameTheConfiguredNode) {
  execution::AdapterOptions options;
  options.node_name = "node-9";
  auto fake = execution::createAdapter(Mechanism::kFake, options,
                                       execution::DevelopmentMechanismsAllowed{});
  ASSERT_TRUE(fake) << fake.error().message();
  EnvironmentSpec spec;
  spec.tenant_id = "t";
  spec.run_id = "r";
  spec.image_digest = fake->image_digest;
  spec.limits = defaultLimits();
  auto handle = fake->env->provision(spec);
  ASSERT_TRUE(handle) << handle.error().message();
  EXPECT_EQ(environmentIdNode(handle->environment_id), std::optional<std::string_view>("node-9"))
      << handle->environment_id;
}

TEST(PlanRun, DefaultsComeFromTheConfiguredLimits) {
  auto plan = planRun(fakeFlags({"true"}), noHostEnv);
  ASSERT_TRUE(plan.has_value()) << plan.error().message();
  EXPECT_EQ(plan->mechanism, Mechanism::kFake);
  EXPECT_EQ(plan->spec.limits, defaultLimits());
  EXPECT_EQ(plan->command.timeout_seconds, defaultLimits().wall_clock_seconds);
  EXPECT_EQ(plan->command.maximum_output_bytes, kDefaultMaximumOutputBytes);
  EXPECT_EQ(plan->command.working_directory, ".");
  EXPECT_EQ(plan->command.stdin_data, std::nullopt);
  EXPECT_EQ(plan->spec.egress.mode, EgressMode::kDeny);
  EXPECT_FALSE(plan->spec.tenant_id.empty());
  EXPECT_FALSE(plan->spec.run_id.empty());
}

TEST(PlanRun, FlagsSetTheLimits) {
  RunFlags flags = fakeFlags({"true"});
  flags.memory = "512M";
  flags.cpus = "0.5";
  flags.pids = "64";
  flags.disk = "1G";
  flags.inodes = "5000";
  flags.max_output = "1K";
  auto plan = planRun(flags, noHostEnv);
  ASSERT_TRUE(plan.has_value()) << plan.error().message();
  EXPECT_EQ(plan->spec.limits.memory_bytes, 512 << 20);
  EXPECT_EQ(plan->spec.limits.cpu_millicores, 500);
  EXPECT_EQ(plan->spec.limits.pids_max, 64);
  EXPECT_EQ(plan->spec.limits.workspace_bytes, std::int64_t{1} << 30);
  EXPECT_EQ(plan->spec.limits.inodes_max, 5000);
  EXPECT_EQ(plan->command.maximum_output_bytes, 1024);
}

TEST(PlanRun, TimeoutSetsBothBoundsRoundedUpToWholeSeconds) {
  RunFlags flags = fakeFlags({"true"});
  flags.timeout = "1500ms";
  auto plan = planRun(flags, noHostEnv);
  ASSERT_TRUE(plan.has_value()) << plan.error().message();
  EXPECT_EQ(plan->spec.limits.wall_clock_seconds, 2);
  EXPECT_EQ(plan->command.timeout_seconds, 2);

  flags.timeout = "1ms";
  plan = planRun(flags, noHostEnv);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->command.timeout_seconds, 1);

  flags.timeout = "2m";
  plan = planRun(flags, noHostEnv);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->command.timeout_seconds, 120);
}

TEST(PlanRun, EnvPassesNamedHostValuesAndSynthesizesTheRest) {
  RunFlags flags = fakeFlags({"true"});
  flags.env_names = {"MY_SETTING", "UNSET_ONE"};
  auto lookup = [](std::string_view name) -> std::optional<std::string> {
    if (name == "MY_SETTING") return "value-1";
    if (name == "OTHER") return "not asked for";
    return std::nullopt;
  };
  auto plan = planRun(flags, lookup);
  ASSERT_TRUE(plan.has_value()) << plan.error().message();
  const auto& env = plan->spec.environment;
  EXPECT_THAT(env, Contains(Pair("MY_SETTING", "value-1")));
  EXPECT_THAT(env, Not(Contains(Key("UNSET_ONE"))));
  EXPECT_THAT(env, Not(Contains(Key("OTHER"))));
  EXPECT_THAT(env, Contains(Pair("HOME", "/workspace")));
  EXPECT_THAT(env, Contains(Key("PATH")));
}

TEST(PlanRun, ATier0NameIsRefusedByName) {
  RunFlags flags = fakeFlags({"true"});
  flags.env_names = {"OPENAI_API_KEY"};
  auto plan = planRun(flags, noHostEnv);
  ASSERT_FALSE(plan.has_value());
  EXPECT_THAT(plan.error().context, HasSubstr("OPENAI_API_KEY"));
  EXPECT_THAT(plan.error().context, HasSubstr("--env"));
}

TEST(PlanRun, ArgvWhitespaceInTheProgramNameIsAShellString) {
  constexpr auto kCli = ArgvSpelling::kCommandLine;
  EXPECT_TRUE(shellStringProblem({"ls -la"}, kCli).has_value());
  EXPECT_TRUE(shellStringProblem({"python script.py", "--flag"}, kCli).has_value());
  EXPECT_FALSE(shellStringProblem({"sh", "-c", "echo hi"}, kCli).has_value());
  EXPECT_FALSE(shellStringProblem({"echo", "two words"}, kCli).has_value());
  EXPECT_THAT(*shellStringProblem({"ls -la", "/tmp"}, kCli),
              HasSubstr("airlock run -- sh -c 'ls -la /tmp'"));
}

// One message for the CLI and the HTTP API: the same words, each with the
// suggestion spelled for where the user typed the command.
TEST(PlanRun, TheShellStringHintIsTheOneTheApiGivesSpelledForTheCommandLine) {
  auto plan = planRun(fakeFlags({"ls -la", "/tmp"}), noHostEnv);
  ASSERT_FALSE(plan.has_value());
  EXPECT_EQ(plan.error().context,
            shellStringProblem({"ls -la", "/tmp"}, ArgvSpelling::kCommandLine).value());
  const std::string cli =
      shellStringProblem({"ls -la", "/tmp"}, ArgvSpelling::kCommandLine).value();
  const std::string api = shellStringProblem({"ls -la", "/tmp"}, ArgvSpelling::kJson).value();
  const std::string said = "say so: ";
  ASSERT_NE(cli.find(said), std::string::npos);
  EXPECT_EQ(cli.substr(0, cli.find(said)), api.substr(0, api.find(said)));
  EXPECT_EQ(cli.substr(cli.find(said) + said.size()), "airlock run -- sh -c 'ls -la /tmp'");
  EXPECT_EQ(api.substr(api.find(said) + said.size()), R"(["sh","-c","ls -la /tmp"])");
}

TEST(PlanRun, ShellQuoteSurvivesSingleQuotes) {
  EXPECT_EQ(shellQuote("plain"), "'plain'");
  EXPECT_EQ(shellQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(shellQuote(""), "''");
}

TEST(ExitStatus, MapsResultsAndErrors) {
  ExecutionResult exited;
  exited.exit_code = 3;
  EXPECT_EQ(exitStatusFor(exited), 3);
  exited.exit_code = 0;
  EXPECT_EQ(exitStatusFor(exited), 0);
  ExecutionResult killed;
  killed.killed_by = KillReason::kMemory;
  EXPECT_EQ(exitStatusFor(killed), kExitKilled);
  ExecutionResult odd;
  odd.exit_code = 300;
  EXPECT_EQ(exitStatusFor(odd), kExitAirlockError);
  EXPECT_EQ(exitStatusFor(Error{ErrorCode::kExecutionUnavailable, 0, "x"}), kExitAirlockError);
}

TEST(Summary, ExitAndFiles) {
  ExecutionResult result;
  result.exit_code = 0;
  result.duration_ms = 23;
  result.files_changed = {{"out.txt", ChangeKind::kCreated, 3,
                           "98ea6e4f216f2fb4b69fff9b3a44842c38686ca685f3f55dc48c5d3fb1107be4"},
                          {"gone.txt", ChangeKind::kDeleted, 0, std::nullopt}};
  ExecutionCommand command;
  command.maximum_output_bytes = 100;
  EXPECT_EQ(formatSummary(result, command),
            "airlock: exit 0 in 23 ms\n"
            "airlock: 2 files changed\n"
            "  CREATED out.txt (3 bytes, sha256 98ea6e4f\u2026)\n"
            "  DELETED gone.txt\n");
}

TEST(Summary, KillTruncationAndCappedListing) {
  ExecutionResult result;
  result.killed_by = KillReason::kTimeout;
  result.timed_out = true;
  result.duration_ms = 2001;
  result.stdout_truncated = true;
  result.files_changed = {{"a", ChangeKind::kModified, 1, std::string(64, 'a')}};
  result.files_changed_truncated = true;
  ExecutionCommand command;
  command.maximum_output_bytes = 1000;
  const std::string summary = formatSummary(result, command);
  EXPECT_THAT(summary, HasSubstr("airlock: killed by TIMEOUT after 2001 ms (timed out)\n"));
  EXPECT_THAT(summary, HasSubstr("stdout truncated at the output cap of 1000 bytes"));
  EXPECT_THAT(summary, HasSubstr("airlock: 1+ file changed\n"));
  EXPECT_THAT(summary, HasSubstr("  MODIFIED a (1 byte, sha256 aaaaaaaa\u2026)\n"));
  EXPECT_THAT(summary, HasSubstr("more changes not listed"));
}

TEST(Summary, OutputHeldOpenIsNamedWithTheExitCode) {
  ExecutionResult result;
  result.exit_code = 0;
  result.duration_ms = 2004;
  result.output_held_open = {"stdout", "stderr"};
  EXPECT_EQ(formatSummary(result, ExecutionCommand{}),
            "airlock: exit 0 in 2004 ms\n"
            "airlock: a background process held stdout and stderr open after the command "
            "exited; it was killed 2 s later (redirect its output to return at once)\n");
}

TEST(Summary, FileNamesFromTheSandboxCannotDriveTheTerminal) {
  ExecutionResult result;
  result.exit_code = 0;
  result.files_changed = {{"evil\n\x1b[2Jname", ChangeKind::kDeleted, 0, std::nullopt}};
  const std::string summary = formatSummary(result, ExecutionCommand{});
  EXPECT_THAT(summary, HasSubstr("  DELETED evil\\n\\x1b[2Jname\n"));
  EXPECT_THAT(summary, Not(HasSubstr("\x1b")));
}

TEST(Summary, ErrorLinesAreOneLine) {
  EXPECT_EQ(formatErrorLine("a\nb\\c\x01"), "airlock: error: a\\nb\\c\\x01\n");
  EXPECT_EQ(escapeForTerminal("a\\b"), "a\\\\b");
  // A terminal shows UTF-8 and quotes as they are; DEL is a control byte.
  EXPECT_EQ(escapeForTerminal("\"\xc3\xa9\x7f"), "\"\xc3\xa9\\x7f");
}

linux_jail::KernelFeatures healthyKernel() {
  linux_jail::KernelFeatures f;
  for (const char* name : {"user", "pid", "mount", "net", "ipc", "uts", "cgroup"}) {
    f.namespaces.push_back({name, true, true, false, ""});
  }
  f.cgroup.v1_mounts = {{"memory", "/sys/fs/cgroup/memory"},
                        {"pids", "/sys/fs/cgroup/pids"},
                        {"cpu", "/sys/fs/cgroup/cpu"}};
  f.cgroup.v2_mount = "/sys/fs/cgroup/unified";
  f.seccomp_filter = true;
  f.seccomp_mode = 0;
  f.openat2 = true;
  f.landlock_abi = 3;
  f.running_as_root = true;
  return f;
}

TEST(Doctor, AHealthyKernelCanRun) {
  auto f = healthyKernel();
  EXPECT_TRUE(linux_jail::linuxMechanismBlockers(f).empty());
  const std::string report = formatDoctorReport(f);
  EXPECT_THAT(report, HasSubstr("hybrid"));
  EXPECT_THAT(report, HasSubstr("(Airlock uses v1)"));
  EXPECT_THAT(report, HasSubstr("result: the linux mechanism can run here"));
}

TEST(Doctor, EachMissingFacilityGetsOneLineSayingWhatWillNotWork) {
  auto f = healthyKernel();
  f.running_as_root = false;
  f.namespaces[3].can_unshare = false;  // net
  f.namespaces[3].detail = "Operation not permitted";
  f.cgroup.v1_mounts.pop_back();  // no cpu
  f.seccomp_filter = false;
  f.openat2 = false;
  f.landlock_abi = 0;
  const auto blockers = linux_jail::linuxMechanismBlockers(f);
  ASSERT_EQ(blockers.size(), 4u);
  EXPECT_THAT(blockers[0], HasSubstr("not running as root"));
  EXPECT_THAT(blockers[1], HasSubstr("net namespace unavailable (Operation not permitted)"));
  EXPECT_THAT(blockers[1], HasSubstr("network cannot be denied"));
  EXPECT_THAT(blockers[2], HasSubstr("cgroup"));
  EXPECT_THAT(blockers[3], HasSubstr("seccomp"));
  const std::string report = formatDoctorReport(f);
  EXPECT_THAT(report, HasSubstr("note: openat2 absent"));
  EXPECT_THAT(report, HasSubstr("note: Landlock absent"));
  EXPECT_THAT(report, HasSubstr("result: the linux mechanism cannot run here"));
}

TEST(Doctor, CgroupV2WithTheControllersIsEnough) {
  auto f = healthyKernel();
  f.cgroup.v1_mounts.clear();
  f.cgroup.v2_mount = "/sys/fs/cgroup";
  f.cgroup.v2_controllers = {"cpuset", "cpu", "io", "memory", "pids"};
  EXPECT_TRUE(linux_jail::linuxMechanismBlockers(f).empty());
  EXPECT_EQ(f.cgroup.layout(), "v2");
  f.cgroup.v2_controllers = {"hugetlb"};
  EXPECT_FALSE(linux_jail::linuxMechanismBlockers(f).empty());
}

TEST(Doctor, ProbingThisMachineReportsEveryNamespace) {
  const auto f = linux_jail::detectKernelFeatures();
  ASSERT_EQ(f.namespaces.size(), 7u);
  EXPECT_EQ(f.namespaces[0].name, "user");
  EXPECT_EQ(f.namespaces[6].name, "cgroup");
  EXPECT_FALSE(f.kernel_release.empty());
}

// The registry of commands (cli/command.h): every command of the binary,
// each with a distinct name and a one-line summary, listed in help order.
TEST(CommandRegistry, HoldsEveryCommandOnceWithAOneLineSummary) {
  const CommandRegistry commands = airlockCommands("1.2.3");
  std::vector<std::string> names;
  for (const auto& command : commands) {
    names.emplace_back(command->name());
    EXPECT_FALSE(command->summary().empty()) << command->name();
    EXPECT_EQ(command->summary().find('\n'), std::string_view::npos) << command->name();
  }
  EXPECT_EQ(names, (std::vector<std::string>{"run", "image", "artifact", "serve", "mcp", "egress",
                                             "tenant-key", "doctor", "version"}));
  EXPECT_EQ(commandNameList(commands),
            "run, image, artifact, serve, mcp, egress, tenant-key, doctor or version");
}

}  // namespace
// `airlock image ls`: a size of four digits ("1023.5 KiB") stays apart
// from the digest, and every size column lines up under SIZE.
TEST(ImageList, TheSizeColumnNeverRunsIntoTheDigest) {
  images::StoredImage wide, narrow;
  wide.digest = "sha256:" + std::string(64, 'a');
  wide.size_bytes = 1023 * 1024 + 512;  // 1023.5 KiB
  wide.references = {"127.0.0.1:5000/team/lua:5.4"};
  narrow.digest = "sha256:" + std::string(64, 'b');
  narrow.size_bytes = 812;
  const std::string table = formatImageTable({wide, narrow});
  const std::string d = std::string(64, 'a'), e = std::string(64, 'b');
  EXPECT_EQ(table, "DIGEST" + std::string(65, ' ') + "        SIZE  REFERENCES\n" + "sha256:" + d +
                       "  1023.5 KiB  127.0.0.1:5000/team/lua:5.4\n" + "sha256:" + e +
                       "       812 B  -\n");
}

}  // namespace airlock::cli
