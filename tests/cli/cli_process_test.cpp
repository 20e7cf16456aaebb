// The built `airlock` binary, run as a user would run it. Bad input must
// give exit status 125 and exactly one line on stderr; --json must print a
// parseable ExecutionResult and nothing else. The fake mechanism keeps these
// hermetic.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "airlock/cli/command.h"
#include "airlock/core/json.h"

extern char** environ;

namespace airlock::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Optional;
using ::testing::StartsWith;

struct Outcome {
  int status = -1;  // exit status, or -1 when killed by a signal
  std::string out;
  std::string err;
};

// Runs the airlock binary with args, feeding `input` on stdin, and collects
// both output streams until it exits.
Outcome runAirlock(const std::vector<std::string>& args, const std::string& input = "") {
  int in_pipe[2], out_pipe[2], err_pipe[2];
  EXPECT_EQ(::pipe2(in_pipe, O_CLOEXEC), 0);
  EXPECT_EQ(::pipe2(out_pipe, O_CLOEXEC), 0);
  EXPECT_EQ(::pipe2(err_pipe, O_CLOEXEC), 0);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in_pipe[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);

  std::vector<std::string> storage = {AIRLOCK_BINARY};
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& arg : storage) argv.push_back(arg.data());
  argv.push_back(nullptr);

  // This process must survive airlock exiting without reading its stdin
  // (EPIPE instead of SIGPIPE); the child gets the default disposition back.
  static const bool kIgnoreSigpipe = [] { return ::signal(SIGPIPE, SIG_IGN) != SIG_ERR; }();
  EXPECT_TRUE(kIgnoreSigpipe);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);

  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, AIRLOCK_BINARY, &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(in_pipe[0]);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  Outcome outcome;
  if (rc != 0) {
    ADD_FAILURE() << "posix_spawn: " << rc;
    ::close(in_pipe[1]);
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    return outcome;
  }

  // Feed stdin and drain both outputs together so no pipe fills up.
  std::size_t written = 0;
  int in_fd = in_pipe[1];
  if (input.empty()) {
    ::close(in_fd);
    in_fd = -1;
  }
  bool out_open = true, err_open = true;
  char buffer[65536];
  while (out_open || err_open || in_fd >= 0) {
    pollfd fds[3] = {{out_open ? out_pipe[0] : -1, POLLIN, 0},
                     {err_open ? err_pipe[0] : -1, POLLIN, 0},
                     {in_fd, POLLOUT, 0}};
    if (::poll(fds, 3, -1) < 0) {
      if (errno == EINTR) continue;
      ADD_FAILURE() << "poll failed";
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].revents == 0) continue;
      ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
      if (n <= 0) {
        (i == 0 ? out_open : err_open) = false;
      } else {
        (i == 0 ? outcome.out : outcome.err).append(buffer, static_cast<std::size_t>(n));
      }
    }
    if (in_fd >= 0 && fds[2].revents != 0) {
      ssize_t n = ::write(in_fd, input.data() + written, input.size() - written);
      if (n > 0) written += static_cast<std::size_t>(n);
      if (n <= 0 || written == input.size()) {
        ::close(in_fd);
        in_fd = -1;
      }
    }
  }
  ::close(out_pipe[0]);
  ::close(err_pipe[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  outcome.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return outcome;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < text.size()) {
    auto end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// --- bad input: 125 and one line --------------------------------------------

struct BadInput {
  const char* name;
  std::vector<std::string> args;
  const char* phrase;  // the stderr line must contain this
};

void PrintTo(const BadInput& bad, std::ostream* os) {
  *os << bad.name;
}

class CliBadInputTest : public ::testing::TestWithParam<BadInput> {};

TEST_P(CliBadInputTest, ExitsWith125AndOneErrorLine) {
  const BadInput& bad = GetParam();
  Outcome outcome = runAirlock(bad.args);
  EXPECT_EQ(outcome.status, 125) << outcome.err;
  EXPECT_EQ(outcome.out, "");
  auto err_lines = lines(outcome.err);
  ASSERT_EQ(err_lines.size(), 1u) << outcome.err;
  EXPECT_THAT(err_lines[0], StartsWith("airlock: error: "));
  EXPECT_THAT(err_lines[0], HasSubstr(bad.phrase));
  EXPECT_EQ(outcome.err.back(), '\n');
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CliBadInputTest,
    ::testing::Values(
        BadInput{"NoCommand", {"run", "--mechanism", "fake"}, "no command given"},
        BadInput{
            "NoCommandAfterSeparator", {"run", "--mechanism", "fake", "--"}, "no command given"},
        BadInput{"ShellString",
                 {"run", "--mechanism", "fake", "--", "echo hi"},
                 "airlock run -- sh -c 'echo hi'"},
        BadInput{"ShellStringWithNewline",
                 {"run", "--mechanism", "fake", "--", "echo a\necho b"},
                 "sh -c"},
        BadInput{"ShellStringWithQuote",
                 {"run", "--mechanism", "fake", "--", "echo it's"},
                 "sh -c 'echo it'\\''s'"},
        BadInput{"UnknownFlag",
                 {"run", "--bogus", "--mechanism", "fake", "--", "true"},
                 "unknown option --bogus"},
        BadInput{"SizeWithUnknownUnit",
                 {"run", "--mechanism", "fake", "--memory", "5Q", "--", "true"},
                 "--memory"},
        BadInput{"SizeWithoutNumber",
                 {"run", "--mechanism", "fake", "--disk", "lots", "--", "true"},
                 "--disk"},
        BadInput{"NegativeSize",
                 {"run", "--mechanism", "fake", "--max-output", "-5", "--", "true"},
                 "--max-output"},
        BadInput{"BadDuration",
                 {"run", "--mechanism", "fake", "--timeout", "soon", "--", "true"},
                 "--timeout"},
        BadInput{"ZeroTimeout",
                 {"run", "--mechanism", "fake", "--timeout", "0s", "--", "true"},
                 "--timeout"},
        BadInput{
            "BadCpus", {"run", "--mechanism", "fake", "--cpus", "many", "--", "true"}, "--cpus"},
        BadInput{"NonNumericPids",
                 {"run", "--mechanism", "fake", "--pids", "1e3", "--", "true"},
                 "--pids: expected a whole number"},
        BadInput{"MemoryBelowMinimum",
                 {"run", "--mechanism", "fake", "--memory", "1K", "--", "true"},
                 "--memory 1 KiB is below the minimum of 8 MiB"},
        BadInput{"PidsBelowMinimum",
                 {"run", "--mechanism", "fake", "--pids", "1", "--", "true"},
                 "--pids 1 is below the minimum of 8"},
        BadInput{"PidsAboveCeiling",
                 {"run", "--mechanism", "fake", "--pids", "100000", "--", "true"},
                 "--pids 100000 is above the operator ceiling of 4096"},
        BadInput{"Tier0Env",
                 {"run", "--mechanism", "fake", "--env", "AWS_SECRET_ACCESS_KEY", "--", "true"},
                 "AWS_SECRET_ACCESS_KEY"},
        BadInput{"EnvWithValue",
                 {"run", "--mechanism", "fake", "--env", "FOO=bar", "--", "true"},
                 "--env takes a NAME"},
        BadInput{"InvalidEnvName",
                 {"run", "--mechanism", "fake", "--env", "1BAD", "--", "true"},
                 "1BAD"},
        BadInput{
            "MissingCopyIn",
            {"run", "--mechanism", "fake", "--copy-in", "/nonexistent/airlock-dir", "--", "true"},
            "--copy-in: /nonexistent/airlock-dir"},
        BadInput{"CopyInIsAFileButNotAnArchive",
                 {"run", "--mechanism", "fake", "--copy-in", "/proc/version", "--", "true"},
                 "is not a readable tar or zip archive"},
        BadInput{"CopyInIsADevice",
                 {"run", "--mechanism", "fake", "--copy-in", "/dev/null", "--", "true"},
                 "neither a directory nor a tar or zip archive"},
        BadInput{"UnknownMechanism", {"run", "--mechanism", "docker", "--", "true"}, "--mechanism"},
        BadInput{
            "RelativeProgram", {"run", "--mechanism", "fake", "--", "./script.sh"}, "./script.sh"},
        BadInput{"MissingFlagValue", {"run", "--mechanism", "fake", "--memory"}, "--memory"},
        BadInput{"UnknownSubcommand", {"launch"}, "unknown command \"launch\""},
        BadInput{"NoSubcommand", {}, "subcommand is required"}),
    [](const ::testing::TestParamInfo<BadInput>& info) { return std::string(info.param.name); });

// `airlock image` and `run --image`: bad names and paths are refused with
// one line that names them, against a store in a fresh state directory.
TEST(CliImage, BadNamesAndPathsAreRefusedWithOneLine) {
  char tmpl[] = "/tmp/airlock-cli-image-XXXXXX";
  const std::string state = ::mkdtemp(tmpl);
  const std::string digest = "sha256:" + std::string(64, 'e');
  for (const auto& [args, phrase] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"image", "pull", "--state-dir", state, "Team/Py:1"}, "upper-case"},
           {{"image", "import", "--state-dir", state, "/nonexistent/layout"},
            "/nonexistent/layout"},
           {{"image", "import", "--state-dir", state, "/proc/version"}, "/proc/version"},
           {{"image", "rm", "--state-dir", state, digest}, "is not in the store"},
           {{"run", "--state-dir", state, "--mechanism", "linux", "--image", digest, "--", "true"},
            "airlock image pull"},
           {{"run", "--state-dir", state, "--mechanism", "linux", "--image", "not a ref", "--",
             "true"},
            "neither a digest"},
           {{"run", "--state-dir", state, "--mechanism", "linux", "--image", "sha256:0e2c", "--",
             "true"},
            "is not a whole digest"},
           {{"run", "--state-dir", state, "--mechanism", "fake", "--image", digest, "--", "true"},
            "the fake mechanism runs no images"},
           {{"run", "--mechanism", "fake", "--image", "", "--", "true"},
            "--image: the name is empty"},
       }) {
    Outcome outcome = runAirlock(args);
    EXPECT_EQ(outcome.status, 125) << args[1] << ": " << outcome.err;
    EXPECT_EQ(outcome.out, "");
    auto err_lines = lines(outcome.err);
    ASSERT_EQ(err_lines.size(), 1u) << outcome.err;
    EXPECT_THAT(err_lines[0], StartsWith("airlock: error: "));
    EXPECT_THAT(err_lines[0], HasSubstr(phrase));
  }
  Outcome listed = runAirlock({"image", "ls", "--json", "--state-dir", state});
  EXPECT_EQ(listed.status, 0) << listed.err;
  EXPECT_EQ(listed.out, "{\"images\":[]}\n");
  EXPECT_EQ(std::filesystem::remove_all(state) > 0, true);
}

// --- results -----------------------------------------------------------------

TEST(CliRun, JsonPrintsOnlyAParseableExecutionResult) {
  Outcome outcome = runAirlock({"run", "--mechanism", "fake", "--json", "--", "echo", "hi"});
  EXPECT_EQ(outcome.status, 0) << outcome.err;
  EXPECT_EQ(outcome.err, "");
  auto result = fromJson<ExecutionResult>(outcome.out);
  ASSERT_TRUE(result.has_value()) << result.error().message() << "\n" << outcome.out;
  EXPECT_THAT(result->exit_code, Optional(0));
  EXPECT_EQ(result->stdout_data, "hi\n");
  EXPECT_FALSE(result->killed_by.has_value());
}

TEST(CliRun, JsonCarriesTheKillReasonAndExitStatusIs126) {
  Outcome outcome =
      runAirlock({"run", "--mechanism", "fake", "--json", "--timeout", "1s", "--", "sleep", "5"});
  EXPECT_EQ(outcome.status, 126);
  EXPECT_EQ(outcome.err, "");
  auto result = fromJson<ExecutionResult>(outcome.out);
  ASSERT_TRUE(result.has_value()) << result.error().message();
  EXPECT_EQ(result->killed_by, KillReason::kTimeout);
  EXPECT_TRUE(result->timed_out);
  EXPECT_EQ(result->exit_code, std::nullopt);
  EXPECT_EQ(result->duration_ms, 1000);
}

// The field table of docs/cli.md ("Output", after "With `--json`"): the
// backticked names in its first column, in order.
std::vector<std::string> documentedJsonFields() {
  std::ifstream in(std::string(AIRLOCK_DOCS_DIR) + "/cli.md");
  std::string line;
  bool in_section = false;
  bool in_table = false;
  std::vector<std::string> fields;
  while (std::getline(in, line)) {
    if (!in_section) {
      in_section = line.rfind("With `--json`, stdout carries exactly one JSON document", 0) == 0;
      continue;
    }
    if (line.rfind("| ", 0) == 0) {
      in_table = true;
      if (line.rfind("| `", 0) == 0) {
        const auto end = line.find('`', 3);
        fields.push_back(line.substr(3, end - 3));
      }
    } else if (in_table) {
      break;
    }
  }
  return fields;
}

// docs/cli.md names exactly the fields `airlock run --json` prints (a
// plain run: --export adds "artifacts", --code "outcome" and
// "capability_audit", each documented below the table).
TEST(CliRun, JsonFieldsAreExactlyTheDocumentedOnes) {
  const std::vector<std::string> documented = documentedJsonFields();
  ASSERT_FALSE(documented.empty()) << "no field table under --json in docs/cli.md";
  Outcome outcome = runAirlock({"run", "--mechanism", "fake", "--json", "--", "true"});
  ASSERT_EQ(outcome.status, 0) << outcome.err;
  const auto printed = nlohmann::json::parse(outcome.out);
  std::vector<std::string> keys;
  for (const auto& [key, value] : printed.items()) keys.push_back(key);
  std::vector<std::string> sorted_documented = documented;
  std::sort(sorted_documented.begin(), sorted_documented.end());
  EXPECT_EQ(keys, sorted_documented);  // json objects iterate in key order
}

// The limit commands, as a user types them, on the real mechanism:
// each ends with its kill reason and exit status 126, and the sandbox is
// gone afterwards (its lock in the default state directory removed with its
// cgroup; the suite's NoLeftovers cleanup checks cgroups, mounts and
// processes machine-wide). The fork bomb is spelled for bash: POSIX sh
// (dash, and bash as sh) refuses `:` as a function name.
struct LimitCommand {
  std::vector<std::string> args;
  KillReason expected;
};

TEST(CliRunLinux, LimitCommandsReportTheirKillReasonAndLeaveNothing) {
  if (::geteuid() != 0) GTEST_SKIP() << "the linux mechanism needs root";
  const std::vector<LimitCommand> commands = {
      {{"--memory", "64M", "--", "python3", "-c", "b=bytearray(256<<20)"}, KillReason::kMemory},
      {{"--pids", "32", "--", "bash", "-c", ":(){ :|:& };:"}, KillReason::kPids},
      {{"--pids", "32", "--", "sh", "-c", "f(){ f|f& }; f"}, KillReason::kPids},
      {{"--disk", "8M", "--", "sh", "-c", "yes > f"}, KillReason::kDisk},
      {{"--max-output", "1M", "--", "sh", "-c", "yes"}, KillReason::kOutputLimit},
  };
  for (const auto& c : commands) {
    std::vector<std::string> args = {"run", "--json"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    Outcome outcome = runAirlock(args);
    const std::string what = c.args.back();
    EXPECT_EQ(outcome.status, 126) << what << ": " << outcome.err;
    auto result = fromJson<ExecutionResult>(outcome.out);
    ASSERT_TRUE(result.has_value()) << what << ": " << outcome.err;
    EXPECT_EQ(result->killed_by, c.expected) << what << ": " << result->stderr_data.substr(0, 300);
    EXPECT_EQ(result->exit_code, std::nullopt) << what;
    if (c.expected == KillReason::kOutputLimit) {
      EXPECT_EQ(result->stdout_data.size(), 1u << 20);
      EXPECT_TRUE(result->stdout_truncated);
    }
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/run/airlock/sandboxes", ec))
      ADD_FAILURE() << what << ": left behind " << e.path().filename();
  }
}

TEST(CliRun, HumanOutputWritesTheCommandsBytesThenASummary) {
  Outcome outcome = runAirlock({"run", "--mechanism", "fake", "--", "echo", "hello", "world"});
  EXPECT_EQ(outcome.status, 0);
  EXPECT_EQ(outcome.out, "hello world\n");
  EXPECT_THAT(outcome.err, StartsWith("airlock: exit 0 in "));
}

TEST(CliRun, TheCommandsExitStatusPassesThrough) {
  Outcome outcome = runAirlock({"run", "--mechanism", "fake", "--", "false"});
  EXPECT_EQ(outcome.status, 1);
  EXPECT_THAT(outcome.err, HasSubstr("airlock: exit 1 in "));
}

TEST(CliRun, CommandNotFoundIs127) {
  Outcome outcome = runAirlock({"run", "--mechanism", "fake", "--", "no-such-program"});
  EXPECT_EQ(outcome.status, 127);
  EXPECT_THAT(outcome.err, HasSubstr("command not found"));
}

TEST(CliRun, ATimeoutIsReportedWithItsKillReason) {
  Outcome outcome =
      runAirlock({"run", "--mechanism", "fake", "--timeout", "2s", "--", "sleep", "9"});
  EXPECT_EQ(outcome.status, 126);
  EXPECT_THAT(outcome.err, HasSubstr("airlock: killed by TIMEOUT after 2000 ms (timed out)"));
}

TEST(CliRun, TheOutputCapTruncatesAndSaysSo) {
  Outcome outcome =
      runAirlock({"run", "--mechanism", "fake", "--max-output", "4", "--", "echo", "abcdefgh"});
  EXPECT_EQ(outcome.status, 126);
  EXPECT_EQ(outcome.out, "abcd");
  EXPECT_THAT(outcome.err, HasSubstr("killed by OUTPUT_LIMIT"));
  EXPECT_THAT(outcome.err, HasSubstr("stdout truncated at the output cap of 4 bytes"));
}

TEST(CliRun, StdinIsSentOnlyWhenAsked) {
  Outcome with = runAirlock({"run", "--mechanism", "fake", "--stdin", "--", "cat"}, "piped bytes");
  EXPECT_EQ(with.status, 0) << with.err;
  EXPECT_EQ(with.out, "piped bytes");
  Outcome without = runAirlock({"run", "--mechanism", "fake", "--", "cat"}, "ignored");
  EXPECT_EQ(without.status, 0) << without.err;
  EXPECT_EQ(without.out, "");
}

TEST(CliRun, OptionsAfterTheCommandBelongToTheCommand) {
  Outcome outcome = runAirlock({"run", "--mechanism", "fake", "echo", "--json", "-n"});
  EXPECT_EQ(outcome.status, 0) << outcome.err;
  EXPECT_EQ(outcome.out, "--json -n\n");
}

TEST(CliRun, CopyInSeedsTheWorkspace) {
  auto dir = std::filesystem::temp_directory_path() /
             ("airlock-cli-copy-in-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "sub");
  std::ofstream(dir / "sub" / "data.txt") << "seed";
  Outcome outcome =
      runAirlock({"run", "--mechanism", "fake", "--copy-in", dir.string(), "--", "true"});
  std::filesystem::remove_all(dir);
  EXPECT_EQ(outcome.status, 0) << outcome.err;
  // Copied-in files are the starting point, not changes the command made.
  EXPECT_THAT(outcome.err, Not(HasSubstr("CREATED")));
}

// A minimal ustar archive of regular files, written by hand so the names
// are exactly what the test says (a real tar strips "../").
std::string ustar(const std::vector<std::pair<std::string, std::string>>& files) {
  std::string out;
  for (const auto& [name, data] : files) {
    std::string header(512, '\0');
    auto put = [&](std::size_t at, const std::string& field) {
      header.replace(at, field.size(), field);
    };
    auto octal = [](std::uint64_t v, int width) {
      std::string digits(static_cast<std::size_t>(width - 1), '0');
      for (int i = width - 2; i >= 0 && v != 0; --i, v >>= 3)
        digits[static_cast<std::size_t>(i)] = static_cast<char>('0' + (v & 7));
      return digits;
    };
    put(0, name);
    put(100, octal(0644, 8));
    put(108, octal(0, 8));
    put(116, octal(0, 8));
    put(124, octal(data.size(), 12));
    put(136, octal(0, 12));
    put(148, std::string(8, ' '));
    header[156] = '0';
    put(257, std::string("ustar\0", 6) + "00");
    unsigned sum = 0;
    for (unsigned char c : header) sum += c;
    put(148, octal(sum, 7) + std::string(1, '\0'));
    out += header;
    out += data;
    out.append((512 - data.size() % 512) % 512, '\0');
  }
  out.append(1024, '\0');
  return out;
}

TEST(CliRun, CopyInExtractsATarAndRefusesTraversal) {
  auto dir = std::filesystem::temp_directory_path() /
             ("airlock-cli-copy-in-tar-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "good.tar", std::ios::binary) << ustar({{"sub/data.txt", "seed"}});
  std::ofstream(dir / "evil.tar", std::ios::binary)
      << ustar({{"ok.txt", "fine"}, {"../evil", "escaped"}});
  Outcome good = runAirlock(
      {"run", "--mechanism", "fake", "--copy-in", (dir / "good.tar").string(), "--", "true"});
  Outcome evil = runAirlock(
      {"run", "--mechanism", "fake", "--copy-in", (dir / "evil.tar").string(), "--", "true"});
  std::filesystem::remove_all(dir);
  EXPECT_EQ(good.status, 0) << good.err;
  EXPECT_THAT(good.err, Not(HasSubstr("CREATED")));
  EXPECT_NE(evil.status, 0);
  EXPECT_THAT(evil.err, HasSubstr("--copy-in: archive member \"../evil\" leaves the workspace"));
}

// --- other subcommands -------------------------------------------------------

TEST(CliVersion, PrintsTheVersion) {
  Outcome outcome = runAirlock({"version"});
  EXPECT_EQ(outcome.status, 0);
  EXPECT_EQ(outcome.out, std::string("airlock ") + AIRLOCK_VERSION + "\n");
}

// The top-level help is generated from the registry of commands: every
// command appears with its one-line summary.
TEST(CliHelp, TopLevelHelpListsEveryRegisteredCommand) {
  Outcome outcome = runAirlock({"--help"});
  EXPECT_EQ(outcome.status, 0);
  const CommandRegistry commands = airlockCommands(AIRLOCK_VERSION);
  ASSERT_FALSE(commands.empty());
  for (const auto& command : commands) {
    EXPECT_THAT(outcome.out, HasSubstr("  " + std::string(command->name()) + " "));
    EXPECT_THAT(outcome.out, HasSubstr(std::string(command->summary())));
  }
}

// docs/cli.md's listing of the subcommands is the registry's, line for line.
TEST(CliHelp, DocsListEveryRegisteredCommandWithItsSummary) {
  std::ifstream in(std::string(AIRLOCK_DOCS_DIR) + "/cli.md");
  std::stringstream text;
  text << in.rdbuf();
  ASSERT_FALSE(text.str().empty()) << "docs/cli.md";
  for (const auto& command : airlockCommands(AIRLOCK_VERSION)) {
    std::string line = "  " + std::string(command->name());
    // Names up to 8 characters are padded to a column; a longer one is
    // followed by two spaces.
    line.resize(std::max<std::size_t>(12, line.size() + 2), ' ');
    EXPECT_THAT(text.str(), HasSubstr(line + std::string(command->summary()) + "\n"));
  }
}

// A missing or unknown command is answered with the registry's names.
TEST(CliHelp, AMissingOrUnknownCommandIsAnsweredWithEveryCommandName) {
  const std::string names = commandNameList(airlockCommands(AIRLOCK_VERSION));
  Outcome none = runAirlock({});
  EXPECT_EQ(none.status, 125);
  EXPECT_EQ(none.err,
            "airlock: error: a subcommand is required: " + names + " (see airlock --help)\n");
  Outcome unknown = runAirlock({"launch"});
  EXPECT_EQ(unknown.status, 125);
  EXPECT_EQ(unknown.err,
            "airlock: error: unknown command \"launch\": use " + names + " (see airlock --help)\n");
}

TEST(CliHelp, RunHelpDocumentsTheExitStatuses) {
  Outcome outcome = runAirlock({"run", "--help"});
  EXPECT_EQ(outcome.status, 0);
  EXPECT_THAT(outcome.out, HasSubstr("125"));
  EXPECT_THAT(outcome.out, HasSubstr("126"));
  EXPECT_THAT(outcome.out, HasSubstr("--copy-in"));
}

TEST(CliDoctor, ReportsEveryFacilityAndAgreesWithItsExitStatus) {
  Outcome outcome = runAirlock({"doctor"});
  ASSERT_TRUE(outcome.status == 0 || outcome.status == 1) << outcome.status;
  for (const char* facility :
       {"running as root", "user namespace", "pid namespace", "mount namespace", "net namespace",
        "ipc namespace", "uts namespace", "cgroup namespace", "cgroup ..", "seccomp filter",
        "openat2", "landlock"}) {
    EXPECT_THAT(outcome.out, HasSubstr(facility));
  }
  if (outcome.status == 0) {
    EXPECT_THAT(outcome.out, HasSubstr("result: the linux mechanism can run here"));
    EXPECT_THAT(outcome.out, Not(HasSubstr("missing: ")));
  } else {
    EXPECT_THAT(outcome.out, HasSubstr("result: the linux mechanism cannot run here"));
    EXPECT_THAT(outcome.out, HasSubstr("missing: "));
  }
}

}  // namespace
}  // namespace airlock::cli
