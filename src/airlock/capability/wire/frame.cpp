#include "airlock/capability/wire/frame.h"

#include <msgpuck.h>

#include <array>
#include <limits>

#include "airlock/core/encoding.h"

namespace airlock::capability::wire {
namespace {

constexpr std::array<std::string_view, 6> kKindNames = {"cap_call", "cap_result", "cancel",
                                                        "outcome",  "hook_call",  "hook_result"};

// ---------------------------------------------------------------- decoding

// Reads the fields of one body map, moving them out of it (the map is the
// decoder's own and is discarded after); the first problem wins and names
// the field as "body.<name>". Each field is read once.
class BodyReader {
 public:
  explicit BodyReader(Map& body) : body_(body) {}

  Value* optional(std::string_view key) const {
    for (auto& [k, v] : body_) {
      if (k == key) return &v;
    }
    return nullptr;
  }

  Value* required(std::string_view key) {
    Value* v = optional(key);
    if (v == nullptr) problem("body." + std::string(key) + " is missing");
    return v;
  }

  std::optional<std::string> string(std::string_view key) {
    return take(key, &Value::mutableString, "a string");
  }

  std::optional<std::string> bytes(std::string_view key) {
    return take(key, &Value::mutableBytes, "bytes (msgpack bin)");
  }

  std::optional<std::uint64_t> unsignedInteger(std::string_view key) {
    const Value* v = required(key);
    if (v == nullptr) return std::nullopt;
    if (auto u = v->asUnsigned()) return u;
    problem("body." + std::string(key) + " must be a non-negative integer");
    return std::nullopt;
  }

  void problem(std::string what) {
    if (reason_.empty()) reason_ = std::move(what);
  }
  bool ok() const { return reason_.empty(); }
  std::string& reason() { return reason_; }

 private:
  // The string or bytes of field `key`, moved out, when `get` finds that
  // type there; otherwise "body.<key> must be <what>".
  std::optional<std::string> take(std::string_view key, std::string* (Value::*get)(),
                                  const char* what) {
    Value* v = required(key);
    if (v == nullptr) return std::nullopt;
    if (std::string* s = (v->*get)()) return std::move(*s);
    problem("body." + std::string(key) + " must be " + what);
    return std::nullopt;
  }

  Map& body_;
  std::string reason_;
};

// A result body holds exactly one of two fields: `value` (any value) or
// `failure` (a map). Which one, or nullopt with the problem noted in `r`.
struct OneOf {
  Value* value = nullptr;  // set when the body holds `value`
  Map* failure = nullptr;  // else this
};

std::optional<OneOf> readOneOf(BodyReader& r, const char* value, const char* failure) {
  Value* v = r.optional(value);
  Value* f = r.optional(failure);
  if ((v == nullptr) == (f == nullptr)) {
    r.problem(std::string("body must hold exactly one of ") + value + ", " + failure);
    return std::nullopt;
  }
  if (v != nullptr) return OneOf{v, nullptr};
  Map* fields = f->mutableMap();
  if (fields == nullptr) {
    r.problem(std::string("body.") + failure + " must be a map");
    return std::nullopt;
  }
  return OneOf{nullptr, fields};
}

// True when `inner` (the reader of the map under `failure`) found no
// problem; else its problem, as body.<failure>.<field>, noted in `r`.
bool innerOk(BodyReader& r, const char* failure, BodyReader& inner) {
  if (inner.ok()) return true;
  r.problem(std::string("body.") + failure + "." + inner.reason().substr(sizeof("body.") - 1));
  return false;
}

// {ok: any} or {error: {code: str, message: str}}, exactly one.
std::optional<Answer> readAnswer(BodyReader& r) {
  auto one = readOneOf(r, "ok", "error");
  if (!one) return std::nullopt;
  if (one->value != nullptr) return Answer(std::move(*one->value));
  BodyReader inner(*one->failure);
  auto code = inner.string("code");
  auto message = inner.string("message");
  if (!innerOk(r, "error", inner)) return std::nullopt;
  return Answer(Refusal{std::move(*code), std::move(*message)});
}

// {completed: any} or {errored: {message: str, details?: any}}, exactly one.
std::optional<Outcome> readOutcome(BodyReader& r) {
  auto one = readOneOf(r, "completed", "errored");
  if (!one) return std::nullopt;
  if (one->value != nullptr) return Outcome{Completed{std::move(*one->value)}};
  BodyReader inner(*one->failure);
  auto message = inner.string("message");
  if (!innerOk(r, "errored", inner)) return std::nullopt;
  Value* details = inner.optional("details");
  return Outcome{Errored{std::move(*message), details != nullptr ? std::move(*details) : Value()}};
}

std::optional<Body> readBody(Kind kind, BodyReader& r) {
  switch (kind) {
    case Kind::kCapCall: {
      auto token = r.bytes("token");
      auto cap = r.string("cap");
      Value* args = r.required("args");
      auto deadline = r.unsignedInteger("deadline_ms");
      if (!r.ok()) return std::nullopt;
      return CapCall{std::move(*token), std::move(*cap), std::move(*args), *deadline};
    }
    case Kind::kCapResult:
      if (auto a = readAnswer(r)) return CapResult{std::move(*a)};
      return std::nullopt;
    case Kind::kCancel:
      return Cancel{};
    case Kind::kOutcome:
      if (auto o = readOutcome(r)) return std::move(*o);
      return std::nullopt;
    case Kind::kHookCall: {
      auto token = r.bytes("token");
      auto hook = r.string("hook");
      auto name = r.string("name");
      Value* args = r.required("args");
      auto deadline = r.unsignedInteger("deadline_ms");
      if (!r.ok()) return std::nullopt;
      return HookCall{std::move(*token), std::move(*hook), std::move(*name), std::move(*args),
                      *deadline};
    }
    case Kind::kHookResult:
      if (auto a = readAnswer(r)) return HookResult{std::move(*a)};
      return std::nullopt;
  }
  return std::nullopt;
}

Fault badEnvelope(std::string detail) {
  return Fault{FaultKind::kBadEnvelope, std::move(detail)};
}

// ---------------------------------------------------------------- encoding

// Writes the envelope and body maps by hand (their keys are fixed ASCII) and
// the carried Values through encodeNestedValue, keeping the same depth and
// value accounting as the decoder so that the limits mean the same thing on
// both ends.
class PayloadWriter {
 public:
  explicit PayloadWriter(std::string& out) : out_(out) {}

  Result<void> map(std::uint32_t pairs) {
    declared_ += 2 * static_cast<std::size_t>(pairs);
    if (declared_ > kWireLimits.max_values) {
      return fail(ErrorCode::kToolValidationError, "frame holds too many values");
    }
    char buf[8];
    out_.append(buf, mp_encode_map(buf, pairs));
    return {};
  }
  void key(std::string_view k) {
    char buf[8];
    out_.append(buf, mp_encode_strl(buf, static_cast<std::uint32_t>(k.size())));
    out_ += k;
  }
  void unsignedInteger(std::uint64_t n) {
    char buf[16];
    out_.append(buf, mp_encode_uint(buf, n));
  }
  // As encodeNestedValue writes a string Value (a string declares no
  // values), without copying it into one.
  Result<void> string(const std::string& s) {
    if (s.size() > std::numeric_limits<std::uint32_t>::max()) {
      return fail(ErrorCode::kToolValidationError, "string longer than msgpack's 2^32-1 limit");
    }
    if (!isValidUtf8(s)) {
      return fail(ErrorCode::kToolValidationError,
                  "string " + quoteForMessage(s) + " is not UTF-8 (send it as bytes)");
    }
    char buf[8];
    out_.append(buf, mp_encode_strl(buf, static_cast<std::uint32_t>(s.size())));
    out_ += s;
    return {};
  }
  Result<void> bytes(const std::string& b) {
    if (b.size() > std::numeric_limits<std::uint32_t>::max()) {
      return fail(ErrorCode::kToolValidationError, "bytes longer than msgpack's 2^32-1 limit");
    }
    char buf[8];
    out_.append(buf, mp_encode_binl(buf, static_cast<std::uint32_t>(b.size())));
    out_ += b;
    return {};
  }
  Result<void> value(const Value& v, std::size_t depth) {
    return encodeNestedValue(v, out_, kWireLimits, depth, declared_);
  }

  // {ok: v} or {error: {code, message}} at depth 2.
  Result<void> answer(const Answer& a) {
    if (const Value* ok = std::get_if<Value>(&a)) {
      if (auto r = map(1); !r) return r;
      key("ok");
      return value(*ok, 3);
    }
    const Refusal& refusal = std::get<Refusal>(a);
    if (auto r = map(1); !r) return r;
    key("error");
    if (auto r = map(2); !r) return r;
    key("code");
    if (auto r = string(refusal.code); !r) return r;
    key("message");
    return string(refusal.message);
  }

 private:
  std::string& out_;
  std::size_t declared_ = 1;
};

// A cap_call or hook_call body: the token, the names of what is called
// ("cap"; "hook" and "name") as strings, then args and deadline_ms.
Result<void> writeCall(PayloadWriter& w, const std::string& token,
                       std::initializer_list<std::pair<std::string_view, const std::string*>> names,
                       const Value& args, std::uint64_t deadline_ms) {
  if (auto r = w.map(static_cast<std::uint32_t>(names.size()) + 3); !r) return r;
  w.key("token");
  if (auto r = w.bytes(token); !r) return r;
  for (const auto& [key, name] : names) {
    w.key(key);
    if (auto r = w.string(*name); !r) return r;
  }
  w.key("args");
  if (auto r = w.value(args, 3); !r) return r;
  w.key("deadline_ms");
  w.unsignedInteger(deadline_ms);
  return {};
}

Result<void> writeBody(PayloadWriter& w, const Body& body) {
  return std::visit(
      [&w](const auto& b) -> Result<void> {
        using T = std::decay_t<decltype(b)>;
        if constexpr (std::is_same_v<T, CapCall>) {
          return writeCall(w, b.token, {{"cap", &b.capability}}, b.args, b.deadline_ms);
        } else if constexpr (std::is_same_v<T, CapResult> || std::is_same_v<T, HookResult>) {
          return w.answer(b.answer);
        } else if constexpr (std::is_same_v<T, Cancel>) {
          return w.map(0);
        } else if constexpr (std::is_same_v<T, Outcome>) {
          if (const auto* c = std::get_if<Completed>(&b.result)) {
            if (auto r = w.map(1); !r) return r;
            w.key("completed");
            return w.value(c->value, 3);
          }
          const Errored& e = std::get<Errored>(b.result);
          if (auto r = w.map(1); !r) return r;
          w.key("errored");
          if (auto r = w.map(2); !r) return r;
          w.key("message");
          if (auto r = w.string(e.message); !r) return r;
          w.key("details");
          return w.value(e.details, 4);
        } else {
          static_assert(std::is_same_v<T, HookCall>);
          return writeCall(w, b.token, {{"hook", &b.hook}, {"name", &b.name}}, b.args,
                           b.deadline_ms);
        }
      },
      body);
}

std::uint32_t loadBigEndian32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return (std::uint32_t{u[0]} << 24) | (std::uint32_t{u[1]} << 16) | (std::uint32_t{u[2]} << 8) |
         std::uint32_t{u[3]};
}

}  // namespace

std::string_view kindName(Kind kind) noexcept {
  return kKindNames[static_cast<std::size_t>(kind)];
}

std::optional<Kind> kindFromName(std::string_view name) noexcept {
  for (std::size_t i = 0; i < kKindNames.size(); ++i) {
    if (kKindNames[i] == name) return static_cast<Kind>(i);
  }
  return std::nullopt;
}

std::string_view faultKindName(FaultKind kind) noexcept {
  switch (kind) {
    case FaultKind::kOversizedLength:
      return "oversized_length";
    case FaultKind::kMalformed:
      return "malformed";
    case FaultKind::kLimit:
      return "limit";
    case FaultKind::kBadEnvelope:
      return "bad_envelope";
    case FaultKind::kUnsupportedVersion:
      return "unsupported_version";
  }
  return "unknown";
}

Decoded decodePayload(std::string_view payload) {
  if (payload.size() > kMaxPayloadBytes) {
    return Fault{FaultKind::kOversizedLength,
                 "payload of " + std::to_string(payload.size()) + " bytes exceeds the cap"};
  }
  auto decoded = decodeValue(payload, kWireLimits);
  if (!decoded) {
    const auto kind =
        decoded.error().problem == ValueProblem::kLimit ? FaultKind::kLimit : FaultKind::kMalformed;
    return Fault{kind, std::move(decoded.error().detail)};
  }
  Value& envelope = *decoded;
  if (envelope.asMap() == nullptr) {
    return badEnvelope("payload is a " + std::string(typeName(envelope.type())) + ", not a map");
  }
  // The version first: a later version may change everything else.
  const Value* v = envelope.find("v");
  if (v == nullptr) return badEnvelope("envelope has no v");
  if (v->type() != Value::Type::kInteger) return badEnvelope("envelope v is not an integer");
  if (v->asUnsigned() != kWireVersion) {
    return Fault{FaultKind::kUnsupportedVersion, "envelope v is not 1"};
  }
  const Value* id = envelope.find("id");
  if (id == nullptr || !id->asUnsigned()) {
    return badEnvelope("envelope id is missing or not a non-negative integer");
  }
  const Value* kind = envelope.find("kind");
  if (kind == nullptr || kind->asString() == nullptr) {
    return badEnvelope("envelope kind is missing or not a string");
  }
  const Value* body = envelope.find("body");
  if (body == nullptr) return badEnvelope("envelope has no body");

  const std::uint64_t frame_id = *id->asUnsigned();
  const auto known = kindFromName(*kind->asString());
  if (!known) return Dropped{frame_id, *kind->asString()};
  // The body's parts are moved out of the decoded envelope, which is ours.
  Map* fields = const_cast<Value*>(body)->mutableMap();
  if (fields == nullptr) return Invalid{frame_id, *known, "body must be a map"};
  BodyReader reader(*fields);
  auto parsed = readBody(*known, reader);
  if (!parsed) return Invalid{frame_id, *known, std::move(reader.reason())};
  return Frame{frame_id, std::move(*parsed)};
}

namespace {

// Appends the payload of `frame` to `out`.
Result<void> appendPayload(const Frame& frame, std::string& out) {
  const std::size_t start = out.size();
  PayloadWriter w(out);
  if (auto r = w.map(4); !r) return r;
  w.key("v");
  w.unsignedInteger(kWireVersion);
  w.key("id");
  w.unsignedInteger(frame.id);
  w.key("kind");
  w.key(kindName(frame.kind()));
  w.key("body");
  if (auto r = writeBody(w, frame.body); !r) return r;
  const std::size_t size = out.size() - start;
  if (size > kMaxPayloadBytes) {
    return fail(ErrorCode::kToolValidationError,
                "frame payload of " + std::to_string(size) + " bytes exceeds the " +
                    std::to_string(kMaxPayloadBytes) + "-byte cap");
  }
  return {};
}

// Room for a small frame (a cap_call, a nil cap_result) in one allocation.
constexpr std::size_t kSmallFrameBytes = 192;

}  // namespace

Result<std::string> encodePayload(const Frame& frame) {
  std::string out;
  out.reserve(kSmallFrameBytes);
  if (auto r = appendPayload(frame, out); !r) return tl::unexpected(std::move(r.error()));
  return out;
}

// The payload is written in place after a placeholder prefix: one buffer,
// no copy.
Result<std::string> encodeFrame(const Frame& frame) {
  std::string out;
  out.reserve(kSmallFrameBytes);
  out.append(kLengthPrefixBytes, '\0');
  if (auto r = appendPayload(frame, out); !r) return tl::unexpected(std::move(r.error()));
  const auto n = static_cast<std::uint32_t>(out.size() - kLengthPrefixBytes);
  out[0] = static_cast<char>(n >> 24);
  out[1] = static_cast<char>(n >> 16);
  out[2] = static_cast<char>(n >> 8);
  out[3] = static_cast<char>(n);
  return out;
}

void FrameDecoder::feed(std::string_view bytes) {
  if (fault_) return;
  if (consumed_ > 0) {
    buffer_.erase(0, consumed_);
    consumed_ = 0;
  }
  buffer_.append(bytes);
}

FrameDecoder::Event FrameDecoder::next() {
  if (fault_) return *fault_;
  const std::size_t available = buffer_.size() - consumed_;
  if (available < kLengthPrefixBytes) return NeedMore{};
  const std::uint32_t length = loadBigEndian32(buffer_.data() + consumed_);
  if (length > kMaxPayloadBytes) {
    fault_ = Fault{FaultKind::kOversizedLength, "length prefix " + std::to_string(length) +
                                                    " exceeds the " +
                                                    std::to_string(kMaxPayloadBytes) + "-byte cap"};
    buffer_.clear();
    buffer_.shrink_to_fit();
    consumed_ = 0;
    return *fault_;
  }
  if (available - kLengthPrefixBytes < length) return NeedMore{};
  const std::string_view payload(buffer_.data() + consumed_ + kLengthPrefixBytes, length);
  Decoded decoded = decodePayload(payload);
  last_frame_bytes_ = kLengthPrefixBytes + length;
  consumed_ += kLengthPrefixBytes + length;
  if (consumed_ == buffer_.size()) {
    buffer_.clear();
    consumed_ = 0;
  }
  return std::visit(
      [this](auto&& d) -> Event {
        using T = std::decay_t<decltype(d)>;
        if constexpr (std::is_same_v<T, Fault>) {
          fault_ = d;
          buffer_.clear();
          buffer_.shrink_to_fit();
          consumed_ = 0;
        }
        return std::forward<decltype(d)>(d);
      },
      std::move(decoded));
}

}  // namespace airlock::capability::wire
