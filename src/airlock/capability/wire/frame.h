// Frames of the capability channel, version 1 (spec 001 "Wire" and
// "Invariants: every boundary decodes totally"; the full
// definition is docs/wire.md).
//
// On the stream a frame is a 4-byte big-endian payload length followed by the
// payload: one msgpack map {v, id, kind, body}. v is 1; id is an unsigned
// integer naming the call the frame belongs to; kind names one of six frame
// kinds; body is the kind's map (see each struct below). Payloads longer than
// kMaxPayloadBytes are refused from the length prefix alone.
//
// Decoding never throws and yields one of:
//   Frame    a frame of a known kind whose body has the kind's shape;
//   Invalid  a well-formed envelope of a known kind whose body does not have
//            that shape. The channel stays open; the receiver answers or
//            settles call `id` with an error (spec: "a wrong-shape cap_result
//            field is a fault a caller maps to its own typed error");
//   Dropped  a well-formed envelope of a kind this version does not know. The
//            channel drops it and stays open;
//   Fault    the bytes cannot be trusted: an oversized length, malformed
//            msgpack, a limit exceeded, a payload that is not an envelope, or
//            a version other than 1. The channel settles every in-flight call
//            and closes; a FrameDecoder that reported a Fault reports the same
//            Fault forever after.
//
// Which kinds a receiver accepts is the channel's decision, not the codec's:
// the codec decodes all six in both directions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "airlock/capability/wire/msgpack.h"
#include "airlock/capability/wire/value.h"
#include "airlock/core/error.h"

namespace airlock::capability::wire {

inline constexpr std::uint64_t kWireVersion = 1;
// Largest payload (the bytes after the length prefix): 16 MiB.
inline constexpr std::size_t kMaxPayloadBytes = std::size_t{16} << 20;
inline constexpr std::size_t kLengthPrefixBytes = 4;

enum class Kind { kCapCall, kCapResult, kCancel, kOutcome, kHookCall, kHookResult };

// "cap_call", "cap_result", "cancel", "outcome", "hook_call", "hook_result".
std::string_view kindName(Kind kind) noexcept;
std::optional<Kind> kindFromName(std::string_view name) noexcept;

// A named refusal: the broker's or the extension's error code (stable,
// snake_case, e.g. "denied", "deadline_exceeded", "busy") and a sentence.
struct Refusal {
  std::string code;
  std::string message;
  bool operator==(const Refusal&) const = default;
};

// The answer to a call: a value, or a refusal.
using Answer = std::variant<Value, Refusal>;

// Program -> service. Body {token: bin, cap: str, args: any, deadline_ms: uint}.
// `deadline_ms` is how long the caller will wait for the result, counted from
// when the service reads the frame; 0 means no time is left (the broker
// refuses the call).
struct CapCall {
  std::string token;  // bytes, compared by the broker; never logged
  std::string capability;
  Value args;
  std::uint64_t deadline_ms = 0;
  bool operator==(const CapCall&) const = default;
};

// Service -> program; id is the cap_call's. Body {ok: any} or
// {error: {code: str, message: str}}, exactly one of the two.
struct CapResult {
  Answer answer;
  bool operator==(const CapResult&) const = default;
};

// Program -> service: stop the call `id` and undo what can be undone (a
// running proc.run has its process group killed). Service -> serving
// program: end the serving loop. Body {} (keys ignored).
struct Cancel {
  bool operator==(const Cancel&) const = default;
};

// Program -> service, exactly once at the end of a single-shot run, id 0.
// Body {completed: any} or {errored: {message: str, details: any}} (details
// optional, nil when absent), exactly one of the two.
struct Completed {
  Value value;
  bool operator==(const Completed&) const = default;
};
struct Errored {
  std::string message;
  Value details;
  bool operator==(const Errored&) const = default;
};
struct Outcome {
  std::variant<Completed, Errored> result;
  bool operator==(const Outcome&) const = default;
};

// Service -> serving program: answer one invocation. Body {token: bin,
// hook: str, name: str, args: any, deadline_ms: uint}. `hook` is the
// invocation's kind ("tool", "event"); the serving loop answers any other
// with the refusal "bad_kind". `token` is the working token for this
// invocation only.
struct HookCall {
  std::string token;  // bytes; never logged
  std::string hook;
  std::string name;
  Value args;
  std::uint64_t deadline_ms = 0;
  bool operator==(const HookCall&) const = default;
};

// Serving program -> service; id is the hook_call's. Body as cap_result's.
struct HookResult {
  Answer answer;
  bool operator==(const HookResult&) const = default;
};

using Body = std::variant<CapCall, CapResult, Cancel, Outcome, HookCall, HookResult>;

struct Frame {
  std::uint64_t id = 0;
  Body body;
  Kind kind() const noexcept { return static_cast<Kind>(body.index()); }
  bool operator==(const Frame&) const = default;
};

struct Invalid {
  std::uint64_t id;
  Kind kind;
  std::string reason;  // e.g. "body.deadline_ms must be a non-negative integer"
  bool operator==(const Invalid&) const = default;
};

struct Dropped {
  std::uint64_t id;
  std::string kind;  // as received (UTF-8, any length the payload allowed)
  bool operator==(const Dropped&) const = default;
};

enum class FaultKind {
  kOversizedLength,     // the length prefix exceeds kMaxPayloadBytes
  kMalformed,           // not one value of the msgpack subset (incl. empty)
  kLimit,               // nesting or value count beyond kWireLimits
  kBadEnvelope,         // not a map with v, id, kind, body of the right types
  kUnsupportedVersion,  // v is an integer other than 1
};

// "oversized_length", "malformed", "limit", "bad_envelope",
// "unsupported_version" (the conformance vectors' names).
std::string_view faultKindName(FaultKind kind) noexcept;

struct Fault {
  FaultKind kind;
  std::string detail;  // for logs; may quote received bytes, never a token
  bool operator==(const Fault&) const = default;
};

// The verdict on one payload.
using Decoded = std::variant<Frame, Invalid, Dropped, Fault>;

// Decodes one payload (the bytes after the length prefix).
Decoded decodePayload(std::string_view payload);

// The payload of `frame` (no length prefix), canonical as encodeValue's:
// envelope keys in the order v, id, kind, body and body keys in the order
// listed above. Fails (kToolValidationError, naming the rule) when the frame
// could not be decoded by a peer: a string that is not UTF-8, nesting or
// size beyond kWireLimits, or a payload over kMaxPayloadBytes.
Result<std::string> encodePayload(const Frame& frame);

// encodePayload with the 4-byte big-endian length prefix: ready to write.
Result<std::string> encodeFrame(const Frame& frame);

// Incremental decoder for one direction of one channel. Feed it whatever
// the socket returned; call next() until it answers NeedMore.
//
// Memory: it buffers at most one partial frame plus the bytes of the last
// feed(). The length prefix is judged as soon as its four bytes arrive, so
// an oversized frame is refused before any of its payload is buffered.
class FrameDecoder {
 public:
  struct NeedMore {
    bool operator==(const NeedMore&) const = default;
  };
  using Event = std::variant<NeedMore, Frame, Invalid, Dropped, Fault>;

  // Appends bytes. After a Fault, input is discarded.
  void feed(std::string_view bytes);

  // The next complete frame's verdict, or NeedMore. After a Fault every call
  // answers that Fault again.
  Event next();

  // Bytes of an unfinished frame are buffered: a stream ending now ended
  // mid-frame.
  bool hasPartialFrame() const noexcept { return !faulted() && buffer_.size() > consumed_; }
  bool faulted() const noexcept { return fault_.has_value(); }

  // The bytes on the stream (length prefix and payload) of the frame whose
  // verdict next() last returned (a Frame, Invalid or Dropped; for a Fault
  // found in a payload too); 0 before the first.
  std::size_t lastFrameBytes() const noexcept { return last_frame_bytes_; }

 private:
  std::string buffer_;
  std::size_t consumed_ = 0;
  std::size_t last_frame_bytes_ = 0;
  std::optional<Fault> fault_;
};

}  // namespace airlock::capability::wire
