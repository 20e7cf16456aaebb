// Gate no_runtime_in_worker (spec 000, "Where the boundary is", second
// property, and the hard gate "The worker imports no container runtime"). Structural: the gateway
// side (src/airlock/gateway/**, and src/airlock/service/**) holds the ExecutionEnvironment port and
// never a mechanism.
//
// Three walks, each with a check that it can fail:
//  1. Sources: from every file under the gateway and service directories,
//     follow "airlock/..." includes transitively, and with each header its
//     own .cpp (the code that header brings in at link time). Of the
//     execution wing only port/ may be reached: no file under sandbox/,
//     workspace/, execution/ or cli/. No file reached may include
//     a kernel-runtime system header (seccomp, capabilities, mount,
//     namespaces, cgroups, process spawning), or use such a call in its
//     code (comments and string literals removed first).
//  2. Link: the transitive CMake link closure of every target defined in
//     those directories (computed at configure time,
//     gateway_link_closure.txt) names no mechanism library, no libseccomp,
//     no libcap, and not the composition root (airlock_cli).
//  3. Objects: the gateway's static archives reference no symbol of the
//     linux mechanism, libseccomp or clone3 (nm).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

const fs::path kSource = AIRLOCK_SOURCE_DIR;
const fs::path kSrc = kSource / "src";

std::string readFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Code only: comments and the contents of string and character literals
// removed (prose and messages may name what the code must not do). Include
// lines are read before this, from the raw text.
std::string codeOf(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  enum { kCode, kLine, kBlock, kString, kChar } state = kCode;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const char next = i + 1 < text.size() ? text[i + 1] : '\0';
    switch (state) {
      case kCode:
        if (c == '/' && next == '/') {
          state = kLine;
          ++i;
        } else if (c == '/' && next == '*') {
          state = kBlock;
          ++i;
        } else if (c == 'R' && next == '"') {
          // Raw string literal R"delim( ... )delim".
          const std::size_t open = text.find('(', i + 2);
          if (open == std::string::npos) return out;
          const std::string close = ")" + text.substr(i + 2, open - i - 2) + "\"";
          const std::size_t end = text.find(close, open);
          if (end == std::string::npos) return out;
          out += "\"\"";
          i = end + close.size() - 1;
        } else if (c == '"') {
          state = kString;
          out += c;
        } else if (c == '\'') {
          state = kChar;
          out += c;
        } else {
          out += c;
        }
        break;
      case kLine:
        if (c == '\n') {
          state = kCode;
          out += c;
        }
        break;
      case kBlock:
        if (c == '*' && next == '/') {
          state = kCode;
          ++i;
        }
        break;
      case kString:
      case kChar:
        if (c == '\\') {
          ++i;
        } else if ((state == kString && c == '"') || (state == kChar && c == '\'')) {
          state = kCode;
          out += c;
        }
        break;
    }
  }
  return out;
}

struct Include {
  std::string target;
  bool system;  // <...>
};

std::vector<Include> includesOf(const std::string& text) {
  static const std::regex kInclude(R"(^\s*#\s*include\s*([<"])([^>"]+)[>"])");
  std::vector<Include> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, kInclude)) out.push_back({m[2], m[1] == "<"});
  }
  return out;
}

// System headers that only sandbox runtime code needs.
const std::set<std::string>& forbiddenSystemHeaders() {
  static const std::set<std::string> headers{
      "seccomp.h",          "linux/seccomp.h",    "linux/filter.h", "sys/capability.h",
      "linux/capability.h", "sys/mount.h",        "linux/mount.h",  "sched.h",
      "linux/sched.h",      "sys/prctl.h",        "linux/prctl.h",  "spawn.h",
      "sys/fsuid.h",        "linux/cgroupstats.h"};
  return headers;
}

// Calls and names that mean running, jailing or limiting processes.
const std::regex& forbiddenCode() {
  static const std::regex re(
      R"(\b(clone3?|unshare|setns|pivot_root|mount|umount2?|seccomp_\w+|prctl|capset|cap_set_\w+|)"
      R"(execv[pe]?|execl[pe]?|execve(at)?|fexecve|fork|vfork|posix_spawnp?|popen|system|)"
      R"(SYS_clone3?|CLONE_NEW\w+|pidfd_open|pidfd_send_signal)\s*\(|\bcgroup\w*|\bCgroup\w*|)"
      R"(\blinux_jail::|\bSYS_clone3?\b|\bCLONE_NEW\w+)");
  return re;
}

// Of the execution wing the gateway may reach the port (airlock/port/)
// alone: nothing of the mechanisms and their host layer, workspace
// containment, the execution node or the composition root. What it names
// is the problem, "" when the file may be reached.
std::string executionSideOf(const std::string& relative) {
  if (relative.rfind("airlock/sandbox/linux/", 0) == 0 ||
      relative.rfind("airlock/sandbox/oci/", 0) == 0)
    return "sandbox runtime code";
  for (const char* wing :
       {"airlock/sandbox/", "airlock/workspace/", "airlock/execution/", "airlock/cli/"}) {
    if (relative.rfind(wing, 0) == 0)
      return std::string("on the execution side (") + wing + "; the gateway may reach port/ alone)";
  }
  return "";
}

struct Reached {
  std::string file;  // relative to src/
  std::string from;  // the file that brought it in ("" for a root)
};

// Everything reachable from roots (paths relative to src/), with the
// problems found, each naming the chain's last link.
std::vector<std::string> walk(const std::vector<std::string>& roots,
                              std::size_t* files_seen = nullptr) {
  std::vector<std::string> problems;
  std::map<std::string, std::string> parent;
  std::vector<std::string> queue;
  for (const auto& r : roots) {
    if (parent.emplace(r, "").second) queue.push_back(r);
  }
  auto enqueue = [&](const std::string& file, const std::string& from) {
    if (parent.emplace(file, from).second) queue.push_back(file);
  };
  while (!queue.empty()) {
    const std::string file = queue.back();
    queue.pop_back();
    const std::string via = parent[file].empty() ? "" : " (included from " + parent[file] + ")";
    // A root is followed wherever it is (TheWalkCanFail starts in the
    // execution wing); a file it reaches is judged by where it is.
    if (const std::string side = executionSideOf(file); !side.empty() && !parent[file].empty()) {
      problems.push_back(file + " is " + side + via);
      continue;
    }
    const fs::path path = kSrc / file;
    if (!fs::exists(path)) continue;  // a generated or third-party header
    const std::string text = readFile(path);
    for (const Include& inc : includesOf(text)) {
      if (inc.system) {
        if (forbiddenSystemHeaders().count(inc.target)) {
          problems.push_back(file + " includes <" + inc.target + ">" + via);
        }
        continue;
      }
      if (inc.target.rfind("airlock/", 0) == 0) enqueue(inc.target, file);
    }
    std::smatch m;
    const std::string code = codeOf(text);
    if (std::regex_search(code, m, forbiddenCode())) {
      problems.push_back(file + " uses " + m.str() + via);
    }
    // The implementation of a header is linked in with it.
    if (path.extension() == ".h") {
      const std::string impl = file.substr(0, file.size() - 2) + ".cpp";
      if (fs::exists(kSrc / impl)) enqueue(impl, file);
    }
  }
  if (files_seen != nullptr) *files_seen = parent.size();
  return problems;
}

std::vector<std::string> workerRoots() {
  std::vector<std::string> roots;
  for (const char* dir : {"airlock/gateway", "airlock/service"}) {
    if (!fs::exists(kSrc / dir)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(kSrc / dir)) {
      const auto ext = entry.path().extension();
      if (entry.is_regular_file() && (ext == ".h" || ext == ".cpp")) {
        roots.push_back(fs::relative(entry.path(), kSrc).string());
      }
    }
  }
  return roots;
}

TEST(GateNoRuntimeInWorker, GatewaySourcesReachNoRuntimeCode) {
  const auto roots = workerRoots();
  ASSERT_FALSE(roots.empty()) << "no gateway sources under " << kSrc;
  std::size_t seen = 0;
  const auto problems = walk(roots, &seen);
  EXPECT_THAT(problems, ::testing::IsEmpty());
  // The walk really followed includes into the port and core.
  EXPECT_GT(seen, roots.size());
}

// The walk flags runtime code when it is reached: the composition root
// (which chooses the linux adapter) and the adapter itself.
TEST(GateNoRuntimeInWorker, TheWalkCanFail) {
  const auto via_cli = walk({"airlock/execution/adapters.cpp"});
  EXPECT_THAT(via_cli, ::testing::Contains(::testing::HasSubstr("airlock/sandbox/linux/")));
  // The host layer is not runtime code by the regexes below, but it is the
  // execution side: reaching it from a gateway file is a finding too.
  EXPECT_THAT(walk({"airlock/execution/adapters.h"}),
              ::testing::Contains(::testing::HasSubstr("the gateway may reach port/ alone")));
  // The adapter's own sources, scanned as if they were gateway code.
  std::vector<std::string> findings;
  for (const char* file :
       {"airlock/sandbox/linux/init_process.cpp", "airlock/sandbox/linux/seccomp_policy.cpp",
        "airlock/sandbox/host/cgroup.cpp"}) {
    const std::string code = codeOf(readFile(kSrc / file));
    ASSERT_FALSE(code.empty()) << file;
    EXPECT_TRUE(std::regex_search(code, forbiddenCode())) << file;
  }
}

TEST(GateNoRuntimeInWorker, CommentsAndStringsAreNotCode) {
  EXPECT_FALSE(std::regex_search(codeOf("// uses clone3() and cgroups\nint x;"), forbiddenCode()));
  EXPECT_FALSE(
      std::regex_search(codeOf("/* fork() */ const char* s = \"mount(\";"), forbiddenCode()));
  EXPECT_FALSE(std::regex_search(codeOf("auto s = R\"(execve( )\";"), forbiddenCode()));
  EXPECT_TRUE(std::regex_search(codeOf("int r = ::fork ();"), forbiddenCode()));
  EXPECT_TRUE(std::regex_search(codeOf("CgroupHandle h;"), forbiddenCode()));
}

// The other direction: the execution side (src/airlock/execution) is what an
// execution node runs, so none of its files includes the gateway, the
// service or a front end (the cli). The node's own front end, its internal
// API over HTTP, lives apart in src/airlock/node (gate_capability_sides
// keeps the gateway out of it).
std::vector<std::string> frontEndIncludes(const std::string& text) {
  std::vector<std::string> out;
  for (const Include& inc : includesOf(text)) {
    for (const char* dir : {"airlock/gateway/", "airlock/service/", "airlock/cli/"}) {
      if (!inc.system && inc.target.rfind(dir, 0) == 0) out.push_back(inc.target);
    }
  }
  return out;
}

TEST(GateNoRuntimeInWorker, TheExecutionSideIncludesNoFrontEnd) {
  std::size_t files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(kSrc / "airlock/execution")) {
    if (!entry.is_regular_file()) continue;
    ++files;
    EXPECT_THAT(frontEndIncludes(readFile(entry.path())), ::testing::IsEmpty()) << entry.path();
  }
  EXPECT_GT(files, 0u) << "no files under src/airlock/execution";
  // The check sees a front end's include when there is one.
  EXPECT_THAT(frontEndIncludes("#include \"airlock/cli/summary.h\"\n#include <vector>\n"),
              ::testing::ElementsAre("airlock/cli/summary.h"));
}

// --- Link dependencies -------------------------------------------------------

std::map<std::string, std::vector<std::string>> linkClosures() {
  // "target: dep dep dep" per line, written at configure time.
  std::map<std::string, std::vector<std::string>> out;
  std::istringstream lines(readFile(AIRLOCK_LINK_CLOSURE_FILE));
  for (std::string line; std::getline(lines, line);) {
    const auto colon = line.find(": ");
    if (colon == std::string::npos) continue;
    std::istringstream deps(line.substr(colon + 1));
    auto& list = out[line.substr(0, colon)];
    for (std::string dep; deps >> dep;) list.push_back(dep);
  }
  return out;
}

bool forbiddenLibrary(const std::string& dep) {
  static const std::regex re(
      R"((airlock_sandbox_linux|airlock_sandbox_oci\w*|airlock_kernel_features|airlock_cli\b|)"
      R"(SECCOMP|seccomp|libcap\b|(^|[/:])cap$|runsc|crun))");
  return std::regex_search(dep, re);
}

TEST(GateNoRuntimeInWorker, GatewayLinkClosureHoldsNoMechanism) {
  const auto closures = linkClosures();
  ASSERT_TRUE(closures.count("airlock_gateway_tools")) << "closure file lacks the gateway";
  ASSERT_TRUE(closures.count("airlock_gateway_mcp"));
  ASSERT_TRUE(closures.count("airlock_gateway_api"));
  for (const auto& [target, deps] : closures) {
    if (target.rfind("check:", 0) == 0) continue;  // the self-check lines below
    EXPECT_FALSE(deps.empty() && target == "airlock_gateway_tools");
    for (const auto& dep : deps) EXPECT_FALSE(forbiddenLibrary(dep)) << target << " links " << dep;
  }
  // The gateway does hold the port.
  EXPECT_THAT(closures.at("airlock_gateway_tools"), ::testing::Contains("airlock_port"));
}

TEST(GateNoRuntimeInWorker, TheLinkCheckCanFail) {
  // The closure of the composition root, recorded beside the others, does
  // reach the linux mechanism when it is built.
  const auto closures = linkClosures();
  ASSERT_TRUE(closures.count("check:airlock_cli"));
  bool flagged = false;
  for (const auto& dep : closures.at("check:airlock_cli"))
    flagged = flagged || forbiddenLibrary(dep);
  EXPECT_TRUE(flagged) << "the check did not see airlock_cli's mechanism";
}

// --- Object files -------------------------------------------------------------

std::string undefinedSymbols(const std::string& archive) {
  const std::string command = "nm -C --undefined-only '" + archive + "' 2>/dev/null";
  std::string out;
  if (FILE* pipe = ::popen(command.c_str(), "r")) {
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
    ::pclose(pipe);
  }
  return out;
}

TEST(GateNoRuntimeInWorker, GatewayObjectsReferenceNoRuntimeSymbols) {
  const std::regex forbidden(
      R"(linux_jail::|\bseccomp_|\bclone3?\b|\bunshare\b|\bsetns\b|\bmount\b|cap_set)");
  for (const char* archive : {AIRLOCK_GATEWAY_ARCHIVES}) {
    const std::string symbols = undefinedSymbols(archive);
    ASSERT_FALSE(symbols.empty()) << "nm found nothing in " << archive;
    std::smatch m;
    EXPECT_FALSE(std::regex_search(symbols, m, forbidden)) << archive << " needs " << m.str();
  }
  // The same check on the linux mechanism's archive finds its runtime.
  const std::string runtime = undefinedSymbols(AIRLOCK_LINUX_ARCHIVE);
  EXPECT_TRUE(std::regex_search(runtime, forbidden));
}

}  // namespace
