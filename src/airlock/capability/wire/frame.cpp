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
    Value* v = required(key);
    if (v == nullptr) return std::nullopt;
    if (std::string* s = v->mutableString()) return std::move(*s);
    problem("body." + std::string(key) + " must be a string");
    return std::nullopt;
  }

  std::optional<std::string> bytes(std::string_view key) {
    Value* v = required(key);
    if (v == nullptr) return std::nullopt;
    if (std::string* b = v->mutableBytes()) return std::move(*b);
    problem("body." + std::string(key) + " must be bytes (msgpack bin)");
    return std::nullopt;
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
  Map& body_;
  std::string reason_;
};

// {ok: any} or {error: {code: str, message: str}}, exactly one.
std::optional<Answer> readAnswer(BodyReader& r) {
  Value* ok = r.optional("ok");
  Value* error = r.optional("error");
  if ((ok == nullptr) == (error == nullptr)) {
    r.problem("body must hold exactly one of ok, error");
    return std::nullopt;
  }
  if (ok != nullptr) return Answer(std::move(*ok));
  Map* fields = error->mutableMap();
  if (fields == nullptr) {
    r.problem("body.error must be a map");
    return std::nullopt;
  }
  BodyReader inner(*fields);
  auto code = inner.string("code");
  auto message = inner.string("message");
  if (!inner.ok()) {
    r.problem("body.error." + inner.reason().substr(sizeof("body.") - 1));
    return std::nullopt;
  }
  return Answer(Refusal{std::move(*code), std::move(*message)});
}

std::optional<Outcome> readOutcome(BodyReader& r) {
  Value* completed = r.optional("completed");
  Value* errored = r.optional("errored");
  if ((completed == nullptr) == (errored == nullptr)) {
    r.problem("body must hold exactly one of completed, errored");
    return std::nullopt;
  }
  if (completed != nullptr) return Outcome{Completed{std::move(*completed)}};
  Map* fields = errored->mutableMap();
  if (fields == nullptr) {
    r.problem("body.errored must be a map");
    return std::nullopt;
  }
  BodyReader inner(*fields);
  auto message = inner.string("message");
  if (!inner.ok()) {
    r.problem("body.errored." + inner.reason().substr(sizeof("body.") - 1));
    return std::nullopt;
  }
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

Result<void> writeBody(PayloadWriter& w, const Body& body) {
  return std::visit(
      [&w](const auto& b) -> Result<void> {
        using T = std::decay_t<decltype(b)>;
        if constexpr (std::is_same_v<T, CapCall>) {
          if (auto r = w.map(4); !r) return r;
          w.key("token");
          if (auto r = w.bytes(b.token); !r) return r;
          w.key("cap");
          if (auto r = w.string(b.capability); !r) return r;
          w.key("args");
          if (auto r = w.value(b.args, 3); !r) return r;
          w.key("deadline_ms");
          w.unsignedInteger(b.deadline_ms);
          return {};
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
          if (auto r = w.map(5); !r) return r;
          w.key("token");
          if (auto r = w.bytes(b.token); !r) return r;
          w.key("hook");
          if (auto r = w.string(b.hook); !r) return r;
          w.key("name");
          if (auto r = w.string(b.name); !r) return r;
          w.key("args");
          if (auto r = w.value(b.args, 3); !r) return r;
          w.key("deadline_ms");
          w.unsignedInteger(b.deadline_ms);
          return {};
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
