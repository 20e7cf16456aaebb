// notes.*: a JSON blackboard per run, in the metadata repository (or, with
// none, in memory for one table).
#include <map>
#include <nlohmann/json.hpp>

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

// A JSON-shaped value as JSON, and back: integers stay integers, floats
// floats (nlohmann writes the shortest text that reads back the same), and
// a map keeps its keys' order.
using OrderedJson = nlohmann::ordered_json;

OrderedJson toJson(const Value& v) {
  switch (v.type()) {
    case Value::Type::kBool:
      return *v.asBool();
    case Value::Type::kInteger:
      if (auto u = v.asUnsigned()) return *u;
      return *v.asSigned();
    case Value::Type::kFloat:
      return *v.asFloat();
    case Value::Type::kString:
      return *v.asString();
    case Value::Type::kArray: {
      auto a = OrderedJson::array();
      for (const auto& e : *v.asArray()) a.push_back(toJson(e));
      return a;
    }
    case Value::Type::kMap: {
      auto o = OrderedJson::object();
      for (const auto& [k, e] : *v.asMap()) o[k] = toJson(e);
      return o;
    }
    default:  // nil (bytes never get here: jsonShaped)
      return nullptr;
  }
}

Value fromJson(const OrderedJson& j) {
  switch (j.type()) {
    case OrderedJson::value_t::boolean:
      return Value::boolean(j.get<bool>());
    case OrderedJson::value_t::number_unsigned:
      return Value::unsignedInteger(j.get<std::uint64_t>());
    case OrderedJson::value_t::number_integer:
      return Value::integer(j.get<std::int64_t>());
    case OrderedJson::value_t::number_float:
      return Value::floating(j.get<double>());
    case OrderedJson::value_t::string:
      return Value::string(j.get<std::string>());
    case OrderedJson::value_t::array: {
      Array a;
      for (const auto& e : j) a.push_back(fromJson(e));
      return Value::array(std::move(a));
    }
    case OrderedJson::value_t::object: {
      Map m;
      for (const auto& [k, e] : j.items()) m.emplace_back(k, fromJson(e));
      return Value::map(std::move(m));
    }
    default:
      return Value::nil();
  }
}

// Where the notes are: put, get (nullopt: none of that key), list.
class NotesBoard {
 public:
  virtual ~NotesBoard() = default;
  virtual Answer put(const std::string& key, const Value& value) = 0;
  virtual Answer get(const std::string& key) = 0;
  virtual Answer list(const std::string& prefix) = 0;
};

Refusal noNote(const std::string& key) {
  return Refusal{"not_found", "no note is named " + key};
}

// One table's notes, in memory.
class MemoryBoard final : public NotesBoard {
 public:
  Answer put(const std::string& key, const Value& value) override {
    MutexLock lk(mu_);
    notes_[key] = value;
    return Value::nil();
  }
  Answer get(const std::string& key) override {
    MutexLock lk(mu_);
    auto it = notes_.find(key);
    if (it == notes_.end()) return noNote(key);
    return it->second;
  }
  Answer list(const std::string& prefix) override {
    MutexLock lk(mu_);
    Array keys;
    for (auto it = notes_.lower_bound(prefix);
         it != notes_.end() && it->first.rfind(prefix, 0) == 0; ++it)
      keys.push_back(Value::string(it->first));
    return Value::array(std::move(keys));
  }

 private:
  Mutex mu_;
  std::map<std::string, Value> notes_ GUARDED_BY(mu_);
};

// The run's notes in the metadata repository. A database failure is the
// refusal "unavailable" (the message never names the database).
class RepositoryBoard final : public NotesBoard {
 public:
  explicit RepositoryBoard(NoteServices s) : s_(std::move(s)) {
    if (!s_.clock)
      s_.clock = [] {
        return std::chrono::time_point_cast<std::chrono::milliseconds>(
            std::chrono::system_clock::now());
      };
  }
  Answer put(const std::string& key, const Value& value) override {
    auto existing = s_.repository->findNote(s_.tenant_id, s_.run_id, key);
    if (!existing) return unavailable();
    if (!*existing) {
      auto count = s_.repository->countNotes(s_.tenant_id, s_.run_id);
      if (!count) return unavailable();
      if (*count >= static_cast<std::int64_t>(kNotesListMax))
        return Refusal{"too_large", "a run holds at most " + std::to_string(kNotesListMax) +
                                        " notes; put an existing key or use fewer keys"};
    }
    const Timestamp now = s_.clock();
    artifacts::RunNote note{key, toJson(value).dump(), s_.writer, now, now + s_.retention};
    if (auto r = s_.repository->putNote(s_.tenant_id, s_.run_id, note); !r) return unavailable();
    return Value::nil();
  }
  Answer get(const std::string& key) override {
    auto found = s_.repository->findNote(s_.tenant_id, s_.run_id, key);
    if (!found) return unavailable();
    if (!*found) return noNote(key);
    auto parsed = OrderedJson::parse((*found)->value_json, nullptr, false);
    if (parsed.is_discarded()) return Refusal{"unavailable", "the note " + key + " is corrupt"};
    return fromJson(parsed);
  }
  Answer list(const std::string& prefix) override {
    auto notes = s_.repository->listNotes(s_.tenant_id, s_.run_id, prefix, kNotesListMax);
    if (!notes) return unavailable();
    Array keys;
    for (const auto& n : *notes) keys.push_back(Value::string(n.key));
    return Value::array(std::move(keys));
  }

 private:
  static Refusal unavailable() {
    return Refusal{"unavailable", "the notes store failed; try again"};
  }
  NoteServices s_;
};

// A note's key: 1 to kNoteKeyMaxBytes bytes, no NUL (a database key).
tl::expected<std::string, Refusal> noteKey(const CallContext& ctx) {
  auto key = capability::requiredString(ctx.args, "key");
  if (!key) return tl::unexpected(key.error());
  if (key->empty() || key->size() > kNoteKeyMaxBytes || key->find('\0') != std::string::npos)
    return tl::unexpected(badRequest("args.key must be 1 to " + std::to_string(kNoteKeyMaxBytes) +
                                     " bytes without NUL"));
  return *key;
}

Answer notesPut(NotesBoard& b, const CallContext& ctx) {
  auto key = noteKey(ctx);
  if (!key) return key.error();
  const Value* value = ctx.args.find("value");
  if (value == nullptr) return badRequest("args.value is required (nil is a value)");
  if (!jsonShaped(*value))
    return badRequest("args.value must be JSON-shaped (no bytes, finite numbers)");
  std::string encoded;
  if (!capability::wire::encodeValue(*value, encoded) || encoded.size() > kNoteValueMaxBytes)
    return Refusal{"too_large",
                   "a note holds at most " + std::to_string(kNoteValueMaxBytes) + " bytes"};
  return b.put(*key, *value);
}

Answer notesGet(NotesBoard& b, const CallContext& ctx) {
  auto key = capability::requiredString(ctx.args, "key");
  if (!key) return key.error();
  return b.get(*key);
}

Answer notesList(NotesBoard& b, const CallContext& ctx) {
  auto prefix = capability::optionalString(ctx.args, "prefix", "");
  if (!prefix) return prefix.error();
  return b.list(*prefix);
}

}  // namespace

void addNotesCapabilities(capability::CapabilityTable& table, const NoteServices& services) {
  using capability::CallPlacement;
  using capability::CeilingClass;
  std::shared_ptr<NotesBoard> notes;
  // Memory under a mutex never blocks and runs inline; a database call runs
  // on a worker.
  CallPlacement placement = CallPlacement::kInline;
  if (services.repository != nullptr) {
    notes = std::make_shared<RepositoryBoard>(services);
    placement = CallPlacement::kWorker;
  } else {
    notes = std::make_shared<MemoryBoard>();
  }
  table.add(
      "notes.put", CeilingClass::kNote,
      [notes](const CallContext& c) { return notesPut(*notes, c); }, placement);
  table.add(
      "notes.get", CeilingClass::kNotes,
      [notes](const CallContext& c) { return notesGet(*notes, c); }, placement);
  table.add(
      "notes.list", CeilingClass::kNotes,
      [notes](const CallContext& c) { return notesList(*notes, c); }, placement);
}

}  // namespace airlock::gateway
