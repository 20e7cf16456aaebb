// What every MCP client accepts of the tool list: names matching
// ^[a-zA-Z0-9_-]{1,64}$ (Claude Desktop, OpenAI), input schemas without a
// top-level oneOf/anyOf/allOf (the Anthropic API, Ajv's strict mode), and
// every schema compiling under Ajv 8's strict mode (the validator of the
// MCP TypeScript SDK), checked by tests/gateway/ajv_strict_check.cjs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "airlock/gateway/tools/tool_registry.h"

namespace airlock::gateway {
namespace {

using nlohmann::json;

TEST(ToolSchema, EveryToolNameIsValidForEveryClient) {
  const std::regex valid("^[a-zA-Z0-9_-]{1,64}$");
  const ToolRegistry registry = builtinTools();
  ASSERT_FALSE(registry.tools().empty());
  for (const Tool& tool : registry.tools()) {
    EXPECT_TRUE(std::regex_match(tool.name, valid)) << tool.name;
  }
}

TEST(ToolSchema, NoInputSchemaHasATopLevelCombinator) {
  const ToolRegistry registry = builtinTools();
  for (const Tool& tool : registry.tools()) {
    for (const char* keyword : {"oneOf", "anyOf", "allOf", "not", "if", "then", "else"}) {
      EXPECT_FALSE(tool.input_schema.contains(keyword)) << tool.name << " has " << keyword;
    }
    EXPECT_EQ(tool.input_schema.at("type"), "object") << tool.name;
  }
}

// Runs `command`, returning its exit status and what it printed.
std::pair<int, std::string> runShell(const std::string& command) {
  std::string out;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, pipe)) out.append(buf, n);
  const int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

TEST(ToolSchema, EverySchemaCompilesUnderAjvStrictMode) {
  const std::filesystem::path modules =
      std::filesystem::path(AIRLOCK_SOURCE_DIR) / ".cache" / "npm" / "node_modules";
  if (runShell("command -v node").first != 0) GTEST_SKIP() << "node is not installed";
  if (!std::filesystem::exists(modules / "ajv")) {
    GTEST_SKIP() << "ajv is not in " << modules << "; scripts/bootstrap installs it";
  }
  json tools = json::array();
  const ToolRegistry registry = builtinTools();
  for (const Tool& tool : registry.tools()) {
    tools.push_back(json{{"name", tool.name},
                         {"inputSchema", tool.input_schema},
                         {"outputSchema", tool.output_schema}});
  }
  const auto file = std::filesystem::path(::testing::TempDir()) /
                    ("airlock-tools-" + std::to_string(::getpid()) + ".json");
  std::ofstream(file) << tools.dump();
  const auto script =
      std::filesystem::path(AIRLOCK_SOURCE_DIR) / "tests" / "gateway" / "ajv_strict_check.cjs";
  const auto [status, output] = runShell("NODE_PATH='" + modules.string() + "' node '" +
                                         script.string() + "' '" + file.string() + "'");
  std::filesystem::remove(file);
  EXPECT_EQ(status, 0) << output;
  EXPECT_THAT(output, ::testing::HasSubstr(std::to_string(tools.size()) + " tools checked, 0"));
}

}  // namespace
}  // namespace airlock::gateway
