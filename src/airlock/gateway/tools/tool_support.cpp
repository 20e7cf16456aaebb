#include "airlock/gateway/tools/tool_support.h"

#include <algorithm>

#include "airlock/core/command_validation.h"
#include "airlock/core/encoding.h"
#include "airlock/core/environment_tiers.h"

namespace airlock::gateway::detail {

tl::unexpected<ToolFailure> invalidArgument(std::string argument, std::string message) {
  return tl::unexpected<ToolFailure>(
      ToolFailure{ErrorCode::kToolValidationError, std::move(argument), std::move(message)});
}

tl::unexpected<ToolFailure> failureFrom(const Error& error, std::string argument) {
  std::string message = error.message();
  switch (error.code) {
    case ErrorCode::kWorkspaceEscape:
    case ErrorCode::kToolValidationError:
      if (!argument.empty() && message.rfind(argument, 0) != 0) message = argument + ": " + message;
      return invalidArgument(std::move(argument), std::move(message));
    case ErrorCode::kNotFound:
      return tl::unexpected<ToolFailure>(
          ToolFailure{ErrorCode::kNotFound, std::move(argument), std::move(message)});
    default:
      return tl::unexpected<ToolFailure>(ToolFailure{error.code, {}, std::move(message)});
  }
}

const nlohmann::json* member(const nlohmann::json& object, std::string_view name) noexcept {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(name);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

namespace {

std::string jsonTypeName(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
    case nlohmann::json::value_t::number_float:
      return "a number";
    case nlohmann::json::value_t::boolean:
      return "a boolean";
    case nlohmann::json::value_t::array:
      return "an array";
    case nlohmann::json::value_t::object:
      return "an object";
    case nlohmann::json::value_t::string:
      return "a string";
    default:
      return "null";
  }
}

}  // namespace

tl::expected<std::string, ToolFailure> requiredString(const nlohmann::json& arguments,
                                                      std::string_view name) {
  const nlohmann::json* value = member(arguments, name);
  if (value == nullptr) {
    return invalidArgument(std::string(name), std::string(name) + " is required");
  }
  if (!value->is_string()) {
    return invalidArgument(std::string(name),
                           std::string(name) + " must be a string, got " + jsonTypeName(*value));
  }
  return value->get<std::string>();
}

tl::expected<std::string, ToolFailure> optionalString(const nlohmann::json& arguments,
                                                      std::string_view name, std::string fallback) {
  if (member(arguments, name) == nullptr) return fallback;
  return requiredString(arguments, name);
}

tl::expected<std::string, ToolFailure> workspacePath(std::string_view argument,
                                                     const std::string& path, bool allow_root) {
  auto checked = checkRelativePath(path);
  if (!checked) {
    // checkRelativePath's context reads `path "x" has ...`; name the argument.
    return invalidArgument(std::string(argument),
                           std::string(argument) + ": " + checked.error().context);
  }
  if (checked->empty() && !allow_root) {
    return invalidArgument(
        std::string(argument),
        std::string(argument) + " must name a file inside the workspace, not the workspace root");
  }
  return path == "." ? std::string(".") : *checked;
}

tl::expected<void, ToolFailure> onlyKnownArguments(
    const nlohmann::json& arguments, std::initializer_list<std::string_view> allowed) {
  for (const auto& [key, value] : arguments.items()) {
    bool known = false;
    for (std::string_view name : allowed) known = known || key == name;
    if (!known) {
      std::string names;
      for (std::string_view name : allowed)
        names += (names.empty() ? "" : ", ") + std::string(name);
      // The name as sent when it is plain text, quoted and escaped otherwise
      // (empty, control bytes, not UTF-8): failures are always valid text.
      const bool plain = !key.empty() && isValidUtf8(key) &&
                         std::none_of(key.begin(), key.end(),
                                      [](char c) { return static_cast<unsigned char>(c) < 0x20; });
      const std::string argument = plain ? key : quoteArg(key);
      return invalidArgument(argument, argument + " is not an argument of this tool; " +
                                           (names.empty() ? std::string("it takes none")
                                                          : "its arguments are " + names));
    }
  }
  return {};
}

std::string quoteArg(std::string_view text) {
  return quoteForMessage(text, 120);
}

tl::expected<std::map<std::string, std::string>, ToolFailure> envAdditions(
    const nlohmann::json& arguments) {
  std::map<std::string, std::string> env;
  const nlohmann::json* value = detail::member(arguments, "env");
  if (value == nullptr || value->is_null()) return env;
  if (!value->is_object())
    return invalidArgument("env", "env must be an object of strings like {\"DEBUG\": \"1\"}");
  for (const auto& [name, v] : value->items()) {
    if (!v.is_string())
      return invalidArgument("env", "env value of " + quoteForMessage(name) + " must be a string");
    if (auto ok = checkAddedVariable("env", name, v.get_ref<const std::string&>()); !ok)
      return invalidArgument("env", ok.error().context);
    env.emplace(name, v.get<std::string>());
  }
  return env;
}

}  // namespace airlock::gateway::detail
