// Helpers shared by the built-in tools (internal to gateway/tools).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "airlock/core/error.h"
#include "airlock/gateway/tools/tool.h"

namespace airlock::gateway::detail {

// ToolValidationError naming `argument`; the message should start with it.
tl::unexpected<ToolFailure> invalidArgument(std::string argument, std::string message);

// A port error as a tool failure. WorkspaceEscape and ToolValidationError
// become ToolValidationError naming `argument` (prefixed to the message
// when it does not already start with it); NotFound keeps its code and
// names `argument`; other codes pass through with the port's message.
tl::unexpected<ToolFailure> failureFrom(const Error& error, std::string argument = {});

// The argument `name` of an object, or nullptr when absent. JSON null
// counts as absent (models often send null for "not given").
const nlohmann::json* member(const nlohmann::json& object, std::string_view name) noexcept;

// A string argument: ToolValidationError naming it when absent (required)
// or not a string.
tl::expected<std::string, ToolFailure> requiredString(const nlohmann::json& arguments,
                                                      std::string_view name);
tl::expected<std::string, ToolFailure> optionalString(const nlohmann::json& arguments,
                                                      std::string_view name, std::string fallback);

// A workspace-relative path argument that passes the containment rules
// (core/command_validation.h: checkRelativePath). allow_root: "." accepted.
tl::expected<std::string, ToolFailure> workspacePath(std::string_view argument,
                                                     const std::string& path, bool allow_root);

// Rejects members other than `allowed` (after every other check, so the
// spec's order is kept): ToolValidationError naming the first unknown one.
tl::expected<void, ToolFailure> onlyKnownArguments(const nlohmann::json& arguments,
                                                   std::initializer_list<std::string_view> allowed);

// A JSON-quoted rendering of untrusted text for messages (bounded).
std::string quoteArg(std::string_view text);

// The `env` argument: variables added for one command or job ({name:
// string}), each checked by the tier rules (core/environment_tiers.h); an
// absent or null env is empty. ToolValidationError naming the problem.
tl::expected<std::map<std::string, std::string>, ToolFailure> envAdditions(
    const nlohmann::json& arguments);

}  // namespace airlock::gateway::detail
