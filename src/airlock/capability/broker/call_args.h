// Reading a capability call's arguments (spec 001 "Wire": a cap_call's args
// are one wire value; docs/capabilities.md "Capabilities": every parser is
// total, a wrong shape is "bad_request" naming the field). Shared by the
// execution side's capabilities (execution/capabilities) and the gateway's
// (gateway/capabilities), so that both name a field and a refusal alike.
//
// Each reader takes the call's `args` (a wire map; anything else reads as
// "absent") and one key, and returns the value or the refusal
// "bad_request" with the message "args.KEY must be ...". None throws.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "airlock/capability/broker/broker.h"
#include "airlock/capability/wire/frame.h"
#include "airlock/capability/wire/value.h"
#include "airlock/core/error.h"

namespace airlock::capability {

template <typename T>
using Arg = tl::expected<T, wire::Refusal>;

// The refusal "bad_request" with `message`.
wire::Refusal badRequest(std::string message);

// Bytes as a wire value: a string when they are valid UTF-8, else bytes
// (sandbox output, file names, HTTP headers).
wire::Value textOrBytes(std::string bytes);

// A str field that must be present.
Arg<std::string> requiredString(const wire::Value& args, std::string_view key);
// A str field; `fallback` when absent or nil.
Arg<std::string> optionalString(const wire::Value& args, std::string_view key,
                                std::string fallback);
// A str or bin field, as bytes; nullopt when absent or nil.
Arg<std::optional<std::string>> optionalData(const wire::Value& args, std::string_view key);
// A non-negative integer field; `fallback` when absent or nil.
Arg<std::uint64_t> optionalUint(const wire::Value& args, std::string_view key,
                                std::uint64_t fallback);

// The words a capability module's handlers are written in: the call, its
// answer and the wire values, and the helpers above. A module's .cpp takes
// them in with `using namespace capability::handler_terms;`.
namespace handler_terms {
using capability::badRequest;
using capability::BrokerClock;
using capability::CallContext;
using capability::textOrBytes;
using wire::Answer;
using wire::Array;
using wire::Map;
using wire::Refusal;
using wire::Value;
}  // namespace handler_terms

}  // namespace airlock::capability
