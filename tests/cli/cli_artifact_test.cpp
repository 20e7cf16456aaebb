// `airlock run --export` and `airlock artifact list|get|rm` (docs/cli.md,
// "airlock artifact"): the built binary with --mechanism fake and a
// temporary --state-dir, plus the download-name rule linked in directly.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "airlock/cli/artifact_command.h"
#include "airlock/cli/run_plan.h"
#include "airlock/core/command_validation.h"
#include "airlock/core/json.h"
#include "airlock/sys/sha256.h"

extern char** environ;

namespace airlock::cli {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::SizeIs;
using ::testing::StartsWith;

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void spit(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

struct Outcome {
  int status = -1;
  std::string out;
  std::string err;
};

class CliArtifactTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/airlock-cli-artifact-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    root_ = pattern;
    state_ = root_ / "state";
    src_ = root_ / "src";
    cwd_ = root_ / "cwd";
    fs::create_directories(src_);
    fs::create_directories(cwd_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  // Runs the airlock binary in cwd_, stdout and stderr to files.
  Outcome airlock(const std::vector<std::string>& args) {
    std::vector<std::string> storage = {AIRLOCK_BINARY};
    storage.insert(storage.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& arg : storage) argv.push_back(arg.data());
    argv.push_back(nullptr);
    const std::string out_path = (root_ / "stdout").string();
    const std::string err_path = (root_ / "stderr").string();
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addchdir_np(&actions, cwd_.c_str());
    pid_t pid = -1;
    const int rc = ::posix_spawn(&pid, AIRLOCK_BINARY, &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    Outcome outcome;
    if (rc != 0) {
      ADD_FAILURE() << "posix_spawn: " << rc;
      return outcome;
    }
    int wstatus = 0;
    EXPECT_EQ(::waitpid(pid, &wstatus, 0), pid);
    outcome.status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1;
    outcome.out = slurp(out_path);
    outcome.err = slurp(err_path);
    return outcome;
  }

  // `airlock run --json --export P...` of the files in src_; the parsed
  // "artifacts" array.
  nlohmann::json exportAll(const std::vector<std::string>& paths, Outcome* outcome_out = nullptr) {
    std::vector<std::string> args = {"run",         "--json",        "--mechanism", "fake",
                                     "--state-dir", state_.string(), "--copy-in",   src_.string()};
    for (const auto& p : paths) {
      args.push_back("--export");
      args.push_back(p);
    }
    args.insert(args.end(), {"--", "true"});
    Outcome outcome = airlock(args);
    if (outcome_out) *outcome_out = outcome;
    auto parsed = nlohmann::json::parse(outcome.out, nullptr, false);
    if (parsed.is_discarded() || !parsed.contains("artifacts")) {
      ADD_FAILURE() << "no artifacts in: " << outcome.out << " / " << outcome.err;
      return nlohmann::json::array();
    }
    return parsed["artifacts"];
  }

  std::vector<std::string> stateArgs(std::vector<std::string> args) {
    args.push_back("--state-dir");
    args.push_back(state_.string());
    return args;
  }

  fs::path root_, state_, src_, cwd_;
};

// Bytes of every value, larger than one streaming buffer.
std::string binaryContent() {
  std::string bytes;
  for (int i = 0; i < 3 * 65536 + 17; ++i)
    bytes.push_back(static_cast<char>((i * 131 + i / 256) & 0xff));
  return bytes;
}

TEST_F(CliArtifactTest, ExportListGetRmRoundTripIsByteExact) {
  const std::string content = binaryContent();
  spit(src_ / "data.bin", content);
  Outcome run;
  auto artifacts = exportAll({"data.bin"}, &run);
  ASSERT_EQ(run.status, 0) << run.err;
  ASSERT_THAT(artifacts, SizeIs(1));
  const std::string id = artifacts[0]["artifact_id"].get<std::string>();
  EXPECT_EQ(artifacts[0]["path"], "data.bin");
  EXPECT_EQ(artifacts[0]["size_bytes"].get<std::int64_t>(),
            static_cast<std::int64_t>(content.size()));
  // Checked against an independent hash of the source file.
  EXPECT_EQ(artifacts[0]["sha256"].get<std::string>(), sys::sha256Hex(content));

  Outcome list = airlock(stateArgs({"artifact", "list"}));
  ASSERT_EQ(list.status, 0) << list.err;
  EXPECT_THAT(list.out, StartsWith(id + "  " + std::to_string(content.size()) + "  "));
  EXPECT_THAT(list.out, HasSubstr("  data.bin\n"));

  Outcome get = airlock(stateArgs({"artifact", "get", id}));
  ASSERT_EQ(get.status, 0) << get.err;
  EXPECT_EQ(slurp(cwd_ / "data.bin"), content);

  Outcome get_o = airlock(stateArgs({"artifact", "get", id, "-o", "copy.bin"}));
  ASSERT_EQ(get_o.status, 0) << get_o.err;
  EXPECT_EQ(slurp(cwd_ / "copy.bin"), content);

  Outcome rm = airlock(stateArgs({"artifact", "rm", id}));
  ASSERT_EQ(rm.status, 0) << rm.err;
  Outcome after = airlock(stateArgs({"artifact", "list"}));
  ASSERT_EQ(after.status, 0) << after.err;
  EXPECT_THAT(after.out, Not(HasSubstr(id)));
  Outcome gone = airlock(stateArgs({"artifact", "get", id, "-o", "again.bin"}));
  EXPECT_EQ(gone.status, 125);
  EXPECT_EQ(gone.err, "airlock: error: no artifact \"" + id + "\"\n");
  EXPECT_FALSE(fs::exists(cwd_ / "again.bin"));
  Outcome rm_again = airlock(stateArgs({"artifact", "rm", id}));
  EXPECT_EQ(rm_again.status, 125);
}

TEST_F(CliArtifactTest, HumanModePrintsOneLinePerArtifact) {
  spit(src_ / "a.txt", "alpha");
  Outcome run = airlock({"run", "--mechanism", "fake", "--state-dir", state_.string(), "--copy-in",
                         src_.string(), "--export", "a.txt", "--", "true"});
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_THAT(run.err, HasSubstr("airlock: artifact "));
  EXPECT_THAT(run.err, HasSubstr(" 5 bytes, sha256 " + sys::sha256Hex("alpha").substr(0, 12)));
}

TEST_F(CliArtifactTest, DownloadNamesAreSanitized) {
  spit(src_ / "..evil", "dots");
  spit(src_ / "line\nbreak", "newline");
  auto artifacts = exportAll({"..evil", "line\nbreak"});
  ASSERT_THAT(artifacts, SizeIs(2));
  for (const auto& a : artifacts) {
    Outcome get = airlock(stateArgs({"artifact", "get", a["artifact_id"].get<std::string>()}));
    ASSERT_EQ(get.status, 0) << get.err;
  }
  EXPECT_EQ(slurp(cwd_ / "__evil"), "dots");
  EXPECT_EQ(slurp(cwd_ / "line_break"), "newline");
  // Nothing else was written, in the directory or above it.
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(cwd_))
    names.push_back(entry.path().filename().string());
  EXPECT_THAT(names, ::testing::UnorderedElementsAre("__evil", "line_break"));
  EXPECT_FALSE(fs::exists(root_ / "evil"));
  // The original name is kept as metadata.
  Outcome list = airlock(stateArgs({"artifact", "list", "--json"}));
  ASSERT_EQ(list.status, 0) << list.err;
  auto rows = nlohmann::json::parse(list.out);
  std::vector<std::string> filenames;
  for (const auto& row : rows) filenames.push_back(row["filename"].get<std::string>());
  EXPECT_THAT(filenames, ::testing::UnorderedElementsAre("..evil", "line\nbreak"));
}

TEST_F(CliArtifactTest, GetRefusesToOverwrite) {
  spit(src_ / "report.txt", "new bytes");
  auto artifacts = exportAll({"report.txt"});
  ASSERT_THAT(artifacts, SizeIs(1));
  const std::string id = artifacts[0]["artifact_id"].get<std::string>();
  spit(cwd_ / "report.txt", "precious");
  Outcome get = airlock(stateArgs({"artifact", "get", id}));
  EXPECT_EQ(get.status, 125);
  EXPECT_THAT(get.err, StartsWith("airlock: error: \"report.txt\" already exists"));
  EXPECT_EQ(std::count(get.err.begin(), get.err.end(), '\n'), 1);
  EXPECT_EQ(slurp(cwd_ / "report.txt"), "precious");
  spit(cwd_ / "mine.txt", "also precious");
  Outcome get_o = airlock(stateArgs({"artifact", "get", id, "-o", "mine.txt"}));
  EXPECT_EQ(get_o.status, 125);
  EXPECT_EQ(slurp(cwd_ / "mine.txt"), "also precious");
  // A symlink at the target is not followed.
  fs::create_symlink(root_ / "elsewhere", cwd_ / "link.txt");
  Outcome get_link = airlock(stateArgs({"artifact", "get", id, "-o", "link.txt"}));
  EXPECT_EQ(get_link.status, 125);
  EXPECT_FALSE(fs::exists(root_ / "elsewhere"));
}

TEST_F(CliArtifactTest, ExportErrorIsReportedAfterTheResultWithStatus125) {
  spit(src_ / "ok.txt", "ok");
  Outcome run;
  auto artifacts = exportAll({"ok.txt", "missing.txt"}, &run);
  EXPECT_EQ(run.status, 125);
  ASSERT_THAT(artifacts, SizeIs(1));  // the result and the good export are still printed
  EXPECT_EQ(artifacts[0]["path"], "ok.txt");
  EXPECT_THAT(run.err, StartsWith("airlock: error: --export \"missing.txt\": "));
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1);
  EXPECT_THAT(run.err, Not(HasSubstr(state_.string())));
}

TEST_F(CliArtifactTest, UnknownIdIsOneLineWithoutHostPaths) {
  fs::create_directories(state_);
  Outcome get = airlock(stateArgs({"artifact", "get", "01a22b37-dfc9-7cba-8290-eb9786972bf7"}));
  EXPECT_EQ(get.status, 125);
  EXPECT_EQ(get.err, "airlock: error: no artifact \"01a22b37-dfc9-7cba-8290-eb9786972bf7\"\n");
  Outcome bad = airlock(stateArgs({"artifact", "rm", "../../etc/passwd"}));
  EXPECT_EQ(bad.status, 125);
  EXPECT_EQ(bad.err, "airlock: error: no artifact \"../../etc/passwd\"\n");
}

TEST_F(CliArtifactTest, GetToDashWritesTheBytesToStdout) {
  const std::string content = binaryContent();
  spit(src_ / "data.bin", content);
  auto artifacts = exportAll({"data.bin"});
  ASSERT_THAT(artifacts, SizeIs(1));
  Outcome get = airlock(
      stateArgs({"artifact", "get", artifacts[0]["artifact_id"].get<std::string>(), "-o", "-"}));
  ASSERT_EQ(get.status, 0) << get.err;
  EXPECT_EQ(get.out, content);
  EXPECT_EQ(get.err, "") << "stdout carries the bytes alone";
  EXPECT_FALSE(fs::exists(cwd_ / "-"));
  // A file named "-" is still possible, spelled as a path.
  Outcome file = airlock(
      stateArgs({"artifact", "get", artifacts[0]["artifact_id"].get<std::string>(), "-o", "./-"}));
  ASSERT_EQ(file.status, 0) << file.err;
  EXPECT_EQ(slurp(cwd_ / "-"), content);
}

// A mistyped --state-dir: the read-only commands say the directory does not
// exist (naming it) and create nothing; `airlock run` may still create it.
TEST_F(CliArtifactTest, ArtifactCommandsOnAMissingStateDirFailAndCreateNothing) {
  const fs::path typo = root_ / "stat";
  const std::string id = "01a22b37-dfc9-7cba-8290-eb9786972bf7";
  for (const auto& args : std::vector<std::vector<std::string>>{{"artifact", "list"},
                                                                {"artifact", "list", "--json"},
                                                                {"artifact", "get", id},
                                                                {"artifact", "rm", id}}) {
    std::vector<std::string> with = args;
    with.insert(with.end(), {"--state-dir", typo.string()});
    Outcome o = airlock(with);
    EXPECT_EQ(o.status, 125) << args[1];
    EXPECT_EQ(o.out, "") << args[1];
    EXPECT_EQ(
        o.err,
        "airlock: error: state directory " + typo.string() +
            " does not exist, so it holds no artifacts (check --state-dir; airlock run --export "
            "creates it)\n")
        << args[1];
    EXPECT_FALSE(fs::exists(typo)) << args[1] << " created the state directory";
  }
  spit(src_ / "a.txt", "alpha");
  Outcome run = airlock({"run", "--mechanism", "fake", "--state-dir", typo.string(), "--copy-in",
                         src_.string(), "--export", "a.txt", "--", "true"});
  ASSERT_EQ(run.status, 0) << run.err;
  Outcome list = airlock({"artifact", "list", "--state-dir", typo.string()});
  EXPECT_EQ(list.status, 0) << list.err;
  EXPECT_THAT(list.out, HasSubstr("  a.txt\n"));
}

// --export paths are checked before anything is provisioned, with the text
// the export itself would give after the run.
TEST_F(CliArtifactTest, AnEscapingExportIsRefusedBeforeTheCommandRuns) {
  for (const std::string path : {"../x", "/etc/passwd", "a/../b", "a//b"}) {
    Outcome o = airlock({"run", "--mechanism", "fake", "--state-dir", state_.string(), "--export",
                         path, "--", "echo", "ran"});
    EXPECT_EQ(o.status, 125) << path;
    EXPECT_EQ(o.out, "") << path << ": the command ran";
    auto contained = checkRelativePath(path);
    ASSERT_FALSE(contained.has_value()) << path;
    EXPECT_EQ(o.err,
              "airlock: error: --export \"" + path + "\": " + contained.error().context + "\n")
        << path;
    EXPECT_FALSE(fs::exists(state_)) << path << ": the artifact store was opened";
  }
}

TEST(ExportPath, TheEarlyCheckAndTheExportGiveTheSameText) {
  auto early = checkExportPath("../x");
  ASSERT_FALSE(early.has_value());
  EXPECT_EQ(early.error().code, ErrorCode::kWorkspaceEscape);
  EXPECT_EQ(early.error().context.rfind(
                "--export \"../x\": path \"../x\" has a \".\" or \"..\" component", 0),
            0u)
      << early.error().context;
  EXPECT_TRUE(checkExportPath("out/a.txt").has_value());
  auto no_env = [](std::string_view) { return std::optional<std::string>{}; };
  RunFlags flags;
  flags.argv = {"true"};
  flags.exports = {"ok.txt", "../x"};
  auto plan = planRun(flags, no_env);
  ASSERT_FALSE(plan.has_value());
  EXPECT_EQ(plan.error().message(), early.error().message());
}

TEST(SanitizeDownloadName, KeepsOnlyASafeBasename) {
  const std::string id = "01a22b37-dfc9-7cba-8290-eb9786972bf7";
  EXPECT_EQ(sanitizeDownloadName("report.pdf", id), "report.pdf");
  EXPECT_EQ(sanitizeDownloadName("../../etc/passwd", id), "passwd");
  EXPECT_EQ(sanitizeDownloadName("dir\\win.txt", id), "win.txt");
  EXPECT_EQ(sanitizeDownloadName("..evil", id), "__evil");
  EXPECT_EQ(sanitizeDownloadName(".bashrc", id), "_bashrc");
  EXPECT_EQ(sanitizeDownloadName("a\nb\x7f", id), "a_b_");
  EXPECT_EQ(sanitizeDownloadName("", id), "artifact-" + id);
  EXPECT_EQ(sanitizeDownloadName("..", id), "artifact-" + id);
  EXPECT_EQ(sanitizeDownloadName("dir/", id), "artifact-" + id);
  EXPECT_EQ(sanitizeDownloadName(std::string(300, 'x'), id), std::string(255, 'x'));
  EXPECT_EQ(sanitizeDownloadName("caf\xc3\xa9.txt", id), "caf\xc3\xa9.txt");
}

TEST(RunPlanExport, CarriesExportsAndStateDirAndRefusesEmptyOnes) {
  auto no_env = [](std::string_view) { return std::optional<std::string>{}; };
  RunFlags flags;
  flags.argv = {"true"};
  auto defaults = planRun(flags, no_env);
  ASSERT_TRUE(defaults.has_value());
  EXPECT_TRUE(defaults->exports.empty());
  EXPECT_EQ(defaults->state_dir, kDefaultStateDir);

  flags.exports = {"out/a.txt", "b"};
  flags.state_dir = "/tmp/somewhere";
  auto plan = planRun(flags, no_env);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->exports, (std::vector<std::string>{"out/a.txt", "b"}));
  EXPECT_EQ(plan->state_dir, "/tmp/somewhere");

  flags.exports = {""};
  EXPECT_FALSE(planRun(flags, no_env).has_value());
  flags.exports = {};
  flags.state_dir = "";
  EXPECT_FALSE(planRun(flags, no_env).has_value());
}

}  // namespace
}  // namespace airlock::cli
