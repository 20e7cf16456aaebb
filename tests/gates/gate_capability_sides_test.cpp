// The capability table's two halves stay on their sides of spec 000's
// boundary ("Where the boundary is"; "The execution service holds nothing
// worth stealing"). Structural: no file under src/airlock/gateway includes
// anything under airlock/execution/ or airlock/sandbox/, and no file under
// src/airlock/execution includes anything under airlock/gateway/ or
// airlock/service/, and none under src/airlock/node (the execution node's
// internal API) anything under airlock/gateway/, airlock/cli/ or the
// gateway's stores. Direct includes of every .h and .cpp in those trees;
// what a file reaches transitively at run time is gate_no_runtime_in_worker's
// walk. The rule is checked against a synthetic include list too, so that
// a walk that finds nothing has shown it can find something.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

const fs::path kSrc = fs::path(AIRLOCK_SOURCE_DIR) / "src";

struct SideRule {
  std::string side;                    // a directory under src/, "airlock/gateway/"
  std::vector<std::string> forbidden;  // include prefixes it may not use
};

const std::vector<SideRule>& rules() {
  static const std::vector<SideRule> r{
      {"airlock/gateway/", {"airlock/execution/", "airlock/sandbox/"}},
      {"airlock/execution/", {"airlock/gateway/", "airlock/service/"}},
      // The node's front end (its internal API) is written against the
      // service's HTTP core, and never against the gateway.
      {"airlock/node/",
       {"airlock/gateway/", "airlock/cli/", "airlock/storage/", "airlock/artifacts/"}}};
  return r;
}

// The targets of a file's #include lines, "..." and <...> alike.
std::vector<std::string> includesOf(const std::string& text) {
  static const std::regex kInclude(R"(^\s*#\s*include\s*[<"]([^>"]+)[>"])");
  std::vector<std::string> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, kInclude)) out.push_back(m[1]);
  }
  return out;
}

// The rule broken by each include of `files` (path relative to src/ ->
// text), as "FILE includes TARGET (SIDE may not include PREFIX)".
std::vector<std::string> violations(const std::map<std::string, std::string>& files) {
  std::vector<std::string> found;
  for (const auto& [file, text] : files) {
    for (const SideRule& rule : rules()) {
      if (file.rfind(rule.side, 0) != 0) continue;
      for (std::string target : includesOf(text)) {
        while (target.rfind("./", 0) == 0) target.erase(0, 2);
        for (const std::string& prefix : rule.forbidden) {
          if (target.rfind(prefix, 0) == 0)
            found.push_back(file + " includes " + target + " (" + rule.side + " may not include " +
                            prefix + ")");
        }
      }
    }
  }
  return found;
}

std::string readFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Every .h and .cpp under each side, by path relative to src/.
std::map<std::string, std::string> sideSources() {
  std::map<std::string, std::string> files;
  for (const SideRule& rule : rules()) {
    const fs::path dir = kSrc / rule.side;
    if (!fs::exists(dir)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(dir)) {
      const auto ext = entry.path().extension();
      if (entry.is_regular_file() && (ext == ".h" || ext == ".cpp"))
        files[fs::relative(entry.path(), kSrc).string()] = readFile(entry.path());
    }
  }
  return files;
}

TEST(GateCapabilitySides, NeitherSideIncludesTheOther) {
  const auto files = sideSources();
  // Both halves of the capability table are among what was read.
  ASSERT_TRUE(files.count("airlock/gateway/capabilities/gateway_capabilities.h"))
      << "no gateway capabilities under " << kSrc;
  ASSERT_TRUE(files.count("airlock/execution/capabilities/execution_capabilities.h"))
      << "no execution capabilities under " << kSrc;
  EXPECT_THAT(violations(files), ::testing::IsEmpty());
}

// The rule flags each forbidden include, in either spelling, and only those.
TEST(GateCapabilitySides, TheWalkCanFail) {
  const std::map<std::string, std::string> synthetic{
      {"airlock/gateway/capabilities/a.cpp",
       "#include \"airlock/execution/capabilities/execution_capabilities.h\"\n"
       "#include \"airlock/capability/broker/broker.h\"\n"},
      {"airlock/gateway/tools/b.h", "  #  include <airlock/sandbox/linux/linux_environment.h>\n"},
      {"airlock/execution/capabilities/c.cpp",
       "#include \"airlock/gateway/capabilities/job_output_artifacts.h\"\n"
       "#include \"airlock/port/execution_environment.h\"\n"},
      {"airlock/execution/d.h", "#include \"./airlock/service/api.h\"\n"},
      // Not on either side: free to include both.
      {"airlock/capability/broker/e.cpp",
       "#include \"airlock/execution/capabilities/execution_capabilities.h\"\n"
       "#include \"airlock/gateway/capabilities/gateway_capabilities.h\"\n"},
      // A comment is not an include.
      {"airlock/gateway/f.cpp", "// #include \"airlock/execution/x.h\"\n"}};
  const auto found = violations(synthetic);
  EXPECT_THAT(found, ::testing::UnorderedElementsAre(
                         ::testing::StartsWith("airlock/gateway/capabilities/a.cpp includes "
                                               "airlock/execution/"),
                         ::testing::StartsWith("airlock/gateway/tools/b.h includes "
                                               "airlock/sandbox/"),
                         ::testing::StartsWith("airlock/execution/capabilities/c.cpp includes "
                                               "airlock/gateway/"),
                         ::testing::StartsWith("airlock/execution/d.h includes "
                                               "airlock/service/")));
}

}  // namespace
