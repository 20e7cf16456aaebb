#include "airlock/capability/broker/call_args.h"

#include "airlock/core/encoding.h"

namespace airlock::capability {

using wire::Value;

wire::Refusal badRequest(std::string message) {
  return wire::Refusal{"bad_request", std::move(message)};
}

Value textOrBytes(std::string bytes) {
  return isValidUtf8(bytes) ? Value::string(std::move(bytes)) : Value::bytes(std::move(bytes));
}

Arg<std::string> requiredString(const Value& args, std::string_view key) {
  const Value* v = args.find(key);
  if (v == nullptr || v->asString() == nullptr)
    return tl::unexpected(badRequest("args." + std::string(key) + " must be a string"));
  return *v->asString();
}

Arg<std::string> optionalString(const Value& args, std::string_view key, std::string fallback) {
  const Value* v = args.find(key);
  if (v == nullptr || v->isNil()) return fallback;
  if (v->asString() == nullptr)
    return tl::unexpected(badRequest("args." + std::string(key) + " must be a string"));
  return *v->asString();
}

Arg<std::optional<std::string>> optionalData(const Value& args, std::string_view key) {
  const Value* v = args.find(key);
  if (v == nullptr || v->isNil()) return std::optional<std::string>{};
  if (auto* s = v->asString()) return std::optional<std::string>(*s);
  if (auto* b = v->asBytes()) return std::optional<std::string>(*b);
  return tl::unexpected(badRequest("args." + std::string(key) + " must be a string or bytes"));
}

Arg<std::uint64_t> optionalUint(const Value& args, std::string_view key, std::uint64_t fallback) {
  const Value* v = args.find(key);
  if (v == nullptr || v->isNil()) return fallback;
  auto n = v->asUnsigned();
  if (!n)
    return tl::unexpected(
        badRequest("args." + std::string(key) + " must be a non-negative integer"));
  return *n;
}

}  // namespace airlock::capability
