#include "airlock/capability/broker/capabilities.h"

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "airlock/artifacts/artifact_store.h"
#include "airlock/capability/broker/code_run.h"  // valueToJson

namespace airlock::capability {

// The spill's default per-stream cap is the store's per-artifact cap.
static_assert(kDefaultSpillStreamBytes ==
              static_cast<std::uint64_t>(artifacts::kDefaultMaxArtifactBytes));

namespace {

// The path argument of an fs.* call when it is a note:// path.
std::optional<std::string> notePath(const CallContext& c) {
  const wire::Value* path = c.args.find("path");
  if (path == nullptr || path->asString() == nullptr) return std::nullopt;
  const std::string& text = *path->asString();
  if (text.rfind(kNoteScheme, 0) != 0) return std::nullopt;
  return text;
}

// fs.read/fs.write/fs.list in front of the workspace: a note:// path is
// answered by `on_note`, anything else by the execution half's handler.
void routeNotePaths(CapabilityTable& table, const std::string& name,
                    std::function<wire::Answer(const CallContext&, const std::string&)> on_note) {
  const CapabilityTable::Entry* entry = table.find(name);
  if (entry == nullptr) return;
  const CapabilityTable::Entry workspace = *entry;
  table.add(
      name, workspace.ceiling,
      [workspace, on_note = std::move(on_note)](const CallContext& c) -> wire::Answer {
        if (auto path = notePath(c)) return on_note(c, *path);
        return workspace.handler(c);
      },
      workspace.placement);
}

void addNotePaths(CapabilityTable& table, bool note_reads) {
  const CapabilityTable::Entry* get = table.find("notes.get");
  Handler notes_get = get != nullptr ? get->handler : Handler();
  routeNotePaths(
      table, "fs.read", [notes_get, note_reads](const CallContext& c, const std::string& path) {
        if (!note_reads || !notes_get)
          return wire::Answer(wire::Refusal{
              "denied", "this program's policy does not allow notes.get (" + path + ")"});
        const wire::Value args =
            wire::Value::map({{"key", wire::Value::string(path.substr(kNoteScheme.size()))}});
        auto answer = notes_get(CallContext{"notes.get", args, c.deadline, c.cancel});
        if (const auto* value = std::get_if<wire::Value>(&answer))
          return wire::Answer(wire::Value::bytes(valueToJson(*value).dump()));
        return answer;
      });
  for (const char* name : {"fs.write", "fs.list"})
    routeNotePaths(table, name, [](const CallContext&, const std::string& path) {
      return wire::Answer(wire::Refusal{
          "read_only", path + " is a note: note:// paths are read-only (notes.put writes one)"});
    });
}

}  // namespace

std::shared_ptr<CapabilityTable> makeSandboxCapabilities(const SandboxServices& services) {
  auto table = std::make_shared<CapabilityTable>();
  if (services.add_execution)
    services.add_execution(*table, ExecutionCapabilityServices{services.env, services.handle,
                                                               services.job_spill, services.jobs});
  gateway::addGatewayCapabilities(
      *table, gateway::GatewayCapabilityServices{services.handle.environment_id, services.net,
                                                 services.schedule, services.notes});
  addNotePaths(*table, services.note_reads);
  return table;
}

Policy defaultCodeModePolicy() {
  Policy p;
  p.allowed = {"proc.*",     "fs.*",     "notes.*", "job.*",      "net.*",
               "schedule.*", "strand.*", "peer.*",  "workflow.*", "mcp.*"};
  return p;
}

}  // namespace airlock::capability
