// The MCP server's input (lines from an MCP client on stdin, `airlock mcp`):
// any bytes, split into lines, never crash or throw, every response is one
// line of JSON-RPC 2.0 with exactly one of result and error, and tool calls
// reach the fake mechanism through the tool layer.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string_view>

#include "airlock/core/limits_defaults.h"
#include "airlock/gateway/mcp/mcp_session.h"
#include "airlock/sandbox/fake/fake_environment.h"

namespace {

struct World {
  airlock::fake::FakeEnvironment env;
  airlock::gateway::ToolRegistry registry = airlock::gateway::builtinTools();
  airlock::gateway::ToolContext context;
  int uses = 0;

  World() {
    env.setFallback(airlock::fake::basicCommands);
    provision();
  }
  // A fresh sandbox now and then, so the fake's workspace stays small.
  void provision() {
    if (!context.environment.environment_id.empty()) (void)env.destroy(context.environment);
    airlock::EnvironmentSpec spec;
    spec.tenant_id = "fuzz";
    spec.run_id = "run";
    spec.lease_epoch = 1;
    spec.image_digest = airlock::fake::kFakeImageDigest;
    spec.limits = airlock::defaultLimits();
    spec.limits.workspace_bytes = 1 << 20;
    spec.limits.inodes_max = 1000;
    auto handle = env.provision(spec);
    if (!handle) std::abort();
    context.tenant_id = spec.tenant_id;
    context.run_id = spec.run_id;
    context.environment = *handle;
    context.execution = &env;
  }
};

void checkResponse(const std::string& line) {
  if (line.find('\n') != std::string::npos) std::abort();
  auto r = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!r.is_object() || r.value("jsonrpc", "") != "2.0") std::abort();
  if (r.contains("result") == r.contains("error")) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static World* world = new World();
  if (++world->uses % 1000 == 0) world->provision();
  airlock::gateway::mcp::Session session(world->registry, world->context, {});
  std::string_view input(reinterpret_cast<const char*>(data), size);
  // Initialized first when the input asks for it ('I' as the first byte), so
  // both the refusal and the served paths are explored.
  if (!input.empty() && input.front() == 'I') {
    input.remove_prefix(1);
    auto r = session.handleLine(
        R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18"}})");
    if (!r) std::abort();
  }
  while (!input.empty()) {
    const std::size_t nl = input.find('\n');
    const std::string_view line = input.substr(0, nl);
    if (auto response = session.handleLine(line)) checkResponse(*response);
    if (nl == std::string_view::npos) break;
    input.remove_prefix(nl + 1);
  }
  return 0;
}
