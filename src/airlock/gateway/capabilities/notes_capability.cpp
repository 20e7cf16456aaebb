// notes.*: a JSON blackboard per execution, in memory.
#include <map>

#include "airlock/capability/broker/call_args.h"
#include "airlock/capability/wire/msgpack.h"
#include "airlock/core/thread_annotations.h"
#include "airlock/gateway/capabilities/capability_modules.h"

namespace airlock::gateway {

using namespace capability::handler_terms;

namespace {

// JSON-shaped: what a JSON blackboard can hold (no bytes, finite floats).
bool jsonShaped(const Value& v, int depth = 0) {
  if (depth > 64) return false;
  switch (v.type()) {
    case Value::Type::kBytes:
      return false;
    case Value::Type::kFloat: {
      double d = *v.asFloat();
      return d == d && d - d == 0;
    }
    case Value::Type::kArray:
      for (const auto& e : *v.asArray())
        if (!jsonShaped(e, depth + 1)) return false;
      return true;
    case Value::Type::kMap:
      for (const auto& [k, e] : *v.asMap())
        if (!jsonShaped(e, depth + 1)) return false;
      return true;
    default:
      return true;
  }
}

struct NotesBoard {
  Mutex mu;
  std::map<std::string, Value> notes GUARDED_BY(mu);
};

Answer notesPut(NotesBoard& b, const CallContext& ctx) {
  auto key = capability::requiredString(ctx.args, "key");
  if (!key) return key.error();
  if (key->empty() || key->size() > kNoteKeyMaxBytes)
    return badRequest("args.key must be 1 to " + std::to_string(kNoteKeyMaxBytes) + " bytes");
  const Value* value = ctx.args.find("value");
  if (value == nullptr) return badRequest("args.value is required (nil is a value)");
  if (!jsonShaped(*value))
    return badRequest("args.value must be JSON-shaped (no bytes, finite numbers)");
  std::string encoded;
  if (!capability::wire::encodeValue(*value, encoded) || encoded.size() > kNoteValueMaxBytes)
    return Refusal{"too_large",
                   "a note holds at most " + std::to_string(kNoteValueMaxBytes) + " bytes"};
  MutexLock lk(b.mu);
  b.notes[*key] = *value;
  return Value::nil();
}

Answer notesGet(NotesBoard& b, const CallContext& ctx) {
  auto key = capability::requiredString(ctx.args, "key");
  if (!key) return key.error();
  MutexLock lk(b.mu);
  auto it = b.notes.find(*key);
  if (it == b.notes.end()) return Refusal{"not_found", "no note is named " + *key};
  return it->second;
}

Answer notesList(NotesBoard& b, const CallContext& ctx) {
  auto prefix = capability::optionalString(ctx.args, "prefix", "");
  if (!prefix) return prefix.error();
  MutexLock lk(b.mu);
  Array keys;
  for (auto it = b.notes.lower_bound(*prefix);
       it != b.notes.end() && it->first.rfind(*prefix, 0) == 0; ++it)
    keys.push_back(Value::string(it->first));
  return Value::array(std::move(keys));
}

}  // namespace

void addNotesCapabilities(capability::CapabilityTable& table) {
  using capability::CallPlacement;
  using capability::CeilingClass;
  auto notes = std::make_shared<NotesBoard>();
  // The blackboard is memory under a mutex: never blocks, runs inline.
  table.add(
      "notes.put", CeilingClass::kNote,
      [notes](const CallContext& c) { return notesPut(*notes, c); }, CallPlacement::kInline);
  table.add(
      "notes.get", CeilingClass::kNotes,
      [notes](const CallContext& c) { return notesGet(*notes, c); }, CallPlacement::kInline);
  table.add(
      "notes.list", CeilingClass::kNotes,
      [notes](const CallContext& c) { return notesList(*notes, c); }, CallPlacement::kInline);
}

}  // namespace airlock::gateway
