#include "airlock/core/command_validation.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <string>
#include <vector>

#include "airlock/core/limits_defaults.h"

namespace airlock {
namespace {

void expectProblem(std::string_view path, PathProblem problem) {
  EXPECT_EQ(findPathProblem(path), problem) << path;
  const auto r = checkRelativePath(path);
  ASSERT_FALSE(r.has_value()) << path;
  EXPECT_EQ(r.error().code, ErrorCode::kWorkspaceEscape);
  EXPECT_NE(r.error().context.find(pathProblemName(problem)), std::string::npos)
      << r.error().context;
}

TEST(CheckRelativePath, B09MalformedInputsEachGetTheirOwnCode) {
  expectProblem("", PathProblem::kEmptyComponent);
  expectProblem("a//b", PathProblem::kEmptyComponent);
  expectProblem("a/", PathProblem::kEmptyComponent);
  expectProblem("a/./b", PathProblem::kDotComponent);
  expectProblem("../x", PathProblem::kDotComponent);
  expectProblem("a/../../x", PathProblem::kDotComponent);
  expectProblem("./a", PathProblem::kDotComponent);
  expectProblem("a/..", PathProblem::kDotComponent);
  expectProblem("..", PathProblem::kDotComponent);
  expectProblem("/etc/passwd", PathProblem::kAbsolutePath);
  expectProblem("/", PathProblem::kAbsolutePath);
  expectProblem(std::string_view("a\0b", 3), PathProblem::kNulByte);
  expectProblem(std::string(256, 'n'), PathProblem::kNameTooLong);
  expectProblem("ok/" + std::string(256, 'n') + "/ok", PathProblem::kNameTooLong);
}

TEST(CheckRelativePath, MessagesSayWhatIsWrongInWords) {
  EXPECT_EQ(checkRelativePath("a//b").error().context,
            "path \"a//b\" has an empty component (EMPTY_COMPONENT); remove repeated, leading or "
            "trailing '/' and use \".\" for the workspace root");
  EXPECT_NE(checkRelativePath("/etc").error().context.find("relative to /workspace"),
            std::string::npos);
  EXPECT_NE(checkRelativePath(std::string_view("a\0b", 3)).error().context.find("\"a\\x00b\""),
            std::string::npos);
}

TEST(CheckRelativePath, TheRootAndOrdinaryPathsPass) {
  EXPECT_EQ(checkRelativePath(".").value(), "");
  EXPECT_EQ(checkRelativePath("a").value(), "a");
  EXPECT_EQ(checkRelativePath("src/app/main.py").value(), "src/app/main.py");
  EXPECT_EQ(checkRelativePath("..data").value(), "..data");
  EXPECT_EQ(checkRelativePath("...").value(), "...");
  EXPECT_EQ(checkRelativePath(".hidden/x").value(), ".hidden/x");
  EXPECT_EQ(checkRelativePath("a\nb").value(), "a\nb");
  EXPECT_EQ(checkRelativePath("-rf").value(), "-rf");
  EXPECT_EQ(checkRelativePath("\\").value(), "\\");
  EXPECT_EQ(checkRelativePath(std::string("\xff\xfe.txt")).value(), "\xff\xfe.txt");
  EXPECT_EQ(checkRelativePath("%2e%2e/x").value(), "%2e%2e/x");  // literal name, not decoded
}

TEST(CheckRelativePath, B09ComponentLengthBoundary) {
  EXPECT_TRUE(checkRelativePath(std::string(255, 'a')).has_value());
  EXPECT_FALSE(checkRelativePath(std::string(256, 'a')).has_value());
  // 85 three-byte characters are 255 bytes and pass; 86 are 258 and fail.
  std::string multibyte;
  for (int i = 0; i < 85; ++i) multibyte += "\xe2\x9c\x93";
  EXPECT_TRUE(checkRelativePath(multibyte).has_value());
  EXPECT_EQ(findPathProblem(multibyte + "\xe2\x9c\x93"), PathProblem::kNameTooLong);
  // 256 bytes of two-byte characters.
  std::string two_byte;
  for (int i = 0; i < 128; ++i) two_byte += "\xc3\xa9";
  EXPECT_EQ(findPathProblem(two_byte), PathProblem::kNameTooLong);
}

std::string pathOfLength(std::size_t total) {
  // Components of 200 bytes separated by '/', the last one padded to fit.
  std::string out;
  while (out.size() + 201 < total) out += std::string(200, 'd') + "/";
  out += std::string(total - out.size(), 'f');
  return out;
}

TEST(CheckRelativePath, B09TotalLengthBoundary) {
  const std::string max = pathOfLength(4096);
  ASSERT_EQ(max.size(), 4096u);
  EXPECT_EQ(checkRelativePath(max).value(), max);
  const std::string over = pathOfLength(4097);
  ASSERT_EQ(over.size(), 4097u);
  expectProblem(over, PathProblem::kPathTooLong);
}

TEST(PathProblemName, EveryCode) {
  EXPECT_EQ(pathProblemName(PathProblem::kEmptyComponent), "EMPTY_COMPONENT");
  EXPECT_EQ(pathProblemName(PathProblem::kDotComponent), "DOT_COMPONENT");
  EXPECT_EQ(pathProblemName(PathProblem::kAbsolutePath), "ABSOLUTE_PATH");
  EXPECT_EQ(pathProblemName(PathProblem::kNulByte), "NUL_BYTE");
  EXPECT_EQ(pathProblemName(PathProblem::kNameTooLong), "NAME_TOO_LONG");
  EXPECT_EQ(pathProblemName(PathProblem::kPathTooLong), "PATH_TOO_LONG");
}

TEST(CheckRelativePath, GeneratedPathsAreRejectedOrContained) {
  const auto component = rc::gen::oneOf(
      rc::gen::element<std::string>("", ".", "..", "/", std::string(1, '\0'), "a", "b.txt",
                                    "..data", "\xff", "\xe2\x9c\x93", "%2e%2e", "\\", " "),
      rc::gen::map(rc::gen::inRange<std::size_t>(250, 260),
                   [](std::size_t n) { return std::string(n, 'L'); }),
      rc::gen::arbitrary<std::string>());
  EXPECT_TRUE(rc::check("checkRelativePath result is normalized, relative and bounded", [&] {
    const auto parts = *rc::gen::container<std::vector<std::string>>(component);
    const bool leading_slash = *rc::gen::arbitrary<bool>();
    std::string path = leading_slash ? "/" : "";
    for (std::size_t i = 0; i < parts.size(); ++i) {
      if (i > 0) path += '/';
      path += parts[i];
    }
    const auto r = checkRelativePath(path);
    if (!r) {
      RC_ASSERT(r.error().code == ErrorCode::kWorkspaceEscape);
      RC_ASSERT(findPathProblem(path).has_value());
      return;
    }
    const std::string& out = *r;
    RC_ASSERT(out.size() <= kMaxPathBytes);
    RC_ASSERT(out.find('\0') == std::string::npos);
    if (out.empty()) {
      RC_ASSERT(path == ".");
      return;
    }
    RC_ASSERT(out.front() != '/');
    std::size_t start = 0;
    while (true) {
      const std::size_t slash = out.find('/', start);
      const std::string c =
          out.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
      RC_ASSERT(!c.empty());
      RC_ASSERT(c != ".");
      RC_ASSERT(c != "..");
      RC_ASSERT(c.size() <= kMaxPathComponentBytes);
      if (slash == std::string::npos) break;
      start = slash + 1;
    }
    RC_ASSERT(out == path);  // accepted paths are not rewritten
  }));
}

// --- validateCommand -------------------------------------------------------

ExecutionCommand goodCommand() {
  ExecutionCommand c;
  c.argv = {"python3", "script.py"};
  c.working_directory = ".";
  c.timeout_seconds = 30;
  c.maximum_output_bytes = kDefaultMaximumOutputBytes;
  return c;
}

std::string rejection(const ExecutionCommand& c) {
  const auto r = validateCommand(c);
  if (r) return "<accepted>";
  EXPECT_EQ(r.error().code, ErrorCode::kToolValidationError);
  return r.error().context;
}

TEST(ValidateCommand, AcceptsLegalCommands) {
  EXPECT_TRUE(validateCommand(goodCommand()).has_value());
  ExecutionCommand c = goodCommand();
  c.argv = {"bash", "-lc", "pytest -q && echo ok"};
  EXPECT_TRUE(validateCommand(c).has_value());
  c.argv = {"/usr/bin/python3"};
  EXPECT_TRUE(validateCommand(c).has_value());
  c.argv = {"echo hi"};  // one element with a space is legal (the CLI may warn)
  EXPECT_TRUE(validateCommand(c).has_value());
  c.argv = {"bash", "./setup.sh"};
  c.working_directory = "src/app";
  EXPECT_TRUE(validateCommand(c).has_value());
}

TEST(ValidateCommand, RejectsAnEmptyVector) {
  ExecutionCommand c = goodCommand();
  c.argv.clear();
  EXPECT_NE(rejection(c).find("non-empty argument vector like [\"python3\""), std::string::npos);
}

TEST(ValidateCommand, RejectsNulBytesNamingTheElement) {
  ExecutionCommand c = goodCommand();
  c.argv.push_back(std::string("a\0b", 3));
  EXPECT_EQ(rejection(c), "command[2] contains a NUL byte");
}

TEST(ValidateCommand, ArgvSizeCapBoundary) {
  ExecutionCommand c = goodCommand();
  // "python3\0" is 8 bytes; one more element fills the cap exactly.
  c.argv = {"python3", std::string(kMaxArgvBytes - 8 - 1, 'x')};
  EXPECT_TRUE(validateCommand(c).has_value());
  c.argv[1] += 'x';
  EXPECT_NE(rejection(c).find("larger than 65536 bytes"), std::string::npos);
}

TEST(ValidateCommand, ProgramMustBeAbsoluteOrABareName) {
  ExecutionCommand c = goodCommand();
  c.argv = {"./setup.sh"};
  const std::string message = rejection(c);
  EXPECT_NE(message.find("relative path"), std::string::npos) << message;
  EXPECT_NE(message.find("[\"bash\", \"./setup.sh\"]"), std::string::npos) << message;
  c.argv = {"bin/tool"};
  EXPECT_NE(rejection(c).find("relative path"), std::string::npos);
  c.argv = {""};
  EXPECT_NE(rejection(c).find("command[0] is empty"), std::string::npos);
}

TEST(ValidateCommand, WorkingDirectoryMustPassContainment) {
  ExecutionCommand c = goodCommand();
  c.working_directory = "../other-tenant";
  const std::string message = rejection(c);
  EXPECT_NE(message.find("working_directory path \"../other-tenant\""), std::string::npos)
      << message;
  EXPECT_NE(message.find("DOT_COMPONENT"), std::string::npos);
  c.working_directory = "/etc";
  EXPECT_NE(rejection(c).find("ABSOLUTE_PATH"), std::string::npos);
  c.working_directory = "";
  EXPECT_NE(rejection(c).find("EMPTY_COMPONENT"), std::string::npos);
}

TEST(ValidateCommand, TimeoutAndOutputCapMustBePositive) {
  ExecutionCommand c = goodCommand();
  c.timeout_seconds = 0;
  EXPECT_EQ(rejection(c), "timeout_seconds must be a positive number of seconds, got 0");
  c = goodCommand();
  c.timeout_seconds = -3;
  EXPECT_NE(rejection(c).find("got -3"), std::string::npos);
  c = goodCommand();
  c.maximum_output_bytes = 0;
  EXPECT_EQ(rejection(c), "maximum_output_bytes must be positive, got 0");
}

TEST(ValidateCommand, ChecksRunInTheSpecOrder) {
  ExecutionCommand c = goodCommand();
  c.argv = {"./x", std::string("\0", 1)};
  c.working_directory = "..";
  c.timeout_seconds = 0;
  EXPECT_NE(rejection(c).find("NUL byte"), std::string::npos);  // element check before argv[0]
  c.argv = {"./x"};
  EXPECT_NE(rejection(c).find("relative path"), std::string::npos);
  c.argv = {"x"};
  EXPECT_NE(rejection(c).find("working_directory"), std::string::npos);
  c.working_directory = ".";
  EXPECT_NE(rejection(c).find("timeout_seconds"), std::string::npos);
}

TEST(ShellStringProblem, OneMessageSpelledForTheCommandLineOrForJson) {
  EXPECT_EQ(shellStringProblem({"echo", "two words"}, ArgvSpelling::kJson), std::nullopt);
  EXPECT_EQ(shellStringProblem({}, ArgvSpelling::kCommandLine), std::nullopt);
  const std::string prefix =
      "the command \"echo it's \\\"x\\\"\" is a shell string, but Airlock runs an argument vector "
      "and picks no "
      "shell for you; to run it with a shell, say so: ";
  EXPECT_EQ(shellStringProblem({"echo it's \"x\""}, ArgvSpelling::kCommandLine),
            prefix + "airlock run -- sh -c 'echo it'\\''s \"x\"'");
  EXPECT_EQ(shellStringProblem({"echo it's \"x\""}, ArgvSpelling::kJson),
            prefix + R"(["sh","-c","echo it's \"x\""])");
  // The command is quoted for the message (and the JSON form escaped): a
  // newline cannot break an HTTP error's line.
  EXPECT_EQ(shellStringProblem({"a\nb"}, ArgvSpelling::kJson)->find('\n'), std::string::npos);
}

}  // namespace
}  // namespace airlock
