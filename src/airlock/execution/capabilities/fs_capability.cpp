// fs.read, fs.write, fs.list: through the workspace port, whose resolver
// keeps every path beneath /workspace (containment).
#include "airlock/capability/broker/call_args.h"
#include "airlock/execution/capabilities/capability_modules.h"

namespace airlock::execution {

using namespace capability::handler_terms;

namespace {

Answer fsRead(const ExecutionCapabilityServices& s, const CallContext& ctx) {
  auto path = capability::requiredString(ctx.args, "path");
  if (!path) return path.error();
  auto ws = s.env->workspace(s.handle);
  if (!ws) return refusalFor(ws.error());
  auto data = (*ws)->read(*path);
  if (!data) return refusalFor(data.error());
  if (data->size() > kFsMaxBytes)
    return Refusal{"too_large", "the file is larger than fs.read returns (" +
                                    std::to_string(kFsMaxBytes) + " bytes)"};
  return Value::bytes(std::move(*data));
}

Answer fsWrite(const ExecutionCapabilityServices& s, const CallContext& ctx) {
  auto path = capability::requiredString(ctx.args, "path");
  if (!path) return path.error();
  auto data = capability::optionalData(ctx.args, "data");
  if (!data) return data.error();
  if (!*data) return capability::badRequest("args.data must be a string or bytes");
  if ((*data)->size() > kFsMaxBytes)
    return Refusal{"too_large", "fs.write takes at most " + std::to_string(kFsMaxBytes) + " bytes"};
  auto ws = s.env->workspace(s.handle);
  if (!ws) return refusalFor(ws.error());
  if (auto r = (*ws)->write(*path, **data); !r) return refusalFor(r.error());
  return Value::nil();
}

Answer fsList(const ExecutionCapabilityServices& s, const CallContext& ctx) {
  auto path = capability::optionalString(ctx.args, "path", ".");
  if (!path) return path.error();
  auto ws = s.env->workspace(s.handle);
  if (!ws) return refusalFor(ws.error());
  auto entries = (*ws)->listdir(path->empty() ? "." : *path);
  if (!entries) return refusalFor(entries.error());
  Array out;
  for (auto& e : *entries) {
    out.push_back(Value::map({{"name", textOrBytes(e.name)},
                              {"type", Value::string(workspaceEntryTypeName(e.type))},
                              {"size", Value::integer(e.size_bytes)}}));
  }
  return Value::array(std::move(out));
}

}  // namespace

void addFsCapabilities(capability::CapabilityTable& table,
                       const ExecutionCapabilityServices& services) {
  using capability::CeilingClass;
  const ExecutionCapabilityServices& s = services;
  table.add("fs.read", CeilingClass::kNone, [s](const CallContext& c) { return fsRead(s, c); });
  table.add("fs.write", CeilingClass::kNone, [s](const CallContext& c) { return fsWrite(s, c); });
  table.add("fs.list", CeilingClass::kNone, [s](const CallContext& c) { return fsList(s, c); });
}

}  // namespace airlock::execution
