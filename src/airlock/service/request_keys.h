// The one check every JSON route of the API makes on its request body:
// each top-level key must be one the route reads. A misspelled key
// ("netwrok") would otherwise be ignored and its default silently used.
// Shared by the API's route files (gateway/api/) and any new one; nested
// objects (limits, environment, tool arguments) are checked where they are
// read.
#pragma once

#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "airlock/service/http_message.h"

namespace airlock::service {

// The known key closest to `key` (edit distance with transpositions, at
// most max(2, longer length / 3); ties: the first in `known`), or nullopt
// when none is close.
std::optional<std::string_view> closestKey(std::string_view key,
                                           std::initializer_list<std::string_view> known);
std::optional<std::string_view> closestKey(std::string_view key,
                                           std::span<const std::string_view> known);

// nullopt when `body` is not an object or every key is in `known`;
// otherwise one message naming every unknown key (in sorted order), each
// quoted and escaped with the close known key if there is one, and the list
// of known keys when some key has none:
//   unknown key "netwrok" (did you mean "network"?)
//   unknown key "x" (known keys: argv, stdin)
//   unknown keys "frm" (did you mean "from"?), "too" (did you mean "to"?)
//   unknown keys "frm" (did you mean "from"?), "x"; known keys: from, to
std::optional<std::string> unknownKeyMessage(const nlohmann::json& body,
                                             std::initializer_list<std::string_view> known);

// The route's answer to an unknown key: 400 {"error": {"code":
// "bad_request", "message": unknownKeyMessage(...)}}; nullopt when every
// key is known. Usage:
//   if (auto refused = refuseUnknownKeys(*body, {"path", "filename"})) return *refused;
std::optional<HttpResponse> refuseUnknownKeys(const nlohmann::json& body,
                                              std::initializer_list<std::string_view> known);

}  // namespace airlock::service
